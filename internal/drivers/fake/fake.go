// Package fake is a complete in-process driver whose behaviour tests script:
// gates to hold boots and purges in flight, injected failures, and devices
// that vanish or crash. It behaves like a driver (it keeps device state and
// enforces it) rather than recording calls like a mock.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

var _ core.Driver = (*Driver)(nil)

type device struct {
	spec          core.Spec
	running       bool
	transitioning bool  // reads as booting/shutting down
	markOK        *bool // provenance mark as last read, when set
	baseline      bool  // a keep-booted baseline exists for this boot (resetbook.go)
}

// Driver is the scriptable fake.
type Driver struct {
	platform string

	mu      sync.Mutex
	devices map[string]*device
	seq     int
	calls   []string

	udidSpace uuid.UUID // see UDID

	// Models the driver knows; empty means any model resolves.
	Models []string
	// DefaultOS is the OS a request without one resolves to.
	DefaultOS string
	// Gate, when non-nil, makes MakeReady and Reclaim wait for a value
	// (or ctx) before doing their work, so a test can hold them in flight.
	Gate chan struct{}
	// RAM, when set, is the footprint every resolved spec carries
	// (Spec.RAMBytes), as a real driver reports an AVD's hw.ramSize.
	RAM uint64
	// ProvisionedRAM, when set, is the footprint a new device reports once
	// it exists (core.Provisioned.RAMBytes), as an AVD's hw.ramSize does.
	ProvisionedRAM uint64
	// ResourceGate, when non-nil, makes every resource call of Resourced
	// wait for a value (or ctx) first.
	ResourceGate chan struct{}
	res          *resState // resources.go
	// Fail maps an operation ("provision", "boot", "reclaim", "shutdown",
	// "destroy") to how many of its next calls fail.
	Fail map[string]int
	// Caps, when set, is what Capabilities declares instead of the real
	// platform driver's declaration (capabilities.go).
	Caps *core.Capabilities
	// Cat, when set, is what Catalog answers instead of one built from
	// Models and DefaultOS (a test feeds a real driver's catalog through).
	Cat *core.Catalog
}

// New returns a fake driver for platform.
func New(platform string) *Driver {
	return &Driver{platform: platform, devices: map[string]*device{}, DefaultOS: "1.0", Fail: map[string]int{}, udidSpace: uuid.New()}
}

func (d *Driver) Platform() string { return d.platform }

// UDID is the UUID the fake reports for handle: shaped like a real
// simulator's UDID, which the host registry keys iOS devices by, and drawn
// from this driver's own name space, so two fakes in one test process
// (every daemon test shares a host registry) never report the same one.
func (d *Driver) UDID(handle string) string {
	return strings.ToUpper(uuid.NewSHA1(d.udidSpace, []byte(handle)).String())
}

// Calls returns the verbs called so far, as "verb handle".
func (d *Driver) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

func (d *Driver) record(verb, handle string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, verb+" "+handle)
	if d.Fail[verb] > 0 {
		d.Fail[verb]--
		return fmt.Errorf("fake %s failure", verb)
	}
	return nil
}

// SetFail scripts n failures of verb.
func (d *Driver) SetFail(verb string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Fail[verb] = n
}

