package mcp

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports/fake"
)

// reportingSlots reports the scope admitted, then fails as scripted.
type reportingSlots struct {
	fakeSlots
	key  string
	fail func(ctx context.Context) error
}

func (r *reportingSlots) AcquireReporting(ctx context.Context, _ contract.SlotAcquireIn, resolved func(string)) (contract.ManagedSlotsResult, error) {
	if r.key != "" {
		resolved(r.key)
	}
	return contract.ManagedSlotsResult{}, r.fail(ctx)
}

// Reference, "Results and failure": scopeKey is null only "if it failed
// before the scope resolved". A failure the proxy decides itself (its
// deadline, a lost connection) after the daemon reported the scope
// admitted names the key; one before any report leaves it null.
func TestConfSlotFailureAfterTheScopeResolvedNamesItsKey(t *testing.T) {
	cfg, err := contract.ParseSlotLaunchConfig([]byte(testSlotConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.PreparationTimeoutMs = 50
	key := contract.ScopeKey("host-1", "runner-A", "boot-1")
	lost := contract.Errorf(contract.CodeConnectionLost, "the daemon went away")
	for _, c := range []struct {
		name, key string
		fail      func(ctx context.Context) error
		code      contract.Code
	}{
		{"deadline after admission", key, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, contract.CodePreparationTimeout},
		{"connection lost after admission", key, func(context.Context) error { return lost }, contract.CodeConnectionLost},
		{"connection lost before admission", "", func(context.Context) error { return lost }, contract.CodeConnectionLost},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := &reportingSlots{key: c.key, fail: c.fail}
			x := newSlotExec(SlotOptions{Config: cfg}, be, fake.NewClock(time.Now()), slog.New(slog.DiscardHandler))
			x.acquire(context.Background(), nil)
			res := x.snapshot()
			if res.Outcome != contract.SlotOutcomeFailed || res.Failure == nil || res.Failure.Code != c.code {
				t.Fatalf("result %+v", res)
			}
			switch {
			case c.key == "" && res.Scope.ScopeKey != nil:
				t.Fatalf("a failure before the scope resolved has scopeKey %s", *res.Scope.ScopeKey)
			case c.key != "" && (res.Scope.ScopeKey == nil || *res.Scope.ScopeKey != c.key):
				t.Fatalf("scopeKey %v, want %s", res.Scope.ScopeKey, c.key)
			}
		})
	}
}
