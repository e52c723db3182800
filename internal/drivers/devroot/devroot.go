// Package devroot is the ownership proof every driver keeps for its device
// root: the directory (a simctl device set, an AVD home) that simlock
// creates, marks as its own with a MarkerFile, and is the only place a
// driver ever creates, resets or deletes devices.
//
// Claim proves or establishes ownership when a driver starts; Revalidate
// re-proves it right before anything destructive, because a proof taken at
// start-up may be days old and the directory may have been swapped since.
package devroot

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

// MarkerFile is the file that proves a root is simlock's. It starts with a
// dot and has no .ini or .plist suffix, so neither simctl nor avdmanager
// mistakes it for a device.
const MarkerFile = ".simlock-root"

// Owner is the owner every marker simlock writes names.
const Owner = "simlock"

// Marker is the marker file's content.
type Marker struct {
	Owner    string `json:"owner"`
	Platform string `json:"platform"`
	// ID is random and written once, when the root is claimed; a root whose
	// marker carries another id is a different root, even at the same path.
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// Root is a claimed device root.
type Root struct {
	fs       ports.Filesystem
	dir      string
	platform string
	id       string
}

// Option adjusts Claim.
type Option func(*config)

type config struct {
	adoptUnnumbered bool
}

// AdoptUnnumbered lets Claim accept a marker that names the right owner
// and platform but carries no id — the form the android driver wrote before
// markers had ids — and give it one, keeping its creation time. Without it
// such a marker is refused like any other that is not simlock's.
func AdoptUnnumbered() Option { return func(c *config) { c.adoptUnnumbered = true } }

// Claim makes sure dir exists and is marked as platform's simlock root,
// creating it (0700) and marking it when absent. An existing empty
// directory is marked and adopted. A directory that has content but no
// marker is refused: it may be a device set or AVD home someone else
// populated (a user's ~/.android/avd, say), and adopting it would let
// simlock delete their devices. So is a marker that names another owner or
// platform, or that cannot be parsed. Refusals wrap core.ErrRootNotOwned
// in a *core.SpecError; every error message starts with "<platform>: ".
//
// Filesystem has no chmod, so a root other users can read is only logged.
func Claim(fsys ports.Filesystem, clock ports.Clock, log *slog.Logger, dir, platform string, opts ...Option) (*Root, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Root{fs: fsys, dir: dir, platform: platform}
	st, err := fsys.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := fsys.MkdirAll(dir); err != nil {
			return nil, fmt.Errorf("%s: create device root: %w", platform, err)
		}
		if err := r.writeMarker(clock.Now().UTC()); err != nil {
			return nil, err
		}
		return r, nil
	case err != nil:
		return nil, fmt.Errorf("%s: device root %s: %w", platform, dir, err)
	case !st.IsDir():
		return nil, r.notOwned(fmt.Sprintf("device root %s is not a directory", dir))
	}

	m, err := r.readMarker(cfg.adoptUnnumbered)
	switch {
	case err == nil && m.ID != "":
		r.id = m.ID
	case err == nil:
		// An unnumbered marker AdoptUnnumbered let through: number it.
		created := m.CreatedAt
		if created.IsZero() {
			created = clock.Now().UTC()
		}
		if err := r.writeMarker(created); err != nil {
			return nil, err
		}
		log.Info("device root marker given an id", "root", dir, "id", r.id)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	default:
		entries, err := fsys.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: device root %s: %w", platform, dir, err)
		}
		if len(entries) > 0 {
			return nil, r.notOwned(fmt.Sprintf("%s is not empty and has no %s marker; refusing to manage devices simlock did not create", dir, MarkerFile))
		}
		if err := r.writeMarker(clock.Now().UTC()); err != nil {
			return nil, err
		}
	}
	if st.Mode().Perm()&0o077 != 0 {
		// Not fatal: the operator may have chosen it, but simlock's own
		// directories are 0700 and a shared one is worth a line in the log.
		log.Warn("device root is accessible to other users; simlock expects 0700",
			"root", dir, "mode", st.Mode().Perm().String())
	}
	return r, nil
}

// Dir is the root directory.
func (r *Root) Dir() string { return r.dir }

// ID is the id of the marker claimed.
func (r *Root) ID() string { return r.id }

// Revalidate re-reads the marker and insists it is the one Claim found or
// wrote, so a root deleted, swapped or re-created since start-up is never
// swept. Every failure to prove that is an error; a missing or different
// marker wraps core.ErrRootNotOwned.
func (r *Root) Revalidate() error {
	m, err := r.readMarker(false)
	if errors.Is(err, fs.ErrNotExist) {
		return r.notOwned(fmt.Sprintf("root marker in %s has disappeared", r.dir))
	}
	if err != nil {
		return err
	}
	if m.ID != r.id {
		return r.notOwned(fmt.Sprintf("root marker in %s changed since start-up (id %s, expected %s)", r.dir, m.ID, r.id))
	}
	return nil
}

func (r *Root) writeMarker(created time.Time) error {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	m := Marker{Owner: Owner, Platform: r.platform, ID: hex.EncodeToString(b[:]), CreatedAt: created}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := r.fs.WriteFileAtomic(filepath.Join(r.dir, MarkerFile), append(data, '\n')); err != nil {
		return fmt.Errorf("%s: write root marker: %w", r.platform, err)
	}
	r.id = m.ID
	return nil
}

// readMarker returns an fs.ErrNotExist error when there is no marker and
// core.ErrRootNotOwned when there is one that is not this platform's
// simlock's. A marker without an id passes only when unnumbered is set.
func (r *Root) readMarker(unnumbered bool) (Marker, error) {
	path := filepath.Join(r.dir, MarkerFile)
	data, err := r.fs.ReadFile(path)
	if err != nil {
		return Marker{}, fmt.Errorf("%s: root marker: %w", r.platform, err)
	}
	var m Marker
	if err := json.Unmarshal(data, &m); err != nil {
		return Marker{}, r.notOwned(fmt.Sprintf("unreadable root marker %s: %v", path, err))
	}
	if m.Owner != Owner || m.Platform != r.platform || (m.ID == "" && !unnumbered) {
		return Marker{}, r.notOwned(fmt.Sprintf("root marker %s names owner %q platform %q id %q", path, m.Owner, m.Platform, m.ID))
	}
	return m, nil
}

func (r *Root) notOwned(msg string) error {
	return core.NewSpecError(core.ErrRootNotOwned, r.platform+": "+msg, "root", r.dir)
}
