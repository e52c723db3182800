package resources

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/drivers/listcache"
	"github.com/simlock/simlock/internal/ports"
)

// Enrichment stage names, as Enrichment.pending/missing list them.
func observationStage(platform string) string { return platform + ".devices" }
func catalogStage(platform string) string     { return platform + ".catalog" }

// inventoryRetryAfter is the retry hint of an incomplete inventory read:
// how long to wait before asking again, not a promise the shared read is
// done by then.
const inventoryRetryAfter = time.Second

// inventoryTTL is how long a finished shared read serves later calls.
const inventoryTTL = 2500 * time.Millisecond

// Inventory answers list, booted and catalog reads within their budgets
// (config inventory.*): each platform's device listing and catalog is one
// listcache.Shared, so a read that outlives its caller's budget goes on in
// the background (bounded by backgroundCapMs) and a retry shortly after
// gets it without a new process.
type Inventory struct {
	cfg   config.Inventory
	clock ports.Clock
	base  context.Context
	// engine finds a platform's driver and answers the registry reads.
	engine Engine

	mu      sync.Mutex
	devices map[string]*listcache.Shared[map[string]Observation]
	catalog map[string]*listcache.Shared[core.Catalog]
}

// NewInventory builds the inventory; base is the daemon's life, which
// bounds the background reads.
func NewInventory(base context.Context, cfg config.Inventory, clock ports.Clock, engine Engine) *Inventory {
	return &Inventory{cfg: cfg, clock: clock, base: base, engine: engine,
		devices: map[string]*listcache.Shared[map[string]Observation]{}, catalog: map[string]*listcache.Shared[core.Catalog]{}}
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// deviceReads is a platform's shared device listing: the driver's
// ListManaged, then the live facts of the devices it saw running.
func (inv *Inventory) deviceReads(platform string) *listcache.Shared[map[string]Observation] {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	s, ok := inv.devices[platform]
	if !ok {
		s = listcache.NewShared(inv.base, listcache.SharedOptions[map[string]Observation]{
			TTL: inventoryTTL, Cap: ms(inv.cfg.BackgroundCapMs), Clock: inv.clock,
			Read: func(ctx context.Context) (map[string]Observation, error) {
				drv, ok := inv.engine.Driver(platform)
				if !ok {
					return map[string]Observation{}, nil
				}
				obs, err := drv.ListManaged(ctx)
				if err != nil {
					return nil, err
				}
				out := make(map[string]Observation, len(obs))
				for _, o := range obs {
					out[o.Handle] = Observation{Run: o.Run}
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
func observeLive(ctx context.Context, lo core.LiveObserver, devs map[string]Observation) {
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

func (inv *Inventory) catalogReads(platform string) *listcache.Shared[core.Catalog] {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	s, ok := inv.catalog[platform]
	if !ok {
		s = listcache.NewShared(inv.base, listcache.SharedOptions[core.Catalog]{
			TTL: inventoryTTL, Cap: ms(inv.cfg.BackgroundCapMs), Clock: inv.clock,
			Read: func(ctx context.Context) (core.Catalog, error) {
				drv, ok := inv.engine.Driver(platform)
				if !ok {
					return core.Catalog{}, nil
				}
				return drv.Catalog(ctx)
			}})
		inv.catalog[platform] = s
	}
	return s
}

// Invalidate drops what the shared reads know after a fact that changes
// them: a device made, removed or moved between states changes the
// listing; an install changes the catalog. A read under way is superseded.
func (inv *Inventory) Invalidate(e events.Event) {
	switch {
	case strings.HasPrefix(e.Type, "device."):
		if e.Platform == "" {
			inv.mu.Lock()
			all := make([]*listcache.Shared[map[string]Observation], 0, len(inv.devices))
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
func (inv *Inventory) observe(ctx context.Context, platforms []string, budget time.Duration) (map[string]map[string]Observation, *gaps) {
	type res struct {
		p string
		o listcache.Outcome[map[string]Observation]
	}
	ch := make(chan res, len(platforms))
	for _, p := range platforms {
		go func() { ch <- res{p, inv.deviceReads(p).Within(ctx, budget)} }()
	}
	runs := map[string]map[string]Observation{}
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

// List is list.get: every device, with its live observation when the
// platform's listing finished within the budget (inventory.listBudgetMs;
// bootedBudgetMs for the booted view, which keeps only the devices
// observed running, or in a running lifecycle state when the observation
// is still pending).
func (inv *Inventory) List(ctx context.Context, _ *dispatch.Call, in contract.ListGetIn) (contract.ListGetOut, error) {
	budget := ms(inv.cfg.ListBudgetMs)
	if in.Booted {
		budget = ms(inv.cfg.BootedBudgetMs)
	}
	snap := inv.engine.Status()
	leaseOf := map[string]string{}
	for _, l := range snap.Leases {
		for _, id := range l.DeviceIDs() {
			leaseOf[id] = l.ID
		}
	}
	runs, g := inv.observe(ctx, inv.engine.Platforms(), budget)
	out := contract.ListGetOut{Devices: []contract.Device{}}
	for _, r := range snap.Devices {
		var obs *Observation
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
		out.Devices = append(out.Devices, Describe(r, leaseOf[r.ID], obs))
	}
	out.Enrichment = g.enrichment()
	return out, nil
}

// CatalogWithin reads one platform's catalog within inventory.catalogBudgetMs.
func (inv *Inventory) CatalogWithin(ctx context.Context, platform string) listcache.Outcome[core.Catalog] {
	return inv.catalogReads(platform).Within(ctx, ms(inv.cfg.CatalogBudgetMs))
}

// CatalogGet is catalog.get: each platform's catalog (or the one asked
// for), read within its budget.
func (inv *Inventory) CatalogGet(ctx context.Context, _ *dispatch.Call, in contract.CatalogGetIn) (contract.CatalogGetOut, error) {
	out := contract.CatalogGetOut{Platforms: []contract.PlatformCatalog{}}
	g := &gaps{}
	for _, p := range inv.engine.Platforms() {
		if in.Platform != "" && in.Platform != p {
			continue
		}
		pc := contract.PlatformCatalog{Platform: p, Models: []contract.CatalogModel{}, Runtimes: []contract.CatalogRuntime{}}
		o := inv.CatalogWithin(ctx, p)
		cat := o.Val
		g.add(catalogStage(p), outcomeOf(o))
		if o.Err != nil {
			pc.Error = o.Err.Error()
		}
		for _, m := range cat.Models {
			pc.Models = append(pc.Models, contract.CatalogModel{Name: m.Name, Identifier: m.Identifier, MinOS: m.MinOS, MaxOS: m.MaxOS})
		}
		for _, r := range cat.Runtimes {
			pc.Runtimes = append(pc.Runtimes, contract.CatalogRuntime{Name: r.Name, Version: r.Version, Build: r.Build,
				Identifier: r.Identifier, Available: r.Available, SupportedModels: r.SupportedModels})
		}
		out.Platforms = append(out.Platforms, pc)
	}
	if in.Platform != "" && len(out.Platforms) == 0 {
		return out, core.NewSpecError(core.ErrUnsupportedPlatform, "no driver serves platform "+in.Platform)
	}
	out.Enrichment = g.enrichment()
	return out, nil
}

// DeviceOut describes a registry record with the live observation when a
// fresh one is at hand: status and lease grants never start a listing of
// their own.
func (inv *Inventory) DeviceOut(r core.DeviceRecord, leaseID string) contract.Device {
	return Describe(r, leaseID, inv.known(r.Platform, r.Handle))
}

// known is the device's observation from a fresh shared listing, or nil.
func (inv *Inventory) known(platform, handle string) *Observation {
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
