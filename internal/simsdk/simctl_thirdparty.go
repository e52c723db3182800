package simsdk

import (
	"crypto/sha1"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The simctl commands third-party clients (Appium's node-simctl, Detox,
// Maestro, agent-device) call beyond the lifecycle: getenv, openurl,
// listapps and get_app_container, on the per-device app state that
// install, launch, terminate and uninstall keep. Error headers use
// simctl's captured "An error was encountered processing the command"
// form; the reasons for these commands are modelled, not captured.

// systemApp is an app every simulated runtime carries.
type systemApp struct{ id, bundle, name, display string }

var iosSystemApps = []systemApp{
	{"com.apple.Preferences", "Preferences.app", "Preferences", "Settings"},
	{"com.apple.mobilesafari", "MobileSafari.app", "MobileSafari", "Safari"},
	{"com.apple.mobileslideshow", "MobileSlideShow.app", "MobileSlideShow", "Photos"},
}

// containerID is a stable UUID-shaped name for one of a device's
// containers.
func containerID(udid, bundleID, kind string) string {
	h := sha1.Sum([]byte(udid + "/" + bundleID + "/" + kind))
	return strings.ToUpper(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}

func dataContainer(ds deviceSet, d *iosDevice, bundleID string) string {
	return filepath.Join(ds.dataPath(d.UDID), "Containers", "Data", "Application", containerID(d.UDID, bundleID, "data"))
}

// deviceEnv is the environment of the device's launchd, as getenv reads it.
func (s *sdk) deviceEnv(ds deviceSet, d *iosDevice) map[string]string {
	data := ds.dataPath(d.UDID)
	env := map[string]string{
		"HOME":                                 data,
		"TMPDIR":                               filepath.Join(data, "tmp") + "/",
		"SIMULATOR_UDID":                       d.UDID,
		"SIMULATOR_DEVICE_NAME":                d.Name,
		"SIMULATOR_SHARED_RESOURCES_DIRECTORY": data,
		"SIMULATOR_LOG_ROOT":                   ds.logPath(d.UDID),
		"PATH":                                 "/usr/bin:/bin:/usr/sbin:/sbin",
	}
	if rts, err := s.installedRuntimes(); err == nil {
		if r, ok := runtimeByID(rts, d.Runtime); ok {
			env["SIMULATOR_RUNTIME_VERSION"] = r.Version
			env["SIMULATOR_RUNTIME_BUILD_VERSION"] = r.Build
			env["SIMULATOR_ROOT"] = r.runtimeRoot()
		}
	}
	if t, ok := findDeviceType(d.DeviceType); ok {
		env["SIMULATOR_MODEL_IDENTIFIER"] = t.ModelIdentifier
		env["SIMULATOR_PRODUCT_CLASS"] = t.ProductFamily
	}
	return env
}

// simctl getenv <device> <variable name>
func (s *sdk) simctlGetenv(ds deviceSet, args []string) error {
	if err := rejectFlags(args, nil, "getenv <device> <variable name>"); err != nil {
		return err
	}
	if len(args) != 2 {
		return usageErr("getenv <device> <variable name>")
	}
	d, err := s.bootedDevice(ds, args[0])
	if err != nil {
		return err
	}
	v, ok := s.deviceEnv(ds, d)[args[1]]
	if !ok {
		return simErr(2, "No environment variable named "+args[1]+" in the simulator's launchd.")
	}
	_, err = fmt.Fprintln(s.stdout, v)
	return err
}

// simctl openurl <device> <URL>: the URL is recorded on the device, the
// way a test can tell it was delivered.
func (s *sdk) simctlOpenURL(ds deviceSet, args []string) error {
	if err := rejectFlags(args, nil, "openurl <device> <URL>"); err != nil {
		return err
	}
	if len(args) != 2 {
		return usageErr("openurl <device> <URL>")
	}
	d, err := s.bootedDevice(ds, args[0])
	if err != nil {
		return err
	}
	u, perr := url.Parse(args[1])
	if perr != nil || u.Scheme == "" {
		return domainErr("NSOSStatusErrorDomain", -10814, 1,
			"Simulator device failed to open "+args[1]+".", "The operation couldn’t be completed. (OSStatus error -10814.)")
	}
	return s.withSetLock(ds, func() error {
		cur, err := ds.load(d.UDID)
		if err != nil {
			return errInvalidDevice(args[0])
		}
		cur.OpenedURLs = append(cur.OpenedURLs, args[1])
		return ds.save(cur)
	})
}

// OpenedURLs are the URLs simctl openurl delivered to a device of the
// default set at home (udid), oldest first; tests read them.
func OpenedURLs(home, set, udid string) ([]string, error) {
	s := &sdk{home: home, env: func(string) string { return "" }}
	ds, err := s.openSet(set)
	if err != nil {
		return nil, err
	}
	d, err := ds.load(udid)
	if err != nil {
		return nil, err
	}
	return d.OpenedURLs, nil
}

// plistValue writes a string the way NSDictionary's description does:
// bare when it is only letters, digits and _, else quoted.
func plistValue(v string) string {
	bare := v != ""
	for _, c := range v {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			bare = false
			break
		}
	}
	if bare {
		return v
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// simctl listapps <device>: every installed app, in the old-style plist
// (NSDictionary description) simctl prints.
func (s *sdk) simctlListApps(ds deviceSet, args []string) error {
	if err := rejectFlags(args, nil, "listapps <device>"); err != nil {
		return err
	}
	if len(args) != 1 {
		return usageErr("listapps <device>")
	}
	d, err := s.bootedDevice(ds, args[0])
	if err != nil {
		return err
	}
	root := ""
	if rts, err := s.installedRuntimes(); err == nil {
		if r, ok := runtimeByID(rts, d.Runtime); ok {
			root = r.runtimeRoot()
		}
	}
	type entry struct {
		id     string
		fields [][2]string
	}
	var entries []entry
	for _, a := range iosSystemApps {
		p := root + "/Applications/" + a.bundle
		entries = append(entries, entry{a.id, [][2]string{
			{"ApplicationType", "System"}, {"Bundle", "file://" + p + "/"}, {"CFBundleDisplayName", a.display},
			{"CFBundleExecutable", a.name}, {"CFBundleIdentifier", a.id}, {"CFBundleName", a.name},
			{"CFBundleVersion", "1.0"}, {"Path", p},
		}})
	}
	for _, a := range d.Apps {
		name := strings.TrimSuffix(filepath.Base(a.Path), filepath.Ext(a.Path))
		entries = append(entries, entry{a.BundleID, [][2]string{
			{"ApplicationType", "User"}, {"Bundle", "file://" + a.Path + "/"}, {"CFBundleDisplayName", name},
			{"CFBundleExecutable", name}, {"CFBundleIdentifier", a.BundleID}, {"CFBundleName", name},
			{"CFBundleVersion", "1"}, {"DataContainer", "file://" + dataContainer(ds, d, a.BundleID) + "/"}, {"Path", a.Path},
		}})
	}
	slices.SortFunc(entries, func(x, y entry) int { return strings.Compare(x.id, y.id) })
	var b strings.Builder
	b.WriteString("{\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "    %s =     {\n", plistValue(e.id))
		for _, f := range e.fields {
			fmt.Fprintf(&b, "        %s = %s;\n", f[0], plistValue(f[1]))
		}
		b.WriteString("        GroupContainers =         {\n        };\n")
		b.WriteString("        SBAppTags =         (\n        );\n")
		b.WriteString("    };\n")
	}
	b.WriteString("}\n")
	_, err = fmt.Fprint(s.stdout, b.String())
	return err
}

// simctl get_app_container <device> <bundle id> [app|data|groups|<group id>]
func (s *sdk) simctlGetAppContainer(ds deviceSet, args []string) error {
	const usage = "get_app_container <device> <app bundle identifier> [<container>]"
	if err := rejectFlags(args, nil, usage); err != nil {
		return err
	}
	if len(args) < 2 || len(args) > 3 {
		return usageErr(usage)
	}
	d, err := s.bootedDevice(ds, args[0])
	if err != nil {
		return err
	}
	kind := "app"
	if len(args) == 3 {
		kind = args[2]
	}
	i := slices.IndexFunc(d.Apps, func(a iosApp) bool { return a.BundleID == args[1] })
	if i < 0 {
		return simErr(2, "Failed to get the container of "+args[1]+": the app is not installed.", "No such file or directory")
	}
	var out string
	switch kind {
	case "app":
		out = d.Apps[i].Path
	case "data":
		out = dataContainer(ds, d, args[1])
		if err := os.MkdirAll(out, dirMode); err != nil {
			return err
		}
	case "groups":
		return nil // the simulated apps belong to no app group
	default:
		return simErr(2, "Failed to get the container of "+args[1]+": no group container "+kind+".", "No such file or directory")
	}
	_, err = fmt.Fprintln(s.stdout, out)
	return err
}

// rejectFlags fails on an option the subcommand does not take, as simctl
// does: with the subcommand's usage (simctl prints no separate reason).
// allowed are its options; those ending in "=" take a value (--arch=x).
func rejectFlags(args []string, allowed []string, usage string) error {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			continue
		}
		name, _, hasValue := strings.Cut(a, "=")
		ok := slices.Contains(allowed, a) || (hasValue && slices.Contains(allowed, name+"="))
		if !ok {
			return usageErr(usage)
		}
	}
	return nil
}
