package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
)

func (a *app) daemonCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "daemon", Short: "Run, start, stop and inspect the daemon"}
	cmd.AddCommand(a.daemonRunCmd(), a.daemonStartCmd(), a.daemonStopCmd(), a.daemonStatusCmd(), a.daemonLogsCmd())
	return cmd
}

func (a *app) loadConfig() (config.Config, error) {
	return config.Load(a.configPath)
}

func (a *app) daemonRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return contract.Errorf(contract.CodeBadRequest, "%v", err).WithNext("fix the configuration file")
			}
			p := a.paths()
			if err := os.MkdirAll(p.Home, 0o700); err != nil {
				return err
			}
			logFile, err := ports.OpenRotatingFile(p.Log, cfg.Log.RotateBytes)
			if err != nil {
				return err
			}
			defer logFile.Close()
			logger := ports.NewLogger(logFile, ports.ParseLevel(cfg.Log.Level))
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			opts := daemon.Options{Home: p.Home, Config: cfg, Version: Version, Logger: logger, Getenv: a.env.Getenv}
			if v := a.env.Getenv("SIMLOCK_SIMSDK_MACHINE"); v != "" {
				m, err := parseMachine(v)
				if err != nil {
					return err
				}
				logger.Warn("planning capacity for a pretended machine (SIMLOCK_SIMSDK_MACHINE), not this one", "cpus", m.CPUs, "ramBytes", m.RAM)
				opts.Stats = m
			}
			d, err := daemon.Start(ctx, opts)
			if err != nil {
				logger.Error("daemon failed to start", "err", err)
				return err
			}
			mode := cfg.Mode
			if d.HTTPAddr() != "" {
				fmt.Fprintf(a.env.Stderr, "simlock %s %s listening on %s and http://%s (pid %d)\n", mode, Version, p.Socket, d.HTTPAddr(), os.Getpid())
			} else {
				fmt.Fprintf(a.env.Stderr, "simlock %s %s listening on %s (pid %d)\n", mode, Version, p.Socket, os.Getpid())
			}
			select {
			case <-ctx.Done():
				return d.Stop()
			case <-d.Done():
				return d.Wait()
			}
		},
	}
}

func (a *app) daemonStartCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background (does nothing if one is running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			o := client.Options{Socket: a.paths().Socket, Principal: a.principal(), Name: "simlock-cli"}
			verb := "already running"
			c, err := client.Dial(ctx, o)
			if err != nil {
				if _, err := a.loadConfig(); err != nil {
					return contract.Errorf(contract.CodeBadRequest, "%v", err).WithNext("fix the configuration file")
				}
				if c, err = a.launchAndDial(ctx, o); err != nil {
					return err
				}
				verb = "started"
			}
			defer c.Close()
			st, err := a.awaitStartup(ctx, c, startupWait)
			if err != nil {
				return err
			}
			return a.printDaemonInfo(st, verb)
		},
	}
	a.addJSON(cmd)
	return cmd
}

// startupWait bounds how long `daemon start` waits for the daemon's
// startup convergence (adopting running devices, restoring leases) once
// it answers. On the simulated SDK that is milliseconds; on a Mac with many
// devices it is seconds. Past the bound the daemon is reported as it is.
const startupWait = 2 * time.Minute

