package sessions

import (
	"testing"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/drivers/ios"
)

// The operator's reset choices map onto core release policies the core
// accepts for the platform; anything unset is zero pooling.
func TestReleasePolicyForMapsTheOperatorsChoice(t *testing.T) {
	keep := &config.Sessions{Reset: config.SessionReset{IOS: "erase", Android: "keep-booted",
		AndroidKeepBootedMaxUses: 5, AndroidKeepBootedFallback: "snapshot", AndroidResetTimeoutMs: 90000}}
	snap := &config.Sessions{Reset: config.SessionReset{Android: "snapshot", AndroidResetTimeoutMs: 1000}}
	for _, c := range []struct {
		platform string
		s        *config.Sessions
		want     core.ReleasePolicy
	}{
		{"ios", nil, core.ReleasePolicy{Mode: "destroy"}},
		{"android", &config.Sessions{}, core.ReleasePolicy{Mode: "destroy"}},
		{"ios", keep, core.ReleasePolicy{Mode: "erase"}},
		{"android", keep, core.ReleasePolicy{Mode: "keep-booted", Fallback: "snapshot", MaxUses: 5, Timeout: 90 * time.Second}},
		{"android", snap, core.ReleasePolicy{Mode: "snapshot", Timeout: time.Second}},
		{"ios", snap, core.ReleasePolicy{Mode: "destroy"}},
	} {
		got := releasePolicyFor(c.platform, c.s)
		if got != c.want {
			t.Errorf("%s %+v: %+v, want %+v", c.platform, c.s, got, c.want)
		}
		if err := got.Validate(c.platform, map[string]core.Capabilities{ios.Platform: ios.Capabilities(), android.Platform: android.Capabilities()}); err != nil {
			t.Errorf("%s: the core refuses %+v: %v", c.platform, got, err)
		}
	}
}
