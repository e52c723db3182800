package simsdk

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/ios"
	"github.com/simlock/simlock/internal/testhost"
)

// iosRig runs the real iOS driver against the simulated SDK with real
// processes: every simctl and launchctl call is a process of the test
// binary acting as xcrun, and each is logged to cmdLog.
type iosRig struct {
	t      *testing.T
	h      *harness
	root   string
	cmdLog string
	env    []string
	d      *ios.Driver
}

func newIOSRig(t *testing.T, faults string, slim ios.Slim) *iosRig {
	t.Helper()
	h := newHarness(t, EnvFaults, faults)
	r := &iosRig{t: t, h: h, root: filepath.Join(t.TempDir(), "ios-root"), cmdLog: filepath.Join(t.TempDir(), "commands.log")}
	r.env = []string{EnvHome + "=" + h.home, EnvSpeed + "=0", EnvFaults + "=" + faults, EnvCommandLog + "=" + r.cmdLog, "GORACE=" + testGORACE}
	r.d = r.driver(slim)
	return r
}

// driver makes a driver over the rig's root: a second one is an
// independent reader with no state shared with the first.
func (r *iosRig) driver(slim ios.Slim) *ios.Driver {
	r.t.Helper()
	d, err := ios.New(ios.Options{Root: r.root, Runner: envRunner{env: r.env}, Xcrun: filepath.Join(toolLinks, "xcrun"),
		Logger: slog.New(slog.DiscardHandler), Slim: slim})
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// boot creates and boots one device of the runtime and returns its ref.
func (r *iosRig) boot(osVersion string) core.DeviceRef {
	r.t.Helper()
	ctx := context.Background()
	spec, err := r.d.ResolveSpec(ctx, core.SpecRequest{Platform: ios.Platform, Model: "iPhone 15", OSVersion: osVersion})
	if err != nil {
		r.t.Fatal(err)
	}
	p, err := r.d.Provision(ctx, spec)
	if err != nil {
		r.t.Fatal(err)
	}
	dev := core.DeviceRef{ID: "dev-" + p.Handle[:8], Handle: p.Handle, Spec: spec, Attrs: p.Attrs}
	if err := r.d.MakeReady(ctx, dev); err != nil {
		r.t.Fatal(err)
	}
	return dev
}

// commands returns the logged launchctl commands, in order, from line
// from on: "disable system/com.apple.chronod" and so on.
func (r *iosRig) launchctlCommands(from int) []string {
	r.t.Helper()
	data, err := os.ReadFile(r.cmdLog)
	if err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	var out []string
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i < from {
			continue
		}
		if _, cmd, ok := strings.Cut(line, " launchctl "); ok {
			out = append(out, cmd)
		}
	}
	return out
}

func (r *iosRig) logLines() int {
	data, _ := os.ReadFile(r.cmdLog)
	return strings.Count(string(data), "\n")
}

// writes filters launchctl commands down to the ones that change state.
func writes(cmds []string) []string {
	var out []string
	for _, c := range cmds {
		if sub, _, _ := strings.Cut(c, " "); slices.Contains([]string{"disable", "enable", "bootout", "bootstrap"}, sub) {
			out = append(out, c)
		}
	}
	return out
}

// launchctl runs launchctl in the device directly, as a person would.
func (r *iosRig) launchctl(dev core.DeviceRef, args ...string) result {
	return r.h.simctl(append([]string{"--set", r.root, "spawn", dev.Handle, "launchctl"}, args...)...)
}

// states is the observed state of the named groups of res (every group
// when none is named).
func states(res contract.ResourceResult, groups ...string) map[string]contract.ResourceState {
	out := map[string]contract.ResourceState{}
	if len(groups) == 0 {
		for n, o := range res.Resources {
			out[n] = o.State
		}
	}
	for _, g := range groups {
		out[g] = res.Resources[g].State
	}
	return out
}

func req(kv ...string) map[string]contract.ResourceState {
	m := map[string]contract.ResourceState{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = contract.ResourceState(kv[i+1])
	}
	return m
}