// awaitStartup returns the daemon's status once it has left "starting",
// so that a script's next command after `daemon start` sees a ready
// daemon and `daemon start` itself reports a failed convergence, instead
// of the first lease finding it. A wait past a second says so on stderr.
func (a *app) awaitStartup(ctx context.Context, c *client.Client, bound time.Duration) (contract.StatusGetOut, error) {
	start := time.Now()
	told := false
	for {
		st, err := client.Do(ctx, c, contract.StatusGet, contract.StatusGetIn{})
		if err != nil {
			return st, err
		}
		switch st.Daemon.Health {
		case "failed":
			return st, contract.Errorf(contract.CodeDaemonStartupFailed,
				"the daemon (pid %d) answers, but its startup convergence failed", st.Daemon.PID).
				WithNext("read `simlock daemon logs`, fix the cause, then `simlock daemon stop` and start again")
		case "starting":
		default:
			return st, nil
		}
		waited := time.Since(start)
		if waited >= bound {
			fmt.Fprintf(a.env.Stderr, "simlock: the daemon is still starting after %s; requests wait for it\n", bound)
			return st, nil
		}
		if !told && waited >= time.Second {
			fmt.Fprintln(a.env.Stderr, "simlock: waiting for the daemon to adopt its devices and restore its leases...")
			told = true
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *app) printDaemonStatus(ctx context.Context, c *client.Client, verb string) error {
	st, err := client.Do(ctx, c, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		return err
	}
	return a.printDaemonInfo(st, verb)
}

func (a *app) printDaemonInfo(st contract.StatusGetOut, verb string) error {
	if a.jsonOut {
		return a.printJSON(map[string]any{"pid": st.Daemon.PID, "version": st.Daemon.Version, "socket": st.Daemon.Socket,
			"health": st.Daemon.Health, "mode": st.Daemon.Mode, "home": st.Daemon.Home, "instanceId": st.Daemon.InstanceID})
	}
	a.printf("daemon %s: pid %d, version %s, health %s, socket %s\n", verb, st.Daemon.PID, st.Daemon.Version, st.Daemon.Health, st.Daemon.Socket)
	return nil
}

func (a *app) daemonStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Report whether the daemon runs, its pid, version and health",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := client.Options{Socket: a.paths().Socket, Principal: a.principal(), Name: "simlock-cli"}
			c, err := client.Dial(cmd.Context(), o)
			if err != nil {
				if a.jsonOut {
					a.printJSON(map[string]any{"health": "stopped", "socket": a.paths().Socket})
				} else {
					a.printf("daemon not running (socket %s)\n", a.paths().Socket)
				}
				return exitError{3}
			}
			defer c.Close()
			return a.printDaemonStatus(cmd.Context(), c, "running")
		},
	}
	a.addJSON(cmd)
	return cmd
}

func (a *app) daemonStopCmd() *cobra.Command {
	var timeout, grace time.Duration
	var clean bool
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon: gracefully, then SIGTERM, then SIGKILL, within a bounded time",
		Long: "Asks the daemon to stop gracefully (in-flight purges settle first) and waits up to --timeout. " +
			"A daemon that does not answer or does not stop in time gets SIGTERM, then after --grace SIGKILL; " +
			"signals go only to the pid daemon.json names, and only once it is proven to be this home's daemon " +
			"(its process start identity matches the record and it holds the home's lock; the executable's name does not matter); " +
			"SIGCONT follows SIGTERM so a stopped (hung) daemon can still shut down gracefully. --clean also releases every lease and shuts down every running device " +
			"of the home first; if the daemon had to be killed, each of its host claims is reconciled as " +
			"`device release --stale` does. The result grades what was proven (cleanupConfidence) and lists the " +
			"home's claims released and left orphaned.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := a.stopDaemonGraded(cmd.Context(), timeout, grace, clean)
			if a.jsonOut && res.Mode != "" {
				a.printJSON(res)
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 150*time.Second, "how long to wait for a graceful stop before signalling")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long to wait after SIGTERM before SIGKILL")
	cmd.Flags().BoolVar(&clean, "clean", false, "also release every lease and shut down every running device of this home")
	a.addJSON(cmd)
	return cmd
}

