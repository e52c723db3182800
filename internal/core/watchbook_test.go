package core_test

import (
	"context"
	"testing"
	"time"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Every way a lease ends closes its watch channel: release, expiry, a lost
// device and a reset. A failed release (the store refuses) does not.
func TestLeaseEndedClosesOnEveryWayALeaseEnds(t *testing.T) {
	t.Run("release", func(t *testing.T) {
		h := newHarness(t, one(1))
		g, _ := h.lease("a", "")
		ended := h.engine.Watch().LeaseEnded(g.Lease.ID)
		again := h.engine.Watch().LeaseEnded(g.Lease.ID)
		if closed(ended) || closed(again) {
			t.Fatal("closed while the lease is held")
		}
		h.store.failing = true
		if err := h.engine.Release(g.Lease.ID); err == nil {
			t.Fatal("release with a failing store succeeded")
		}
		if closed(ended) {
			t.Fatal("closed by a release that did not land")
		}
		h.store.failing = false
		if err := h.engine.Release(g.Lease.ID); err != nil {
			t.Fatal(err)
		}
		if !closed(ended) || !closed(again) {
			t.Fatal("release left the watch open")
		}
		if !closed(h.engine.Watch().LeaseEnded(g.Lease.ID)) {
			t.Fatal("watching an ended lease must answer at once")
		}
		h.engine.WaitIdle()
	})
	t.Run("expiry", func(t *testing.T) {
		h := newHarness(t, one(1))
		g, _ := h.lease("a", "")
		ended := h.engine.Watch().LeaseEnded(g.Lease.ID)
		h.clock.Advance(time.Minute - time.Millisecond)
		if closed(ended) {
			t.Fatal("closed before the deadline")
		}
		h.clock.Advance(time.Millisecond)
		h.engine.WaitIdle()
		if !closed(ended) {
			t.Fatal("expiry left the watch open")
		}
	})
	t.Run("lost", func(t *testing.T) {
		h := healthHarness(t)
		g, _ := h.lease("a", "")
		ended := h.engine.Watch().LeaseEnded(g.Lease.ID)
		h.engine.Health().StartHealthMonitor()
		for i := 0; i < 3; i++ {
			h.drv.Crash(g.Device.Handle)
			h.clock.Advance(10 * time.Second)
			h.engine.WaitIdle()
		}
		if !closed(ended) {
			t.Fatal("a lost device left the watch open")
		}
	})
	t.Run("nuke", func(t *testing.T) {
		h := newHarness(t, one(1))
		g, _ := h.lease("a", "")
		ended := h.engine.Watch().LeaseEnded(g.Lease.ID)
		if _, err := h.engine.Maintenance().Nuke(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !closed(ended) {
			t.Fatal("a reset left the watch open")
		}
	})
	t.Run("unknown", func(t *testing.T) {
		h := newHarness(t, one(1))
		if !closed(h.engine.Watch().LeaseEnded("nope")) {
			t.Fatal("an unknown lease must read as ended")
		}
	})
}

// Reference (managed slots, "Lifecycle" item 3): an ended execution
// reports "the daemon's release reason". LeaseEndedWhy tells a watcher why
// the lease ended: expired for a deadline, released for a release; a
// release that did not land names nothing, and an unknown lease no reason.
func TestLeaseEndedWhyNamesTheReleaseReason(t *testing.T) {
	h := newHarness(t, one(1))
	g, _ := h.lease("a", "")
	ended, why := h.engine.Watch().LeaseEndedWhy(g.Lease.ID)
	h.clock.Advance(time.Minute)
	h.engine.WaitIdle()
	if !closed(ended) || why() != "expired" {
		t.Fatalf("after the deadline: closed %v, why %q", closed(ended), why())
	}

	g, _ = h.lease("b", "")
	ended, why = h.engine.Watch().LeaseEndedWhy(g.Lease.ID)
	h.store.failing = true
	if err := h.engine.Release(g.Lease.ID); err == nil {
		t.Fatal("release with a failing store succeeded")
	}
	if closed(ended) || why() != "" {
		t.Fatalf("a release that did not land: closed %v, why %q", closed(ended), why())
	}
	h.store.failing = false
	if err := h.engine.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if !closed(ended) || why() != "released" {
		t.Fatalf("after a release: closed %v, why %q", closed(ended), why())
	}
	h.engine.WaitIdle()
	if ch, why := h.engine.Watch().LeaseEndedWhy("nope"); !closed(ch) || why() != "" {
		t.Fatal("an unknown lease must read as ended, with no reason")
	}
}
