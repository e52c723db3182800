package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Reset kinds: the two ways a release's purge can return a device to a
// clean, booted state (ADR 0041).
const (
	// ResetErase purges the device itself: shut down, erase, boot. The boot
	// after an erase is a first boot, the slow kind.
	ResetErase = "erase"
	// ResetClone replaces the device by a fresh clone of its spec's golden
	// and deletes the old one; the clone boots like a device that has
	// booted before.
	ResetClone = "clone"
)

// Cloner is the optional driver ability to provision by cloning a golden
// device. The core uses it for resets; the driver already uses it for its
// own provisions.
type Cloner interface {
	// CloneReady reports, without running anything, whether a fresh golden
	// for spec exists now, so that CloneDevice would clone.
	CloneReady(spec Spec) bool
	// CloneDevice makes a new, shut-down device of spec by cloning its
	// golden. Unlike Provision it never falls back to create: without a
	// fresh golden it fails.
	CloneDevice(ctx context.Context, spec Spec) (Provisioned, error)
}

// resetProbeEvery is how many resets of a spec may go to the faster kind
// before the slower one is tried once, so that a figure measured under
// other conditions (a loaded machine, a cold disk cache) cannot keep a
// kind out of use for ever.
const resetProbeEvery = 8

// resetProbeIdle is how long a spec must have had no grant before a probe
// may run on the only device that could serve its next request (ADR 0093):
// executions that follow one another leave nobody queued at the release,
// yet the next one comes right after, and a probe then makes it wait for
// the slower reset.
const resetProbeIdle = 5 * time.Minute

// resetFigures is the per-spec moving figure of each reset kind's
// duration on this machine, from the purges the engine ran: the choice
// between the kinds follows what this machine measured, not a constant.
// It is kept in memory: after a restart each kind is measured again within
// a few resets.
type resetFigures struct {
	mu sync.Mutex
	by map[string]*resetFigure // spec key ->
}

type resetFigure struct {
	avg   map[string]time.Duration
	since int // resets since the slower kind last ran
}