// Disabling animations and widgets is proven by an independent read: a
// fresh driver's observation and launchctl itself both say disabled,
// while the groups not asked for stay enabled.
func TestIOSResourcesDisableIsProvenByAnIndependentRead(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, "", ios.Slim{})
	dev := r.boot("18.0")
	ctx := context.Background()
	res, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req("animations", "disabled", "widgets", "disabled")})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Resources["animations"].State != contract.ResourceDisabled || res.Resources["widgets"].State != contract.ResourceDisabled {
		t.Fatalf("apply: success %v, resources %+v, services %+v", res.Success, res.Resources, res.Services)
	}
	if !slices.Equal(res.Changed, []string{"animations", "widgets"}) || res.Verification != contract.ResourceVerificationCurrentBoot {
		t.Fatalf("changed %v, verification %q", res.Changed, res.Verification)
	}
	if res.Observed["searchIndexing"].State != contract.ResourceEnabled || len(res.ObservationContradictions) != 0 {
		t.Fatalf("after-write snapshot %+v, contradictions %v", res.Observed, res.ObservationContradictions)
	}
	obs, err := r.driver(ios.Slim{}).ObserveResources(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	got := states(obs)
	if got["animations"] != contract.ResourceDisabled || got["widgets"] != contract.ResourceDisabled ||
		got["searchIndexing"] != contract.ResourceEnabled || got["backgroundSync"] != contract.ResourceUnsupported ||
		got["icloudSync"] != contract.ResourceUnsupported {
		t.Fatalf("independent observation %v", got)
	}
	if out := r.launchctl(dev, "print-disabled", "system"); !strings.Contains(out.stdout, `"com.apple.chronod" => disabled`) {
		t.Fatalf("print-disabled:\n%s", out.stdout)
	}
	if out := r.launchctl(dev, "print", "system/com.apple.chronod"); out.code != 113 || !strings.Contains(out.stderr, "Could not find service") {
		t.Fatalf("the widgets job is still loaded: exit %d %s", out.code, out.stderr)
	}
	// Enabling restores the job without a reboot, and a repeat writes nothing.
	if res, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req("widgets", "enabled")}); err != nil || !res.Success {
		t.Fatalf("enable: %v %+v", err, res.Resources)
	}
	if out := r.launchctl(dev, "print", "system/com.apple.chronod"); out.code != 0 {
		t.Fatalf("widgets job not reloaded: exit %d %s", out.code, out.stderr)
	}
	mark := r.logLines()
	if res, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req("widgets", "enabled", "animations", "disabled")}); err != nil || !res.Success || len(res.Changed) != 0 {
		t.Fatalf("repeat: %v %+v changed %v", err, res.Resources, res.Changed)
	}
	if w := writes(r.launchctlCommands(mark)); len(w) != 0 {
		t.Fatalf("a repeat of the observed state wrote %q", w)
	}
}

