package daemon

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/simlock/simlock/internal/hostreg"
)

// The records a daemon leaves outside its databases (ADR 0064): daemon.json
// in its home, which `daemon stop` proves before it signals, and a record of
// its home in the host directory, which `simlock host repair` reads to find
// every home when host.db is damaged. Both are written atomically.

// writeDaemonRecord writes daemon.json: this process's pid and start
// identity. Without a start identity (a platform the prober does not
// know) nothing is written, and `daemon stop` then refuses to signal.
func (d *Daemon) writeDaemonRecord(home string) error {
	abs, err := filepath.Abs(home)
	if err != nil {
		return err
	}
	self, err := hostreg.Self(abs)
	if err != nil {
		d.log.Warn("no start identity for this process: `daemon stop` will not signal it", "err", err)
		return nil
	}
	r := hostreg.HomeRecord{Home: self.Home, PID: self.PID, Start: self.Start, StartedAt: d.startedAt.UnixMilli()}
	return hostreg.WriteHomeRecord(filepath.Join(abs, hostreg.DaemonRecordFile), r)
}

// recordHome writes this home's record into the host directory dir, with
// its device roots and the identity of the registry file it has open. A
// failed write only costs the repair a home it must be told about
// (--include-home), so it is logged, not fatal.
func (d *Daemon) recordHome(dir string) {
	d.hostDir = dir
	d.hostFile, _ = hostreg.FileIdentity(d.host.File())
	d.writeHomeRecord()
}

func (d *Daemon) writeHomeRecord() {
	r := hostreg.HomeRecord{Home: d.self.Home, PID: d.self.PID, Start: d.self.Start, StartedAt: d.startedAt.UnixMilli(),
		Roots: d.roots, Registry: d.hostFile}
	if err := hostreg.WriteHomeRecord(hostreg.HomeRecordPath(d.hostDir, d.self.Home), r); err != nil {
		d.log.Warn("record this home in the host directory (host repair will not find it by itself)", "err", err)
	}
}

// followReplacedRegistry runs on the host watcher's goroutine at each tick:
// when host.db is no longer the file this daemon has open (`simlock host
// repair` moved a damaged one aside and made a fresh one), it reopens the
// registry, writes every claim it holds into the new file, and records the
// new file's identity, which is how the repair learns it has moved.
func (d *Daemon) followReplacedRegistry(ctx context.Context) {
	if d.host == nil || d.hostDir == "" {
		return
	}
	id, err := hostreg.FileIdentity(d.host.File())
	if err != nil || id == "" || id == d.hostFile {
		return // unreadable or mid-repair (moved aside, not yet made): next tick
	}
	if err := d.host.Reopen(ctx); err != nil {
		d.log.Error("reopen the replaced host registry", "file", d.host.File(), "err", err)
		return
	}
	d.hostFile, _ = hostreg.FileIdentity(d.host.File())
	n, err := d.claims.reassert(ctx)
	if err != nil {
		d.log.Error("write this home's claims into the replaced host registry", "err", err)
	}
	d.log.Warn("the host registry was replaced (host repair): reopened it and wrote this home's claims into it",
		"file", d.host.File(), "claims", n)
	d.writeHomeRecord()
	d.kickHost()
}

// reassert writes every claim this daemon holds into the registry again,
// as last written: after a repair the new file knows none of them. A
// device another owner claimed in the new file meanwhile is reported, and
// the claim is kept in memory (this daemon still runs the device).
func (c *claims) reassert(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	var errs []error
	for key, h := range c.held {
		cl := hostreg.Claim{Key: key, Kind: hostreg.KindTransient, Command: claimIdle, Owner: c.self, ClaimedAt: c.now()}
		if h.lease != "" {
			cl.Kind, cl.Command, cl.LeaseID = hostreg.KindLease, "", h.lease
		}
		err := c.store.Claim(ctx, cl)
		switch {
		case err != nil:
		case h.state == hostreg.StateReleasing:
			err = c.store.MarkReleasing(ctx, key, c.self)
		case h.state == hostreg.StateReleaseFailed:
			// Which steps failed went with the damaged file.
			err = c.store.MarkReleaseFailed(ctx, key, c.self, []string{"teardown (its failed steps were lost with the damaged registry)"})
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	c.kick()
	return n, errors.Join(errs...)
}
