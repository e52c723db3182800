package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/test/harness"
)

// A host limit of 2 with each daemon's own limit at 2: only the host binds.
// Clone provisioning off: these tests count booted devices exactly, and a golden's one boot would be one more.
const hostCapConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":4},
 "host":{"maxRunning":2,"pollIntervalMs":100}},
 "drivers":{"ios":{"clone":{"enabled":false}}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`

// hostView is status.get's capacity.host.
type hostView struct {
	MaxRunning, Booted, Ours, OtherHomes, ExternalDevices int
	Platforms                                             map[string]struct {
		ExternalDevices int
		ExternalKnown   bool
	}
}

func (w *world) host() hostView {
	w.t.Helper()
	var st struct {
		Capacity struct{ Host *hostView }
	}
	w.json(&st, "status", "--json")
	if st.Capacity.Host == nil {
		return hostView{}
	}
	return *st.Capacity.Host
}

// registryDir is the world's host registry directory (see newWorld).
func (w *world) registryDir() string { return filepath.Join(filepath.Dir(w.home), "hostreg") }

// shareHost makes b a second home on a's machine: the same host registry
// and the same simulated SDK state (one default device set, one set of
// device processes), each home keeping its own private device sets.
func shareHost(a, b *world) {
	b.env = append(b.env, harness.HostEnv(a.registryDir(), a.simHome)...)
	b.simHome = a.simHome
}

// xcrun runs the world's simulated xcrun directly, as a user would outside
// simlock (no --set: Xcode's default device set).
func (w *world) xcrun(args ...string) string {
	w.t.Helper()
	c := exec.Command(filepath.Join(w.sdk, "xcrun"), args...)
	c.Env = w.env
	out, err := c.Output()
	if err != nil {
		w.t.Fatalf("xcrun %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// hostRefusal is a --json error on stderr.
type hostRefusal struct {
	Error struct {
		Code         string
		Retryable    bool
		RetryAfterMs *int64
		Details      map[string]any
	}
}

func (w *world) refused(args ...string) hostRefusal {
	w.t.Helper()
	r := w.run(args...)
	if r.code == 0 {
		w.t.Fatalf("simlock %s succeeded, want a hostRefusal: %s", strings.Join(args, " "), r.stdout)
	}
	var out hostRefusal
	line := strings.TrimSpace(r.stderr)
	if i := strings.LastIndex(line, "\n{"); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal([]byte(line), &out); err != nil {
		w.t.Fatalf("simlock %s: stderr %q: %v", strings.Join(args, " "), r.stderr, err)
	}
	return out
}

func checkExhausted(t *testing.T, r hostRefusal, booted, external int) {
	t.Helper()
	e := r.Error
	if e.Code != "CAPACITY_EXHAUSTED" || !e.Retryable || e.RetryAfterMs == nil || *e.RetryAfterMs <= 0 {
		t.Fatalf("hostRefusal %+v, want retryable CAPACITY_EXHAUSTED with retryAfterMs", e)
	}
	want := map[string]any{"limit": 2.0, "booted": float64(booted), "platform": "ios", "externalDevices": float64(external),
		"retryAfterMs": float64(*e.RetryAfterMs)}
	for k, v := range want {
		if e.Details[k] != v {
			t.Fatalf("details[%s] = %v, want %v (%+v)", k, e.Details[k], v, e.Details)
		}
	}
}

// A simulator booted outside simlock, with plain `xcrun simctl boot` in the
// default device set, counts against the host limit: with one device of
// simlock's own the limit of 2 is reached, a noWait lease is refused with
// CAPACITY_EXHAUSTED naming it, and once it is shut down the lease goes
// through.
func TestExternallyBootedSimulatorTightensTheHostLimit(t *testing.T) {
	w := newWorld(t, hostCapConfig)
	var first lease
	w.json(&first, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "one")
	eventually(t, "the external count to be known", 20*time.Second, func() bool { return w.host().Platforms["ios"].ExternalKnown })
	if h := w.host(); h.Booted != 1 || h.Ours != 1 || h.ExternalDevices != 0 || h.MaxRunning != 2 {
		t.Fatalf("host view before the external boot %+v", h)
	}
	udid := w.xcrun("simctl", "create", "By hand", "iPhone 15", "iOS 18.0")
	w.xcrun("simctl", "boot", udid)
	if out := w.xcrun("simctl", "list", "devices", "booted", "-j"); !strings.Contains(out, udid) {
		t.Fatalf("the booted device is not listed in the default set: %s", out)
	}
	eventually(t, "the external device to be counted", 20*time.Second, func() bool { return w.host().ExternalDevices == 1 })
	checkExhausted(t, w.refused("lease", "--platform", "ios", "--model", "iPhone 16", "--no-wait", "--requester", "two", "--json"), 2, 1)
	w.xcrun("simctl", "shutdown", udid)
	eventually(t, "the external device to be gone", 20*time.Second, func() bool { return w.host().ExternalDevices == 0 })
	var second lease
	w.json(&second, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--no-wait", "--requester", "two")
	if h := w.host(); h.Booted != 2 || h.Ours != 2 {
		t.Fatalf("host view after the second lease %+v", h)
	}
}

// Two daemons (two homes) on one host with a host limit of 2 cannot run 3
// devices between them: the third is refused with noWait, and without it
// waits in its daemon's queue and is granted when the other daemon
// releases its device; an externally booted simulator then counts too, and
// a warm device over the limit is shut down to make up for it.
func TestTwoHomesShareOneHostLimit(t *testing.T) {
	a := newWorld(t, hostCapConfig)
	b := newWorld(t, hostCapConfig)
	shareHost(a, b)
	b.mustRun("daemon", "start") // status reads; it starts no daemon
	var la, lb lease
	a.json(&la, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "a1")
	eventually(t, "b to see a's device", 20*time.Second, func() bool { return b.host().OtherHomes == 1 })
	b.json(&lb, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "b1")
	eventually(t, "a to see b's device", 20*time.Second, func() bool { return a.host().OtherHomes == 1 })

	checkExhausted(t, b.refused("lease", "--platform", "ios", "--model", "iPhone 16", "--no-wait", "--requester", "b2", "--json"), 2, 0)
	checkExhausted(t, a.refused("lease", "--platform", "ios", "--model", "iPhone 16", "--no-wait", "--requester", "a2", "--json"), 2, 0)

	// Queued in b, granted when a releases (a's device is shut down: at a
	// shared host limit it is not kept warm).
	wait := b.cmd("lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "b3", "--timeout", "60s")
	var out strings.Builder
	wait.Stdout = &out
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wait.Wait() }()
	eventually(t, "b's request to queue", 20*time.Second, func() bool { return b.status().QueueDepth == 1 })
	select {
	case err := <-done:
		t.Fatalf("b's third device was granted past the host limit: %v %s", err, out.String())
	case <-time.After(500 * time.Millisecond):
	}
	a.mustRun("release", la.LeaseID)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("b's queued request after a released: %v", err)
		}
	case <-time.After(testhost.Scale(30 * time.Second)):
		t.Fatal("b's queued request was not granted after a released")
	}
	var lb3 lease
	if err := json.Unmarshal([]byte(out.String()), &lb3); err != nil || lb3.LeaseID == "" {
		t.Fatalf("b's granted lease %q: %v", out.String(), err)
	}
	eventually(t, "a to see b's two devices", 20*time.Second, func() bool { h := a.host(); return h.OtherHomes == 2 && h.Ours == 0 })

	// b releases one: alone at the limit, b keeps it warm, and it still
	// runs. A simulator booted by hand then puts the host over its limit:
	// b gives the room back by shutting its warm device down, and a is
	// refused with the external device counted.
	b.mustRun("release", lb3.LeaseID)
	udid := a.xcrun("simctl", "create", "By hand", "iPhone 15", "iOS 18.0")
	a.xcrun("simctl", "boot", udid)
	eventually(t, "a to count the external device and b to shed its warm one", 20*time.Second, func() bool {
		h := a.host()
		return h.ExternalDevices == 1 && h.OtherHomes == 1
	})
	checkExhausted(t, a.refused("lease", "--platform", "ios", "--model", "iPhone 16", "--no-wait", "--requester", "a3", "--json"), 2, 1)
	if h := b.host(); h.Booted != 2 || h.Ours != 1 || h.ExternalDevices != 1 {
		t.Fatalf("b's host view %+v", h)
	}
}
