package ios

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Slim is the density mode (drivers.ios.slim): every booted simulator gets
// the slim profile, the listed groups disabled, and is not ready until the
// profile is proven. An empty Groups means SlimGroups().
type Slim struct {
	Enabled bool
	Groups  []string
}

// resolve checks the groups and fills the default set.
func (s Slim) resolve() (Slim, error) {
	if !s.Enabled {
		return Slim{}, nil
	}
	if len(s.Groups) == 0 {
		s.Groups = SlimGroups()
		return s, nil
	}
	var bad []string
	for _, g := range s.Groups {
		if _, ok := resourceCatalog[g]; !ok {
			bad = append(bad, g)
		}
	}
	if len(bad) > 0 {
		return Slim{}, fmt.Errorf("ios: drivers.ios.slim.groups: %s not controllable on iOS (known: %s)",
			strings.Join(bad, ", "), strings.Join(ControlledGroups(), ", "))
	}
	s.Groups = slices.Clone(s.Groups)
	slices.Sort(s.Groups)
	s.Groups = slices.Compact(s.Groups)
	return s, nil
}

// slimFootprint is RAMPerDevice's stock figure scaled by what the slim
// groups' jobs cost on a stock runtime.
func (s Slim) footprint(stock uint64) uint64 {
	if !s.Enabled {
		return stock
	}
	saved := 0
	for _, g := range s.Groups {
		for _, l := range resourceCatalog[g] {
			saved += l.SaveMB
		}
	}
	left := max(stockFootprintMB-saved, stockFootprintMB/10)
	return stock * uint64(left) / stockFootprintMB
}

// cpuFootprint is CPUMilliPerDevice's stock figure for a slim device. Half
// of a stock simulator's CPU share is declared foreground work slim mode
// does not touch (the app under test, SpringBoard, the render server); the
// other half is its background jobs, scaled by the share of their idle
// memory the slim groups leave running, the same measure footprint uses.
// With every group off: 2 CPUs become about 1.2, so an 8-core machine runs
// 6 slim simulators where it runs 4 stock ones.
func (s Slim) cpuFootprint(stock uint64) uint64 {
	if !s.Enabled {
		return stock
	}
	fixed := stock / 2
	return fixed + s.footprint(stock-fixed)
}

// applySlim applies and verifies the slim profile on a booted device. A
// group the runtime cannot provide is skipped (there is nothing to run);
// any other group not proven disabled fails readiness, so a device that
// would cost more than it was admitted for never reaches the pool.
func (d *Driver) applySlim(ctx context.Context, dev core.DeviceRef) error {
	sl := d.res.slim
	if !sl.Enabled {
		return nil
	}
	req := map[string]contract.ResourceState{}
	for _, g := range sl.Groups {
		req[g] = contract.ResourceDisabled
	}
	s, err := d.resourceSession(ctx, dev)
	if err != nil {
		return fmt.Errorf("ios: slim: %w", err)
	}
	r, err := s.apply(ctx, dev, req)
	if err != nil {
		return fmt.Errorf("ios: slim %s: %w", s.inc.UDID, err)
	}
	var unproven, skipped []string
	for _, g := range sl.Groups {
		switch r.Resources[g].State {
		case contract.ResourceDisabled:
		case contract.ResourceUnsupported:
			skipped = append(skipped, g)
		default:
			unproven = append(unproven, fmt.Sprintf("%s (%s: %s)", g, r.Resources[g].State, r.Resources[g].Reason))
		}
	}
	if len(unproven) > 0 {
		return fmt.Errorf("ios: slim %s: profile not proven: %s", s.inc.UDID, strings.Join(unproven, "; "))
	}
	d.log.Info("slim profile applied", "udid", s.inc.UDID, "changed", r.Changed, "unsupportedOnRuntime", skipped)
	return nil
}
