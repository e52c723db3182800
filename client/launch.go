package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/contract"
)

// LaunchOptions say how to start a daemon when none is listening.
type LaunchOptions struct {
	// Exe is the simlock binary; default os.Executable().
	Exe string
	// Args start the daemon in the foreground of the new process;
	// default ["daemon", "run"].
	Args []string
	// Env is the daemon's environment; default os.Environ().
	Env []string
	// LogFile receives the daemon's stdout and stderr, appended.
	LogFile string
	// Wait bounds how long to wait for the socket (default 20s).
	Wait time.Duration
}

// Launch starts a detached daemon (its own session, so it outlives the
// caller and is not killed by the caller's terminal) with append-only logs.
func Launch(o LaunchOptions) (pid int, err error) {
	exe := o.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return 0, err
		}
	}
	args := o.Args
	if args == nil {
		args = []string{"daemon", "run"}
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = o.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	cmd.Stdin = devnull
	if o.LogFile != "" {
		if err := os.MkdirAll(filepath.Dir(o.LogFile), 0o700); err != nil {
			return 0, err
		}
		f, err := os.OpenFile(o.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start daemon: %w", err)
	}
	pid = cmd.Process.Pid
	// Reap it if it exits early so it does not linger as a zombie while we
	// are still alive; a daemon that keeps running is reparented on our exit.
	go func() { _ = cmd.Wait() }()
	return pid, nil
}

// DialOrLaunch connects to the daemon, starting one when nothing listens.
// It never launches on a version mismatch or a refused handshake: only
// "nothing is listening" justifies a new daemon.
func DialOrLaunch(ctx context.Context, o Options, l LaunchOptions) (*Client, error) {
	c, err := Dial(ctx, o)
	if err == nil || !IsCode(err, contract.CodeDaemonNotRunning) {
		return c, err
	}
	if _, lerr := Launch(l); lerr != nil {
		return nil, lerr
	}
	wait := l.Wait
	if wait <= 0 {
		wait = 20 * time.Second
	}
	return DialRetry(ctx, o, wait)
}

// DialRetry dials until the daemon answers or wait elapses, backing off
// between attempts. A daemon that answers but refuses is returned at once.
func DialRetry(ctx context.Context, o Options, wait time.Duration) (*Client, error) {
	deadline := time.Now().Add(wait)
	delay := 20 * time.Millisecond
	for {
		c, err := Dial(ctx, o)
		if err == nil || !IsCode(err, contract.CodeDaemonNotRunning) {
			return c, err
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(err, fmt.Errorf("daemon did not start listening within %s", wait))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}
