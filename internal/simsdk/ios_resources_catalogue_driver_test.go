package simsdk

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/ios"
)

// Every iOS group the driver controls, the reference's full list of
// service groups included, maps to launchd jobs the simulated runtimes ship
// and to launchctl commands they accept. On iOS 18.0 and on iOS 26.3
// (between them every label of the catalogue ships) one request turns
// every group off with exactly a disable and a bootout per label the
// runtime has, and none for a label it lacks; an independent driver reads
// every group disabled (backgroundSync and icloudSync unsupported, and a
// group with no job on that runtime unsupported), and turning them on
// again re-enables and reloads each job.
func TestIOSEveryControlledGroupAgainstTheSimulatedRuntime(t *testing.T) {
	t.Parallel()
	groups := ios.ControlledGroups()
	var mu sync.Mutex
	written := map[string]bool{}
	t.Run("runtimes", func(t *testing.T) {
		for _, version := range []string{"18.0", "26.3"} {
			t.Run(version, func(t *testing.T) {
				t.Parallel()
				for _, l := range allOffAndOn(t, version, groups) {
					mu.Lock()
					written[l] = true
					mu.Unlock()
				}
			})
		}
	})
	for _, g := range groups {
		for _, l := range ios.ResourceLabels(g) {
			if !written[l] {
				t.Errorf("%s's label %s was written on no runtime", g, l)
			}
		}
	}
}

// allOffAndOn turns every group off and on again on a device of the
// runtime, checking each step, and returns the labels it wrote.
func allOffAndOn(t *testing.T, version string, groups []string) []string {
	r := newIOSRig(t, "", ios.Slim{})
	dev := r.boot(version)
	ctx := context.Background()
	shipped := map[string]bool{}
	for _, j := range simJobs {
		if j.shippedBy(version) {
			shipped[j.Label] = true
		}
	}
	off, on := map[string]contract.ResourceState{}, map[string]contract.ResourceState{}
	var wantOff, wantOn, labels, changed []string
	absent := map[string]bool{} // groups with no job on this runtime
	for _, g := range groups {
		off[g], on[g] = contract.ResourceDisabled, contract.ResourceEnabled
		absent[g] = true
		for _, l := range ios.ResourceLabels(g) {
			if !shipped[l] {
				continue
			}
			absent[g] = false
			labels = append(labels, l)
			wantOff = append(wantOff, "disable system/"+l, "bootout system/"+l)
			wantOn = append(wantOn, "enable system/"+l, "bootstrap system")
		}
		if !absent[g] {
			changed = append(changed, g)
		}
	}
	slices.Sort(changed)
	mark := r.logLines()
	res, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: off})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ObservationContradictions) != 0 || !slices.Equal(res.Changed, changed) {
		t.Errorf("all off: contradictions %v changed %v, want %v", res.ObservationContradictions, res.Changed, changed)
	}
	for _, ev := range res.Services {
		switch {
		case !shipped[ev.Service]:
			if ev.Written || ev.Observed != contract.ResourceUnsupported {
				t.Errorf("%s lacks %s: %+v", version, ev.Service, ev)
			}
		case !ev.Written || ev.Observed != contract.ResourceDisabled:
			t.Errorf("%s/%s: %+v", ev.Group, ev.Service, ev)
		}
	}
	got := writes(r.launchctlCommands(mark))
	slices.Sort(got)
	slices.Sort(wantOff)
	if !slices.Equal(got, wantOff) {
		t.Errorf("writes\n %q\nwant\n %q", got, wantOff)
	}
	obs, err := r.driver(ios.Slim{}).ObserveResources(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range contract.ResourceGroupsFor(ios.Platform) {
		want := contract.ResourceDisabled
		if g == "backgroundSync" || g == "icloudSync" || absent[g] {
			want = contract.ResourceUnsupported
		}
		if o := obs.Resources[g]; o.State != want || (want == contract.ResourceUnsupported && o.Reason == "") {
			t.Errorf("independent read of %s: %+v, want %s", g, o, want)
		}
	}

	mark = r.logLines()
	back, err := r.d.ApplyResources(ctx, dev, core.ResourceChange{Resources: on})
	if err != nil {
		t.Fatal(err)
	}
	var gotOn []string
	for _, w := range writes(r.launchctlCommands(mark)) {
		if strings.HasPrefix(w, "bootstrap system ") {
			w = "bootstrap system"
		}
		gotOn = append(gotOn, w)
	}
	slices.Sort(gotOn)
	slices.Sort(wantOn)
	if !slices.Equal(gotOn, wantOn) {
		t.Errorf("writes turning on\n %q\nwant\n %q", gotOn, wantOn)
	}
	for _, g := range groups {
		want := contract.ResourceEnabled
		if absent[g] {
			want = contract.ResourceUnsupported
		}
		if st := back.Resources[g].State; st != want {
			t.Errorf("%s after turning on: %s, want %s", g, st, want)
		}
	}
	return labels
}

// A runtime that ships none of a group's jobs reports the group
// unsupported and gets no write: iOS 17.5 has no Apple Intelligence jobs,
// while a group it does ship in the same request is applied.
func TestIOSAppleIntelligenceIsUnsupportedOnARuntimeWithoutIt(t *testing.T) {
	t.Parallel()
	r := newIOSRig(t, "", ios.Slim{})
	dev := r.boot("17.5")
	mark := r.logLines()
	res, err := r.d.ApplyResources(context.Background(), dev, core.ResourceChange{Resources: req("appleIntelligence", "disabled", "walletServices", "disabled")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.Resources["appleIntelligence"].State != contract.ResourceUnsupported || res.Resources["appleIntelligence"].Reason == "" ||
		res.Resources["walletServices"].State != contract.ResourceDisabled || !slices.Equal(res.Changed, []string{"walletServices"}) {
		t.Fatalf("success %v changed %v resources %+v", res.Success, res.Changed, res.Resources)
	}
	for _, w := range writes(r.launchctlCommands(mark)) {
		for _, l := range ios.ResourceLabels("appleIntelligence") {
			if w == "disable system/"+l || w == "bootout system/"+l {
				t.Errorf("a job the runtime lacks was written: %q", w)
			}
		}
	}
}
