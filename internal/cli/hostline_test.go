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
