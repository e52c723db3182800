package daemon

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/drivers/listcache"
	"github.com/simlock/simlock/internal/ports"
)

// describeDevice is the one projection of a registry record onto the
// canonical description (docs/adr/0039): every frontend's devices, lease
// grants included, come from here. Static facts are what the driver
// stated under core.AttrFactPrefix when it made the device; readiness and
// the live facts (locked, orientation; docs/adr/0090) are the driver
// listing's observation when one is known (nil: not known).
func describeDevice(r core.DeviceRecord, leaseID string, obs *deviceObservation) contract.Device {
	out := contract.Device{ID: r.ID, Platform: r.Platform, Model: r.Spec.Model, OSVersion: r.Spec.OSVersion,
		Name: r.Name, Simulated: r.Simulated,
		StateSince: r.StateSince.UTC(), CreatedAt: r.CreatedAt.UTC(), FormFactor: contract.FormFactorUnknown,
		OwnerSystem: r.OwnerSystem}
	if !r.LastLeasedAt.IsZero() {
		t := r.LastLeasedAt.UTC()
		out.LastLeasedAt = &t
	}
	facts := map[string]string{}
	for k, v := range r.Attrs {
		switch {
		case k == core.AttrUDID:
			out.UDID = v
		case k == core.AttrSerial:
			out.Serial = v
		case k == core.AttrDeviceSet:
			out.DeviceSet = v
		case strings.HasPrefix(k, core.AttrEnvPrefix):
			if out.Env == nil {
				out.Env = map[string]string{}
			}
			out.Env[strings.TrimPrefix(k, core.AttrEnvPrefix)] = v
		case strings.HasPrefix(k, core.AttrFactPrefix):
			facts[strings.TrimPrefix(k, core.AttrFactPrefix)] = v
		}
	}
	out.ModelIdentifier = str(facts[core.FactModelIdentifier])
	out.RuntimeID = str(r.Spec.RuntimeID)
	switch ff := facts[core.FactFormFactor]; ff {
	case contract.FormFactorPhone, contract.FormFactorTablet, contract.FormFactorFoldable:
		out.FormFactor = ff
	}
	disp := contract.DeviceDisplay{WidthPx: num(facts[core.FactDisplayWidthPx]), HeightPx: num(facts[core.FactDisplayHeightPx]),
		Density: num(facts[core.FactDisplayDensity])}
	if f, err := strconv.ParseFloat(facts[core.FactDisplayScale], 64); err == nil && f > 0 {
		disp.Scale = &f
	}
	if disp.WidthPx != nil || disp.HeightPx != nil || disp.Density != nil || disp.Scale != nil {
		out.Display = &disp
	}
	// Image provenance is an Android fact: an iOS device has none (null),
	// an Android one always has the object, with nulls for what is unknown.
	if r.Platform == "android" {
		out.Image = &contract.AndroidImage{Path: str(facts[core.FactImagePath]), Target: str(facts[core.FactImageTarget]),
			BasedOn: str(facts[core.FactImageBasedOn])}
	}
	out.Runtime = contract.DeviceRuntime{Lifecycle: string(r.State), Lease: str(leaseID)}
	if obs != nil {
		out.Runtime.Readiness = str(string(obs.Run))
		if obs.Live.Locked != nil {
			locked := *obs.Live.Locked
			out.Runtime.Locked = &locked
		}
		switch o := obs.Live.Orientation; o {
		case contract.OrientationPortrait, contract.OrientationLandscape:
			out.Runtime.Orientation = &o
		}
	}
	return out
}

// deviceObservation is one device as its platform's shared listing saw
// it: the run state and, for a running device whose driver can read them
// (core.LiveObserver), its live facts.
type deviceObservation struct {
	Run  core.RunState
	Live core.LiveState
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func num(s string) *int {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return nil
	}
	return &n
}

// Enrichment stage names, as Enrichment.pending/missing list them.
func observationStage(platform string) string { return platform + ".devices" }
func catalogStage(platform string) string     { return platform + ".catalog" }

// inventoryRetryAfter is the retry hint of an incomplete inventory read:
// how long to wait before asking again, not a promise the shared read is
// done by then.
const inventoryRetryAfter = time.Second

// inventoryTTL is how long a finished shared read serves later calls.
const inventoryTTL = 2500 * time.Millisecond

// inventory answers list, booted and catalog reads within their budgets
// (config inventory.*): each platform's device listing and catalog is one
// listcache.Shared, so a read that outlives its caller's budget goes on in
// the background (bounded by backgroundCapMs) and a retry shortly after
// gets it without a new process.
type inventory struct {
	cfg   config.Inventory
	clock ports.Clock
	base  context.Context
	// driver finds a platform's driver (the engine's, in the daemon).
	driver func(platform string) (core.Driver, bool)

	mu      sync.Mutex
	devices map[string]*listcache.Shared[map[string]deviceObservation]
	catalog map[string]*listcache.Shared[core.Catalog]
}

