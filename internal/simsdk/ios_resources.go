package simsdk

import (
	"path/filepath"
	"slices"
	"time"
)

// The simulated launchd inside a booted simulator: which optional jobs a
// runtime ships, what each costs while it runs, and the per-device state
// launchctl changes (overrides and loaded jobs). The labels match the iOS
// driver's resource catalogue (internal/drivers/ios/resources.go); a test
// in this package checks that the two agree.

// A stock simulator idles at about 4 GB and 260 processes; disabling every
// optional job below leaves about 0.9 GB and 70 (the published simslim
// figures this simulation is scaled to).
const (
	stockFootprintMB = 4096
	stockProcesses   = 260
)

// simJob is one optional launchd job of a runtime.
type simJob struct {
	Label   string
	Program string
	// MB and Procs are what the job and the helpers it keeps alive cost.
	MB    int
	Procs int
	// Since and Before bound the runtime versions (packed, see packVersion)
	// that ship the job; zero means unbounded.
	Since, Before string
}

// simJobs is the whole optional-job catalogue. It is never modified.
var simJobs = []simJob{
	{Label: "com.apple.UIKit.transitiond", Program: "/usr/libexec/transitiond", MB: 90, Procs: 3},
	{Label: "com.apple.CoreMotion.parallaxd", Program: "/usr/libexec/parallaxd", MB: 60, Procs: 2},
	{Label: "com.apple.searchd", Program: "/usr/libexec/searchd", MB: 380, Procs: 22},
	{Label: "com.apple.spotlightknowledged", Program: "/usr/libexec/spotlightknowledged", MB: 220, Procs: 10},
	{Label: "com.apple.wallpaperservicesd", Program: "/usr/libexec/wallpaperservicesd", MB: 180, Procs: 6},
	{Label: "com.apple.PosterBoard.renderer", Program: "/usr/libexec/posterrenderer", MB: 160, Procs: 5},
	{Label: "com.apple.chronod", Program: "/System/Library/PrivateFrameworks/ChronoCore.framework/Support/chronod", MB: 240, Procs: 24},
	{Label: "com.apple.activitykitd", Program: "/usr/libexec/activitykitd", MB: 110, Procs: 6, Since: "18.0"},
	{Label: "com.apple.photoanalysisd", Program: "/System/Library/PrivateFrameworks/PhotoAnalysis.framework/Versions/A/Support/photoanalysisd", MB: 330, Procs: 12},
	{Label: "com.apple.healthd", Program: "/usr/libexec/healthd", MB: 150, Procs: 8},
	{Label: "com.apple.healthrecordsd", Program: "/usr/libexec/healthrecordsd", MB: 70, Procs: 4},
	{Label: "com.apple.homed", Program: "/usr/libexec/homed", MB: 140, Procs: 8},
	{Label: "com.apple.fitnesscoachingd", Program: "/usr/libexec/fitnesscoachingd", MB: 60, Procs: 4},
	{Label: "com.apple.activityawardsd", Program: "/usr/libexec/activityawardsd", MB: 40, Procs: 3},
	{Label: "com.apple.newsd", Program: "/usr/libexec/newsd", MB: 90, Procs: 6},
	{Label: "com.apple.weatherd", Program: "/usr/libexec/weatherd", MB: 80, Procs: 5},
	{Label: "com.apple.tipsd", Program: "/usr/libexec/tipsd", MB: 50, Procs: 4, Before: "26.0"},
	{Label: "com.apple.gamed", Program: "/System/Library/PrivateFrameworks/GameCenterFoundation.framework/Support/gamed", MB: 110, Procs: 8},
	{Label: "com.apple.navd", Program: "/usr/libexec/navd", MB: 120, Procs: 7},
	{Label: "com.apple.Maps.mapssyncd", Program: "/usr/libexec/mapssyncd", MB: 60, Procs: 4, Since: "18.0"},
	{Label: "com.apple.suggestd", Program: "/System/Library/PrivateFrameworks/CoreSuggestions.framework/suggestd", MB: 200, Procs: 20},
	{Label: "com.apple.proactiveeventtrackerd", Program: "/usr/libexec/proactiveeventtrackerd", MB: 90, Procs: 6},
	{Label: "com.apple.analyticsd", Program: "/System/Library/PrivateFrameworks/CoreAnalytics.framework/Support/analyticsd", MB: 120, Procs: 8},
	{Label: "com.apple.osanalytics.osanalyticshelper", Program: "/usr/libexec/osanalyticshelper", MB: 70, Procs: 5},
}

