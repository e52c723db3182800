package android

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// ListManaged implements core.Driver. The AVDs are the root's members; their
// run state comes from supervision first and the private adb server second.
// Whenever the answer is not certain it is "transitioning", which the health
// monitor never counts as a crash.
func (d *Driver) ListManaged(ctx context.Context) ([]core.Observed, error) {
	names, err := d.members()
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return []core.Observed{}, nil
	}
	sort.Strings(names)
	devs, adbErr := d.adbDevices(ctx)
	if adbErr != nil {
		d.log.Warn("adb devices failed; run states are partial", "err", adbErr)
	}
	states := map[string]string{}
	for _, dv := range devs {
		states[dv.Serial] = dv.State
	}

	out := make([]core.Observed, 0, len(names))
	for _, name := range names {
		st, err := d.loadState(name)
		if err != nil {
			d.log.Warn("unreadable AVD state", "avd", name, "err", err)
		}
		if d.ports != nil && st.ConsolePort != 0 {
			// A restarted daemon takes its AVDs' ports back (and holds
			// them) at its first look, not only when a device is next
			// used; later looks are answered from memory.
			if _, err := d.consolePort(ctx, name, st.ConsolePort); err != nil {
				d.log.Warn("take back the AVD's console port", "avd", name, "port", st.ConsolePort, "err", err)
			}
		}
		obs := core.Observed{Handle: name, Name: name}
		p := d.proc(name)
		serial := ""
		if st.ConsolePort != 0 {
			serial = serialFor(st.ConsolePort)
		}
		adbState, listed := states[serial]
		switch {
		case p != nil && !p.alive():
			obs.Run = core.RunStopped // its process ended: proven
		case adbErr != nil:
			if p != nil || st.Running {
				obs.Run = core.RunTransitioning
			} else {
				obs.Run = core.RunStopped
			}
		case listed && adbState == "device":
			obs.Run = core.RunRunning
		case listed:
			obs.Run = core.RunTransitioning // offline: still booting or going away
		case p != nil:
			obs.Run = core.RunTransitioning // launched, not yet known to adb
		default:
			obs.Run = core.RunStopped
		}
		if obs.Run == core.RunRunning && st.MarkID != "" {
			mark, present, err := d.readMark(ctx, serial)
			if err != nil {
				d.log.Info("provenance mark unreadable", "avd", name, "err", err)
			} else {
				ok := present && mark == st.MarkID
				obs.MarkOK = &ok
			}
		}
		out = append(out, obs)
	}
	return out, nil
}

// Catalog implements core.Driver: the device profiles, the installed system
// images for this host's ABI, and the phone images sdkmanager could download.
// `sdkmanager --list` reaches the network; when it fails the catalog falls
// back to what is installed.
func (d *Driver) Catalog(ctx context.Context) (core.Catalog, error) {
	profiles, err := d.deviceProfiles(ctx, true)
	if err != nil {
		return core.Catalog{}, err
	}
	var list sdkList
	if res, err := d.sdkmanager(ctx, "--list"); err == nil {
		list = parseSDKList(res.Stdout)
	} else {
		d.log.Info("sdkmanager --list failed; listing installed images only", "err", err)
		res, err := d.sdkmanager(ctx, "--list_installed")
		if err != nil {
			return core.Catalog{}, fmt.Errorf("android driver: list installed SDK packages: %w", err)
		}
		list = parseSDKList(res.Stdout)
	}

	var cat core.Catalog
	byFamily := map[string][]string{}
	for _, p := range profiles {
		cat.Models = append(cat.Models, core.CatalogModel{Name: p.Name, Identifier: p.ID})
		fam := imageFamily(p.Tag)
		byFamily[fam] = append(byFamily[fam], p.ID)
	}
	installed := map[string]bool{}
	for _, img := range imagesIn(list.Installed) {
		if img.ABI != d.abi || img.APILevel == 0 || img.Codename != "" {
			continue
		}
		installed[img.Package] = true
		cat.Runtimes = append(cat.Runtimes, runtimeEntry(img, true, byFamily))
	}
	for _, img := range imagesIn(list.Available) {
		if installed[img.Package] || !downloadable(img, d.abi) {
			continue
		}
		cat.Runtimes = append(cat.Runtimes, runtimeEntry(img, false, byFamily))
	}
	return cat, nil
}

// downloadable limits the advertised downloads to the phone images a
// request can resolve to: released levels simlock knows, plain versions,
// Google APIs or Play Store, the host's ABI.
func downloadable(img systemImage, abi string) bool {
	if img.ABI != abi || img.Codename != "" || img.Ext != 0 || img.Minor != 0 {
		return false
	}
	if img.Tag != "google_apis" && img.Tag != "google_apis_playstore" {
		return false
	}
	_, known := apiForRelease(releaseForAPI(img.APILevel))
	return known && img.APILevel >= 29
}

func runtimeEntry(img systemImage, available bool, byFamily map[string][]string) core.CatalogRuntime {
	rel := releaseForAPI(img.APILevel)
	return core.CatalogRuntime{
		Name:            fmt.Sprintf("Android %s (API %d, %s, %s)", rel, img.APILevel, img.Tag, img.ABI),
		Version:         rel,
		Build:           fmt.Sprintf("API %d", img.APILevel),
		Identifier:      img.Package,
		Available:       available,
		SupportedModels: byFamily[imageFamily(img.Tag)],
		Tag:             img.Tag,
		ABI:             img.ABI,
		APILevel:        img.APILevel,
	}
}

// Estimate implements core.Driver with the measured figures: a cold boot
// is ~30s, a baseline snapshot restore ~3.7s.
func (d *Driver) Estimate(op core.DriverOp) time.Duration {
	switch op {
	case core.OpProvision:
		return 2 * time.Second
	case core.OpBoot:
		return 30 * time.Second
	case core.OpReclaim:
		return 4 * time.Second
	case core.OpShutdown:
		return 3 * time.Second
	case core.OpDestroy:
		return time.Second
	default:
		return 0
	}
}
