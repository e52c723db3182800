package claims

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// RepairOptions configure RepairHost.
type RepairOptions struct {
	// HostDir is the host registry's directory.
	HostDir string
	// Homes are homes to include besides those the host directory records
	// (a home whose daemon never wrote its record, or whose record is bad).
	Homes []string
	// Force rebuilds a registry that SQLite can still read.
	Force bool
	// ReopenWait bounds how long the repair waits for each running daemon
	// to move to the new registry and write its claims there.
	ReopenWait time.Duration
	// Progress is told each step as it happens (nil: silent).
	Progress func(format string, args ...any)
	Now      func() time.Time
	// LoadStore reads the devices and leases of the home store at path
	// (the daemon's home store, which this package does not open).
	LoadStore func(ctx context.Context, path string) (core.Snapshot, error)
}

// RepairReport is what `simlock host repair --json` prints.
type RepairReport struct {
	// Registry is the host.db that was judged; Damage says why it was
	// rebuilt ("" when it was healthy and nothing was done).
	Registry string `json:"registry"`
	Damage   string `json:"damage"`
	Repaired bool   `json:"repaired"`
	// MovedAside are the damaged files' new names.
	MovedAside []string       `json:"movedAside"`
	Homes      []RepairedHome `json:"homes"`
	Warnings   []string       `json:"warnings"`
}

// RepairedHome is one home as the repair found and restored it.
type RepairedHome struct {
	Home string `json:"home"`
	// State is running (its daemon holds the home lock: the daemon writes
	// its own claims into the new registry), stopped (no daemon: the
	// repair restored its claims from its store), gone (the home no longer
	// exists: nothing to restore) or unreadable.
	State string `json:"state"`
	// ClaimsRestored are the device keys the repair claimed in a stopped
	// home's name, which its next daemon adopts.
	ClaimsRestored []string `json:"claimsRestored"`
	// Reopened: a running home's daemon moved to the new registry within
	// the wait (its home record names the new file).
	Reopened bool   `json:"reopened,omitempty"`
	Error    string `json:"error,omitempty"`
}

