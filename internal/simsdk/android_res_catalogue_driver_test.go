package simsdk

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
)

// Every Android package group of the catalogue, the reference's optional
// apps and feature tradeoffs included, maps to packages the simulated
// image knows and to `pm disable-user --user 0 PKG` / `pm enable` commands
// it accepts: one request disables them all (the default role holders
// first stay on, as protected), an independent read agrees, every write
// was one of those two commands, and the receipt puts each package back
// to its default state. googlePlayServices and googleServicesFramework are
// separate switches.
func TestAndroidEveryPackageGroupAgainstTheSimulatedSDK(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	d, run, root := newResDriver(t, a, 32000, nil)
	ctx := context.Background()
	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: android.Platform, Model: "pixel_7", OSVersion: "15"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	dev := core.DeviceRef{ID: "dev-cat", Handle: p.Handle, Name: p.Name, Spec: spec, Attrs: p.Attrs, Data: p.Data}
	serial := p.Attrs[core.AttrSerial]
	// The harness's adb talks to the driver's private server, wherever the
	// host's registry placed it (5137 may be another program's).
	a.env[envADBServerPort] = p.Attrs[core.AttrEnvPrefix+"ANDROID_ADB_SERVER_PORT"]
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), dev) })
	a.env[envAVDHome] = root
	listed := func(flags string) map[string]bool {
		t.Helper()
		m := map[string]bool{}
		for _, l := range strings.Split(a.shell(serial, "pm list packages "+flags).stdout, "\n") {
			if pkg, ok := strings.CutPrefix(strings.TrimSpace(l), "package:"); ok {
				m[pkg] = true
			}
		}
		return m
	}
	installed := listed("")

	// The package groups, and which of their packages this image has.
	var groups []string
	present := map[string][]string{}
	for _, g := range contract.ResourceGroupsFor(android.Platform) {
		pkgs := android.ResourcePackages(g)
		if len(pkgs) == 0 {
			continue
		}
		groups = append(groups, g)
		for _, pkg := range pkgs {
			if installed[pkg] {
				present[g] = append(present[g], pkg)
			}
		}
	}
	for _, g := range []string{"contactsApp", "videoApp", "assistantApp", "digitalWellbeing", "accessibilityApps", "textToSpeech",
		"wallpaperApps", "healthConnect", "adServices", "onDevicePersonalization", "dialerApp", "messagesApp",
		"googlePlayServices", "googleServicesFramework"} {
		if len(present[g]) == 0 {
			t.Fatalf("the simulated image (%s) has none of %s's packages %v: the test proves nothing for it", spec.Data, g, android.ResourcePackages(g))
		}
	}

	// 1. Play services and the Services Framework are separate switches.
	gms, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: map[string]contract.ResourceState{"googlePlayServices": "disabled"}})
	if err != nil || !gms.Success || gms.Observed["googleServicesFramework"].State != contract.ResourceEnabled {
		t.Fatalf("googlePlayServices alone: %v %+v observed %+v", err, gms.Resources, gms.Observed["googleServicesFramework"])
	}
	if dis := listed("-d"); !dis["com.google.android.gms"] || dis["com.google.android.gsf"] {
		t.Fatalf("disabled packages after googlePlayServices alone: %v", dis)
	}
	if back, err := d.ApplyResources(ctx, dev, core.ResourceChange{Restore: gms.Restore}); err != nil || !back.Success {
		t.Fatalf("restore googlePlayServices: %v %+v", err, back)
	}

	// 2. The default dialer and SMS app are protected while they hold
	// their roles.
	prot, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: map[string]contract.ResourceState{"dialerApp": "disabled", "messagesApp": "disabled"}})
	if err != nil {
		t.Fatal(err)
	}
	if prot.Success || prot.Resources["dialerApp"].State != contract.ResourceEnabled || prot.Resources["messagesApp"].State != contract.ResourceEnabled {
		t.Fatalf("role holders: %+v", prot.Resources)
	}
	for _, ev := range prot.Services {
		if slices.Contains(present[ev.Group], ev.Service) && !strings.Contains(ev.Detail, "protected") {
			t.Errorf("%s: %+v does not say it is protected", ev.Group, ev)
		}
	}
	holders := map[string]string{}
	for _, role := range []string{"android.app.role.DIALER", "android.app.role.SMS"} {
		holders[role] = strings.TrimSpace(a.shell(serial, "cmd role get-role-holders --user 0 "+role).stdout)
		a.ok("adb", "-s", serial, "shell", "cmd", "role", "remove-role-holder", role, holders[role])
	}

	// 3. Every package group off in one request.
	req := map[string]contract.ResourceState{}
	for _, g := range groups {
		req[g] = contract.ResourceDisabled
	}
	mark := len(run.commands("adb"))
	res, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req})
	if err != nil {
		t.Fatal(err)
	}
	var wantChanged []string
	for _, g := range groups {
		want := contract.ResourceDisabled
		if len(present[g]) == 0 {
			want = contract.ResourceUnsupported
		} else {
			wantChanged = append(wantChanged, g)
		}
		if got := res.Resources[g]; got.State != want {
			t.Errorf("%s: %+v, want %s", g, got, want)
		}
	}
	slices.Sort(wantChanged)
	if !slices.Equal(res.Changed, wantChanged) || res.Restore == nil || len(res.ObservationContradictions) != 0 {
		t.Errorf("changed %v (want %v), receipt %v, contradictions %v", res.Changed, wantChanged, res.Restore != nil, res.ObservationContradictions)
	}
	dis := listed("-d")
	var wantWrites []string
	for _, g := range groups {
		for _, pkg := range present[g] {
			if !dis[pkg] {
				t.Errorf("%s: %s is not disabled on the device", g, pkg)
			}
			wantWrites = append(wantWrites, fmt.Sprintf("shell pm disable-user --user 0 %s", pkg))
		}
	}
	var writes []string
	for _, l := range run.commands("adb")[mark:] {
		if strings.Contains(l, " shell pm disable-user ") || strings.Contains(l, " shell pm enable ") || strings.Contains(l, " shell settings put ") {
			_, cmd, _ := strings.Cut(l, " shell ")
			writes = append(writes, "shell "+cmd)
		}
	}
	slices.Sort(writes)
	slices.Sort(wantWrites)
	if !slices.Equal(writes, wantWrites) {
		t.Errorf("writes\n %q\nwant\n %q", writes, wantWrites)
	}
	obs, err := d.ObserveResources(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if obs.Resources[g].State != res.Resources[g].State {
			t.Errorf("independent read of %s: %+v, the write's read %+v", g, obs.Resources[g], res.Resources[g])
		}
	}
	if obs.Resources["animations"].State == contract.ResourceDisabled {
		t.Error("a package request changed the animation scales")
	}

	// 4. The receipt puts every package back to its default state.
	back, err := d.ApplyResources(ctx, dev, core.ResourceChange{Restore: res.Restore})
	if err != nil || !back.Success {
		t.Fatalf("restore: %v %+v", err, back)
	}
	if dis := listed("-d"); len(dis) != 0 {
		t.Errorf("still disabled after the restore: %v", dis)
	}
	for _, g := range groups {
		for _, pkg := range present[g] {
			if out := a.shell(serial, "dumpsys package "+pkg).stdout; !strings.Contains(out, " enabled=0 ") {
				t.Errorf("%s not back to its default state: %q", pkg, out)
			}
		}
	}
	for role, pkg := range holders {
		a.ok("adb", "-s", serial, "shell", "cmd", "role", "add-role-holder", role, pkg)
	}
}
