package sessions

import (
	"context"
	"sort"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// The broker's devices (ADR 0063): every session's lease request carries
// the owner-system mark System, so each device made for a session is the
// broker's from its first record to its destruction. The core keeps it out
// of the general pool; the broker counts it against totalDeviceCap in
// every state, and destroys an idle one before a create when the cap is
// full.

// System is the owner-system mark of session devices, shown as
// ownerSystem in status, list and the metrics.
const System = "session"

// evictWait bounds how long admission waits for an idle session device's
// destruction to be confirmed before answering EVICTION_PENDING.
const evictWait = 2 * time.Minute

// IsSessionDevice reports whether d is one of the broker's devices.
func IsSessionDevice(d core.DeviceRecord) bool { return d.OwnerSystem == System }

// idleSessionDevice reports whether d is a session device no session
// holds and no operation touches: admission may destroy it.
func idleSessionDevice(d core.DeviceRecord, leased map[string]bool) bool {
	return IsSessionDevice(d) && !leased[d.ID] && d.Intent == (core.DeviceIntent{}) &&
		(d.State == core.StateReady || d.State == core.StateShutdown)
}

// fits reports whether an idle session device serves profile as it is.
func fits(d core.DeviceRecord, p contract.SessionProfile) bool {
	return d.Platform == p.Platform && d.Spec.Model == p.Model && d.Spec.OSVersion == p.OSVersion
}

// usage counts, for admission, the broker's sessions and its devices in
// the registry, and picks the idle device admission would destroy (the
// least recently used one that does not fit the profile, else the least
// recently used one). It reads the engine before taking b.mu: the engine
// calls back into the broker (progress) outside its own lock only, but the
// broker never holds b.mu across an engine call.
func (b *Broker) usage(p contract.SessionProfile) (Usage, string) {
	leased := map[string]bool{}
	for _, l := range b.engine.Leases() {
		for _, id := range l.DeviceIDs() {
			leased[id] = true
		}
	}
	var u Usage
	present := map[string]bool{}
	var idle []core.DeviceRecord
	for _, d := range b.engine.Devices() {
		if !IsSessionDevice(d) {
			continue
		}
		u.Devices++
		present[d.ID] = true
		if idleSessionDevice(d, leased) {
			u.Idle++
			idle = append(idle, d)
			if fits(d, p) {
				u.Fitting++
			}
		}
	}
	b.mu.Lock()
	for _, s := range b.live {
		switch {
		case s.cleanup:
			u.CleanupPending++
		default:
			u.Live++
			if s.deviceID == "" || !present[s.deviceID] {
				u.Preparing++
			}
		}
	}
	b.mu.Unlock()
	sort.SliceStable(idle, func(i, j int) bool {
		fi, fj := fits(idle[i], p), fits(idle[j], p)
		if fi != fj {
			return !fi
		}
		return lastTouched(idle[i]).Before(lastTouched(idle[j]))
	})
	victim := ""
	if len(idle) > 0 {
		victim = idle[0].ID
	}
	return u, victim
}

func lastTouched(d core.DeviceRecord) time.Time {
	if d.LastReleasedAt.After(d.StateSince) {
		return d.LastReleasedAt
	}
	return d.StateSince
}

// admit is the admission decision under admitMu: the caps as Decide
// reads them, with every idle session device the cap needs destroyed
// first, its destruction confirmed by the registry. It reports whether it
// evicted, for the receipt's admission.
func (b *Broker) admit(ctx context.Context, p contract.SessionProfile) (Refusal, bool) {
	limits := Limits{SessionCap: b.cfg.Limits.SessionCap, TotalDeviceCap: b.cfg.Limits.TotalDeviceCap}
	evicted := false
	for range 8 {
		u, victim := b.usage(p)
		r := Decide(limits, u)
		if r != EvictIdle {
			return r, evicted
		}
		gone := b.deviceGone(victim)
		if err := b.retirer.RetireIdle(victim, System); err != nil {
			b.log.Info("evicting an idle session device", "device", victim, "err", err)
			return EvictionPending, evicted
		}
		b.log.Info("totalDeviceCap full; destroying an idle session device before a create", "device", victim)
		select {
		case <-gone:
			evicted = true
		case <-b.clock.After(evictWait):
			return EvictionPending, evicted
		case <-ctx.Done():
			return EvictionPending, evicted
		}
	}
	return EvictionPending, evicted
}

// deviceGone closes once device id is no longer in the registry: its
// destruction is confirmed (the core drops the record only then). It
// follows the bus, so a fake clock needs no ticks.
func (b *Broker) deviceGone(id string) <-chan struct{} {
	out := make(chan struct{})
	evs, unsub := b.bus.Subscribe(64)
	go func() {
		defer unsub()
		for {
			if _, ok := b.engine.Device(id); !ok || id == "" {
				close(out)
				return
			}
			select {
			case <-evs:
			case <-b.ctx.Done():
				return // never closed: a stop confirms nothing
			}
		}
	}()
	return out
}

// preparing records the device a preparation works on (provisioning,
// booting, granted), so an abandoned or interrupted preparation knows
// which device to see destroyed, and admission counts it once.
func (b *Broker) preparing(sid string, p core.Progress) {
	if p.DeviceID == "" || (p.Phase != "provisioning" && p.Phase != "booting" && p.Phase != "granted") {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.live[sid]; ok && !s.cleanup {
		s.deviceID = p.DeviceID
	}
}

// leftBehind is the device an ended preparation leaves to be torn down:
// a session device it was preparing that no lease ever held. The core
// destroys such a device (ADR 0063); until the registry confirms it, the
// receipt says cleanupPending and the device counts against the cap.
func (b *Broker) leftBehind(sid string) (core.DeviceRecord, bool) {
	b.mu.Lock()
	id := ""
	if s, ok := b.live[sid]; ok {
		id = s.deviceID
	}
	b.mu.Unlock()
	if id == "" {
		return core.DeviceRecord{}, false
	}
	d, ok := b.engine.Device(id)
	if !ok || !IsSessionDevice(d) || !d.LastLeasedAt.IsZero() {
		return core.DeviceRecord{}, false
	}
	return d, true
}
