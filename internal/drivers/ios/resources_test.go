package ios

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports/fake"
)

func TestParsePrintDisabled(t *testing.T) {
	out := "disabled services = {\n\t\"com.apple.chronod\" => disabled\n\t\"com.apple.searchd\" => enabled\n\t\"com.apple.old\" => true\n}\nlogin item associations = {\n}\n"
	ov, err := ParsePrintDisabled([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(ov) != 3 || !ov["com.apple.chronod"] || ov["com.apple.searchd"] || !ov["com.apple.old"] {
		t.Fatalf("%v", ov)
	}
	if ov, err := ParsePrintDisabled([]byte("disabled services = {\n}\n")); err != nil || len(ov) != 0 {
		t.Fatalf("empty block: %v %v", ov, err)
	}
	for _, bad := range []string{"", "disabled services = {\n\t\"x\" => maybe\n}\n", "disabled services = {\n\t\"x\" => disabled\n", "disabled services = {\n\tx => disabled\n}\n"} {
		if _, err := ParsePrintDisabled([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// Idempotent reads are retried at most twice, after 100 ms and then
// 400 ms more.
func TestRetryReadRetriesTwiceWithBackoff(t *testing.T) {
	h := newHarness(t)
	start := h.clock.Now()
	var at []time.Duration
	err := h.drive(50*time.Millisecond, 1, func() error {
		return h.d.retryRead(context.Background(), func(context.Context) error {
			at = append(at, h.clock.Now().Sub(start))
			return errors.New("read failed")
		})
	})
	if err == nil || len(at) != 3 || at[0] != 0 || at[1] != 100*time.Millisecond || at[2] != 500*time.Millisecond {
		t.Fatalf("err %v, reads at %v", err, at)
	}
	calls := 0
	if err := h.d.retryRead(context.Background(), func(context.Context) error { calls++; return nil }); err != nil || calls != 1 {
		t.Fatalf("a good read: %v after %d calls", err, calls)
	}
	// No retry the request's deadline cannot wait for.
	ctx := deadlineCtx{context.Background(), h.clock.Now().Add(50 * time.Millisecond)}
	calls = 0
	if err := h.d.retryRead(ctx, func(context.Context) error { calls++; return errors.New("no") }); err == nil || calls != 1 {
		t.Fatalf("with 50 ms left: %v after %d calls", err, calls)
	}
}

// deadlineCtx has a deadline on the driver's (fake) clock but is never
// done, so only the deadline check can stop a retry.
type deadlineCtx struct {
	context.Context
	dl time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.dl, true }

// A failed write is not retried: it is reported as unknown evidence and
// the call fails; the verification re-read still runs.
func TestResourceWriteIsNeverRetried(t *testing.T) {
	h := newHarness(t)
	lc := h.sim("spawn " + bootedUDID + " launchctl ")
	h.runner.Always(fake.Step{Match: h.sim("list -j"), Stdout: string(readFixture(t, xcode16JSON))})
	h.runner.Always(fake.Step{Match: lc + "print-disabled system", Stdout: "disabled services = {\n}\n"})
	for _, l := range ResourceLabels("widgets") {
		h.runner.Always(fake.Step{Match: lc + "print system/" + l, Stdout: "system/" + l + " = {\n\tstate = running\n}\n"})
	}
	h.runner.Always(fake.Step{Match: lc + "print system/*", ExitCode: 113, Stderr: "Could not find service\n"})
	h.expect(fake.Step{Match: lc + "disable system/com.apple.chronod", ExitCode: 1, Stderr: "Operation not permitted\n", Err: nil})
	res, err := h.d.ApplyResources(context.Background(), core.DeviceRef{ID: "dev-1", Handle: bootedUDID},
		core.ResourceChange{Resources: map[string]contract.ResourceState{"widgets": contract.ResourceDisabled}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.Resources["widgets"].State != contract.ResourceUnknown {
		t.Fatalf("success %v resources %+v", res.Success, res.Resources)
	}
	n := 0
	for _, c := range h.runner.Calls {
		if strings.Contains(c, " disable ") || strings.Contains(c, " bootout ") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d write commands, want the one failed disable: %q", n, h.runner.Calls)
	}
	h.assertDone()
}

// The driver's evidence rules, label by label.
func TestLabelStateEvidence(t *testing.T) {
	for _, c := range []struct {
		st   labelState
		want contract.ResourceState
	}{
		{labelState{Installed: true, Loaded: true}, contract.ResourceEnabled},
		{labelState{Installed: true, Disabled: true}, contract.ResourceDisabled},
		{labelState{Installed: true, Disabled: true, Loaded: true}, contract.ResourceUnknown}, // override not applied to the job
		{labelState{Installed: true}, contract.ResourceUnknown},                               // enabled override, job not loaded
		{labelState{}, contract.ResourceUnsupported},
		{labelState{Err: errors.New("x"), Installed: true, Loaded: true}, contract.ResourceUnknown},
	} {
		if got := c.st.observed(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.st, got, c.want)
		}
	}
}

// Groups never share a label, so enabling one cannot restore another; a
// group iOS cannot control has no labels at all.
func TestResourceCatalogueIsDisjointAndKnown(t *testing.T) {
	seen := map[string]string{}
	for g, labels := range resourceCatalog {
		if grp, ok := contract.LookupResourceGroup(g); !ok || !contains(grp.Platforms, Platform) {
			t.Errorf("%s is not an iOS group of the contract", g)
		}
		for _, l := range labels {
			if other, dup := seen[l.Label]; dup {
				t.Errorf("%s is in %s and %s", l.Label, other, g)
			}
			seen[l.Label] = g
		}
	}
	for _, g := range contract.ResourceGroupsFor(Platform) {
		_, mapped := resourceCatalog[g]
		_, refused := unsupportedGroups[g]
		if mapped == refused {
			t.Errorf("%s: mapped %v, unsupported %v; want exactly one", g, mapped, refused)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestSlimFootprintAndGroups(t *testing.T) {
	off := newHarness(t)
	if got := off.d.RAMPerDevice(); got != 2<<30 {
		t.Fatalf("stock footprint %d", got)
	}
	on := newHarness(t, func(o *Options) { o.Slim = Slim{Enabled: true} })
	if got := on.d.RAMPerDevice(); got*4 > 2<<30 || got < 300<<20 {
		t.Fatalf("slim footprint %d MiB", got>>20)
	}
	some := newHarness(t, func(o *Options) { o.Slim = Slim{Enabled: true, Groups: []string{"widgets", "widgets"}} })
	if got := some.d.RAMPerDevice(); got != (2<<30)*(stockFootprintMB-240)/stockFootprintMB || len(some.d.res.slim.Groups) != 1 {
		t.Fatalf("widgets-only slim %d, groups %v", got, some.d.res.slim.Groups)
	}
	if _, err := (Slim{Enabled: true, Groups: []string{"backgroundSync"}}).resolve(); err == nil {
		t.Fatal("slim accepted an uncontrollable group")
	}
	if s, err := (Slim{Groups: []string{"nonsense"}}).resolve(); err != nil || s.Enabled {
		t.Fatalf("disabled slim: %+v %v", s, err)
	}
}

// Every iOS group of the contract is controlled by labels, except
// backgroundSync and icloudSync, which stay unsupported; slim mode's
// default set is its original sixteen groups, all controlled, and the
// groups added since are not in it (ADR 0089).
func TestEveryIOSGroupButTheSharedOnesIsControlled(t *testing.T) {
	var want []string
	for _, g := range contract.ResourceGroupsFor(Platform) {
		if g != "backgroundSync" && g != "icloudSync" {
			want = append(want, g)
		}
	}
	if got := ControlledGroups(); !slices.Equal(got, want) {
		t.Fatalf("controlled %v\nwant %v", got, want)
	}
	if len(unsupportedGroups) != 2 || unsupportedGroups["backgroundSync"] == "" || unsupportedGroups["icloudSync"] == "" {
		t.Fatalf("unsupported %v", unsupportedGroups)
	}
	for g, labels := range resourceCatalog {
		if len(labels) == 0 {
			t.Errorf("%s has no label", g)
		}
		for _, l := range labels {
			if !strings.HasPrefix(l.Label, "com.apple.") || l.SaveMB <= 0 {
				t.Errorf("%s: label %+v", g, l)
			}
		}
	}
	slim := SlimGroups()
	if len(slim) != 16 {
		t.Fatalf("slim default %v", slim)
	}
	for _, g := range slim {
		if !slices.Contains(want, g) {
			t.Errorf("slim default %s is not controlled", g)
		}
	}
	for _, g := range []string{"familyServices", "screenTime", "walletServices", "watchConnectivity", "messagingMaintenance"} {
		if slices.Contains(slim, g) {
			t.Errorf("slim turns %s off by default", g)
		}
	}
}
