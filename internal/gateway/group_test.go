package gateway

import (
	"testing"

	"github.com/simlock/simlock/contract"
)

// both is a worker running both platforms with n free slots on each.
func both(id string, n int) viewSnapshot {
	return viewSnapshot{ID: id, State: contract.WorkerConnected, Policy: "on-request",
		Catalog: append(iosCatalog(), androidCatalog()...),
		Capacity: contract.Capacity{MaxRunning: 2 * n, Platforms: map[string]contract.PlatformCapacity{
			"ios": {MaxRunning: n}, "android": {MaxRunning: n}}}}
}

func group(members ...routeRequest) routeRequest {
	return routeRequest{Platform: members[0].Platform, group: &groupRoute{members: members}}
}

// A group goes to one worker that can hold every member at once, never
// split over the workers that could each hold one of them.
func TestGroupRoutesToOneWorkerThatHoldsAll(t *testing.T) {
	ios, droid := routeRequest{Platform: "ios"}, routeRequest{Platform: "android"}
	views := []viewSnapshot{view("a-ios", "ios", 4, 0), view("b-droid", "android", 4, 0), both("c-both", 1)}
	pl := newPlanner(warmThenFree, views)
	if id, ok := pl.place(group(ios, droid), nil); !ok || id != "c-both" {
		t.Fatalf("iOS+Android group routed to %q %v, want c-both", id, ok)
	}
	// c-both is now full on both platforms: a second pair fits nowhere.
	if id, ok := pl.place(group(droid, ios), nil); ok {
		t.Fatalf("a second pair was routed to %s, which has no room left", id)
	}
	// Two iOS devices fit only where two iOS slots are free.
	pl = newPlanner(warmThenFree, []viewSnapshot{both("c-both", 1), view("a-ios", "ios", 2, 0)})
	if id, ok := pl.place(group(ios, ios), nil); !ok || id != "a-ios" {
		t.Fatalf("iOS pair routed to %q %v, want a-ios", id, ok)
	}
}

// The worker with more members warm wins.
func TestGroupPrefersWarmMembers(t *testing.T) {
	ios, droid := routeRequest{Platform: "ios"}, routeRequest{Platform: "android"}
	warm := with(both("b", 2), func(v *viewSnapshot) {
		v.Devices = []contract.Device{ready("ios", "iPhone 16", "18.2"), ready("android", "Pixel 8", "14")}
	})
	id, ok := routeGroup([]viewSnapshot{both("a", 2), warm}, group(ios, droid).group)
	if !ok || id != "b" {
		t.Fatalf("routed to %q %v, want the warm worker b", id, ok)
	}
}
