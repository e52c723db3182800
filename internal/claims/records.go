package claims

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/hostreg"
)

// The records a daemon leaves outside its databases (ADR 0064): daemon.json
// in its home, which `daemon stop` proves before it signals, and a record of
// its home in the host directory, which `simlock host repair` reads to find
// every home when host.db is damaged. Both are written atomically.

// WriteDaemonRecord writes daemon.json into home: this process's pid and
// start identity, and when it started. Without a start identity (a
// platform the prober does not know) nothing is written, and `daemon stop`
// then refuses to signal.
func WriteDaemonRecord(home string, startedAt time.Time, log *slog.Logger) error {
	abs, err := filepath.Abs(home)
	if err != nil {
		return err
	}
	self, err := hostreg.Self(abs)
	if err != nil {
		log.Warn("no start identity for this process: `daemon stop` will not signal it", "err", err)
		return nil
	}
	r := hostreg.HomeRecord{Home: self.Home, PID: self.PID, Start: self.Start, StartedAt: startedAt.UnixMilli()}
	return hostreg.WriteHomeRecord(filepath.Join(abs, hostreg.DaemonRecordFile), r)
}

// recordHome writes this home's record into the host directory dir, with
// its device roots and the identity of the registry file it has open. A
// failed write only costs the repair a home it must be told about
// (--include-home), so it is logged, not fatal.
func (s *System) recordHome(dir string) {
	s.hostDir = dir
	s.hostFile, _ = hostreg.FileIdentity(s.host.File())
	s.writeHomeRecord()
}

func (s *System) writeHomeRecord() {
	r := hostreg.HomeRecord{Home: s.self.Home, PID: s.self.PID, Start: s.self.Start, StartedAt: s.startedAt.UnixMilli(),
		Roots: s.roots, Registry: s.hostFile}
	if err := hostreg.WriteHomeRecord(hostreg.HomeRecordPath(s.hostDir, s.self.Home), r); err != nil {
		s.log.Warn("record this home in the host directory (host repair will not find it by itself)", "err", err)
	}
}

// followReplacedRegistry runs on the host watcher's goroutine at each tick:
// when host.db is no longer the file this daemon has open (`simlock host
// repair` moved a damaged one aside and made a fresh one), it reopens the
// registry, writes every claim it holds into the new file, and records the
// new file's identity, which is how the repair learns it has moved.
func (s *System) followReplacedRegistry(ctx context.Context) {
	if s.host == nil || s.hostDir == "" {
		return
	}
	id, err := hostreg.FileIdentity(s.host.File())
	if err != nil || id == "" || id == s.hostFile {
		return // unreadable or mid-repair (moved aside, not yet made): next tick
	}
	if err := s.host.Reopen(ctx); err != nil {
		s.log.Error("reopen the replaced host registry", "file", s.host.File(), "err", err)
		return
	}
	s.hostFile, _ = hostreg.FileIdentity(s.host.File())
	n, err := s.claims.reassert(ctx)
	if err != nil {
		s.log.Error("write this home's claims into the replaced host registry", "err", err)
	}
	s.log.Warn("the host registry was replaced (host repair): reopened it and wrote this home's claims into it",
		"file", s.host.File(), "claims", n)
	s.writeHomeRecord()
	s.Kick()
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
		cl := hostreg.Claim{Key: key, Kind: hostreg.KindTransient, Command: IdleCommand, Owner: c.self, ClaimedAt: c.now()}
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
