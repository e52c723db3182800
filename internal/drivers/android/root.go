package android

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// RevalidateRoot implements core.Driver: it re-reads the marker right before
// a destructive sweep, because a proof taken at startup may be days old,
// and insists it is the one claimed then.
func (d *Driver) RevalidateRoot(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.devRoot.Revalidate()
}

// members lists the AVD names inside the root. An AVD is a "<name>.ini"
// file with a "<name>.avd" directory beside it — the pair avdmanager writes
// under ANDROID_AVD_HOME. Membership, not a name prefix, is the proof: an AVD
// simlock adopted under another name still counts, and a stray file does not.
func (d *Driver) members() ([]string, error) {
	ents, err := d.fs.ReadDir(d.root)
	if err != nil {
		return nil, fmt.Errorf("android driver: list root: %w", err)
	}
	dirs := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() {
			dirs[e.Name()] = true
		}
	}
	var names []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".ini")
		if !ok || name == "" || e.IsDir() || !dirs[name+".avd"] {
			continue
		}
		names = append(names, name)
	}
	return names, nil
}

func (d *Driver) isMember(name string) bool {
	if !validAVDName(name) {
		return false
	}
	ini, err := d.fs.Stat(filepath.Join(d.root, name+".ini"))
	if err != nil || ini.IsDir() {
		return false
	}
	dir, err := d.fs.Stat(d.avdDir(name))
	return err == nil && dir.IsDir()
}

// validAVDName keeps handles from naming paths outside the root.
func validAVDName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		ok := r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

func (d *Driver) avdDir(name string) string { return filepath.Join(d.root, name+".avd") }

// avdState is what the driver keeps about one AVD, in
// <root>/<name>.simlock.json beside the AVD's own files.
type avdState struct {
	ConsolePort int `json:"consolePort"`
	// MarkID is the provenance mark written onto the device's data
	// partition; empty until the first clean boot wrote it.
	MarkID string `json:"markId,omitempty"`
	// Pristine means the data partition is known unused: just created or
	// just wiped. Only a pristine boot may become the baseline.
	Pristine bool `json:"pristine"`
	// Running is set while an emulator launched by simlock may be up and
	// cleared once a shutdown proved it exited. Still set on a stopped
	// device means the last run ended without an orderly shutdown (a crash,
	// or the daemon dying with it).
	Running  bool           `json:"running"`
	Baseline *baselineState `json:"baseline,omitempty"`
	// Incarnation names the device's current incarnation: a new one
	// starts before every boot and every snapshot load (resources.go).
	Incarnation string `json:"incarnation,omitempty"`
}

type baselineState struct {
	Snapshot string `json:"snapshot"`
	// Tag hashes what silently invalidates a snapshot: the post-boot AVD
	// configuration, the system image and the emulator version.
	Tag string `json:"tag"`
}

func (d *Driver) statePath(name string) string {
	return filepath.Join(d.root, name+".simlock.json")
}

// loadState returns the AVD's state; a missing file is the zero state.
func (d *Driver) loadState(name string) (avdState, error) {
	var st avdState
	b, err := d.fs.ReadFile(d.statePath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return avdState{}, fmt.Errorf("android driver: %s: %w", d.statePath(name), err)
	}
	return st, nil
}

func (d *Driver) saveState(name string, st avdState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return d.fs.WriteFileAtomic(d.statePath(name), b)
}

// updateState applies f to the stored state and writes it back.
func (d *Driver) updateState(name string, f func(*avdState)) error {
	st, err := d.loadState(name)
	if err != nil {
		return err
	}
	f(&st)
	return d.saveState(name, st)
}
