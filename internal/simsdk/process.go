package simsdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A booted simulated device is a real process. Its liveness is not judged
// by its pid (pids get reused) but by a lock: the device process holds an
// exclusive flock on <device dir>/proc.lock for as long as it lives, and the
// kernel drops that lock the instant the process dies, however it dies. So
// "kill -9 the device process" is observed as a crash by the next reader,
// with no cooperation from the dead process.
//
// The spawning xcrun takes the lock before starting the child and hands the
// locked descriptor to it (it becomes the child's fd 3); the lock is
// therefore held continuously from before the process exists, and there is
// no start-up window in which a booting device looks dead.

const (
	procLockName = "proc.lock"
	logDirName   = "logs"
	deviceLog    = "device.log"
)

// Proc is a running simulated device process.
type Proc struct {
	Platform string `json:"platform"` // "ios" or "android"
	ID       string `json:"id"`       // the device's UDID, or the emulator's serial
	PID      int    `json:"pid"`
	Name     string `json:"name"` // device name, or the AVD an emulator runs
}

// procEntry is the registry record of a running device process, kept in
// <home>/procs so that PS and Reset find processes whatever device set they
// belong to.
type procEntry struct {
	Platform  string    `json:"platform"`
	ID        string    `json:"id"`
	PID       int       `json:"pid"`
	Name      string    `json:"name"`
	Dir       string    `json:"dir"`
	StartedAt time.Time `json:"startedAt"`
}

func procEntryPath(home, platform, id string) string {
	return filepath.Join(home, procsDirName, platform+"-"+id+".json")
}

func procLockPath(deviceDir string) string { return filepath.Join(deviceDir, procLockName) }

// lockHeld reports whether some process holds the lock at path, i.e.
// whether the device process owning it is alive. It probes with a shared
// non-blocking lock, so concurrent probes never see each other as owners.
func lockHeld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// waitLockFree polls until the device process owning lockPath is gone, ctx
// ends or timeout passes (timeout < 0: no limit). It reports whether the
// process is gone.
func waitLockFree(ctx context.Context, lockPath string, timeout time.Duration) bool {
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		if !lockHeld(lockPath) {
			return true
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return false
		}
		if sleepCtx(ctx, pollInterval) != nil {
			return !lockHeld(lockPath)
		}
	}
}

// deviceSpawn is what a device process needs to know.
type deviceSpawn struct {
	Platform   string
	ID         string
	Name       string
	Dir        string        // device dir: proc.lock, logs/; the process exits when it vanishes
	BootTime   time.Duration // < 0: never finishes booting (cosmetic: only logged)
	CrashAfter time.Duration // < 0: never crashes
}

