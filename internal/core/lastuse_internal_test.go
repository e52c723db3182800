package core

import (
	"testing"
	"time"
)

// Two devices released one after the other are least recently used in
// that order, whichever purge finished last: a purge is the pool's work,
// not a use. (TestAnotherHomesWaiterIsServedFromIdleWarmDevices yielded
// the second device whenever the first one's purge happened to end last.)
func TestLastUseIsTheReleaseNotThePurgeThatFollows(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	first := &DeviceRecord{ID: "a1", State: StateReady, LastReleasedAt: t0, StateSince: t0.Add(3 * time.Second)}
	second := &DeviceRecord{ID: "a2", State: StateReady, LastReleasedAt: t0.Add(time.Second), StateSince: t0.Add(2 * time.Second)}
	if !lastUse(first).Before(lastUse(second)) {
		t.Fatalf("lastUse(a1) = %v, lastUse(a2) = %v: a1 was released first and must be the least recently used", lastUse(first), lastUse(second))
	}
	// A device nobody has leased yet was last "used" when it became ready.
	fresh := &DeviceRecord{ID: "w", State: StateReady, StateSince: t0.Add(-time.Minute)}
	if got := lastUse(fresh); !got.Equal(fresh.StateSince) {
		t.Fatalf("lastUse of a never-leased device = %v, want its state time %v", got, fresh.StateSince)
	}
}