func (d *Driver) wait(ctx context.Context) error {
	if d.Gate == nil {
		return nil
	}
	select {
	case <-d.Gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Driver) ResolveSpec(_ context.Context, r core.SpecRequest) (core.Spec, error) {
	model := r.Model
	if model == "" {
		model = "Phone"
	}
	if len(d.Models) > 0 {
		found := false
		for _, m := range d.Models {
			found = found || m == model
		}
		if !found {
			return core.Spec{}, core.NewSpecError(core.ErrUnknownModel, "unknown model "+model)
		}
	}
	os := r.OSVersion
	if os == "" {
		os = d.DefaultOS
	}
	return core.Spec{Platform: d.platform, Model: model, ModelID: model, OSVersion: os, RuntimeID: "rt-" + os, RAMBytes: d.RAM}, nil
}

func (d *Driver) Provision(_ context.Context, s core.Spec) (core.Provisioned, error) {
	if err := d.record("provision", s.Model); err != nil {
		return core.Provisioned{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	h := fmt.Sprintf("%s-%d", d.platform, d.seq)
	d.devices[h] = &device{spec: s}
	data, _ := json.Marshal(map[string]string{"fake": h})
	return core.Provisioned{Handle: h, Name: "fake " + h, Attrs: map[string]string{core.AttrUDID: d.UDID(h)}, Simulated: true, Data: data, RAMBytes: d.ProvisionedRAM}, nil
}

func (d *Driver) MakeReady(ctx context.Context, r core.DeviceRef) error {
	return d.bringUp(ctx, "boot", r)
}

// Reclaim is a boot as far as the fake is concerned: the device comes back
// running (a real driver also erases it).
func (d *Driver) Reclaim(ctx context.Context, r core.DeviceRef) error {
	return d.bringUp(ctx, "reclaim", r)
}

// Erasing is the fake with the optional core.Eraser ability: its purge can
// stop after the erase, leaving the device shut down.
type Erasing struct{ *Driver }

var _ core.Eraser = Erasing{}

// Erase records "erase" (or fails as scripted) and leaves the device
// stopped; MakeReady then boots it.
func (d Erasing) Erase(_ context.Context, r core.DeviceRef) error {
	if err := d.record("erase", r.Handle); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dev, ok := d.devices[r.Handle]
	if !ok {
		return core.ErrDeviceNotFound
	}
	dev.running = false
	dev.baseline = false // an erased device has no keep-booted baseline
	d.resetResourcesLocked(r.Handle)
	return nil
}

// bringUp waits at the gate, records verb (or fails as scripted) and marks
// the device running.
func (d *Driver) bringUp(ctx context.Context, verb string, r core.DeviceRef) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	if err := d.record(verb, r.Handle); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dev, ok := d.devices[r.Handle]
	if !ok {
		return core.ErrDeviceNotFound
	}
	if verb == "reclaim" || verb == "wipe-data" {
		d.resetResourcesLocked(r.Handle) // a purge erases what was written
		dev.baseline = false             // and begins a new boot
	} else if !dev.running && d.res != nil {
		d.res.boots[r.Handle]++ // a new boot: receipts of the old one no longer apply
	}
	dev.running, dev.transitioning = true, false
	return nil
}

func (d *Driver) Shutdown(_ context.Context, r core.DeviceRef) error {
	if err := d.record("shutdown", r.Handle); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if dev, ok := d.devices[r.Handle]; ok {
		dev.running = false
		dev.baseline = false // the next boot is a new incarnation
	}
	return nil
}

func (d *Driver) Destroy(_ context.Context, r core.DeviceRef) error {
	if err := d.record("destroy", r.Handle); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.devices, r.Handle)
	return nil
}

// Crash stops a device as if its process died.
func (d *Driver) Crash(handle string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dev, ok := d.devices[handle]; ok {
		dev.running, dev.transitioning = false, false
	}
}

// Vanish deletes a device behind the core's back.
func (d *Driver) Vanish(handle string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.devices, handle)
}

// Transitioning makes a device read as booting or shutting down.
func (d *Driver) Transitioning(handle string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dev, ok := d.devices[handle]; ok {
		dev.transitioning = true
	}
}

// SetMark sets what the provenance mark check reports for a device.
func (d *Driver) SetMark(handle string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dev, found := d.devices[handle]; found {
		dev.markOK = &ok
	}
}

// AddOrphan creates a device in the root the core never provisioned.
func (d *Driver) AddOrphan(handle string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.devices[handle] = &device{running: false}
}

// Running reports whether the device with handle is booted.
func (d *Driver) Running(handle string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	dev, ok := d.devices[handle]
	return ok && dev.running
}

// Count reports how many devices exist and how many run.
func (d *Driver) Count() (exist, running int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, dev := range d.devices {
		exist++
		if dev.running {
			running++
		}
	}
	return exist, running
}

func (d *Driver) ListManaged(context.Context) ([]core.Observed, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []core.Observed
	for h, dev := range d.devices {
		run := core.RunStopped
		switch {
		case dev.transitioning:
			run = core.RunTransitioning
		case dev.running:
			run = core.RunRunning
		}
		out = append(out, core.Observed{Handle: h, Name: "fake " + h, Run: run, MarkOK: dev.markOK})
	}
	return out, nil
}

func (d *Driver) Estimate(op core.DriverOp) time.Duration {
	if op == core.OpBoot {
		return 30 * time.Second
	}
	return time.Second
}