// RepairHost rebuilds a damaged host registry (ADR 0064): it moves the
// damaged host.db (and its -wal and -shm) aside as host.db.damaged-<UTC
// time>, creates a fresh registry, and fills it from the homes' own
// records: a home whose daemon runs writes its own claims (its watcher
// notices the replaced file); a stopped home's running devices, read from
// its store under its home lock, are claimed in its name by this process,
// which is dead once the repair ends, so the home's next daemon adopts
// them as its previous daemon's and its leases stay intact; no other home
// can take them meanwhile.
func RepairHost(ctx context.Context, o RepairOptions) (RepairReport, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	if o.ReopenWait <= 0 {
		o.ReopenWait = 30 * time.Second
	}
	dir, err := filepath.Abs(o.HostDir)
	if err != nil {
		return RepairReport{}, err
	}
	path := filepath.Join(dir, hostreg.FileName)
	rep := RepairReport{Registry: path, MovedAside: []string{}, Homes: []RepairedHome{}, Warnings: []string{}}
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		rep.Warnings = append(rep.Warnings, msg)
		o.Progress("warning: %s", msg)
	}

	// One repair at a time on a host directory.
	unlock, err := flockFile(filepath.Join(dir, "repair.lock"), true)
	if err != nil {
		return rep, fmt.Errorf("another `simlock host repair` runs on %s: %w", dir, err)
	}
	defer unlock()

	_, ierr := hostreg.Inspect(ctx, dir, hostreg.SystemProber{})
	var dmg *hostreg.DamagedError
	switch {
	case errors.As(ierr, &dmg):
		rep.Damage = dmg.Err.Error()
	case ierr != nil:
		// Busy, unreadable for permissions, too new: not damage, and
		// moving the file aside would lose a good registry.
		return rep, fmt.Errorf("the host registry %s cannot be judged, so nothing was changed: %w", path, ierr)
	case o.Force:
		rep.Damage = "rebuild forced (--force); SQLite reads the file"
	default:
		o.Progress("the host registry %s is readable: nothing to repair", path)
		return rep, nil
	}
	o.Progress("the host registry %s is damaged: %s", path, rep.Damage)

	homes := homesToRepair(dir, o.Homes, warn)
	// Stopped homes stay stopped while the repair reads their stores and
	// restores their claims: their lock is held until the end.
	type stoppedHome struct {
		rec  hostreg.HomeRecord
		snap core.Snapshot
	}
	var stopped []stoppedHome
	var running []hostreg.HomeRecord
	for _, h := range homes {
		rh := RepairedHome{Home: h.Home, ClaimsRestored: []string{}}
		exists, err := hostreg.SystemProber{}.HomeExists(ctx, h.Home)
		switch {
		case err != nil:
			rh.State, rh.Error = "unreadable", err.Error()
		case !exists:
			rh.State = "gone"
		default:
			release, lerr := flockFile(filepath.Join(h.Home, "daemon.lock"), false)
			if errors.Is(lerr, unix.EWOULDBLOCK) {
				rh.State = "running"
				running = append(running, h)
				break
			}
			if lerr != nil {
				rh.State, rh.Error = "unreadable", lerr.Error()
				break
			}
			defer release()
			snap, serr := readHomeStore(ctx, h.Home, o.LoadStore)
			if serr != nil {
				rh.State, rh.Error = "unreadable", serr.Error()
				break
			}
			rh.State = "stopped"
			stopped = append(stopped, stoppedHome{rec: h, snap: snap})
		}
		o.Progress("home %s: %s", h.Home, rh.State)
		rep.Homes = append(rep.Homes, rh)
	}

	stamp := o.Now().UTC().Format("20060102T150405Z")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		from, to := path+suffix, path+".damaged-"+stamp+suffix
		if err := os.Rename(from, to); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return rep, fmt.Errorf("move %s aside: %w", from, err)
		}
		rep.MovedAside = append(rep.MovedAside, to)
		o.Progress("moved %s to %s", from, to)
	}
	db, err := hostreg.Open(ctx, dir)
	if err != nil {
		return rep, fmt.Errorf("create a fresh host registry: %w", err)
	}
	defer db.Close()
	rep.Repaired = true
	o.Progress("created a fresh host registry %s", path)

	self, err := hostreg.Self("/")
	if err != nil {
		return rep, fmt.Errorf("host registry: %w", err)
	}
	byHome := map[string]*RepairedHome{}
	for i := range rep.Homes {
		byHome[rep.Homes[i].Home] = &rep.Homes[i]
	}
	for _, s := range stopped {
		rh := byHome[s.rec.Home]
		owner := hostreg.Owner{Home: s.rec.Home, PID: self.PID, Start: self.Start}
		for _, c := range stoppedHomeClaims(s.rec, s.snap, owner, o.Now(), warn) {
			if err := db.Claim(ctx, c); err != nil {
				warn("home %s: claim %s: %v", s.rec.Home, c.Key, err)
				continue
			}
			rh.ClaimsRestored = append(rh.ClaimsRestored, string(c.Key))
		}
		slices.Sort(rh.ClaimsRestored)
		o.Progress("home %s: restored %d claim(s) for its next daemon to adopt", s.rec.Home, len(rh.ClaimsRestored))
	}

	// Running daemons notice the new file at their next watcher tick, write
	// their claims and then their home record with the new file's identity.
	id, _ := hostreg.FileIdentity(path)
	deadline := time.Now().Add(o.ReopenWait)
	for _, h := range running {
		rh := byHome[h.Home]
		for {
			r, err := hostreg.ReadHomeRecord(hostreg.HomeRecordPath(dir, h.Home))
			if err == nil && r.Registry == id {
				rh.Reopened = true
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if rh.Reopened {
			o.Progress("home %s: its daemon moved to the new registry and wrote its claims", h.Home)
		} else {
			warn("home %s: its daemon did not move to the new registry within %s; restart it (`simlock --home %s daemon stop`, then start)", h.Home, o.ReopenWait, h.Home)
		}
	}
	return rep, nil
}

// homesToRepair is every home the host directory records plus the extra
// ones, each once, with its record where there is one.
func homesToRepair(dir string, extra []string, warn func(string, ...any)) []hostreg.HomeRecord {
	recs, bad, err := hostreg.HomeRecords(dir)
	if err != nil {
		warn("read the home records: %v", err)
	}
	for p, err := range bad {
		warn("skipped an unreadable home record %s: %v (name its home with --include-home)", p, err)
	}
	seen := map[string]bool{}
	var out []hostreg.HomeRecord
	for _, r := range recs {
		if !seen[r.Home] {
			seen[r.Home] = true
			out = append(out, r)
		}
	}
	for _, h := range extra {
		abs, err := filepath.Abs(h)
		if err != nil || seen[filepath.Clean(abs)] {
			continue
		}
		abs = filepath.Clean(abs)
		seen[abs] = true
		out = append(out, hostreg.HomeRecord{Home: abs})
	}
	slices.SortFunc(out, func(a, b hostreg.HomeRecord) int {
		switch {
		case a.Home < b.Home:
			return -1
		case a.Home > b.Home:
			return 1
		}
		return 0
	})
	return out
}

// readHomeStore reads a stopped home's devices and leases. The caller
// holds the home lock, so no daemon has the store open.
func readHomeStore(ctx context.Context, home string, load func(context.Context, string) (core.Snapshot, error)) (core.Snapshot, error) {
	p := config.PathsFor(home).DB
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return core.Snapshot{}, nil // never ran a device
		}
		return core.Snapshot{}, err
	}
	return load(ctx, p)
}

