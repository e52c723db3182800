package ios

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

// Clone provisioning (drivers.ios.clone, ADR 0041). Per (device type,
// runtime) the driver keeps one golden simulator: created, booted once to
// completion and shut down, in a device set of its own under the root
// (<root>/.golden), so it is never listed as one of the root's devices,
// never leased, and no orphan sweep of the root can take it for one. A
// new device is then `simctl clone` of the golden into the root: the
// clone inherits the golden's first-boot data and boots in seconds where
// create + first boot takes half a minute.
//
// The golden is only used while fresh: made with the runtime build and
// the Xcode that are installed now, and with the slim groups in force. A
// missing or stale golden is rebuilt in the background while provisioning
// falls back to create, and so does any failed clone.

// Clone configures clone provisioning.
type Clone struct {
	Enabled bool
}

// goldenDirName is the golden device set, inside the root. The leading
// dot keeps it out of the root's own listing.
const goldenDirName = ".golden"

// goldenRecordName is the record of the goldens, beside their set.
const goldenRecordName = ".golden.json"

// xcodeVersionTTL bounds how long the Xcode version read for staleness
// checks is trusted; an Xcode update shows up within it.
const xcodeVersionTTL = 5 * time.Minute

// golden is one golden device as recorded.
type golden struct {
	UDID         string    `json:"udid"`
	ModelID      string    `json:"modelId"`
	RuntimeID    string    `json:"runtimeId"`
	RuntimeBuild string    `json:"runtimeBuild"`
	Xcode        string    `json:"xcode"`
	Slim         string    `json:"slim,omitempty"`
	Ready        bool      `json:"ready"` // booted once and shut down again
	MadeAt       time.Time `json:"madeAt"`
}

type goldenFile struct {
	Goldens map[string]golden `json:"goldens"`
}

// cloneState is the driver's clone provisioning state.
type cloneState struct {
	enabled bool

	mu       sync.Mutex
	building map[string]bool // spec key -> a rebuild is running
	// ready holds the goldens last found or made fresh, so CloneReady can
	// answer without running anything; CloneDevice checks again.
	ready   map[string]bool
	xcode   string
	xcodeAt time.Time
	wg      sync.WaitGroup
	// gate is the engine's admission of golden builds (nil: build freely).
	gate core.GoldenGate

	// view is the golden record as last written (or read at start), and
	// buildingView the keys being built, for Goldens: it runs inside the
	// core's decision section, so it must not wait behind file I/O that
	// mu may be held across.
	viewMu sync.Mutex
	view   map[string]golden
	// buildingView holds the keys being built; the value says the build
	// runs beside the devices (charged as running), false an inline one
	// inside a provision's own reservation.
	buildingView map[string]bool
}

func goldenKey(modelID, runtimeID string) string { return modelID + "|" + runtimeID }

func (d *Driver) goldenSet() string    { return filepath.Join(d.root, goldenDirName) }
func (d *Driver) goldenRecord() string { return filepath.Join(d.root, goldenRecordName) }

// cloneOn reports whether provisioning tries a clone. Default device-set
// mode keeps create: a clone would land outside the set the mark and the
// created-devices record prove ownership in (ADR 0033).
func (d *Driver) cloneOn() bool { return d.clone.enabled && !d.defaultSet }

func (d *Driver) readGoldens() (goldenFile, error) {
	f := goldenFile{Goldens: map[string]golden{}}
	if err := readRecordFile(d.fs, d.goldenRecord(), &f); err != nil {
		return goldenFile{Goldens: map[string]golden{}}, err
	}
	if f.Goldens == nil {
		f.Goldens = map[string]golden{}
	}
	return f, nil
}

// updateGoldens rewrites the record; the caller holds clone.mu.
func (d *Driver) updateGoldens(fn func(*goldenFile)) error {
	f, err := d.readGoldens()
	if err != nil {
		return err
	}
	fn(&f)
	if err := writeRecordFile(d.fs, d.goldenRecord(), f); err != nil {
		return err
	}
	d.setView(f)
	return nil
}

func (d *Driver) setView(f goldenFile) {
	d.clone.viewMu.Lock()
	defer d.clone.viewMu.Unlock()
	d.clone.view = f.Goldens
}