func (d *Driver) Catalog(context.Context) (core.Catalog, error) {
	if d.Cat != nil {
		return *d.Cat, nil
	}
	var c core.Catalog
	for _, m := range d.Models {
		c.Models = append(c.Models, core.CatalogModel{Name: m, Identifier: m})
	}
	c.Runtimes = []core.CatalogRuntime{{Name: d.platform + " " + d.DefaultOS, Version: d.DefaultOS, Identifier: "rt-" + d.DefaultOS, Available: true}}
	return c, nil
}

func (d *Driver) RevalidateRoot(context.Context) error { return nil }

var _ core.Passthrougher = (*Driver)(nil)

// PassthroughTools: the fake wraps one tool, "fakectl"; its verb "kill" is
// refused like a lifecycle verb would be, and "on HANDLE" names a device,
// which a pinned resolution (device.exec) confines to the lease's.
func (d *Driver) PassthroughTools() []string { return []string{"fakectl"} }

func (d *Driver) ResolvePassthrough(tool string, args []string, scope core.PassthroughScope) (ports.Command, error) {
	if tool != "fakectl" {
		return ports.Command{}, core.ErrUnknownTool
	}
	if len(args) > 0 && args[0] == "kill" {
		return ports.Command{}, fmt.Errorf("fakectl kill: %w", core.ErrPassthroughRefused)
	}
	cmd := ports.Command{Name: "fakectl", Args: append([]string{"--root", "/fake/" + d.platform}, args...)}
	if scope.Pin != nil {
		// "fakectl on HANDLE ..." names a device; pinned, only the lease's.
		if len(args) > 1 && args[0] == "on" && args[1] != scope.Pin.Handle {
			return ports.Command{}, &core.SpecError{Err: core.ErrPassthroughRefused,
				Msg: "fakectl on " + args[1] + ": not the leased device", Next: "use fakectl on " + scope.Pin.Handle}
		}
		cmd.Env = []string{"FAKECTL_DEVICE=" + scope.Pin.Handle}
	}
	return cmd, nil
}

// Cloning is the fake with core.Cloner on top of core.Eraser: a clone
// reset replaces the device by a new one. Cost, when set, is how long each
// verb takes on Clock ("erase", "boot" after an erase, "clone", "boot"
// of a clone), applied by advancing Clock, so a test with the fake clock
// scripts the timings the core's reset choice follows.
type Cloning struct {
	Erasing
	// GoldenReady is what CloneReady reports.
	GoldenReady bool
	Clock       interface{ Advance(time.Duration) }
	Cost        map[string]time.Duration
	// erased marks devices whose next boot is a first boot.
	erased  map[string]bool
	goldens []core.Golden
	gate    core.GoldenGate
	// removeBusy is how many of the next RemoveGolden calls meet a build
	// of the golden (core.ErrGoldenBusy).
	removeBusy int
}

// BusyRemovals makes the next n RemoveGolden calls answer
// core.ErrGoldenBusy, as a reclaim that meets a rebuild does.
func (c *Cloning) BusyRemovals(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeBusy = n
}

var _ core.Cloner = (*Cloning)(nil)

// NewCloning wraps d; clock may be nil (no costs).
func NewCloning(d *Driver, clock interface{ Advance(time.Duration) }) *Cloning {
	return &Cloning{Erasing: Erasing{d}, GoldenReady: true, Clock: clock, Cost: map[string]time.Duration{}, erased: map[string]bool{}}
}

func (c *Cloning) spend(verb string) {
	if c.Clock == nil {
		return
	}
	c.mu.Lock()
	d := c.Cost[verb]
	c.mu.Unlock()
	if d > 0 {
		c.Clock.Advance(d)
	}
}

// SetGoldenReady changes what CloneReady reports.
func (c *Cloning) SetGoldenReady(ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.GoldenReady = ok
}

// SetCost sets how long verb takes.
func (c *Cloning) SetCost(verb string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Cost[verb] = d
}

func (c *Cloning) CloneReady(core.Spec) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.GoldenReady
}

