package core_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
)

// Many clients lease and release at once, on fewer devices than clients,
// so most grants are made by another goroutine's section (a release or a
// finished purge handing the device to a waiter) while the winner's own
// goroutine may release at once. Every subscriber must still see the
// facts in commit order: seq strictly increasing, and each lease granted
// before it is released.
func TestConcurrentGrantsAndReleasesReachSubscribersInCommitOrder(t *testing.T) {
	const clients, rounds = 12, 6
	clock := fake.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	bus := events.New(1<<16, clock.Now)
	var idmu sync.Mutex
	n := 0
	e := core.New(core.Config{DefaultTTL: time.Hour, MaxTTL: time.Hour}, core.Deps{
		Clock: clock, Store: newMemStore(), Drivers: []core.Driver{fakedrv.New("ios")},
		Strategy: core.FixedStrategy{L: core.Limits{MaxRunning: 3, MaxManaged: 3}}, Bus: bus,
		NewID: func() string { idmu.Lock(); defer idmu.Unlock(); n++; return fmt.Sprintf("%05d", n) },
	})
	if err := e.Converge(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.WaitIdle()

	// Three subscribers of both kinds, reading as fast as they can.
	obsCh, cancelObs := bus.Subscribe(0)
	gap, obs := bus.Observe(bus.LastSeq())
	if gap != nil {
		t.Fatal(gap)
	}
	_, _, fol := bus.Follow(bus.LastSeq())
	type seen struct {
		name string
		evs  []events.Event
	}
	// Each reader stops at the sentinel published after the clients end.
	results := make(chan seen, 3)
	readCh := func(name string, ch <-chan events.Event) {
		var s []events.Event
		for ev := range ch {
			if ev.Type == "test.sentinel" {
				break
			}
			s = append(s, ev)
		}
		results <- seen{name, s}
	}
	go readCh("subscribe", obsCh)
	go readCh("observe", obs.C())
	go func() {
		var s []events.Event
		for {
			it, err := fol.Next(context.Background())
			if err != nil || it.Event.Type == "test.sentinel" {
				break
			}
			if it.Gap != nil {
				t.Errorf("follower with a 64k ring got a gap %+v", *it.Gap)
				continue
			}
			s = append(s, it.Event)
		}
		results <- seen{"follow", s}
	}()
	first := bus.LastSeq() + 1

	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				g, err := e.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"},
					RequesterID: fmt.Sprintf("c%d", c), OwnerID: "o", Timeout: time.Hour}, nil)
				if err != nil {
					t.Errorf("client %d round %d: %v", c, r, err)
					return
				}
				if err := e.Release(g.Lease.ID); err != nil {
					t.Errorf("release %s: %v", g.Lease.ID, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	e.WaitIdle()
	last := bus.LastSeq()
	bus.Publish(events.Event{Type: "test.sentinel"})
	var all []seen
	for i := 0; i < 3; i++ {
		all = append(all, <-results)
	}
	cancelObs()
	obs.Close()
	fol.Close()

	for _, s := range all {
		grants := map[string]uint64{}
		var prev uint64
		releases := 0
		for _, ev := range s.evs {
			if ev.Seq <= prev {
				t.Fatalf("%s: seq %d after %d", s.name, ev.Seq, prev)
			}
			prev = ev.Seq
			switch ev.Type {
			case "lease.granted":
				grants[ev.LeaseID] = ev.Seq
			case "lease.released":
				releases++
				if _, ok := grants[ev.LeaseID]; !ok {
					t.Fatalf("%s: lease %s released (seq %d) before it was granted", s.name, ev.LeaseID, ev.Seq)
				}
			}
		}
		if want := int(last - first + 1); len(s.evs) != want {
			t.Fatalf("%s saw %d facts, want all %d", s.name, len(s.evs), want)
		}
		if len(grants) != clients*rounds || releases < clients*rounds {
			t.Fatalf("%s saw %d grants and %d releases, want %d each", s.name, len(grants), releases, clients*rounds)
		}
	}
}
