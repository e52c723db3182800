package resources

import (
	"testing"

	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/test/harness"
)

// Inventory reads answer within budgets of their own: the device list in
// 2 s, the booted view in 8 s and the catalog in 9 s by default, with the
// shared background read capped at 30 s.
func TestConfResInventoryBudgetDefaults(t *testing.T) {
	harness.Proves(t, "resources/1.11")
	t.Parallel()
	inv := config.Default().Inventory
	if inv.ListBudgetMs != 2_000 || inv.BootedBudgetMs != 8_000 || inv.CatalogBudgetMs != 9_000 || inv.BackgroundCapMs != 30_000 {
		t.Fatalf("inventory defaults %+v", inv)
	}
}

// A lease-time resource step, like a resource call, is bounded by five
// minutes unless the request says otherwise.
func TestConfResResourceStepDeadlineDefault(t *testing.T) {
	harness.Proves(t, "resources/5.6")
	t.Parallel()
	if core.TuneTimeout != 5*time.Minute {
		t.Fatalf("the resource step's bound is %s, want 5m", core.TuneTimeout)
	}
}
