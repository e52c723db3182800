package simsdk

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// App commands only record what is installed on the device; nothing runs.
// They exist so that passthrough commands an agent sends behave like the
// real ones where orchestration can observe it (state checks, errors,
// the install-fail fault).

// bootedDevice resolves ref and insists that it is booted, failing the way
// simctl does for a device it cannot look services up on.
func (s *sdk) bootedDevice(ds deviceSet, ref string) (*iosDevice, error) {
	d, err := s.resolveDevice(ds, ref)
	if err != nil {
		return nil, err
	}
	if st := ds.state(d, s.now()); st != stateBooted {
		return nil, stateErr("lookup", st)
	}
	return d, nil
}

var bundleIDPattern = regexp.MustCompile(`<key>CFBundleIdentifier</key>\s*<string>([^<]+)</string>`)

// bundleID reads CFBundleIdentifier from an XML Info.plist in the bundle,
// falling back to a name derived from the bundle's file name (binary
// plists are not worth parsing for a simulation).
func bundleID(path string) string {
	if data, err := os.ReadFile(filepath.Join(path, "Info.plist")); err == nil {
		if m := bundleIDPattern.FindSubmatch(data); m != nil {
			return strings.TrimSpace(string(m[1]))
		}
	}
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return "simulated." + base
}

// simctl install <device> <path>
func (s *sdk) simctlInstall(ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) != 2 {
		return usageErr("install <device> <path>")
	}
	d, err := s.bootedDevice(ds, pos[0])
	if err != nil {
		return err
	}
	path, err := filepath.Abs(pos[1])
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return domainErr("NSPOSIXErrorDomain", 2, 2,
			"Failed to install the requested application", "No such file or directory: "+pos[1])
	}
	if _, fired, err := s.fire(faultInstallFail); err != nil {
		return err
	} else if fired {
		return domainErr("IXUserPresentableErrorDomain", 1, 1,
			"This app could not be installed at this time. "+faultNote(faultInstallFail))
	}
	id := bundleID(path)
	return s.withSetLock(ds, func() error {
		cur, err := ds.load(d.UDID)
		if err != nil {
			return errInvalidDevice(pos[0])
		}
		cur.Apps = slices.DeleteFunc(cur.Apps, func(a iosApp) bool { return a.BundleID == id })
		cur.Apps = append(cur.Apps, iosApp{BundleID: id, Path: path})
		return ds.save(cur)
	})
}

// simctl uninstall <device> <bundle id>
func (s *sdk) simctlUninstall(ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) != 2 {
		return usageErr("uninstall <device> <app bundle identifier>")
	}
	d, err := s.bootedDevice(ds, pos[0])
	if err != nil {
		return err
	}
	return s.withSetLock(ds, func() error {
		cur, err := ds.load(d.UDID)
		if err != nil {
			return errInvalidDevice(pos[0])
		}
		cur.Apps = slices.DeleteFunc(cur.Apps, func(a iosApp) bool { return a.BundleID == pos[1] })
		return ds.save(cur)
	})
}

func installed(d *iosDevice, id string) bool {
	return strings.HasPrefix(id, "com.apple.") ||
		slices.ContainsFunc(d.Apps, func(a iosApp) bool { return a.BundleID == id })
}

// simctl launch [options] <device> <bundle id> [<arguments>...]: prints
// "<bundle id>: <pid>" like simctl.
func (s *sdk) simctlLaunch(ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) < 2 {
		return usageErr("launch [-w | --wait-for-debugger] [--console|--console-pty] <device> <app bundle identifier> [<argv 1> <argv 2> ... <argv n>]")
	}
	d, err := s.bootedDevice(ds, pos[0])
	if err != nil {
		return err
	}
	id := pos[1]
	if !installed(d, id) {
		return domainErr("FBSOpenApplicationServiceErrorDomain", 4, 4,
			fmt.Sprintf("The request to open %q failed.", id))
	}
	if err := s.setAppRunning(ds, d.UDID, id, true); err != nil {
		return err
	}
	// A stable pseudo pid: above the device process, different per app.
	pid := d.PID + 1 + int(crc32.ChecksumIEEE([]byte(id))%5000)
	_, err = fmt.Fprintf(s.stdout, "%s: %d\n", id, pid)
	return err
}

// setAppRunning records whether an installed app runs (system apps are
// not tracked). It reports whether the app was running before.
func (s *sdk) setAppRunning(ds deviceSet, udid, id string, running bool) error {
	return s.withSetLock(ds, func() error {
		cur, err := ds.load(udid)
		if err != nil {
			return errInvalidDevice(udid)
		}
		for i := range cur.Apps {
			if cur.Apps[i].BundleID == id {
				cur.Apps[i].Running = running
			}
		}
		return ds.save(cur)
	})
}

// simctl terminate <device> <bundle id>
func (s *sdk) simctlTerminate(ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) != 2 {
		return usageErr("terminate <device> <app bundle identifier>")
	}
	d, err := s.bootedDevice(ds, pos[0])
	if err != nil {
		return err
	}
	if !installed(d, pos[1]) {
		return domainErr("FBSOpenApplicationServiceErrorDomain", 4, 4,
			fmt.Sprintf("The request to terminate %q failed: it is not installed.", pos[1]))
	}
	i := slices.IndexFunc(d.Apps, func(a iosApp) bool { return a.BundleID == pos[1] })
	if i >= 0 && !d.Apps[i].Running {
		return simErr(164, "found nothing to terminate")
	}
	if i < 0 {
		return nil // a system app: not tracked
	}
	return s.setAppRunning(ds, d.UDID, pos[1], false)
}