// choose picks the reset kind for a device of spec key. cloneOK says a
// clone reset is possible now (a fresh golden exists). The clone is tried
// first, and the other kind, unmeasured, at the first reset probeOK allows; then the faster one, except that every resetProbeEvery
// resets the slower one runs once. probeOK says no execution would wait
// for the probe (resetBook.probeFreeLocked): a probe is a reset known to
// be slower, so it waits until no request would wait for it (a release
// must not make the next execution wait longer than it has to), and runs
// at the first reset after that.
func (f *resetFigures) choose(key string, cloneOK, probeOK bool) string {
	if !cloneOK {
		return ResetErase
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.figureLocked(key)
	ce, okE := r.avg[ResetErase]
	cc, okC := r.avg[ResetClone]
	switch {
	case !okC && !okE:
		return ResetClone
	case !okC || !okE:
		// The first measurement of the other kind is a probe too: it may
		// be the slow one (an erase's first boot), so it waits for probeOK
		// like every probe (ADR 0093).
		if !probeOK {
			if okC {
				return ResetClone
			}
			return ResetErase
		}
		if okC {
			return ResetErase
		}
		return ResetClone
	}
	fast, slow := ResetClone, ResetErase
	if ce < cc {
		fast, slow = slow, fast
	}
	r.since++
	if r.since >= resetProbeEvery && probeOK {
		r.since = 0
		return slow
	}
	return fast
}

// probeFreeLocked reports whether a probe of the slower reset kind on
// device id, of spec key, would make no execution wait (ADR 0093): nobody
// is queued for the spec, and either another device of the spec is ready
// and free to serve the next request, or the spec has had no grant for
// resetProbeIdle, so its next request is not expected within the probe.
func (b *resetBook) probeFreeLocked(key, id string, now time.Time) bool {
	if b.specWaitedForLocked(key) {
		return false
	}
	var last time.Time
	for _, d := range b.reg.devices {
		if d.Spec.Key() != key {
			continue
		}
		if d.ID != id && d.State == StateReady && b.reg.opLock(d.ID) == "" && !b.reg.leased(d.ID) {
			return true
		}
		if d.LastLeasedAt.After(last) {
			last = d.LastLeasedAt
		}
	}
	return now.Sub(last) >= resetProbeIdle
}

// specWaitedForLocked reports whether a queued request waits for a device
// of spec key.
func (b *resetBook) specWaitedForLocked(key string) bool {
	for _, w := range b.queue.Entries() {
		if w.key == key {
			return true
		}
	}
	return false
}

// observe folds one measured reset of kind into the figure: a quarter
// weight to the newest, so one slow reset moves the figure without
// owning it.
func (f *resetFigures) observe(key, kind string, d time.Duration) {
	if d <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.figureLocked(key)
	if old, ok := r.avg[kind]; ok {
		d = old + (d-old)/4
	}
	r.avg[kind] = d
}

// figure returns the moving figure of kind for key.
func (f *resetFigures) figure(key, kind string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.figureLocked(key).avg[kind]
	return d, ok
}

func (f *resetFigures) figureLocked(key string) *resetFigure {
	if f.by == nil {
		f.by = map[string]*resetFigure{}
	}
	r, ok := f.by[key]
	if !ok {
		r = &resetFigure{avg: map[string]time.Duration{}}
		f.by[key] = r
	}
	return r
}

// purgeByClone is the clone reset: a fresh clone of the golden is made
// first and recorded in the device's place (so a crash between the steps
// leaves the registry naming a device that exists), the old device is
// deleted as a teardown of its own (its host claim goes with it), and the
// clone is claimed and booted. A clone that cannot be made leaves the old
// device untouched, and the purge falls back to an erase.
func (b *resetBook) purgeByClone(ctx context.Context, o *deviceOp, c Cloner) (stopped bool, kind string, err error) {
	old := o.rec
	prov, err := c.CloneDevice(ctx, old.Spec)
	if err != nil {
		b.log.Info("clone reset not possible; erasing instead", "device", o.id, "err", err)
		stopped, err = b.eng.purgeByErase(ctx, o.drv, o.rec)
		return stopped, ResetErase, err
	}
	var ref DeviceRef
	var cerr error
	b.eng.section(func() {
		var d DeviceRecord
		d, cerr = b.reg.update(o.id, func(d *DeviceRecord) {
			d.Handle, d.Name, d.Attrs, d.Simulated, d.Data = prov.Handle, prov.Name, prov.Attrs, prov.Simulated, prov.Data
		})
		if cerr == nil {
			o.rec, ref = d, d.Ref()
		}
	})
	if cerr != nil {
		if derr := o.drv.Destroy(ctx, DeviceRef{ID: o.id, Handle: prov.Handle, Name: prov.Name, Spec: old.Spec, Attrs: prov.Attrs, Data: prov.Data}); derr != nil {
			b.log.Error("destroying an unrecorded clone failed; doctor --purge-orphans finds it", "handle", prov.Handle, "err", derr)
		}
		return false, ResetClone, fmt.Errorf("record the clone: %w", cerr)
	}
	gone := OpInfo{Kind: OpKindDestroy, Lock: o.lock, DeviceID: o.id, Platform: old.Platform, Handle: old.Handle, Attrs: old.Attrs}
	if derr := b.eng.runUnrecorded(ctx, gone, func(ctx context.Context) error { return o.drv.Destroy(ctx, old.Ref()) }); derr != nil {
		// The record names the clone now; the old device is an orphan
		// for doctor --purge-orphans, and the reset goes on.
		b.log.Warn("clone reset: deleting the replaced device failed", "device", o.id, "handle", old.Handle, "err", derr)
	}
	info := o.info()
	if herr := b.hooks.Created(ctx, info); herr != nil {
		return false, ResetClone, fmt.Errorf("claim the clone: %w", herr)
	}
	keep := true
	b.eng.section(func() { keep = b.eng.keepRunningAfterPurgeLocked(o.id) })
	if !keep {
		return true, ResetClone, nil
	}
	return false, ResetClone, o.drv.MakeReady(ctx, ref)
}

// purge returns a released device to a clean state by the reset kind the
// recorded figures favour (resetFigures.choose), and folds the duration
// of a reset that ended booted into the figure of its kind. A reset that
// skipped the boot is not comparable, so it is not counted. With a driver
// that cannot clone there is one kind, reported as "".
func (b *resetBook) purge(ctx context.Context, o *deviceOp) (stopped bool, kind string, err error) {
	start := b.eng.now()
	key := o.rec.Spec.Key()
	c, ok := o.drv.(Cloner)
	if !ok {
		// One way to reset (Android's snapshot restore): nothing to choose.
		stopped, err = b.eng.purgeByErase(ctx, o.drv, o.rec)
		return stopped, "", err
	}
	probeOK := false
	b.eng.section(func() { probeOK = b.probeFreeLocked(key, o.id, b.eng.now()) })
	if b.figures.choose(key, c.CloneReady(o.rec.Spec), probeOK) == ResetClone {
		stopped, kind, err = b.purgeByClone(ctx, o, c)
	} else {
		kind = ResetErase
		stopped, err = b.eng.purgeByErase(ctx, o.drv, o.rec)
	}
	if err == nil && !stopped {
		b.figures.observe(key, kind, b.eng.now().Sub(start))
	}
	return stopped, kind, err
}

// resetData adds the reset kind to a device.reclaimed fact's data, when
// the driver has a choice of kinds.
func resetData(data map[string]any, kind string) map[string]any {
	if kind != "" {
		data["reset"] = kind
	}
	return data
}
