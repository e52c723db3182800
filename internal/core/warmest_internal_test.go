package core

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The warm grant's short way (registry.warmest) hands out the very device
// the planner's first rule would: the most recently used ready device of
// the spec the pool may use, ties to the lowest id, never one whose work
// holds a reservation. Checked against Plan on random registries.
func TestWarmestIsThePlannersGrant(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261205, 1))
	base := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	specs := []Spec{{Platform: "ios", ModelID: "a", OSVersion: "1"}, {Platform: "ios", ModelID: "b", OSVersion: "1"}}
	states := []DeviceState{StateReady, StateReady, StateShutdown, StateLeased, StateProvisioning}
	for round := range 2000 {
		reg := newRegistry(func() time.Time { return base }, nil, nil, nil)
		usable := map[string]bool{}
		in := PlanInput{Limits: Limits{MaxRunning: 100, MaxManaged: 100}}
		for range rng.IntN(8) {
			d := &DeviceRecord{ID: fmt.Sprintf("d%02d", rng.IntN(40)), Platform: "ios", Spec: specs[rng.IntN(2)], State: states[rng.IntN(len(states))],
				StateSince: base.Add(time.Duration(rng.IntN(4)) * time.Second)}
			if rng.IntN(2) == 0 {
				d.LastReleasedAt = base.Add(time.Duration(rng.IntN(4)) * time.Second)
			}
			if rng.IntN(6) == 0 {
				reg.opLocks[d.ID] = "boot"
			}
			if _, dup := reg.devices[d.ID]; dup {
				continue
			}
			reg.devices[d.ID] = d
			usable[d.ID] = rng.IntN(5) != 0 && reg.opLocks[d.ID] == ""
		}
		for _, d := range reg.devices {
			in.Devices = append(in.Devices, PlanDevice{ID: d.ID, Platform: d.Platform, SpecKey: d.Spec.Key(), State: d.State,
				Usable: usable[d.ID], Reserved: reg.holdsReservation(d), LastUse: lastUse(d)})
		}
		want := specs[rng.IntN(2)]
		in.Queue = []PlanWaiter{{Platform: "ios", SpecKey: want.Key()}}
		var planned string
		for _, dec := range Plan(in) {
			if dec.Waiter == 0 && dec.Kind == DecideGrant {
				planned = dec.DeviceID
			}
		}
		got := ""
		if d, ok := reg.warmest(want.Key(), func(d *DeviceRecord) bool { return usable[d.ID] }); ok {
			got = d.ID
		}
		if got != planned {
			t.Fatalf("round %d: warmest %q, the planner grants %q\ndevices: %+v", round, got, planned, in.Devices)
		}
	}
}
