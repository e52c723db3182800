package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// openHost opens the host registry and names this daemon as a claim owner:
// its home, its pid and its process start identity.
func (d *Daemon) openHost(ctx context.Context, o Options) error {
	dir := o.HostDir
	if dir == "" {
		dir = config.HostDir(o.Getenv)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	prober := o.Prober
	if prober == nil {
		prober = hostreg.SystemProber{}
	}
	if d.host, err = hostreg.OpenWithProber(ctx, dir, prober); err != nil {
		var dmg *hostreg.DamagedError
		if errors.As(err, &dmg) {
			return toContractError(err) // HOST_REGISTRY_DAMAGED: no restart can succeed
		}
		return fmt.Errorf("open the host registry in %s (SIMLOCK_HOST_DIR): %w", dir, err)
	}
	home, err := filepath.Abs(o.Home)
	if err != nil {
		return err
	}
	if d.self, err = hostreg.Self(home); err != nil {
		return fmt.Errorf("host registry: %w", err)
	}
	if d.roots, err = deviceRoots(o); err != nil {
		return err
	}
	d.hostKick = make(chan struct{}, 1)
	d.recordHome(dir)
	return nil
}

// hostSub receives every claim on the host, classified, each time the
// registry's generation moves (and once at start). It runs on the watcher's
// goroutine and must not block for long.
type hostSub func(claims []hostreg.Status)

// onHostChange subscribes to the host watcher; call it before watchHost.
func (d *Daemon) onHostChange(f hostSub) { d.hostSubs = append(d.hostSubs, f) }

// onSlotChange subscribes f to the registry's slot counter: the watcher
// calls it (on its own goroutine) each time any daemon of the host
// committed a slot decision. Call it before watchHost.
// f reports false when its read failed, so the watcher calls it again at
// the next tick rather than waiting for the next change.
func (d *Daemon) onSlotChange(f func(context.Context) bool) { d.slotSubs = append(d.slotSubs, f) }

// kickHost makes the watcher read the registry now instead of at its next
// tick: after this daemon changed a claim, or when a subscriber wants a
// fresh view.
func (d *Daemon) kickHost() {
	select {
	case d.hostKick <- struct{}{}:
	default:
	}
}

// watchHost polls the host registry's generations, a single-row read,
// every capacity.host.pollIntervalMs, and reads every claim only when the
// claim generation moved, the slot tables only when the slot counter did.
// Other daemons' claims, releases and slot decisions reach this daemon
// only this way: the lease hot path never reads the registry.
func (d *Daemon) watchHost(ctx context.Context) {
	every := time.Duration(d.cfg.Capacity.Host.PollIntervalMs) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	last := hostreg.Generations{Claims: -1, Slots: -1}
	for {
		d.followReplacedRegistry(ctx)
		gen, err := d.host.Generations(ctx)
		if err != nil {
			// A busy or unreadable registry changes nothing: the last view
			// stands until a read succeeds (never "free" by default).
			if ctx.Err() == nil {
				d.log.Warn("read the host registry's generation", "err", err)
			}
		}
		if err == nil && gen.Claims != last.Claims {
			if claims, err := d.host.Inspect(ctx); err != nil {
				if ctx.Err() == nil {
					d.log.Warn("read the host registry's claims", "err", err)
				}
			} else {
				last.Claims = gen.Claims
				for _, f := range d.hostSubs {
					f(claims)
				}
			}
		}
		if err == nil && gen.Slots != last.Slots {
			// A subscriber that fails to read keeps its last good view and
			// is called again at the next tick.
			ok := true
			for _, f := range d.slotSubs {
				ok = f(ctx) && ok
			}
			if ok {
				last.Slots = gen.Slots
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.hostKick:
		case <-d.clock.After(every):
		}
	}
}

// deviceKey is a device's canonical key in the host registry: an iOS
// simulator by its UDID, an Android emulator by its AVD name and the AVD
// root it lives in. A device without one cannot be claimed.
func (d *Daemon) deviceKey(platform, handle string, attrs map[string]string) (hostreg.Key, error) {
	return deviceKeyFor(d.roots, platform, handle, attrs)
}

// deviceKeyFor is deviceKey for a home whose device roots are roots; the
// host repair derives a stopped home's keys with it.
func deviceKeyFor(roots map[string]string, platform, handle string, attrs map[string]string) (hostreg.Key, error) {
	switch platform {
	case "ios":
		udid := attrs[core.AttrUDID]
		if udid == "" {
			udid = handle
		}
		return hostreg.IOSSimulatorKey(udid)
	case "android":
		root, ok := roots[platform]
		if !ok {
			return "", fmt.Errorf("no android device root is configured")
		}
		return hostreg.AndroidAVDKey(root, handle)
	default:
		return "", fmt.Errorf("platform %q has no host-registry key", platform)
	}
}

// deviceRoots resolves each platform's absolute device root from the
// configuration, as the drivers do.
func deviceRoots(o Options) (map[string]string, error) {
	roots := map[string]string{}
	for _, p := range []string{"ios", "android"} {
		r, err := filepath.Abs(o.Config.DriverRoot(o.Home, p))
		if err != nil {
			return nil, err
		}
		roots[p] = filepath.Clean(r)
	}
	return roots, nil
}