// CloneDevice records "clone <model>" (or fails as scripted, or when no
// golden is ready) and makes a new shut-down device.
func (c *Cloning) CloneDevice(_ context.Context, s core.Spec) (core.Provisioned, error) {
	if !c.CloneReady(s) {
		return core.Provisioned{}, fmt.Errorf("fake: no golden for %s", s.Key())
	}
	if err := c.record("clone", s.Model); err != nil {
		return core.Provisioned{}, err
	}
	c.spend("clone")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	h := fmt.Sprintf("%s-%d", c.platform, c.seq)
	c.devices[h] = &device{spec: s}
	data, _ := json.Marshal(map[string]string{"fake": h})
	return core.Provisioned{Handle: h, Name: "fake " + h, Attrs: map[string]string{core.AttrUDID: c.UDID(h)}, Simulated: true, Data: data}, nil
}

func (c *Cloning) Erase(ctx context.Context, r core.DeviceRef) error {
	if err := c.Erasing.Erase(ctx, r); err != nil {
		return err
	}
	c.spend("erase")
	c.mu.Lock()
	c.erased[r.Handle] = true
	c.mu.Unlock()
	return nil
}

// MakeReady boots; a boot after an erase costs "first-boot", any other
// "boot".
func (c *Cloning) MakeReady(ctx context.Context, r core.DeviceRef) error {
	if err := c.Driver.MakeReady(ctx, r); err != nil {
		return err
	}
	c.mu.Lock()
	first := c.erased[r.Handle]
	delete(c.erased, r.Handle)
	c.mu.Unlock()
	if first {
		c.spend("first-boot")
	} else {
		c.spend("boot")
	}
	return nil
}

var _ core.GoldenKeeper = (*Cloning)(nil)

// SetGoldens sets what Goldens reports.
func (c *Cloning) SetGoldens(g []core.Golden) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.goldens = append([]core.Golden(nil), g...)
}

// Goldens implements core.GoldenKeeper with what SetGoldens set.
func (c *Cloning) Goldens() []core.Golden {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]core.Golden(nil), c.goldens...)
}

var _ core.GoldenReclaimer = (*Cloning)(nil)

// RemoveGolden records "remove-golden <handle>" (or fails as scripted) and
// drops that golden from what Goldens reports.
func (c *Cloning) RemoveGolden(_ context.Context, handle string) error {
	if err := c.record("remove-golden", handle); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removeBusy > 0 {
		c.removeBusy--
		return fmt.Errorf("fake: golden %s: %w", handle, core.ErrGoldenBusy)
	}
	kept := c.goldens[:0]
	for _, g := range c.goldens {
		if g.Handle != handle {
			kept = append(kept, g)
		}
	}
	c.goldens = kept
	return nil
}

var _ core.GoldenGated = (*Cloning)(nil)

// SetGoldenGate implements core.GoldenGated; AskGoldenBuild uses the gate.
func (c *Cloning) SetGoldenGate(g core.GoldenGate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gate = g
}

// AskGoldenBuild asks the engine's gate, as the iOS driver does before a
// build (inlineOK: from a provision); admitted, the golden is reported
// under handle, Building when it runs beside the devices, until SetGoldens
// says otherwise.
func (c *Cloning) AskGoldenBuild(handle, model, runtime string, inlineOK bool) core.GoldenAdmission {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate == nil {
		return core.GoldenRefused
	}
	return gate.AdmitGoldenBuild(c.platform, core.Golden{ModelID: model, RuntimeID: runtime}, inlineOK, func(v core.GoldenAdmission) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.goldens = append(c.goldens, core.Golden{Handle: handle, ModelID: model, RuntimeID: runtime, Building: v == core.GoldenBackground, Busy: true})
	})
}

var _ core.GoldenEnsurer = (*Cloning)(nil)

// EnsureGolden records "ensure-golden <model>|<runtime>" (or fails as
// scripted) and, unless a golden of the spec is reported already, asks the
// gate for a build beside the devices as the iOS driver does; admitted,
// the golden is reported as "G-<model>", Building, until SetGoldens says
// otherwise.
func (c *Cloning) EnsureGolden(_ context.Context, s core.Spec) error {
	if err := c.record("ensure-golden", s.ModelID+"|"+s.RuntimeID); err != nil {
		return err
	}
	for _, g := range c.Goldens() {
		if g.ModelID == s.ModelID && g.RuntimeID == s.RuntimeID {
			return nil
		}
	}
	if c.AskGoldenBuild("G-"+s.ModelID, s.ModelID, s.RuntimeID, false) == core.GoldenRefused {
		return fmt.Errorf("fake: golden %s: %w", s.ModelID, core.ErrGoldenRefused)
	}
	return nil
}