// A label the booted runtime does not ship is reported and excluded; a
// group left with none is unsupported, and no write touches it.
func TestIOSResourcesMissingLabelMakesItsGroupUnsupportedWithoutWrites(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, faultLaunchctlMissing+"=com.apple.chronod,"+faultLaunchctlMissing+"=com.apple.CoreMotion.parallaxd", ios.Slim{})
	dev := r.boot("18.0")
	mark := r.logLines()
	res, err := r.d.ApplyResources(context.Background(), dev, core.ResourceChange{Resources: req("widgets", "disabled", "animations", "disabled")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.Resources["widgets"].State != contract.ResourceUnsupported || res.Resources["animations"].State != contract.ResourceDisabled {
		t.Fatalf("success %v resources %+v", res.Success, res.Resources)
	}
	if !slices.Equal(res.Changed, []string{"animations"}) {
		t.Fatalf("changed %v", res.Changed)
	}
	for _, ev := range res.Services {
		if ev.Service == "com.apple.CoreMotion.parallaxd" && (ev.Observed != contract.ResourceUnsupported || ev.Written) {
			t.Fatalf("missing label's evidence %+v", ev)
		}
	}
	for _, w := range writes(r.launchctlCommands(mark)) {
		if strings.Contains(w, "chronod") || strings.Contains(w, "parallaxd") {
			t.Fatalf("a missing label was written: %q", w)
		}
	}
	if len(writes(r.launchctlCommands(mark))) == 0 {
		t.Fatal("the supported label was not written either: the log proves nothing")
	}
}

// A runtime's own catalogue: iOS 17.5 ships no Live Activities job, and
// only one of the two Maps jobs.
func TestIOSResourcesFollowTheBootedRuntimesCatalogue(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, "", ios.Slim{})
	dev := r.boot("17.5")
	mark := r.logLines()
	res, err := r.d.ApplyResources(context.Background(), dev, core.ResourceChange{Resources: req("liveActivities", "disabled", "mapsSync", "disabled")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resources["liveActivities"].State != contract.ResourceUnsupported || res.Resources["mapsSync"].State != contract.ResourceDisabled {
		t.Fatalf("resources %+v", res.Resources)
	}
	if w := writes(r.launchctlCommands(mark)); !slices.Equal(w, []string{"disable system/com.apple.navd", "bootout system/com.apple.navd"}) {
		t.Fatalf("writes %q", w)
	}
}

// A write launchctl acknowledges but that does not stick is unknown, and
// the call fails; an independent reconcile then sees it missing.
func TestIOSResourcesWriteThatDoesNotStickIsUnknown(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, faultLaunchctlWriteNoop, ios.Slim{})
	dev := r.boot("18.0")
	ctx := context.Background()
	res, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req("animations", "disabled")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.Resources["animations"].State != contract.ResourceUnknown || !slices.Equal(res.Changed, []string{"animations"}) {
		t.Fatalf("success %v resources %+v changed %v", res.Success, res.Resources, res.Changed)
	}
	for _, ev := range res.Services {
		if ev.Group == "animations" && (!ev.Written || ev.Observed != contract.ResourceUnknown) {
			t.Fatalf("evidence %+v", ev)
		}
	}
	rec, err := r.d.ReconcileResources(ctx, dev, core.ResourceReconcile{Resources: req("animations", "disabled")})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Success || !slices.Equal(rec.Drift.MissingRequested, []string{"animations"}) || len(rec.Drift.OwnedExtra) != 0 {
		t.Fatalf("reconcile success %v drift %+v", rec.Success, rec.Drift)
	}
}

// Reconcile reports each kind of drift, repairs only what drifted,
// releases owned extras when asked, and a second run with no drift issues
// no write.
func TestIOSResourcesReconcileDriftRepairAndRelease(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, "", ios.Slim{})
	dev := r.boot("18.0")
	ctx := context.Background()
	if res, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req("searchIndexing", "disabled", "widgets", "disabled")}); err != nil || !res.Success {
		t.Fatalf("apply: %v %+v", err, res.Resources)
	}
	// Someone re-enables the widgets override by hand without loading the
	// job: the evidence is inconsistent.
	if out := r.launchctl(dev, "enable", "system/com.apple.chronod"); out.code != 0 {
		t.Fatalf("enable by hand: %+v", out)
	}
	want := req("animations", "disabled", "widgets", "disabled", "backgroundSync", "disabled")
	mark := r.logLines()
	rec, err := r.d.ReconcileResources(ctx, dev, core.ResourceReconcile{Resources: want})
	if err != nil {
		t.Fatal(err)
	}
	d := rec.Drift
	if !slices.Equal(d.MissingRequested, []string{"animations"}) || !slices.Equal(d.OwnedExtra, []string{"searchIndexing"}) ||
		!slices.Equal(d.Unsupported, []string{"backgroundSync"}) || !slices.Equal(d.CommandFailure, []string{"widgets"}) || rec.Success {
		t.Fatalf("drift %+v success %v", d, rec.Success)
	}
	if w := writes(r.launchctlCommands(mark)); len(w) != 0 {
		t.Fatalf("a report-only reconcile wrote %q", w)
	}
	rec, err = r.d.ReconcileResources(ctx, dev, core.ResourceReconcile{Resources: want, Repair: true, ReleaseOwnedExtras: true})
	if err != nil {
		t.Fatal(err)
	}
	f := rec.FinalDrift
	if f == nil || len(f.MissingRequested)+len(f.CommandFailure)+len(f.OwnedExtra) != 0 || !slices.Equal(f.Unsupported, []string{"backgroundSync"}) {
		t.Fatalf("final drift %+v", f)
	}
	if rec.Success {
		t.Fatal("an unsupported requested group must fail closed")
	}
	if !slices.Equal(rec.Changed, []string{"animations", "searchIndexing", "widgets"}) {
		t.Fatalf("repair changed %v", rec.Changed)
	}
	mark = r.logLines()
	rec, err = r.d.ReconcileResources(ctx, dev, core.ResourceReconcile{Resources: req("animations", "disabled", "widgets", "disabled"), Repair: true, ReleaseOwnedExtras: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Success || !rec.Drift.Empty() || rec.FinalDrift != nil {
		t.Fatalf("second reconcile: success %v drift %+v final %+v", rec.Success, rec.Drift, rec.FinalDrift)
	}
	if w := writes(r.launchctlCommands(mark)); len(w) != 0 {
		t.Fatalf("a reconcile with no drift wrote %q", w)
	}
}

// An erase forgets the overrides: the requested groups are missing again,
// the recorded ones are no longer extras, and a repair reapplies them.
func TestIOSResourcesEraseClearsOverrides(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, "", ios.Slim{})
	dev := r.boot("18.0")
	ctx := context.Background()
	if res, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req("animations", "disabled", "photoAnalysis", "disabled")}); err != nil || !res.Success {
		t.Fatalf("apply: %v %+v", err, res.Resources)
	}
	if err := r.d.Reclaim(ctx, dev); err != nil {
		t.Fatal(err)
	}
	rec, err := r.d.ReconcileResources(ctx, dev, core.ResourceReconcile{Resources: req("animations", "disabled")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Drift.MissingRequested, []string{"animations"}) || len(rec.Drift.OwnedExtra) != 0 || rec.Success {
		t.Fatalf("after erase: drift %+v", rec.Drift)
	}
	rec, err = r.d.ReconcileResources(ctx, dev, core.ResourceReconcile{Resources: req("animations", "disabled"), Repair: true})
	if err != nil || !rec.Success || rec.Resources["animations"].State != contract.ResourceDisabled {
		t.Fatalf("repair: %v %+v final %+v", err, rec.Resources, rec.FinalDrift)
	}
}

