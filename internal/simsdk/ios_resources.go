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

// A stock simulator idles at about 4 GB and 260 processes; disabling the
// jobs of slim mode's default groups leaves about 0.9 GB and 70 (the
// published simslim figures this simulation is scaled to).
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
	// The smaller jobs of the groups slim mode leaves on unless told
	// (ADR 0089): they are part of the stock figure, and slim's ~0.9 GB
	// is with them still running.
	{Label: "com.apple.familycircled", Program: "/System/Library/PrivateFrameworks/FamilyCircle.framework/familycircled", MB: 20, Procs: 1},
	{Label: "com.apple.askpermissiond", Program: "/usr/libexec/askpermissiond", MB: 10, Procs: 1},
	{Label: "com.apple.ScreenTimeAgent", Program: "/System/Library/PrivateFrameworks/ScreenTimeCore.framework/ScreenTimeAgent", MB: 30, Procs: 1},
	{Label: "com.apple.UsageTrackingAgent", Program: "/System/Library/PrivateFrameworks/UsageTracking.framework/UsageTrackingAgent", MB: 20, Procs: 1},
	{Label: "com.apple.ap.promotedcontentd", Program: "/System/Library/PrivateFrameworks/PromotedContentPrediction.framework/promotedcontentd", MB: 25, Procs: 1},
	{Label: "com.apple.intelligenceplatformd", Program: "/System/Library/PrivateFrameworks/IntelligencePlatformCore.framework/intelligenceplatformd", MB: 45, Procs: 2, Since: "18.0"},
	{Label: "com.apple.generativeexperiencesd", Program: "/usr/libexec/generativeexperiencesd", MB: 30, Procs: 1, Since: "18.1"},
	{Label: "com.apple.appstored", Program: "/System/Library/PrivateFrameworks/AppStoreDaemon.framework/Support/appstored", MB: 35, Procs: 2},
	{Label: "com.apple.itunescloudd", Program: "/System/Library/PrivateFrameworks/iTunesCloud.framework/Support/itunescloudd", MB: 30, Procs: 1},
	{Label: "com.apple.storebookkeeperd", Program: "/System/Library/PrivateFrameworks/StoreBookkeeper.framework/Support/storebookkeeperd", MB: 10, Procs: 1},
	{Label: "com.apple.email.maild", Program: "/System/Library/PrivateFrameworks/Message.framework/Support/maild", MB: 35, Procs: 2},
	{Label: "com.apple.calaccessd", Program: "/System/Library/PrivateFrameworks/CalendarDaemon.framework/Support/calaccessd", MB: 20, Procs: 1},
	{Label: "com.apple.remindd", Program: "/System/Library/PrivateFrameworks/ReminderKit.framework/Support/remindd", MB: 20, Procs: 1},
	{Label: "com.apple.dataaccess.dataaccessd", Program: "/System/Library/PrivateFrameworks/DataAccess.framework/Support/dataaccessd", MB: 30, Procs: 2},
	{Label: "com.apple.SafariBookmarksSyncAgent", Program: "/usr/libexec/SafariBookmarksSyncAgent", MB: 15, Procs: 1},
	{Label: "com.apple.syncdefaultsd", Program: "/System/Library/PrivateFrameworks/SyncedDefaults.framework/Support/syncdefaultsd", MB: 15, Procs: 1},
	{Label: "com.apple.imautomatichistorydeletionagent", Program: "/System/Library/PrivateFrameworks/IMDPersistence.framework/IMAutomaticHistoryDeletionAgent.app/IMAutomaticHistoryDeletionAgent", MB: 10, Procs: 1},
	{Label: "com.apple.imtransferagent", Program: "/System/Library/PrivateFrameworks/IMTransferServices.framework/IMTransferAgent.app/IMTransferAgent", MB: 20, Procs: 1},
	{Label: "com.apple.facetimemessagestored", Program: "/usr/libexec/facetimemessagestored", MB: 10, Procs: 1},
	{Label: "com.apple.wcd", Program: "/usr/libexec/wcd", MB: 15, Procs: 1},
	{Label: "com.apple.companionappd", Program: "/usr/libexec/companionappd", MB: 15, Procs: 1},
	{Label: "com.apple.carkitd", Program: "/System/Library/PrivateFrameworks/CarKit.framework/carkitd", MB: 20, Procs: 1},
	{Label: "com.apple.tvremoted", Program: "/usr/libexec/tvremoted", MB: 15, Procs: 1},
	{Label: "com.apple.icloud.searchpartyd", Program: "/System/Library/PrivateFrameworks/SPOwner.framework/searchpartyd", MB: 25, Procs: 1},
	{Label: "com.apple.icloud.findmydeviced", Program: "/System/Library/PrivateFrameworks/FindMyDevice.framework/findmydeviced", MB: 20, Procs: 1},
	{Label: "com.apple.rapportd", Program: "/usr/libexec/rapportd", MB: 20, Procs: 1},
	{Label: "com.apple.passd", Program: "/usr/libexec/passd", MB: 40, Procs: 2},
	{Label: "com.apple.coreidvd", Program: "/usr/libexec/coreidvd", MB: 15, Procs: 1},
	{Label: "com.apple.businessservicesd", Program: "/usr/libexec/businessservicesd", MB: 10, Procs: 1},
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