// stopResult is what `daemon stop --json` prints.
type stopResult struct {
	// Stopped: no daemon holds the home any more (proven by its lock).
	Stopped bool `json:"stopped"`
	// Mode is graceful (the daemon stopped on request), forced (a signal
	// ended it) or notRunning.
	Mode string `json:"mode"`
	// CleanupConfidence grades what the stop proved: verified (the daemon
	// finalized its state and every cleanup asked for is proven), partial
	// (some cleanup is proven, some is not), unknown (the daemon was
	// killed: what it left is not known).
	CleanupConfidence string `json:"cleanupConfidence"`
	// ClaimsReleased are this home's device claims cleared because the
	// device's teardown completed (never because a pid died).
	ClaimsReleased []string `json:"claimsReleased"`
	// ClaimsOrphaned are this home's claims left behind by a daemon that is
	// now gone: proven stale, cleanup still pending (the home's next daemon
	// adopts them, or `simlock device release --stale`).
	ClaimsOrphaned []string `json:"claimsOrphaned"`
	// Pending is the cleanup known to be outstanding (device keys), [] when
	// known to be none, and null when it cannot be known (forced stop).
	Pending  []string `json:"pending"`
	Warnings []string `json:"warnings"`
	// Signal is the last signal sent: SIGTERM or SIGKILL.
	Signal string   `json:"signal,omitempty"`
	PID    int      `json:"pid,omitempty"`
	Steps  []string `json:"steps"`
	// Clean is the daemon's own report of its clean pass, when it ran one.
	Clean *contract.DaemonCleanReport `json:"clean,omitempty"`
}

// homeClaims is the home's claims in the host registry, by key. ok is
// false when the registry could not be read: nothing is then claimed about
// them.
func (a *app) homeClaims(ctx context.Context) (map[hostreg.Key]hostreg.Status, bool) {
	sts, err := hostreg.Inspect(ctx, a.hostDir(), hostreg.SystemProber{})
	if err != nil {
		return nil, false
	}
	out := map[hostreg.Key]hostreg.Status{}
	for _, st := range sts {
		if filepath.Clean(st.Claim.Owner.Home) == a.home {
			out[st.Key] = st
		}
	}
	return out, true
}

// stopDaemonGraded stops the daemon and grades the result by comparing the
// home's host claims before and after: a claim that is gone was released by
// a teardown; one still there belongs to a dead daemon (orphaned). After a
// forced stop nothing the daemon had in memory is known (pending null),
// and with --clean each orphaned claim is reconciled as --stale does.
func (a *app) stopDaemonGraded(ctx context.Context, timeout, grace time.Duration, clean bool) (stopResult, error) {
	before, readBefore := a.homeClaims(ctx)
	res, err := a.stopDaemon(ctx, timeout, grace, clean)
	res.ClaimsReleased, res.ClaimsOrphaned, res.Warnings = []string{}, []string{}, []string{}
	if res.Mode == "" || err != nil {
		return res, err
	}
	res.Stopped = true
	after, readAfter := a.homeClaims(ctx)
	warn := func(format string, v ...any) {
		msg := fmt.Sprintf(format, v...)
		res.Warnings = append(res.Warnings, msg)
		if !a.jsonOut {
			a.printf("warning: %s\n", msg)
		}
	}
	if !readBefore || !readAfter {
		warn("the host registry could not be read, so nothing is known about this home's device claims")
		res.CleanupConfidence = "unknown"
		return res, nil
	}
	for k := range before {
		if _, still := after[k]; !still {
			res.ClaimsReleased = append(res.ClaimsReleased, string(k))
		}
	}
	if res.Mode == "forced" && clean && len(after) > 0 {
		db, err := hostreg.Open(ctx, a.hostDir())
		if err != nil {
			warn("open the host registry to reconcile: %v", err)
		} else {
			for k, st := range after {
				// Cleared or not, a nil error means the claim is gone: this
				// command cleared it, or another home's watcher reclaimed it.
				r, err := a.releaseStale(ctx, db, st, 30*time.Second)
				if err != nil {
					warn("%s: not reconciled: %v", k, err)
					continue
				}
				res.ClaimsReleased = append(res.ClaimsReleased, string(k))
				delete(after, k)
				res.Warnings = append(res.Warnings, r.Warnings...)
			}
			db.Close()
		}
	}
	for k := range after {
		res.ClaimsOrphaned = append(res.ClaimsOrphaned, string(k))
	}
	slices.Sort(res.ClaimsReleased)
	slices.Sort(res.ClaimsOrphaned)
	switch {
	case res.Mode == "notRunning":
		res.Pending = []string{}
		res.CleanupConfidence = "verified"
		if len(after) > 0 {
			res.Pending = slices.Clone(res.ClaimsOrphaned)
			res.CleanupConfidence = "partial"
			warn("no daemon runs for this home, but %d of its device claims remain: `simlock --home %s device status`", len(after), a.home)
		}
	case res.Mode == "forced":
		res.Pending = nil // what the killed daemon had in flight is unknowable
		res.CleanupConfidence = "unknown"
		if res.Signal == "SIGTERM" {
			warn("the daemon ended on SIGTERM, not on request: it ran its own shutdown, but what that finalized is not proven")
		} else {
			warn("the daemon was killed before it could finalize its state: leases and in-flight device work are not known to be cleaned up")
		}
		if clean && len(res.ClaimsOrphaned) == 0 {
			res.CleanupConfidence = "partial" // every claim is reconciled; the rest stays unknown
		}
	default: // graceful: the daemon finalized everything it held
		res.Pending = slices.Clone(res.ClaimsOrphaned)
		res.CleanupConfidence = "verified"
		if clean && (len(res.ClaimsOrphaned) > 0 || (res.Clean != nil && len(res.Clean.Failed) > 0)) {
			res.CleanupConfidence = "partial"
			if res.Clean != nil {
				for id, why := range res.Clean.Failed {
					warn("device %s was not shut down: %s", id, why)
				}
			}
			for _, k := range res.ClaimsOrphaned {
				warn("%s is still claimed by this home after the clean stop: its teardown is not proven; `simlock device release --stale %s` reconciles it", k, k)
			}
		}
		if !clean && len(res.ClaimsOrphaned) > 0 {
			warn("%d device(s) were left running; their claims stay orphaned until this home's daemon starts again (it adopts them) or `simlock device release --stale`", len(res.ClaimsOrphaned))
		}
	}
	return res, nil
}

