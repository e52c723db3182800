package ios

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// MarkerFile is the file that proves a device set directory is simlock's.
// Only a directory carrying it (or an empty one, which gets it) is ever
// handed to simctl --set, so the driver cannot act on a user's own devices.
const MarkerFile = ".simlock-root"

// rootMarker is the marker's content.
type rootMarker struct {
	Owner     string    `json:"owner"`
	Platform  string    `json:"platform"`
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
}

const markerOwner = "simlock"

// claimRoot makes sure root exists and is marked as ours, creating both when
// absent. A non-empty directory without a marker is refused: it may be a
// device set someone else populated.
func (d *Driver) claimRoot() error {
	st, err := d.fs.Stat(d.root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := d.fs.MkdirAll(d.root); err != nil {
			return fmt.Errorf("ios: create device root: %w", err)
		}
		return d.writeMarker()
	case err != nil:
		return fmt.Errorf("ios: device root: %w", err)
	case !st.IsDir():
		return core.NewSpecError(core.ErrRootNotOwned, fmt.Sprintf("ios: device root %s is not a directory", d.root), "root", d.root)
	}
	if st.Mode().Perm()&0o077 != 0 {
		// Not fatal: the operator may have chosen it, but simlock's own
		// directories are 0700 and a shared one is worth a line in the log.
		d.log.Warn("device root is accessible to other users", "root", d.root, "mode", st.Mode().Perm().String())
	}
	m, err := d.readMarker()
	if err == nil {
		d.markerID = m.ID
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	entries, err := d.fs.ReadDir(d.root)
	if err != nil {
		return fmt.Errorf("ios: device root: %w", err)
	}
	if len(entries) > 0 {
		return core.NewSpecError(core.ErrRootNotOwned,
			fmt.Sprintf("ios: %s is not empty and has no %s marker; refusing to manage devices simlock did not create", d.root, MarkerFile),
			"root", d.root)
	}
	return d.writeMarker()
}

func (d *Driver) writeMarker() error {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	m := rootMarker{Owner: markerOwner, Platform: Platform, ID: hex.EncodeToString(b[:]), CreatedAt: d.clock.Now().UTC()}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := d.fs.WriteFileAtomic(filepath.Join(d.root, MarkerFile), append(data, '\n')); err != nil {
		return fmt.Errorf("ios: write root marker: %w", err)
	}
	d.markerID = m.ID
	return nil
}

// readMarker returns fs.ErrNotExist (wrapped) when there is no marker and
// core.ErrRootNotOwned when there is one that is not ours.
func (d *Driver) readMarker() (rootMarker, error) {
	path := filepath.Join(d.root, MarkerFile)
	data, err := d.fs.ReadFile(path)
	if err != nil {
		return rootMarker{}, fmt.Errorf("ios: root marker: %w", err)
	}
	var m rootMarker
	if err := json.Unmarshal(data, &m); err != nil {
		return rootMarker{}, core.NewSpecError(core.ErrRootNotOwned, fmt.Sprintf("ios: unreadable root marker %s: %v", path, err), "root", d.root)
	}
	if m.Owner != markerOwner || m.Platform != Platform || m.ID == "" {
		return rootMarker{}, core.NewSpecError(core.ErrRootNotOwned,
			fmt.Sprintf("ios: root marker %s names owner %q platform %q", path, m.Owner, m.Platform), "root", d.root)
	}
	return m, nil
}

// revalidate re-reads the marker and insists it is the one this driver
// claimed, so a root swapped or re-created since start-up is never swept.
func (d *Driver) revalidate() error {
	m, err := d.readMarker()
	if errors.Is(err, fs.ErrNotExist) {
		return core.NewSpecError(core.ErrRootNotOwned, fmt.Sprintf("ios: root marker in %s has disappeared", d.root), "root", d.root)
	}
	if err != nil {
		return err
	}
	if m.ID != d.markerID {
		return core.NewSpecError(core.ErrRootNotOwned,
			fmt.Sprintf("ios: root marker in %s changed since start-up (id %s, expected %s)", d.root, m.ID, d.markerID), "root", d.root)
	}
	return nil
}
