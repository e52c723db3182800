package claims

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/hostreg"
)

// hostSub receives every claim on the host, classified, each time the
// registry's generation moves (and once at start). It runs on the watcher's
// goroutine and must not block for long.
type hostSub func(claims []hostreg.Status)

// OnHostChange subscribes to the host watcher; call it before StartLoops.
func (s *System) OnHostChange(f func(claims []hostreg.Status)) { s.hostSubs = append(s.hostSubs, f) }

// OnSlotChange subscribes f to the registry's slot counter: the watcher
// calls it (on its own goroutine) each time any daemon of the host
// committed a slot decision. Call it before StartLoops.
// f reports false when its read failed, so the watcher calls it again at
// the next tick rather than waiting for the next change.
func (s *System) OnSlotChange(f func(context.Context) bool) { s.slotSubs = append(s.slotSubs, f) }

// Kick makes the watcher read the registry now instead of at its next
// tick: after this daemon changed a claim, or when a subscriber wants a
// fresh view.
func (s *System) Kick() {
	select {
	case s.hostKick <- struct{}{}:
	default:
	}
}

// watchHost polls the host registry's generations, a single-row read,
// every capacity.host.pollIntervalMs, and reads every claim only when the
// claim generation moved, the slot tables only when the slot counter did.
// Other daemons' claims, releases and slot decisions reach this daemon
// only this way: the lease hot path never reads the registry.
func (s *System) watchHost(ctx context.Context) {
	every := time.Duration(s.hostCfg.PollIntervalMs) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	last := hostreg.Generations{Claims: -1, Slots: -1}
	for {
		s.followReplacedRegistry(ctx)
		gen, err := s.host.Generations(ctx)
		if err != nil {
			// A busy or unreadable registry changes nothing: the last view
			// stands until a read succeeds (never "free" by default).
			if ctx.Err() == nil {
				s.log.Warn("read the host registry's generation", "err", err)
			}
		}
		if err == nil && gen.Claims != last.Claims {
			if claims, err := s.host.Inspect(ctx); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("read the host registry's claims", "err", err)
				}
			} else {
				last.Claims = gen.Claims
				for _, f := range s.hostSubs {
					f(claims)
				}
			}
		}
		if err == nil && gen.Slots != last.Slots {
			// A subscriber that fails to read keeps its last good view and
			// is called again at the next tick.
			ok := true
			for _, f := range s.slotSubs {
				ok = f(ctx) && ok
			}
			if ok {
				last.Slots = gen.Slots
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.hostKick:
		case <-s.clock.After(every):
		}
	}
}

// DeviceKey is a device's canonical key in the host registry: an iOS
// simulator by its UDID, an Android emulator by its AVD name and the AVD
// root it lives in. A device without one cannot be claimed.
func (s *System) DeviceKey(platform, handle string, attrs map[string]string) (hostreg.Key, error) {
	return deviceKeyFor(s.roots, platform, handle, attrs)
}

// Roots are the platforms' absolute device roots.
func (s *System) Roots() map[string]string { return s.roots }

// deviceKeyFor is DeviceKey for a home whose device roots are roots; the
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

// DeviceRoots resolves each platform's absolute device root of home from
// its configuration, as the drivers do.
func DeviceRoots(cfg config.Config, home string) (map[string]string, error) {
	roots := map[string]string{}
	for _, p := range []string{"ios", "android"} {
		r, err := filepath.Abs(cfg.DriverRoot(home, p))
		if err != nil {
			return nil, err
		}
		roots[p] = filepath.Clean(r)
	}
	return roots, nil
}