// stopDaemon escalates: a graceful daemon.stop (bounded), then SIGTERM,
// then SIGKILL of the verified daemon pid. Each step is reported as it
// happens; the home lock being free is the proof that the daemon is gone.
func (a *app) stopDaemon(ctx context.Context, timeout, grace time.Duration, clean bool) (stopResult, error) {
	p := a.paths()
	res := stopResult{Steps: []string{}}
	step := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		res.Steps = append(res.Steps, msg)
		if !a.jsonOut {
			a.printf("%s\n", msg)
		}
	}
	lockPath := filepath.Join(p.Home, "daemon.lock")
	o := client.Options{Socket: p.Socket, Principal: a.principal(), Name: "simlock-cli", Credential: a.credential(false),
		HandshakeTimeout: 5 * time.Second}
	c, err := client.Dial(ctx, o)
	if client.IsCode(err, contract.CodeDaemonNotRunning) && !homeLocked(lockPath) {
		res.Mode = "notRunning"
		step("daemon not running")
		return res, nil
	}
	if err != nil && !client.IsCode(err, contract.CodeConnectionLost) && !client.IsCode(err, contract.CodeDaemonNotRunning) {
		return res, err // a refused handshake is an answer: never signal past it
	}
	if c != nil {
		callTimeout := 10 * time.Second
		if clean {
			callTimeout = timeout // the clean pass runs before the answer
		}
		sctx, cancel := context.WithTimeout(ctx, callTimeout)
		var out contract.DaemonStopOut
		out, err = client.Do(sctx, c, contract.DaemonStop, contract.DaemonStopIn{Clean: clean})
		cancel()
		res.Clean = out.Clean
		if client.IsCode(err, contract.CodeForbidden) || client.IsCode(err, contract.CodeAdminAuthFailed) {
			c.Close()
			return res, err // a refusal is an answer: never signal past it
		}
		if err == nil {
			if waitUnlocked(ctx, lockPath, timeout) {
				c.Close()
				res.Mode = "graceful"
				step("daemon stopped")
				return res, nil
			}
			step("the daemon accepted the stop request but did not stop within %s", timeout)
		} else {
			step("the daemon did not take the stop request: %v", err)
		}
		c.Close()
	} else {
		step("the daemon did not answer: %v", err)
	}

	target, verr := verifiedDaemon(p.Home, p.PID, lockPath)
	if verr != nil {
		if !homeLocked(lockPath) {
			res.Mode = "graceful"
			step("daemon stopped")
			return res, nil
		}
		return res, fmt.Errorf("the daemon is still running and no signal was sent, because its pid could not be verified: %w; "+
			"find the simlock daemon process for %s and stop it yourself", verr, p.Home)
	}
	pid := target.pid
	res.PID, res.Mode = pid, "forced"
	for _, sig := range []struct {
		s    syscall.Signal
		name string
		wait time.Duration
	}{{syscall.SIGTERM, "SIGTERM", grace}, {syscall.SIGKILL, "SIGKILL", 5 * time.Second}} {
		// Proven again right before each signal: a daemon that exited
		// meanwhile may have left its pid to another process.
		if err := target.still(); err != nil {
			if !homeLocked(lockPath) {
				step("daemon stopped")
				return res, nil
			}
			return res, fmt.Errorf("no %s sent: %w", sig.name, err)
		}
		if err := syscall.Kill(pid, sig.s); err != nil && !errors.Is(err, syscall.ESRCH) {
			return res, fmt.Errorf("send %s to daemon pid %d: %w", sig.name, pid, err)
		}
		if sig.s == syscall.SIGTERM {
			// A stopped (SIGSTOP, hung in a debugger) daemon only queues
			// SIGTERM; SIGCONT lets it run its graceful shutdown.
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		res.Signal = sig.name
		step("sent %s to daemon pid %d", sig.name, pid)
		if waitUnlocked(ctx, lockPath, sig.wait) {
			if sig.s == syscall.SIGKILL {
				step("daemon stopped (killed: leases and in-flight work were not finalized; the next start recovers them)")
			} else {
				step("daemon stopped")
			}
			return res, nil
		}
	}
	return res, fmt.Errorf("daemon pid %d still holds %s after SIGKILL", pid, lockPath)
}