func (d *Driver) setBuilding(key string, on, background bool) {
	d.clone.viewMu.Lock()
	defer d.clone.viewMu.Unlock()
	if d.clone.buildingView == nil {
		d.clone.buildingView = map[string]bool{}
	}
	if on {
		d.clone.buildingView[key] = background
	} else {
		delete(d.clone.buildingView, key)
	}
}

var _ core.GoldenKeeper = (*Driver)(nil)

// Goldens implements core.GoldenKeeper from memory: the recorded goldens
// (a half-built one included: it exists), and a build not yet recorded as
// one more; Building (charged as running) only for a build beside the
// devices, since an inline one runs in its provision's reservation.
func (d *Driver) Goldens() []core.Golden {
	if !d.cloneOn() {
		return nil
	}
	d.clone.viewMu.Lock()
	defer d.clone.viewMu.Unlock()
	var out []core.Golden
	for key, g := range d.clone.view {
		bg, busy := d.clone.buildingView[key]
		out = append(out, core.Golden{Handle: g.UDID, ModelID: g.ModelID, RuntimeID: g.RuntimeID, Building: bg, Busy: busy})
	}
	for key, bg := range d.clone.buildingView {
		if _, ok := d.clone.view[key]; !ok {
			model, runtime, _ := strings.Cut(key, "|")
			out = append(out, core.Golden{Handle: "building:" + key, ModelID: model, RuntimeID: runtime, Building: bg, Busy: true})
		}
	}
	return out
}

// loadGoldenView reads the golden record at start-up, so the goldens a
// previous run made count from the first plan on.
func (d *Driver) loadGoldenView() {
	if !d.cloneOn() {
		return
	}
	f, err := d.readGoldens()
	if err != nil {
		d.log.Warn("golden record unreadable; goldens will be rebuilt", "err", err)
		return
	}
	d.setView(f)
	for key, g := range f.Goldens {
		if g.Ready {
			// Fresh as far as anyone knows; CloneDevice checks again.
			d.clone.ready[key] = true
		}
	}
}

// fingerprint is what a golden must have been made with to be fresh.
func (d *Driver) fingerprint(ctx context.Context, spec core.Spec) (golden, error) {
	l, _, err := d.listing.Get(ctx)
	if err != nil {
		return golden{}, err
	}
	g := golden{ModelID: spec.ModelID, RuntimeID: spec.RuntimeID, Slim: strings.Join(d.res.slim.Groups, ",")}
	for _, r := range l.Runtimes {
		if r.Identifier == spec.RuntimeID {
			g.RuntimeBuild = r.Build
		}
	}
	if g.RuntimeBuild == "" {
		return golden{}, fmt.Errorf("ios: golden: runtime %s not listed", spec.RuntimeID)
	}
	if g.Xcode, err = d.xcodeVersion(ctx); err != nil {
		return golden{}, err
	}
	return g, nil
}

// xcodeVersion is `xcodebuild -version`, read at most every
// xcodeVersionTTL.
func (d *Driver) xcodeVersion(ctx context.Context) (string, error) {
	now := d.clock.Now()
	d.clone.mu.Lock()
	if d.clone.xcode != "" && now.Sub(d.clone.xcodeAt) < xcodeVersionTTL {
		v := d.clone.xcode
		d.clone.mu.Unlock()
		return v, nil
	}
	d.clone.mu.Unlock()
	cctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "xcodebuild -version")
	defer cancel()
	res, err := d.runner.Run(cctx, ports.Command{Name: d.xcodebuild, Args: []string{"-version"}})
	if err != nil {
		return "", fmt.Errorf("ios: xcodebuild -version: %w", err)
	}
	v := strings.TrimSpace(string(res.Stdout))
	d.clone.mu.Lock()
	d.clone.xcode, d.clone.xcodeAt = v, now
	d.clone.mu.Unlock()
	return v, nil
}

// fresh reports whether g was made with want's runtime build, Xcode and
// slim groups, and finished.
func (g golden) fresh(want golden) bool {
	return g.Ready && g.UDID != "" && g.RuntimeBuild == want.RuntimeBuild && g.Xcode == want.Xcode && g.Slim == want.Slim
}