// A slow probe is bounded by the caller's deadline: the observation gives
// up when the request's time is spent instead of waiting out every read.
func TestIOSResourcesSlowProbeIsBoundedByTheDeadline(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, faultLaunchctlSlow+"=1500", ios.Slim{})
	dev := r.boot("18.0")
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.d.ObserveResources(ctx, dev)
	if err == nil {
		t.Fatal("an observation outlived its deadline")
	}
	if d := time.Since(start); d > 700*time.Millisecond+testhost.Scale(5*time.Second) {
		t.Fatalf("the observation took %s past a 700 ms deadline", d)
	}
}

// Deleting a device forgets its recorded overrides; others' stay.
func TestIOSResourcesRecordForgetsDeletedDevices(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, "", ios.Slim{})
	a, b := r.boot("18.0"), r.boot("18.0")
	ctx := context.Background()
	for _, dev := range []core.DeviceRef{a, b} {
		if res, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req("widgets", "disabled")}); err != nil || !res.Success {
			t.Fatalf("apply: %v %+v", err, res.Resources)
		}
	}
	record := func() string {
		data, err := os.ReadFile(filepath.Join(r.root, ".simlock-resources.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if rec := record(); !strings.Contains(rec, a.Handle+"|") || !strings.Contains(rec, b.Handle+"|") {
		t.Fatalf("record:\n%s", rec)
	}
	if err := r.d.Destroy(ctx, a); err != nil {
		t.Fatal(err)
	}
	if rec := record(); strings.Contains(rec, a.Handle) || !strings.Contains(rec, b.Handle+"|com.apple.CoreSimulator.SimRuntime.iOS-18-0|com.apple.CoreSimulator.SimDeviceType.iPhone-15") {
		t.Fatalf("record after destroying %s:\n%s", a.Handle, rec)
	}
}