// stoppedHomeClaims are the claims a stopped home's running devices need:
// each device its store has running, with the lease holding it.
func stoppedHomeClaims(rec hostreg.HomeRecord, snap core.Snapshot, owner hostreg.Owner, now time.Time, warn func(string, ...any)) []hostreg.Claim {
	roots := rec.Roots
	if len(roots) == 0 {
		cfg, err := config.Load(config.PathsFor(rec.Home).Config)
		if err != nil {
			warn("home %s: no recorded device roots and its config does not load (%v): its devices cannot be keyed", rec.Home, err)
			return nil
		}
		roots = map[string]string{}
		for _, p := range []string{"ios", "android"} {
			if r, err := filepath.Abs(cfg.DriverRoot(rec.Home, p)); err == nil {
				roots[p] = filepath.Clean(r)
			}
		}
	}
	leaseOf := map[string]string{}
	for _, l := range snap.Leases {
		for _, id := range l.DeviceIDs() {
			leaseOf[id] = l.ID
		}
	}
	var out []hostreg.Claim
	for _, d := range snap.Devices {
		if d.Handle == "" || d.State == core.StateShutdown {
			continue
		}
		key, err := deviceKeyFor(roots, d.Platform, d.Handle, d.Attrs)
		if err != nil {
			warn("home %s: device %s has no claim key: %v", rec.Home, d.ID, err)
			continue
		}
		c := hostreg.Claim{Key: key, Kind: hostreg.KindTransient, Command: "repair", Owner: owner, ClaimedAt: now}
		if l := leaseOf[d.ID]; l != "" {
			c.Kind, c.Command, c.LeaseID = hostreg.KindLease, "", l
		}
		out = append(out, c)
	}
	return out
}

// flockFile takes an exclusive, non-blocking flock on path (creating it
// when create is set) and returns its release.
func flockFile(path string, create bool) (func(), error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return func() {}, nil // never locked: no daemon ever ran here
	}
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}
