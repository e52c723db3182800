package daemon

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/testhost"
)

// aliveProber proves every owner alive with start identity "s".
type aliveProber struct{}

func (aliveProber) ProcessStart(context.Context, int) (string, bool, error) { return "s", true, nil }
func (aliveProber) HomeExists(context.Context, string) (bool, error)        { return true, nil }

// countingDriver is the fake iOS driver with a scripted external count.
type countingDriver struct {
	*fakedrv.Driver
	mu  sync.Mutex
	n   int
	err error
}

func (c *countingDriver) ExternalRunning(context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.err
}

func (c *countingDriver) set(n int, err error) {
	c.mu.Lock()
	c.n, c.err = n, err
	c.mu.Unlock()
}

type hostFixture struct {
	*fixture
	reg *hostreg.DB
	ext *countingDriver
}

func startHostDaemon(t *testing.T, setup ...func(*countingDriver)) *hostFixture {
	t.Helper()
	home, err := os.MkdirTemp("", "sld-")
	if err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	cfg := config.Default()
	cfg.Capacity.Strategy = "fixed"
	cfg.Capacity.Fixed = config.Fixed{MaxRunning: 4, MaxManaged: 8}
	cfg.Capacity.Host = config.HostCapacity{MaxRunning: 2, PollIntervalMs: 10}
	ext := &countingDriver{Driver: fakedrv.New("ios")}
	for _, f := range setup {
		f(ext)
	}
	d, err := Start(context.Background(), Options{Home: home, Config: cfg, Version: "test", Drivers: []core.Driver{ext},
		HostDir: hostDir, Prober: aliveProber{}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := hostreg.OpenWithProber(context.Background(), hostDir, aliveProber{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop()
		reg.Close()
		os.RemoveAll(home)
	})
	return &hostFixture{fixture: &fixture{t: t, d: d, home: home, drv: ext.Driver}, reg: reg, ext: ext}
}

func (f *hostFixture) host(c *client.Client) contract.HostCapacity {
	f.t.Helper()
	st, err := client.Do(context.Background(), c, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		f.t.Fatalf("status: %v", err)
	}
	if st.Capacity.Host == nil {
		return contract.HostCapacity{} // not ready yet: status reports nothing
	}
	return *st.Capacity.Host
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(10 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const otherUDID = "0EF9705E-9DAD-4B5F-86F7-93F41EC2ADAB"

// Another home's claim counts against the host limit: with one device of
// our own and one of theirs, a noWait request is refused with
// CAPACITY_EXHAUSTED and its figures; a queued one is granted once the
// other home releases.
func TestOtherHomesClaimsBindTheHostLimit(t *testing.T) {
	f := startHostDaemon(t)
	ctx := context.Background()
	c := f.dial("alice", f.adminToken())
	waitFor(t, "the external count to be known", func() bool { return f.host(c).Platforms["ios"].ExternalKnown })
	if _, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "one"}, nil); err != nil {
		t.Fatal(err)
	}
	key, _ := hostreg.IOSSimulatorKey(otherUDID)
	other := hostreg.Owner{Home: "/elsewhere/home", PID: 4242, Start: "s"}
	if err := f.reg.Claim(ctx, hostreg.Claim{Key: key, Kind: hostreg.KindLease, Owner: other, LeaseID: "lse_x", ClaimedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other home's claim in status", func() bool { return f.host(c).OtherHomes == 1 })
	h := f.host(c)
	if h.MaxRunning != 2 || h.Booted != 2 || h.Ours != 1 || h.ExternalDevices != 0 || h.Platforms["ios"].OtherHomes != 1 {
		t.Fatalf("host view %+v", h)
	}
	_, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "two", NoWait: true}, nil)
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeCapacityExhausted || !ce.Retryable || ce.RetryAfterMs == nil {
		t.Fatalf("noWait at the host limit: %v", err)
	}
	for k, want := range map[string]any{"limit": 2.0, "booted": 2.0, "platform": "ios", "externalDevices": 0.0, "retryAfterMs": float64(*ce.RetryAfterMs)} {
		if ce.Details[k] != want {
			t.Fatalf("details[%s] = %v, want %v (%+v)", k, ce.Details[k], want, ce.Details)
		}
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "three"}, nil)
		got <- err
	}()
	waitFor(t, "the request to queue", func() bool { return len(f.d.Engine().Queue()) == 1 })
	select {
	case err := <-got:
		t.Fatalf("granted past the host limit: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := f.reg.Release(ctx, key, other); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("queued request after the other home released: %v", err)
		}
	case <-time.After(testhost.Scale(10 * time.Second)):
		t.Fatal("the queued request was not granted after the other home released")
	}
}

// An external device tightens the limit; a failed count keeps the last
// good one and says why.
func TestExternalDevicesCountAndAFailedProbeKeepsTheLastCount(t *testing.T) {
	f := startHostDaemon(t)
	ctx := context.Background()
	c := f.dial("alice", f.adminToken())
	f.ext.set(2, nil)
	waitFor(t, "two external devices in status", func() bool { return f.host(c).ExternalDevices == 2 })
	_, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "one", NoWait: true}, nil)
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeCapacityExhausted || ce.Details["externalDevices"] != 2.0 {
		t.Fatalf("noWait with the host full of external devices: %v", err)
	}
	f.ext.set(0, errors.New("simctl is unwell"))
	waitFor(t, "the probe error in status", func() bool { return f.host(c).Platforms["ios"].ExternalError != "" })
	if h := f.host(c); h.ExternalDevices != 2 || !h.Platforms["ios"].ExternalKnown {
		t.Fatalf("a failed count changed the last good one: %+v", h)
	}
	f.ext.set(1, nil)
	waitFor(t, "the count to fall to 1", func() bool { return f.host(c).ExternalDevices == 1 })
	if _, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "two", NoWait: true}, nil); err != nil {
		t.Fatalf("room for one: %v", err)
	}
}

// Until the first count succeeds, external devices read 0 and status says
// they are not counted, with the probe's error; the first success counts.
func TestExternalDevicesUnknownUntilTheFirstCount(t *testing.T) {
	f := startHostDaemon(t, func(c *countingDriver) { c.err = errors.New("xcrun: not found") })
	c := f.dial("alice", f.adminToken())
	waitFor(t, "the probe error in status", func() bool { return f.host(c).Platforms["ios"].ExternalError != "" })
	if h := f.host(c); h.ExternalDevices != 0 || h.Platforms["ios"].ExternalKnown {
		t.Fatalf("before any successful count: %+v", h)
	}
	f.ext.set(1, nil)
	waitFor(t, "the first count", func() bool { p := f.host(c).Platforms["ios"]; return p.ExternalKnown && p.ExternalDevices == 1 })
}