// provisionByClone clones spec's golden into the root. Without a fresh
// golden it asks the gate for one build, once: with inlineOK (a provision,
// holding its own running reservation) the build may run inline, and the
// device is then cloned from the golden it made. It reports false, having
// started a rebuild where one is due, when provisioning must fall back to
// create: no fresh golden, or the clone failed. Only the clone itself runs
// under a command deadline; an inline build has its own.
func (d *Driver) provisionByClone(ctx context.Context, spec core.Spec, name string, inlineOK bool) (string, bool) {
	want, err := d.fingerprint(ctx, spec)
	if err != nil {
		d.log.Warn("clone: cannot check the golden; creating", "err", err)
		return "", false
	}
	key, f, building, err := d.goldenState(spec)
	if err != nil {
		d.log.Warn("clone: golden record unreadable; creating", "err", err)
		return "", false
	}
	g, ok := f.Goldens[key]
	if building || !ok || !g.fresh(want) {
		d.setCloneReady(key, false)
		if building {
			return "", false
		}
		if _, inline := d.admitGolden(ctx, spec, want, inlineOK); !inline {
			return "", false
		}
		// Made inline, just now: clone from it.
		if _, f, _, err = d.goldenState(spec); err != nil {
			return "", false
		}
		if g, ok = f.Goldens[key]; !ok || !g.fresh(want) {
			return "", false
		}
	}
	cctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl clone")
	defer cancel()
	out, err := d.goldenSimctl(cctx, "clone", g.UDID, name, d.root)
	if err == nil {
		var udid string
		if udid, err = ParseCreateOutput(string(out)); err == nil {
			d.setCloneReady(key, true)
			return udid, true
		}
	}
	// The golden may have been deleted or booted behind simlock's back:
	// make a new one and create this device meanwhile.
	d.log.Warn("clone failed; creating and rebuilding the golden", "golden", g.UDID, "err", err)
	d.setCloneReady(key, false)
	d.clone.mu.Lock()
	_ = d.updateGoldens(func(f *goldenFile) {
		if cur, ok := f.Goldens[key]; ok && cur.UDID == g.UDID {
			cur.Ready = false
			f.Goldens[key] = cur
		}
	})
	d.clone.mu.Unlock()
	// One background rebuild, unless one runs already or the engine's gate
	// refuses it (ADR 0053); a refused one is asked for again at the next
	// provision, or by the engine (EnsureGolden).
	d.admitGolden(context.Background(), spec, want, false)
	return "", false
}

// goldenSimctl runs simctl on the golden device set.
func (d *Driver) goldenSimctl(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"simctl", "--set", d.goldenSet()}, args...)
	res, err := d.runner.Run(ctx, ports.Command{Name: d.xcrun, Args: full})
	if err != nil {
		return res.Stdout, d.commandError(ctx, "simctl "+args[0], res, err)
	}
	return res.Stdout, nil
}

var _ core.GoldenEnsurer = (*Driver)(nil)

// EnsureGolden implements core.GoldenEnsurer: the engine asks for a golden
// it refused earlier, now that the gate would admit it. Nothing is built
// when a fresh golden exists or a build is in flight; otherwise the gate
// is asked again (the engine's view may have moved since it decided) and
// an admitted build runs in the background, as a provision's rebuild
// does. It returns without waiting for the build.
func (d *Driver) EnsureGolden(ctx context.Context, spec core.Spec) error {
	if !d.cloneOn() {
		return nil
	}
	want, err := d.fingerprint(ctx, spec)
	if err != nil {
		return err
	}
	key, f, building, err := d.goldenState(spec)
	if err != nil {
		return err
	}
	if building {
		return nil
	}
	if g, ok := f.Goldens[key]; ok && g.fresh(want) {
		d.setCloneReady(key, true)
		return nil
	}
	if v, _ := d.admitGolden(ctx, spec, want, false); v == core.GoldenRefused {
		return fmt.Errorf("ios: golden of %s on %s: %w", spec.ModelID, spec.RuntimeID, core.ErrGoldenRefused)
	}
	return nil
}

// goldenState reads spec's golden key, the golden record and whether a
// build of it is in flight, under one hold of the clone lock, so the two
// agree.
func (d *Driver) goldenState(spec core.Spec) (key string, f goldenFile, building bool, err error) {
	key = goldenKey(spec.ModelID, spec.RuntimeID)
	d.clone.mu.Lock()
	defer d.clone.mu.Unlock()
	f, err = d.readGoldens()
	return key, f, d.clone.building[key], err
}