func newInventory(base context.Context, cfg config.Inventory, clock ports.Clock, driver func(string) (core.Driver, bool)) *inventory {
	return &inventory{cfg: cfg, clock: clock, base: base, driver: driver,
		devices: map[string]*listcache.Shared[map[string]deviceObservation]{}, catalog: map[string]*listcache.Shared[core.Catalog]{}}
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// deviceReads is a platform's shared device listing: the driver's
// ListManaged, then the live facts of the devices it saw running.
func (inv *inventory) deviceReads(platform string) *listcache.Shared[map[string]deviceObservation] {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	s, ok := inv.devices[platform]
	if !ok {
		s = listcache.NewShared(inv.base, listcache.SharedOptions[map[string]deviceObservation]{
			TTL: inventoryTTL, Cap: ms(inv.cfg.BackgroundCapMs), Clock: inv.clock,
			Read: func(ctx context.Context) (map[string]deviceObservation, error) {
				drv, ok := inv.driver(platform)
				if !ok {
					return map[string]deviceObservation{}, nil
				}
				obs, err := drv.ListManaged(ctx)
				if err != nil {
					return nil, err
				}
				out := make(map[string]deviceObservation, len(obs))
				for _, o := range obs {
					out[o.Handle] = deviceObservation{Run: o.Run}
				}
				if lo, ok := drv.(core.LiveObserver); ok {
					observeLive(ctx, lo, out)
				}
				return out, nil
			}})
		inv.devices[platform] = s
	}
	return s
}

// observeLive reads the live facts of every running device in devs at
// once and waits for all of them. The driver bounds each read; one that
// fails leaves only that device's facts unknown, never the listing.
func observeLive(ctx context.Context, lo core.LiveObserver, devs map[string]deviceObservation) {
	type read struct {
		handle string
		live   core.LiveState
	}
	var running []string
	for h, o := range devs {
		if o.Run == core.RunRunning {
			running = append(running, h)
		}
	}
	ch := make(chan read, len(running))
	for _, h := range running {
		go func() {
			live, err := lo.ObserveLive(ctx, h)
			if err != nil {
				live = core.LiveState{}
			}
			ch <- read{h, live}
		}()
	}
	for range running {
		r := <-ch
		o := devs[r.handle]
		o.Live = r.live
		devs[r.handle] = o
	}
}

func (inv *inventory) catalogReads(platform string) *listcache.Shared[core.Catalog] {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	s, ok := inv.catalog[platform]
	if !ok {
		s = listcache.NewShared(inv.base, listcache.SharedOptions[core.Catalog]{
			TTL: inventoryTTL, Cap: ms(inv.cfg.BackgroundCapMs), Clock: inv.clock,
			Read: func(ctx context.Context) (core.Catalog, error) {
				drv, ok := inv.driver(platform)
				if !ok {
					return core.Catalog{}, nil
				}
				return drv.Catalog(ctx)
			}})
		inv.catalog[platform] = s
	}
	return s
}

// invalidate drops what the shared reads know after a fact that changes
// them: a device made, removed or moved between states changes the
// listing; an install changes the catalog. A read under way is superseded.
func (inv *inventory) invalidate(e events.Event) {
	switch {
	case strings.HasPrefix(e.Type, "device."):
		if e.Platform == "" {
			inv.mu.Lock()
			all := make([]*listcache.Shared[map[string]deviceObservation], 0, len(inv.devices))
			for _, s := range inv.devices {
				all = append(all, s)
			}
			inv.mu.Unlock()
			for _, s := range all {
				s.Invalidate()
			}
			return
		}
		inv.deviceReads(e.Platform).Invalidate()
	case strings.HasPrefix(e.Type, "component.install"):
		inv.mu.Lock()
		all := make([]*listcache.Shared[core.Catalog], 0, len(inv.catalog))
		for _, s := range inv.catalog {
			all = append(all, s)
		}
		inv.mu.Unlock()
		for _, s := range all {
			s.Invalidate()
		}
	}
}

// gaps collects one inventory read's unfinished stages.
type gaps struct {
	pending, missing []string
	code, reason     string
}

func (g *gaps) add(stage string, o outcome) {
	switch {
	case o.pending && o.superseded:
		// The read a caller was told to come back for was overtaken by a
		// change; a fresh one runs.
		g.pending = append(g.pending, stage)
		g.note(contract.EnrichmentSuperseded, stage+" changed while it was read; a fresh shared read continues")
	case o.pending:
		g.pending = append(g.pending, stage)
		g.note(contract.EnrichmentTimeout, stage+" did not finish within the budget; a shared read continues")
	case o.superseded:
		g.missing = append(g.missing, stage)
		g.note(contract.EnrichmentSuperseded, stage+" changed while it was read")
	case o.err != nil:
		g.missing = append(g.missing, stage)
		g.note(contract.EnrichmentFailed, stage+": "+o.err.Error())
	}
}

// note keeps the first reason and the most telling code: superseded over
// failed over timeout.
func (g *gaps) note(code, reason string) {
	rank := map[string]int{"": 0, contract.EnrichmentTimeout: 1, contract.EnrichmentFailed: 2, contract.EnrichmentSuperseded: 3}
	if rank[code] > rank[g.code] {
		g.code = code
	}
	if g.reason == "" {
		g.reason = reason
	}
}

func (g *gaps) enrichment() *contract.Enrichment {
	if len(g.pending) == 0 && len(g.missing) == 0 {
		return &contract.Enrichment{Complete: true}
	}
	sort.Strings(g.pending)
	sort.Strings(g.missing)
	return &contract.Enrichment{Complete: false, Pending: g.pending, Missing: g.missing, Retryable: true,
		RetryAfterMs: inventoryRetryAfter.Milliseconds(), Reason: g.reason, Code: g.code}
}

type outcome struct {
	pending, superseded bool
	err                 error
}

func outcomeOf[T any](o listcache.Outcome[T]) outcome {
	return outcome{pending: o.Pending, superseded: o.Superseded, err: o.Err}
}

// observe reads every platform's device listing at once, each within
// budget, and returns the observations it got and the gaps.
func (inv *inventory) observe(ctx context.Context, platforms []string, budget time.Duration) (map[string]map[string]deviceObservation, *gaps) {
	type res struct {
		p string
		o listcache.Outcome[map[string]deviceObservation]
	}
	ch := make(chan res, len(platforms))
	for _, p := range platforms {
		go func() { ch <- res{p, inv.deviceReads(p).Within(ctx, budget)} }()
	}
	runs := map[string]map[string]deviceObservation{}
	g := &gaps{}
	for range platforms {
		r := <-ch
		if r.o.Done {
			runs[r.p] = r.o.Val
			continue
		}
		g.add(observationStage(r.p), outcomeOf(r.o))
	}
	return runs, g
}

// listDevices is list.get: every device, with its live observation when
// the platform's listing finished within the budget (inventory.listBudgetMs;
// bootedBudgetMs for the booted view, which keeps only the devices
// observed running, or in a running lifecycle state when the observation
// is still pending).
func (d *Daemon) listDevices(ctx context.Context, in contract.ListGetIn) contract.ListGetOut {
	budget := ms(d.cfg.Inventory.ListBudgetMs)
	if in.Booted {
		budget = ms(d.cfg.Inventory.BootedBudgetMs)
	}
	snap := d.engine.Status()
	leaseOf := map[string]string{}
	for _, l := range snap.Leases {
		for _, id := range l.DeviceIDs() {
			leaseOf[id] = l.ID
		}
	}
	runs, g := d.inv.observe(ctx, d.engine.Platforms(), budget)
	out := contract.ListGetOut{Devices: []contract.Device{}}
	for _, r := range snap.Devices {
		var obs *deviceObservation
		if m, ok := runs[r.Platform]; ok {
			if o, ok := m[r.Handle]; ok {
				obs = &o
			}
		}
		if in.Booted {
			booted := obs != nil && obs.Run == core.RunRunning
			if obs == nil {
				booted = r.State == core.StateReady || r.State == core.StateLeased
			}
			if !booted {
				continue
			}
		}
		out.Devices = append(out.Devices, describeDevice(r, leaseOf[r.ID], obs))
	}
	out.Enrichment = g.enrichment()
	return out
}

// catalogWithin reads one platform's catalog within inventory.catalogBudgetMs.
func (d *Daemon) catalogWithin(ctx context.Context, platform string) listcache.Outcome[core.Catalog] {
	return d.inv.catalogReads(platform).Within(ctx, ms(d.cfg.Inventory.CatalogBudgetMs))
}

// known is the device's observation from a fresh shared listing, or nil.
func (inv *inventory) known(platform, handle string) *deviceObservation {
	if inv == nil {
		return nil
	}
	m, ok := inv.deviceReads(platform).Peek()
	if !ok {
		return nil
	}
	st, ok := m[handle]
	if !ok {
		return nil
	}
	return &st
}