// homeLocked reports whether some process holds the home's daemon lock.
// Probing takes the lock for an instant when it is free; a daemon starting
// in that instant reports DAEMON_ALREADY_RUNNING and can be started again.
func homeLocked(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false // no lock file: no daemon ever claimed this home
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// waitUnlocked waits up to d for the home lock to be released: the
// daemon's last act, and the kernel's on its exit whatever killed it.
func waitUnlocked(ctx context.Context, path string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !homeLocked(path) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// provenDaemon is a process proven to be this home's daemon: the pid and
// the start identity it had when it was proven.
type provenDaemon struct {
	pid   int
	start string
}

// still proves again that pid is the process that was proven, by its start
// identity: a pid the kernel gave to another process fails.
func (t provenDaemon) still() error {
	start, alive, err := hostreg.SystemProber{}.ProcessStart(context.Background(), t.pid)
	switch {
	case err != nil:
		return fmt.Errorf("read the start identity of pid %d: %w", t.pid, err)
	case !alive:
		return fmt.Errorf("pid %d is not running", t.pid)
	case start != t.start:
		return fmt.Errorf("pid %d now belongs to another process (started %s, the daemon %s)", t.pid, start, t.start)
	}
	return nil
}

// verifiedDaemon proves which process is this home's daemon before
// anything signals it, by what the daemon recorded and the kernel
// confirms, never by the executable's name (a simlock built or installed
// as `sl` is as much a daemon): daemon.json names the home, the pid and the
// pid's start identity; the home lock is held; the pid runs with that
// start identity now; and where the kernel lists flock owners (/proc/locks)
// the lock's owner is that pid. A stale or reused pid fails the proof.
//
// A daemon from before daemon.json existed is proven only where the
// kernel names the lock's holder: daemon.pid's pid must be it.
func verifiedDaemon(home, pidPath, lockPath string) (provenDaemon, error) {
	if !homeLocked(lockPath) {
		return provenDaemon{}, fmt.Errorf("no process holds %s", lockPath)
	}
	owners, listed := flockOwners(lockPath)
	recPath := filepath.Join(home, hostreg.DaemonRecordFile)
	rec, err := hostreg.ReadHomeRecord(recPath)
	if errors.Is(err, fs.ErrNotExist) && listed {
		pid, perr := readPIDFile(pidPath)
		if perr != nil {
			return provenDaemon{}, perr
		}
		if !slices.Contains(owners, pid) {
			return provenDaemon{}, fmt.Errorf("pid %d from %s does not hold %s (held by %v)", pid, pidPath, lockPath, owners)
		}
		start, alive, serr := hostreg.SystemProber{}.ProcessStart(context.Background(), pid)
		if serr != nil || !alive {
			return provenDaemon{}, fmt.Errorf("pid %d from %s is not running", pid, pidPath)
		}
		return provenDaemon{pid: pid, start: start}, nil
	}
	if err != nil {
		return provenDaemon{}, fmt.Errorf("read %s: %w", recPath, err)
	}
	if abs, aerr := filepath.Abs(home); aerr != nil || filepath.Clean(abs) != rec.Home {
		return provenDaemon{}, fmt.Errorf("%s names home %s, not %s", recPath, rec.Home, home)
	}
	if rec.PID == os.Getpid() {
		return provenDaemon{}, fmt.Errorf("%s names this very process", recPath)
	}
	t := provenDaemon{pid: rec.PID, start: rec.Start}
	if err := t.still(); err != nil {
		return provenDaemon{}, fmt.Errorf("%s: %w", recPath, err)
	}
	if listed && !slices.Contains(owners, t.pid) {
		return provenDaemon{}, fmt.Errorf("pid %d does not hold %s (held by %v)", t.pid, lockPath, owners)
	}
	return t, nil
}

// readPIDFile reads daemon.pid.
func readPIDFile(pidPath string) (int, error) {
	b, err := os.ReadFile(pidPath)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", pidPath, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || pid == os.Getpid() {
		return 0, fmt.Errorf("%s holds no usable pid (%q)", pidPath, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// flockOwners lists the pids /proc/locks names as holding a FLOCK on the
// file; ok is false where the kernel does not say (not Linux).
func flockOwners(path string) (pids []int, ok bool) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return nil, false
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, false
	}
	// "1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF": pid, then
	// major:minor:inode in hex:hex:decimal.
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[2] == "->" {
			continue
		}
		dev := strings.Split(f[5], ":")
		if len(dev) != 3 || dev[2] != strconv.FormatUint(uint64(st.Ino), 10) {
			continue
		}
		maj, err1 := strconv.ParseUint(dev[0], 16, 32)
		mnr, err2 := strconv.ParseUint(dev[1], 16, 32)
		if err1 != nil || err2 != nil || uint64(unix.Major(uint64(st.Dev))) != maj || uint64(unix.Minor(uint64(st.Dev))) != mnr {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

func (a *app) daemonLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Print the daemon's log (rotated generation first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := a.paths().Log
			for _, f := range []string{p + ".1", p} {
				b, err := os.ReadFile(f)
				if err == nil {
					a.env.Stdout.Write(b)
				}
			}
			if !follow {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			off, _ := f.Seek(0, io.SeekEnd)
			for {
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(300 * time.Millisecond):
				}
				st, err := os.Stat(p)
				if err == nil && st.Size() < off { // rotated
					f.Close()
					if f, err = os.Open(p); err != nil {
						return err
					}
					off = 0
				}
				f.Seek(off, io.SeekStart)
				n, _ := io.Copy(a.env.Stdout, f)
				off += n
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	return cmd
}

// parseMachine reads SIMLOCK_SIMSDK_MACHINE, "RAM_GIB:CPUS" (e.g. "16:8"):
// the capacity strategy then plans for a machine of that size.
func parseMachine(v string) (ports.PretendMachine, error) {
	ram, cpus, ok := strings.Cut(v, ":")
	g, err1 := strconv.Atoi(ram)
	c, err2 := strconv.Atoi(cpus)
	if !ok || err1 != nil || err2 != nil || g <= 0 || c <= 0 {
		return ports.PretendMachine{}, contract.Errorf(contract.CodeBadRequest, "SIMLOCK_SIMSDK_MACHINE=%q is not RAM_GIB:CPUS (for example 16:8)", v)
	}
	return ports.PretendMachine{Base: ports.HostStats{}, CPUs: c, RAM: uint64(g) << 30}, nil
}