// admitGolden asks the gate for spec's golden build and runs what it
// admits: in the background, or, with inlineOK (a provision asks, holding
// its own running reservation), inline, before it returns. It reports the
// verdict (refused too when a build of the spec is in flight already) and
// whether a fresh golden was made inline.
func (d *Driver) admitGolden(ctx context.Context, spec core.Spec, want golden, inlineOK bool) (core.GoldenAdmission, bool) {
	key := goldenKey(spec.ModelID, spec.RuntimeID)
	d.clone.mu.Lock()
	if d.clone.building[key] {
		d.clone.mu.Unlock()
		return core.GoldenRefused, false
	}
	// Claimed before asking, so a concurrent provision does not ask too.
	d.clone.building[key] = true
	gate := d.clone.gate
	d.clone.mu.Unlock()
	verdict := core.GoldenBackground
	start := func(v core.GoldenAdmission) { d.setBuilding(key, true, v == core.GoldenBackground) }
	if gate == nil {
		start(verdict)
	} else {
		verdict = gate.AdmitGoldenBuild(Platform, core.Golden{ModelID: spec.ModelID, RuntimeID: spec.RuntimeID}, inlineOK, start)
	}
	done := func() {
		d.clone.mu.Lock()
		delete(d.clone.building, key)
		d.clone.mu.Unlock()
		d.setBuilding(key, false, false)
	}
	switch verdict {
	case core.GoldenRefused:
		done()
		return verdict, false
	case core.GoldenInline:
		defer done()
		bctx, cancel := context.WithTimeout(ctx, d.timeouts.Boot+3*d.timeouts.Command)
		defer cancel()
		if err := d.buildGolden(bctx, key, want); err != nil {
			d.log.Warn("inline golden build failed; creating", "deviceType", spec.ModelID, "runtime", spec.RuntimeID, "err", err)
			return verdict, false
		}
		return verdict, true
	}
	d.clone.mu.Lock()
	defer d.clone.mu.Unlock()
	d.clone.wg.Go(func() {
		defer done()
		// Detached from the request: the golden serves later requests.
		ctx, cancel := context.WithTimeout(context.Background(), d.timeouts.Boot+3*d.timeouts.Command)
		defer cancel()
		if err := d.buildGolden(ctx, key, want); err != nil {
			d.log.Warn("golden build failed", "deviceType", spec.ModelID, "runtime", spec.RuntimeID, "err", err)
		}
	})
	return verdict, false
}

var _ core.GoldenGated = (*Driver)(nil)

// SetGoldenGate implements core.GoldenGated: from now on every golden
// build asks the engine first.
func (d *Driver) SetGoldenGate(g core.GoldenGate) {
	d.clone.mu.Lock()
	defer d.clone.mu.Unlock()
	d.clone.gate = g
}

var _ core.GoldenReclaimer = (*Driver)(nil)

// RemoveGolden implements core.GoldenReclaimer: the planner gives the
// golden's managed slot to a device a request needs. A golden being
// rebuilt, or not yet recorded, is refused with core.ErrGoldenBusy (the
// build would record it again); one already gone is not an error, its
// slot is free either way.
func (d *Driver) RemoveGolden(ctx context.Context, handle string) error {
	if strings.HasPrefix(handle, "building:") {
		return fmt.Errorf("ios: golden %s: %w", handle, core.ErrGoldenBusy)
	}
	d.clone.mu.Lock()
	defer d.clone.mu.Unlock()
	f, err := d.readGoldens()
	if err != nil {
		return err
	}
	key := ""
	for k, g := range f.Goldens {
		if g.UDID == handle {
			key = k
		}
	}
	if key == "" {
		return nil
	}
	if d.clone.building[key] {
		return fmt.Errorf("ios: golden %s: %w", handle, core.ErrGoldenBusy)
	}
	cctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl delete "+handle)
	defer cancel()
	if _, err := d.goldenSimctl(cctx, "delete", handle); err != nil && !errors.Is(err, core.ErrDeviceNotFound) {
		return err
	}
	delete(d.clone.ready, key)
	if err := d.updateGoldens(func(f *goldenFile) { delete(f.Goldens, key) }); err != nil {
		return err
	}
	d.log.Info("golden reclaimed", "udid", handle, "key", key)
	return nil
}

// WaitGoldens waits for the golden rebuilds in flight (tests, shutdown).
func (d *Driver) WaitGoldens() { d.clone.wg.Wait() }

