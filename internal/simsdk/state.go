package simsdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Everything the simulated SDK keeps lives in files, because every tool
// invocation is a separate short-lived process and many of them run at
// once. Two rules keep that safe:
//
//   - read-decide-write sequences hold an flock on a lock file for the
//     directory they change (the device set, or the SDK home), and never
//     hold it across a simulated delay;
//   - every file is replaced atomically (write a temp file, rename), so a
//     reader without the lock sees the old or the new version, never half.

const (
	dirMode  = 0o700
	fileMode = 0o600

	homeLockName = ".simsdk.lock" // in the SDK home: fault counts, runtimes
	setLockName  = ".simsdk.lock" // in a device set: the devices in it
	procsDirName = "procs"        // in the SDK home: running device processes
)

// fileLock is a held flock. Unlock releases it; the kernel also releases it
// if the holder dies, which is what makes a crashed xcrun harmless.
type fileLock struct{ f *os.File }

// lockFile takes an exclusive flock on path, creating the file (and its
// directory) if needed. It blocks until the lock is free.
func lockFile(path string) (*fileLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// writeFileAtomic replaces path with data so that concurrent readers never
// observe a partial file.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(name, fileMode)
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		_ = os.Remove(name)
	}
	return werr
}

func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// readJSON decodes path into v. A missing file is reported as fs.ErrNotExist
// so callers can treat "never written" as the zero state.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// homeState is the SDK-wide mutable state that is not a device: how often
// each count-limited fault has fired, which downloadable runtimes and
// Android packages have been installed (or preinstalled ones removed), and
// what each simulated adb server remembers.
type homeState struct {
	FaultsFired       map[string]int `json:"faultsFired,omitempty"`
	InstalledRuntimes []string       `json:"installedRuntimes,omitempty"`

	AndroidInstalled   []string                   `json:"androidInstalled,omitempty"`
	AndroidUninstalled []string                   `json:"androidUninstalled,omitempty"`
	ADBServers         map[string]*adbServerState `json:"adbServers,omitempty"`
}

func homeStatePath(home string) string { return filepath.Join(home, "state.json") }

func loadHomeState(home string) (homeState, error) {
	var st homeState
	err := readJSON(homeStatePath(home), &st)
	if err != nil && !isNotExist(err) {
		return st, err
	}
	return st, nil
}

// updateHomeState runs fn on the home state under the home lock and writes
// the result back if fn reports a change.
func updateHomeState(home string, fn func(*homeState) (changed bool, err error)) error {
	l, err := lockFile(filepath.Join(home, homeLockName))
	if err != nil {
		return err
	}
	defer l.Unlock()
	st, err := loadHomeState(home)
	if err != nil {
		return err
	}
	changed, err := fn(&st)
	if err != nil || !changed {
		return err
	}
	return writeJSONAtomic(homeStatePath(home), &st)
}
