package simsdk

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// A running emulator is the `emulator` process itself: it holds the lock
// <home>/android/emulators/<console port>/proc.lock for its whole life (that
// lock is the console port: a second emulator cannot take it) and describes
// itself in run.json beside it. adb, a separate short-lived process, reads
// run.json to answer for the device and leaves requests for the emulator
// (a kill request file) in the same directory. Whoever changes run.json
// after start (a snapshot load) does so under that directory's lock.

const (
	runFileName     = "run.json"
	killRequestName = "kill-request"
	runLockName     = ".simsdk.lock"
)

// emuRun is what a running emulator publishes about itself.
type emuRun struct {
	AVD         string `json:"avd"`
	AVDDir      string `json:"avdDir"`
	ConsolePort int    `json:"consolePort"`
	// ADBServerPort is the adb server the emulator announced itself to
	// (its ANDROID_ADB_SERVER_PORT when it started).
	ADBServerPort int    `json:"adbServerPort"`
	PID           int    `json:"pid"`
	DataDir       string `json:"dataDir"` // the data partition in use
	ReadOnly      bool   `json:"readOnly,omitempty"`
	BootAnim      bool   `json:"bootAnim"` // false with -no-boot-anim

	API     int    `json:"api"`
	Tag     string `json:"tag"`
	ABI     string `json:"abi"`
	Density int    `json:"density"`
	// Props are -prop and setprop values, over the image's own.
	Props map[string]string `json:"props,omitempty"`

	StartedAt time.Time `json:"startedAt"`
	// OnlineAt is when adbd answers (adb state "device"); nil: never, as
	// for a boot that fails.
	OnlineAt *time.Time `json:"onlineAt,omitempty"`
	// BootedAt is when sys.boot_completed becomes 1; nil: never (boot-hang).
	BootedAt *time.Time `json:"bootedAt,omitempty"`
	// RestoringUntil is set while a snapshot loads: the device is offline.
	RestoringUntil *time.Time `json:"restoringUntil,omitempty"`
	// SaveOnExit is the snapshot an orderly exit saves ("" for none).
	SaveOnExit string `json:"saveOnExit,omitempty"`
	// BootID is the guest kernel's boot id: new on every cold boot, and
	// the snapshot's own after a snapshot load (the guest's memory,
	// kernel included, comes back with it).
	BootID string `json:"bootId,omitempty"`
	// RAMMB is the guest RAM (-memory, else the AVD's hw.ramSize).
	RAMMB int `json:"ramMb,omitempty"`
	// Running are the packages am started and nothing stopped since,
	// the foreground one last (android_am.go).
	Running []string `json:"running,omitempty"`
	// ScreenOff and Keyguard are the screen as the power and menu keys
	// left it (android_window.go): a boot or a snapshot load starts awake
	// and unlocked.
	ScreenOff bool `json:"screenOff,omitempty"`
	Keyguard  bool `json:"keyguard,omitempty"`
}

func (r *emuRun) serial() string { return emulatorSerial(r.ConsolePort) }

func (r *emuRun) restoring(now time.Time) bool {
	return r.RestoringUntil != nil && now.Before(*r.RestoringUntil)
}

// state is the device's adb connection state.
func (r *emuRun) state(now time.Time) string {
	if r.restoring(now) || r.OnlineAt == nil || now.Before(*r.OnlineAt) {
		return "offline"
	}
	return "device"
}

// booted reports sys.boot_completed.
func (r *emuRun) booted(now time.Time) bool {
	return !r.restoring(now) && r.BootedAt != nil && !now.Before(*r.BootedAt)
}

func (s *sdk) emulatorsDir() string { return filepath.Join(s.androidDir(), "emulators") }
func (s *sdk) runDir(consolePort int) string {
	return filepath.Join(s.emulatorsDir(), strconv.Itoa(consolePort))
}

