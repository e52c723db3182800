package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
)

func (a *app) runCmd() *cobra.Command {
	var lf leaseFlags
	cmd := &cobra.Command{
		Use:                   "run [LEASE FLAGS] -- CMD [ARGS...]",
		DisableFlagsInUseLine: true,
		Short:                 "Lease a device, run a command with it in its environment, release when it exits",
		Long: `Lease a device (the flags are those of simlock lease), then run CMD with the device in
its environment: SIMLOCK_LEASE_ID, SIMLOCK_DEVICE_ID, SIMLOCK_UDID and SIMLOCK_DEVICE_SET (iOS),
ANDROID_SERIAL and ANDROID_ADB_SERVER_PORT (Android), and everything in the device's env.
{udid}, {serial}, {deviceSet} and {leaseId} in CMD's arguments are replaced by the lease's values.
The lease is renewed while CMD runs and released when it exits; SIGINT and SIGTERM are passed
on to CMD, and the lease is released once it has exited; while the request still waits, they
withdraw it (exit 128+N for signal N). simlock run exits with CMD's exit code (128+N when CMD
died of signal N). Progress goes to stderr; CMD owns stdin and stdout.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return contract.Errorf(contract.CodeBadRequest, "give the command after --: simlock run [lease flags] -- CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPlaceholders(lf.in.Platform, args); err != nil {
				return err
			}
			return a.runWithLease(cmd.Context(), &lf, args)
		},
	}
	lf.register(cmd.Flags())
	a.addJSON(cmd) // --json: the grant as a JSON line on stderr, errors as JSON
	return cmd
}

// checkPlaceholders refuses, before any device is leased, a placeholder
// the requested platform's device has no value for.
func checkPlaceholders(platform string, args []string) error {
	return contract.CheckPlaceholders(platform, args)
}

// runWithLease is the body of `simlock run`: lease, start, hold, wait,
// release, exit as the child did.
func (a *app) runWithLease(parent context.Context, lf *leaseFlags, args []string) error {
	// Until the child starts, a signal withdraws the request. From the
	// moment it starts, signals are the child's: the channel below is
	// registered before the cancelling one is stopped, so none is lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	actx, stopAcquire := signalContext(parent)
	c, l, pl, err := a.acquire(actx, lf)
	stopAcquire()
	if err != nil {
		return err
	}
	defer c.Close()
	if l.Device == nil {
		// A grant may omit the device; renew returns it whole.
		if rl, rerr := client.Do(parent, c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: l.LeaseID}); rerr == nil {
			l = rl
		}
	}
	a.announceGrant(l, c.Hello().Role, pl.tty)

	hctx, stopHold := context.WithCancel(context.WithoutCancel(parent))
	defer stopHold()
	h := c.Hold(hctx, l)
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 10*time.Second)
		defer cancel()
		if err := h.Release(rctx); err != nil {
			fmt.Fprintf(a.env.Stderr, "simlock: release %s failed: %v (it ends at its expiry)\n", l.LeaseID, err)
			return
		}
		fmt.Fprintf(a.env.Stderr, "simlock: released %s\n", l.LeaseID)
	}

	cargs, err := contract.ExpandPlaceholders(args[1:], contract.LeaseValues(l))
	if err != nil {
		release()
		return err
	}
	child := exec.Command(args[0], cargs...)
	child.Env = a.runEnv(l)
	child.Stdin, child.Stdout, child.Stderr = a.env.Stdin, a.env.Stdout, a.env.Stderr
	if err := child.Start(); err != nil {
		release()
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127 // what a shell answers for a missing command
		}
		fmt.Fprintf(a.env.Stderr, "simlock: run %s: %v\n", args[0], err)
		return exitError{code}
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	parentGone := ports.PollParentWatch{}.Watch(hctx)
	lost := h.Lost()

	var werr error
wait:
	for {
		select {
		case werr = <-exited:
			break wait
		case s := <-sigs:
			// Passed on, not acted on: the child decides how to stop, and
			// the lease is released once it has.
			_ = child.Process.Signal(s)
		case <-parentGone:
			parentGone = nil
			fmt.Fprintln(a.env.Stderr, "simlock: parent process exited; stopping the command")
			_ = child.Process.Signal(syscall.SIGTERM)
		case <-lost:
			lost = nil
			fmt.Fprintf(a.env.Stderr, "simlock: lease %s was lost (%v); stopping the command\n", l.LeaseID, h.Err())
			_ = child.Process.Signal(syscall.SIGTERM)
		}
	}
	release()
	return childExit(werr)
}

// announceGrant tells the person (or, with --json, the log) which device
// the command gets. stdout is the child's, so this goes to stderr.
func (a *app) announceGrant(l contract.Lease, role contract.Role, tty bool) {
	if a.jsonOut && !tty {
		b, _ := json.Marshal(map[string]any{"lease": leaseLine{Lease: l, Role: role}})
		fmt.Fprintln(a.env.Stderr, string(b))
		return
	}
	fmt.Fprintln(a.env.Stderr, grantSummary(l, time.Now()))
}

// childExit turns the child's end into simlock run's exit: its own code,
// or 128+N when signal N ended it, as shells report it.
func childExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitError{128 + int(ws.Signal())}
	}
	return exitError{ee.ExitCode()}
}

// runEnv is the child's environment: this process's, then the lease's
// variables, then the device's own env (which knows the adb port best).
// A simlock command the child runs reaches the same daemon as the same
// principal, so `simlock exec $SIMLOCK_LEASE_ID` works from inside it.
func (a *app) runEnv(l contract.Lease) []string {
	env := append([]string(nil), a.env.Environ...)
	set := func(k, v string) {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	if a.url == "" {
		// The principal is not passed down: the child's simlock derives
		// the same one (the OS user, or the inherited SIMLOCK_PRINCIPAL),
		// and pinning it would also pin the child's requester to it.
		set("SIMLOCK_HOME", a.home)
	} else {
		set("SIMLOCK_URL", a.url)
	}
	set("SIMLOCK_LEASE_ID", l.LeaseID)
	set("SIMLOCK_DEVICE_ID", l.DeviceID)
	if d := l.Device; d != nil {
		set("SIMLOCK_UDID", d.UDID)
		set("SIMLOCK_DEVICE_SET", d.DeviceSet)
		set("ANDROID_SERIAL", d.Serial)
		keys := make([]string, 0, len(d.Env))
		for k := range d.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(k, d.Env[k])
		}
	}
	return env
}