// buildGolden replaces key's golden: the old one is deleted, a new one is
// created (and recorded at once, unfinished, so a crash leaves nothing
// unaccounted), booted to completion and shut down, then marked ready.
func (d *Driver) buildGolden(ctx context.Context, key string, want golden) error {
	d.clone.mu.Lock()
	f, err := d.readGoldens()
	d.clone.mu.Unlock()
	if err != nil {
		return err
	}
	if old, ok := f.Goldens[key]; ok && old.UDID != "" {
		if _, err := d.goldenSimctl(ctx, "delete", old.UDID); err != nil && !errors.Is(err, core.ErrDeviceNotFound) {
			d.log.Debug("old golden not deleted", "udid", old.UDID, "err", err)
		}
	}
	suffix, err := deviceName()
	if err != nil {
		return err
	}
	out, err := d.goldenSimctl(ctx, "create", strings.Replace(suffix, "simlock-", "simlock-golden-", 1), want.ModelID, want.RuntimeID)
	if err != nil {
		return err
	}
	udid, err := ParseCreateOutput(string(out))
	if err != nil {
		return err
	}
	g := want
	g.UDID, g.Ready, g.MadeAt = udid, false, d.clock.Now().UTC()
	record := func(g golden) error {
		d.clone.mu.Lock()
		defer d.clone.mu.Unlock()
		return d.updateGoldens(func(f *goldenFile) { f.Goldens[key] = g })
	}
	if err := record(g); err != nil {
		return err
	}
	// Boot it once (bootstatus -b boots and waits in one process) so its
	// clones skip the first boot, then shut it down to be cloned.
	_, err = bootAndWait(ctx, d.goldenSimctl, udid)
	if err == nil {
		_, err = d.goldenSimctl(ctx, "shutdown", udid)
	}
	if err != nil {
		// It may be running (the boot can fail after it started, or the wait
		// time out), and once the build ends the engine no longer counts it
		// as running: shut it down, with a context of its own since ctx may
		// be what ended. An already shut-down device is no news.
		sctx, cancel := d.withTimeout(context.WithoutCancel(ctx), d.timeouts.Command, "simctl shutdown "+udid)
		if _, serr := d.goldenSimctl(sctx, "shutdown", udid); serr != nil {
			if st, ok := stateOf(serr); !ok || st != StateShutdown {
				d.log.Warn("a failed golden build left its simulator up", "udid", udid, "err", serr)
			}
		}
		cancel()
		return err
	}
	g.Ready = true
	if err := record(g); err != nil {
		return err
	}
	d.setCloneReady(key, true)
	d.log.Info("golden ready", "udid", udid, "deviceType", want.ModelID, "runtime", want.RuntimeID, "runtimeBuild", want.RuntimeBuild)
	return nil
}

func (d *Driver) setCloneReady(key string, ok bool) {
	d.clone.mu.Lock()
	defer d.clone.mu.Unlock()
	if ok {
		d.clone.ready[key] = true
	} else {
		delete(d.clone.ready, key)
	}
}

var _ core.Cloner = (*Driver)(nil)

// CloneReady implements core.Cloner from what this driver last learned:
// a golden it made, or cloned from, fresh, and that is not being rebuilt.
// It runs nothing; CloneDevice checks freshness again.
func (d *Driver) CloneReady(spec core.Spec) bool {
	if !d.cloneOn() {
		return false
	}
	key := goldenKey(spec.ModelID, spec.RuntimeID)
	d.clone.mu.Lock()
	defer d.clone.mu.Unlock()
	return d.clone.ready[key] && !d.clone.building[key]
}

// CloneDevice implements core.Cloner: a clone of spec's fresh golden, or
// an error (and a rebuild started where one is due) without one. It never
// creates.
func (d *Driver) CloneDevice(ctx context.Context, spec core.Spec) (core.Provisioned, error) {
	if !d.cloneOn() {
		return core.Provisioned{}, errors.New("ios: clone provisioning is off")
	}
	name, err := deviceName()
	if err != nil {
		return core.Provisioned{}, err
	}
	udid, ok := d.provisionByClone(ctx, spec, name, false)
	if !ok {
		return core.Provisioned{}, fmt.Errorf("ios: no fresh golden for %s on %s", spec.ModelID, spec.RuntimeID)
	}
	d.log.Info("device cloned", "udid", udid, "name", name, "deviceType", spec.ModelID, "runtime", spec.RuntimeID)
	return d.provisioned(ctx, spec, udid, name, d.root), nil
}