func readRun(dir string) (*emuRun, error) {
	var r emuRun
	if err := readJSON(filepath.Join(dir, runFileName), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func writeRun(dir string, r *emuRun) error {
	return writeJSONAtomic(filepath.Join(dir, runFileName), r)
}

// liveRun returns the emulator running in dir, or nil. The lock proves a
// process holds the port; the pid check rejects a run.json left behind by
// an earlier emulator that was killed, read in the instant before its
// successor replaced it.
func liveRun(dir string) *emuRun {
	if !lockHeld(procLockPath(dir)) {
		return nil
	}
	r, err := readRun(dir)
	if err != nil || !pidAlive(r.PID) {
		return nil
	}
	return r
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// runningEmulators lists the live emulators, newest first (the order adb
// lists freshly connected transports in).
func (s *sdk) runningEmulators() ([]*emuRun, error) {
	ents, err := os.ReadDir(s.emulatorsDir())
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []*emuRun
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if r := liveRun(filepath.Join(s.emulatorsDir(), e.Name())); r != nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.After(out[j].StartedAt)
		}
		return out[i].ConsolePort < out[j].ConsolePort
	})
	return out, nil
}

// updateRun changes a live emulator's run.json under its directory lock;
// fn sees the current record. It fails with errEmulatorGone when the
// emulator has exited.
func (s *sdk) updateRun(consolePort int, fn func(*emuRun) error) error {
	dir := s.runDir(consolePort)
	l, err := lockFile(filepath.Join(dir, runLockName))
	if err != nil {
		return err
	}
	defer l.Unlock()
	r := liveRun(dir)
	if r == nil {
		return errEmulatorGone
	}
	if err := fn(r); err != nil {
		return err
	}
	return writeRun(dir, r)
}

var errEmulatorGone = errors.New("the emulator has exited")

// snapshotMeta is kept with each snapshot.
type snapshotMeta struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// BootLeft is how much of the boot was still to go when the snapshot
	// was taken (0: taken booted; -1: taken during a boot that hung).
	BootLeft time.Duration `json:"bootLeft"`
	Size     int64         `json:"size"`
	// BootID is the guest's boot id when the snapshot was taken.
	BootID string `json:"bootId,omitempty"`
}

func validSnapshotName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name
}

func snapshotDir(avdDir, name string) string {
	return filepath.Join(avdDir, avdSnapshotsName, name)
}

// saveSnapshot copies the data partition into the named snapshot; the
// caller holds the AVD's data lock.
func saveSnapshot(avdDir, dataDir, name string, bootLeft time.Duration, now time.Time, bootID string) error {
	final := snapshotDir(avdDir, name)
	tmp := final + ".saving"
	_ = os.RemoveAll(tmp)
	if err := copyTree(dataDir, filepath.Join(tmp, "data")); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	meta := snapshotMeta{Name: name, CreatedAt: now.UTC(), BootLeft: bootLeft, Size: dirSize(dataDir), BootID: bootID}
	if err := writeJSONAtomic(filepath.Join(tmp, "snapshot.json"), meta); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	_ = os.RemoveAll(final)
	return os.Rename(tmp, final)
}

func readSnapshot(avdDir, name string) (snapshotMeta, bool) {
	var m snapshotMeta
	if !validSnapshotName(name) {
		return m, false
	}
	if err := readJSON(filepath.Join(snapshotDir(avdDir, name), "snapshot.json"), &m); err != nil {
		return m, false
	}
	return m, true
}

// loadSnapshot replaces the data partition with the snapshot's copy; the
// caller holds the AVD's data lock.
func loadSnapshot(avdDir, dataDir, name string) error {
	return replaceTree(filepath.Join(snapshotDir(avdDir, name), "data"), dataDir)
}

func listSnapshots(avdDir string) []snapshotMeta {
	ents, err := os.ReadDir(filepath.Join(avdDir, avdSnapshotsName))
	if err != nil {
		return nil
	}
	var out []snapshotMeta
	for _, e := range ents {
		if m, ok := readSnapshot(avdDir, e.Name()); ok && e.IsDir() {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// bootLeftAt is how much boot remains at now, for a snapshot taken then.
func (r *emuRun) bootLeftAt(now time.Time) time.Duration {
	switch {
	case r.BootedAt == nil:
		return -1
	case r.booted(now):
		return 0
	}
	return r.BootedAt.Sub(now)
}