func (sp deviceSpawn) args() []string {
	ms := func(d time.Duration) string {
		if d < 0 {
			return "-1"
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	return []string{
		"platform=" + sp.Platform,
		"id=" + sp.ID,
		"name=" + sp.Name,
		"dir=" + sp.Dir,
		"boot-ms=" + ms(sp.BootTime),
		"crash-after-ms=" + ms(sp.CrashAfter),
	}
}

// spawnDevice starts a device process, detached from the caller (own
// session, stdio to the device log) so it outlives the short xcrun that
// booted it, and records it in the process registry.
func (s *sdk) spawnDevice(sp deviceSpawn) (int, error) {
	if s.launcherErr != nil {
		return 0, fmt.Errorf("cannot locate the simlock executable: %w", s.launcherErr)
	}
	if err := os.MkdirAll(filepath.Join(sp.Dir, logDirName), dirMode); err != nil {
		return 0, err
	}
	lockf, err := os.OpenFile(procLockPath(sp.Dir), os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return 0, err
	}
	defer lockf.Close()
	// Probes hold the lock shared for an instant; retry through them, but
	// give up if a previous device process really is still alive.
	deadline := time.Now().Add(time.Second)
	for {
		err = unix.Flock(int(lockf.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("device process for %s is still running", sp.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	logf, err := os.OpenFile(filepath.Join(sp.Dir, logDirName, deviceLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	// Written before the process starts, so a booted device always has
	// logs (simctl list then prints logPathSize, as it does for every
	// booted device in the captures).
	fmt.Fprintf(logf, "%s %s %s: boot requested\n", s.now().UTC().Format(time.RFC3339Nano), sp.Platform, sp.ID)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()

	l := s.launcher
	cmd := exec.Command(l.path, append(append([]string(nil), l.args...), sp.args()...)...)
	cmd.Env = append(os.Environ(), l.env...)
	cmd.Dir = sp.Dir
	cmd.Stdin = devnull
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{lockf} // fd 3 in the child: the held lock
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	// Reap the child if this process lives long enough to see it exit
	// (tests, or an in-process caller); a short-lived xcrun leaves it to init.
	go func() { _ = cmd.Wait() }()

	entry := procEntry{Platform: sp.Platform, ID: sp.ID, PID: pid, Name: sp.Name, Dir: sp.Dir, StartedAt: s.now().UTC()}
	if err := writeJSONAtomic(procEntryPath(s.home, sp.Platform, sp.ID), entry); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return 0, err
	}
	return pid, nil
}

// unregisterProc forgets a device process in the registry.
func (s *sdk) unregisterProc(platform, id string) {
	_ = os.Remove(procEntryPath(s.home, platform, id))
}

// stopDevice ends a device process: SIGTERM and wait for it to exit,
// SIGKILL if that does not happen within grace. hard skips straight to
// SIGKILL.
func stopDevice(ctx context.Context, pid int, dir string, grace time.Duration, hard bool) error {
	lock := procLockPath(dir)
	if !lockHeld(lock) {
		return nil
	}
	if !hard {
		_ = unix.Kill(pid, unix.SIGTERM)
		if waitLockFree(ctx, lock, grace) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if lockHeld(lock) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	if !waitLockFree(ctx, lock, 5*time.Second) {
		return fmt.Errorf("device process %d did not exit", pid)
	}
	return nil
}

// PS lists the running simulated device processes recorded under home,
// dropping registry entries whose process has died.
func PS(home string) ([]Proc, error) {
	entries, err := readProcEntries(home)
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range entries {
		if !lockHeld(procLockPath(e.Dir)) {
			_ = os.Remove(procEntryPath(home, e.Platform, e.ID))
			continue
		}
		out = append(out, Proc{Platform: e.Platform, ID: e.ID, PID: e.PID, Name: e.Name})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Platform != out[j].Platform {
			return out[i].Platform < out[j].Platform
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func readProcEntries(home string) ([]procEntry, error) {
	dir := filepath.Join(home, procsDirName)
	names, err := os.ReadDir(dir)
	if isNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []procEntry
	for _, n := range names {
		if n.IsDir() || !strings.HasSuffix(n.Name(), ".json") || strings.HasPrefix(n.Name(), ".") {
			continue
		}
		var e procEntry
		if err := readJSON(filepath.Join(dir, n.Name()), &e); err != nil {
			continue // a torn or foreign file says nothing about a process
		}
		out = append(out, e)
	}
	return out, nil
}

// Reset kills every simulated device process recorded under home and
// removes the simulated state (devices of the default set, fault counts,
// downloaded runtimes). Device sets elsewhere (--set) keep their device
// records; with their processes gone those devices read as Shutdown.
func Reset(home string) error {
	entries, err := readProcEntries(home)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.PID == os.Getpid() {
			// An emulator run in-process (Main called as "emulator" by an
			// embedding program): killing it would kill the caller. It
			// exits by itself once its run directory is removed below.
			continue
		}
		if err := stopDevice(context.Background(), e.PID, e.Dir, 0, true); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(home); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deviceOpts are the parsed arguments of a device process.
type deviceOpts struct {
	platform, id, name, dir string
	boot, crash             time.Duration
}

func parseDeviceArgs(args []string) (deviceOpts, error) {
	o := deviceOpts{boot: -1, crash: -1}
	if len(args) > 0 && args[0] == DeviceCommand {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return o, fmt.Errorf("bad argument %q: want key=value", a)
		}
		var err error
		switch k {
		case "platform":
			o.platform = v
		case "id":
			o.id = v
		case "name":
			o.name = v
		case "dir":
			o.dir = v
		case "boot-ms":
			o.boot, err = parseMS(v)
		case "crash-after-ms":
			o.crash, err = parseMS(v)
		default:
			err = fmt.Errorf("unknown argument %q", k)
		}
		if err != nil {
			return o, err
		}
	}
	if o.id == "" || o.dir == "" {
		return o, errors.New("id= and dir= are required")
	}
	return o, nil
}

func parseMS(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad milliseconds %q", v)
	}
	if n < 0 {
		return -1, nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

// DeviceProcessMain is the body of a booted simulated device. It runs until
// SIGTERM or SIGINT, a simulated crash (crash-after-ms), ctx ending, or its
// device directory disappearing (so deleting a device set never leaves
// orphans behind). Its stdout is the device log. The simulated shutdown
// time is spent by `simctl shutdown` before it signals, so it does not
// depend on how the caller of DeviceProcessMain handles signals.
func DeviceProcessMain(ctx context.Context, args []string) int {
	o, err := parseDeviceArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", DeviceCommand, err)
		return 2
	}
	return runDevice(ctx, o, os.Stdout)
}

func runDevice(ctx context.Context, o deviceOpts, log io.Writer) int {
	logf := func(format string, a ...any) {
		fmt.Fprintf(log, "%s %s %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), o.platform, o.id, fmt.Sprintf(format, a...))
	}
	return deviceLoop(ctx, o, deviceHooks{logf: logf}).code
}

// loopExit says why a device process body ended and with what status.
type loopExit struct {
	code int
	// orderly is set when the device was asked to stop (a signal, a
	// console kill) rather than crashing or losing its directory; only an
	// orderly exit may still do work such as saving a snapshot.
	orderly bool
	why     string
}

// deviceHooks adapt the shared device loop to a platform. The iOS device
// process uses none; the Android emulator logs in its own format and
// polls its run directory for console requests.
type deviceHooks struct {
	logf func(format string, a ...any)
	// poll, when set, runs every pollInterval; a non-nil result ends the
	// loop with that exit.
	poll func() *loopExit
	// sigs, when set, is a channel the caller subscribed to SIGTERM and
	// SIGINT before its own start-up, so a signal that arrives then is
	// not lost to the default action (which would kill without cleanup).
	sigs chan os.Signal
}

// deviceLoop is the life of a device process: it runs until SIGTERM or
// SIGINT, a simulated crash, ctx ending, its directory disappearing, or a
// hook asking it to stop.
func deviceLoop(ctx context.Context, o deviceOpts, h deviceHooks) loopExit {
	logf := h.logf
	sigs := h.sigs
	if sigs == nil {
		sigs = make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(sigs)
	}
	signal.Ignore(syscall.SIGHUP)

	logf("device process started (pid %d, name %q)", os.Getpid(), o.name)
	var booted, crash, polls <-chan time.Time
	if o.boot >= 0 {
		t := time.NewTimer(o.boot)
		defer t.Stop()
		booted = t.C
	}
	if o.crash >= 0 {
		t := time.NewTimer(o.crash)
		defer t.Stop()
		crash = t.C
	}
	if h.poll != nil {
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		polls = t.C
	}
	watch := time.NewTicker(time.Second)
	defer watch.Stop()

	for {
		select {
		case <-ctx.Done():
			logf("stopped: %v", ctx.Err())
			return loopExit{code: 0, orderly: true, why: "context ended"}
		case <-booted:
			logf("boot finished")
		case <-crash:
			logf("simulated crash (fault %s=%d)", faultCrashAfter, o.crash.Milliseconds())
			// 134 is what a process killed by SIGABRT reports through a shell.
			return loopExit{code: 134, why: "crash"}
		case <-polls:
			if e := h.poll(); e != nil {
				return *e
			}
		case <-watch.C:
			if _, err := os.Stat(o.dir); isNotExist(err) {
				logf("device directory is gone; exiting")
				return loopExit{code: 0, why: "directory removed"}
			}
		case sig := <-sigs:
			logf("received %v; shutting down", sig)
			return loopExit{code: 0, orderly: true, why: sig.String()}
		}
	}
}