// shippedBy reports whether runtime version v (as "a.b[.c]") has the job.
func (j simJob) shippedBy(v string) bool {
	pv, err := packVersion(v)
	if err != nil {
		return false
	}
	if j.Since != "" && pv < mustPack(j.Since) {
		return false
	}
	if j.Before != "" && pv >= mustPack(j.Before) {
		return false
	}
	return true
}

// plistPath is where the runtime keeps the job's definition, as launchctl
// prints it and as bootstrap takes it.
func (j simJob) plistPath(rt simRuntime) string {
	return rt.runtimeRoot() + "/System/Library/LaunchDaemons/" + j.Label + ".plist"
}

// runtimeOf finds the catalogue runtime a device was created with.
func runtimeOf(d *iosDevice) (simRuntime, bool) {
	for _, r := range iosRuntimes {
		if r.Identifier == d.Runtime {
			return r, true
		}
	}
	return simRuntime{}, false
}

// jobsOf lists the optional jobs the device's runtime ships, minus any the
// launchctl-missing fault removes.
func (s *sdk) jobsOf(d *iosDevice) []simJob {
	rt, ok := runtimeOf(d)
	if !ok || rt.Platform != "iOS" {
		return nil
	}
	var missing []string
	for _, f := range s.faults {
		if f.Name == faultLaunchctlMissing {
			missing = append(missing, f.Value)
		}
	}
	var out []simJob
	for _, j := range simJobs {
		if j.shippedBy(rt.Version) && !slices.Contains(missing, j.Label) {
			out = append(out, j)
		}
	}
	return out
}

const launchdStateFile = "launchd.json"

// launchdState is what launchctl changed on one device. It lives in the
// device's data directory, so an erase forgets it as it forgets
// everything else a device was told.
type launchdState struct {
	// Overrides are the disabled-services database: label -> disabled.
	Overrides map[string]bool `json:"overrides,omitempty"`
	// Unloaded lists shipped jobs that are not loaded in this boot.
	Unloaded []string `json:"unloaded,omitempty"`
	// Boot is the boot the Unloaded list belongs to; a new boot starts
	// with every job loaded except the disabled ones, as launchd does.
	Boot time.Time `json:"boot"`
}

func launchdStatePath(ds deviceSet, d *iosDevice) string {
	return filepath.Join(ds.dataPath(d.UDID), launchdStateFile)
}

// loadLaunchd reads the device's launchd state for its current boot.
func loadLaunchd(ds deviceSet, d *iosDevice) (launchdState, error) {
	var st launchdState
	if err := readJSON(launchdStatePath(ds, d), &st); err != nil && !isNotExist(err) {
		return st, err
	}
	var boot time.Time
	if d.BootStartedAt != nil {
		boot = *d.BootStartedAt
	}
	if !st.Boot.Equal(boot) {
		st.Boot = boot
		st.Unloaded = nil
		for label, disabled := range st.Overrides {
			if disabled {
				st.Unloaded = append(st.Unloaded, label)
			}
		}
		slices.Sort(st.Unloaded)
	}
	return st, nil
}

func (st *launchdState) loaded(label string) bool { return !slices.Contains(st.Unloaded, label) }

func (st *launchdState) setLoaded(label string, on bool) {
	st.Unloaded = slices.DeleteFunc(st.Unloaded, func(l string) bool { return l == label })
	if !on {
		st.Unloaded = append(st.Unloaded, label)
		slices.Sort(st.Unloaded)
	}
}

// iosFootprint is the simulated idle memory (MB) and process count of a
// booted device: the stock figures minus every shipped job that is not
// loaded. A job the runtime does not ship costs nothing either way.
func iosFootprint(jobs []simJob, st launchdState) (mb, procs int) {
	mb, procs = stockFootprintMB, stockProcesses
	for _, j := range jobs {
		if !st.loaded(j.Label) {
			mb -= j.MB
			procs -= j.Procs
		}
	}
	return mb, procs
}
