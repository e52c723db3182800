package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
)

// factsEngine is an engine whose refusals are classified the way the daemon
// does it, so request facts carry a code.
func factsEngine(t *testing.T) (*core.Engine, *events.Bus, *fake.Clock, *fakedrv.Driver) {
	t.Helper()
	clock := fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	drv := fakedrv.New("ios")
	bus := events.New(100, clock.Now)
	e := core.New(core.Config{DefaultTTL: time.Minute, MaxTTL: time.Hour}, core.Deps{
		DiskFree: func() (uint64, error) { return 100 << 30, nil },
		Clock:    clock, Store: newMemStore(), Drivers: []core.Driver{drv},
		Strategy: core.FixedStrategy{L: core.Limits{MaxRunning: 1, MaxManaged: 2}}, Bus: bus,
		Classify: func(err error) core.RequestError {
			code := "OTHER"
			switch {
			case errors.Is(err, core.ErrNoCapacity):
				code = "NO_CAPACITY"
			case errors.Is(err, core.ErrTTLTooLong):
				code = "TTL_TOO_LONG"
			}
			return core.RequestError{Code: code, Message: err.Error()}
		},
	})
	if err := e.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.WaitIdle()
	return e, bus, clock, drv
}

func lastOf(bus *events.Bus, typ string) (events.Event, bool) {
	evs, _ := bus.Since(0)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i], true
		}
	}
	return events.Event{}, false
}

// The facts metrics and the audit trail read: a refusal's code (also for a
// request refused before it was queued), a renewal's TTL change, and how
// long a purge took on the engine's clock.
func TestFactsCarryRefusalCodesTTLChangesAndPurgeDurations(t *testing.T) {
	e, bus, clock, drv := factsEngine(t)
	ctx := context.Background()
	g, err := e.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "a", OwnerID: "owner-a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "b", OwnerID: "owner-b", NoWait: true}, nil)
	if ev, ok := lastOf(bus, "request.refused"); !errors.Is(err, core.ErrNoCapacity) || !ok || ev.Data["code"] != "NO_CAPACITY" {
		t.Fatalf("noWait refusal: %v, fact %+v", err, ev)
	}
	_, err = e.Request(ctx, core.Request{Spec: core.SpecRequest{Platform: "ios"}, RequesterID: "c", OwnerID: "owner-c", TTL: 2 * time.Hour}, nil)
	ev, ok := lastOf(bus, "request.rejected")
	if !errors.Is(err, core.ErrTTLTooLong) || !ok || ev.Data["code"] != "TTL_TOO_LONG" || ev.RequesterID != "c" || ev.Data["ownerId"] != "owner-c" || ev.Platform != "ios" {
		t.Fatalf("refusal before the queue: %v, fact %+v", err, ev)
	}
	if _, ok := lastOf(bus, "request.queued"); ok {
		t.Fatal("a refused request was queued")
	}

	if _, err := e.Renew(g.Lease.ID, 0); err != nil {
		t.Fatal(err)
	}
	if ev, _ := lastOf(bus, "lease.renewed"); ev.Data["ttlMs"] != int64(60_000) || ev.Data["previousTtlMs"] != nil {
		t.Fatalf("plain renewal %+v", ev.Data)
	}
	if _, err := e.Renew(g.Lease.ID, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if ev, _ := lastOf(bus, "lease.renewed"); ev.Data["ttlMs"] != int64(300_000) || ev.Data["previousTtlMs"] != int64(60_000) {
		t.Fatalf("widening renewal %+v", ev.Data)
	}

	// The purge is held in flight while the clock moves 3 s.
	gate := make(chan struct{})
	drv.Gate = gate
	if err := e.Release(g.Lease.ID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second)
	gate <- struct{}{}
	e.WaitIdle()
	ev, ok = lastOf(bus, "device.reclaimed")
	if !ok || ev.Data["durationMs"] != int64(3000) || ev.Data["disposition"] != "ready" {
		t.Fatalf("reclaimed fact %+v", ev)
	}
}
