package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/simlock/simlock/contract"
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
	p, err := launch(o)
	if err != nil {
		return 0, err
	}
	return p.pid, nil
}

// launched is a daemon process this caller started.
type launched struct {
	pid    int
	exited chan struct{} // closed when the process has exited
}

func launch(o LaunchOptions) (*launched, error) {
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
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
		return nil, err
	}
	defer devnull.Close()
	cmd.Stdin = devnull
	if o.LogFile != "" {
		if err := os.MkdirAll(filepath.Dir(o.LogFile), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(o.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	p := &launched{pid: cmd.Process.Pid, exited: make(chan struct{})}
	// Reap it if it exits early so it does not linger as a zombie while we
	// are still alive (and so we learn at once that it did); a daemon that
	// keeps running is reparented on our exit.
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// DialOrLaunch connects to the daemon, starting one when nothing listens.
// It never launches on a version mismatch or a refused handshake: only
// "nothing is listening" justifies a new daemon.
func DialOrLaunch(ctx context.Context, o Options, l LaunchOptions) (*Client, error) {
	c, err := Dial(ctx, o)
	if err == nil || !IsCode(err, contract.CodeDaemonNotRunning) {
		return c, err
	}
	return LaunchAndDial(ctx, o, l)
}

// LaunchAndDial starts a daemon and dials it until it answers (within
// l.Wait, default 20s). It watches the process it started: a daemon that
// exits during startup (port taken, unreadable database, ...) is reported
// at once as DAEMON_STARTUP_FAILED with the last lines it wrote to
// l.LogFile, instead of after the whole wait. A daemon that lost a start
// race to another one (DAEMON_ALREADY_RUNNING) is not a failure: the
// winner is dialled instead.
func LaunchAndDial(ctx context.Context, o Options, l LaunchOptions) (*Client, error) {
	wait := l.Wait
	if wait <= 0 {
		wait = 20 * time.Second
	}
	var offset int64
	if st, err := os.Stat(l.LogFile); l.LogFile != "" && err == nil {
		offset = st.Size()
	}
	p, err := launch(l)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	delay := 20 * time.Millisecond
	for {
		c, err := Dial(ctx, o)
		if err == nil {
			return c, nil
		}
		if !IsCode(err, contract.CodeDaemonNotRunning) {
			if !IsCode(err, contract.CodeConnectionLost) {
				return nil, err
			}
			// The daemon listens before it opens its databases, so a
			// start that fails there can accept the hello and then exit:
			// its own reason, not the lost connection, is the answer.
			select {
			case <-p.exited:
			case <-time.After(2 * time.Second):
				return nil, err
			}
		}
		select {
		case <-p.exited:
			lines := logTail(l.LogFile, offset, 5)
			reason := exitReason(lines)
			if strings.Contains(reason, string(contract.CodeDaemonAlreadyRunning)) {
				return DialRetry(ctx, o, time.Until(deadline))
			}
			// A damaged host registry is its own answer: no restart of the
			// daemon can succeed until `simlock host repair` ran.
			if msg, ok := strings.CutPrefix(reason, string(contract.CodeHostRegistryDamaged)+": "); ok {
				return nil, contract.Errorf(contract.CodeHostRegistryDamaged, "%s", msg).WithDetails("log", lines)
			}
			next := "fix the cause and retry"
			if l.LogFile != "" {
				next += "; the daemon's output is in " + l.LogFile
			}
			return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon exited during startup: %s", reason).
				WithDetails("log", lines).WithNext(next)
		default:
		}
		if time.Now().After(deadline) {
			return nil, contract.Errorf(contract.CodeDaemonStartupFailed, "the daemon did not come up within %s: %v", wait, err).
				WithDetails("log", logTail(l.LogFile, offset, 5)).
				WithNext("see " + l.LogFile + " and `simlock daemon logs`")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.exited:
		case <-time.After(delay):
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// exitReason is the daemon's own last word: the last "simlock: ..." line
// (a refusal's "next:" line may follow it), else the last line.
func exitReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if r, ok := strings.CutPrefix(lines[i], "simlock: "); ok {
			return r
		}
	}
	if len(lines) > 0 {
		return lines[len(lines)-1]
	}
	return "it exited without saying why"
}

// logTail returns the last n non-blank lines written to path after offset.
func logTail(path string, offset int64, n int) []string {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(string(b[offset:]), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
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
