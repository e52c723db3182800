package cli

import (
	"testing"

	"github.com/simlock/simlock/contract"
)

func TestHostLine(t *testing.T) {
	h := contract.HostCapacity{MaxRunning: 2, Booted: 3, Ours: 1, OtherHomes: 1, ExternalDevices: 1, Platforms: map[string]contract.HostPlatformCapacity{
		"ios":     {MaxRunning: 1, Booted: 2, ExternalKnown: true},
		"android": {},
	}}
	want := "3/2 running (1 ours, 1 other homes, 1 external); android external not counted, ios 2/1"
	if got := hostLine(h); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	h.Platforms["ios"] = contract.HostPlatformCapacity{ExternalKnown: true, ExternalError: "boom"}
	h.Platforms["android"] = contract.HostPlatformCapacity{ExternalKnown: true}
	h.MaxRunning = 0
	want = "3/no limit running (1 ours, 1 other homes, 1 external); ios external count failing, last count kept"
	if got := hostLine(h); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestHostWaiterLines(t *testing.T) {
	h := contract.HostCapacity{Yielded: 1, Waiters: []contract.HostWaiter{
		{Home: "/h/b", Platform: "ios", Limit: "host.maxRunning", Count: 1, AgeMs: 12_400},
		{Home: "/h/a", Self: true, Platform: "android", Limit: "host.platforms.android.maxRunning", Count: 2, AgeMs: 900},
	}}
	got := hostWaiterLines(h)
	want := []string{
		"  waiting  /h/b: 1 ios for 12s (host.maxRunning)",
		"  waiting  /h/a (this home): 2 android for 1s (host.platforms.android.maxRunning)",
		"  yielded  1 idle warm device(s) shut down for other homes' waiters",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if l := hostWaiterLines(contract.HostCapacity{}); len(l) != 0 {
		t.Fatalf("nothing waiting, nothing yielded: %q", l)
	}
}
