package simsdk

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The device-state commands resource tuning reads and writes: settings,
// cmd (role, activity), bmgr, the package states pm and `dumpsys package`
// report, and the /proc files the driver reads (boot_id, meminfo).
//
// The state lives on the data partition (as Android keeps settings and
// package restrictions under /data/system), so a snapshot load brings the
// snapshot's values back and -wipe-data starts from the image defaults.
// Output forms follow the platform's shell commands: `settings get` prints
// "null" for an absent key, `settings delete` "Deleted N rows", pm a
// "Package P new state: S" line; `cmd` with a missing service prints
// "cmd: Can't find service: NAME" and exits 20. Usage errors are modelled,
// not captured.

// deviceStateFile is where a device's settings and package states live,
// relative to the data partition.
const deviceStateFile = "system/simsdk-device.json"

// devState is one device's mutable system state.
type devState struct {
	// Settings are namespace (global, system, secure) → key → value.
	Settings map[string]map[string]string `json:"settings"`
	// Packages are explicit enabled states by user ("0") and package:
	// "enabled", "disabled", "disabled-user". Absent: the default.
	Packages map[string]map[string]string `json:"packages,omitempty"`
	// Roles are role → holders.
	Roles map[string][]string `json:"roles"`
	// Grants are granted runtime permissions by user and package
	// (android_keepbooted.go).
	Grants map[string]map[string][]string `json:"grants,omitempty"`
	// Display holds wm's size and density overrides ("size", "density").
	Display map[string]string `json:"display,omitempty"`
}

var settingsNamespaces = []string{"global", "system", "secure"}

// imageDefaults is the state of a freshly wiped device of image tag.
func imageDefaults(tag string) devState {
	google := strings.HasPrefix(tag, "google_apis")
	ime := "com.android.inputmethod.latin/.LatinIME"
	roles := map[string][]string{
		"android.app.role.HOME":    {"com.android.launcher3"},
		"android.app.role.DIALER":  {"com.android.dialer"},
		"android.app.role.SMS":     {"com.android.messaging"},
		"android.app.role.BROWSER": {"org.chromium.webview_shell"},
	}
	if google {
		ime = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"
		roles = map[string][]string{
			"android.app.role.HOME":    {"com.google.android.apps.nexuslauncher"},
			"android.app.role.DIALER":  {"com.google.android.dialer"},
			"android.app.role.SMS":     {"com.google.android.apps.messaging"},
			"android.app.role.BROWSER": {"com.android.chrome"},
		}
	}
	return devState{
		Settings: map[string]map[string]string{
			// Two of the three animation scales are written by setup; the
			// third is absent until someone sets it, as on a fresh image.
			"global": {"adb_enabled": "1", "device_provisioned": "1",
				"window_animation_scale": "1.0", "transition_animation_scale": "1.0"},
			"system": {"screen_off_timeout": "60000"},
			"secure": {"default_input_method": ime, "enabled_input_methods": ime,
				"screensaver_enabled": "1", "screensaver_activate_on_dock": "1", "screensaver_activate_on_sleep": "0",
				"backup_enabled": "1", "user_setup_complete": "1"},
		},
		Roles: roles,
	}
}

// readDevState reads the device's state, the image defaults when none was
// written yet.
func readDevState(r *emuRun) devState {
	var st devState
	if err := readJSON(filepath.Join(r.DataDir, filepath.FromSlash(deviceStateFile)), &st); err != nil {
		return imageDefaults(r.Tag)
	}
	if st.Settings == nil {
		st.Settings = map[string]map[string]string{}
	}
	return st
}

// updateDevState changes the device's state under the AVD's data lock.
func (sh *devShell) updateDevState(fn func(*devState) error) error {
	return sh.s.withDataLock(sh.run.AVDDir, func() error {
		st := readDevState(sh.run)
		if err := fn(&st); err != nil {
			return err
		}
		p := filepath.Join(sh.run.DataDir, filepath.FromSlash(deviceStateFile))
		if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
			return err
		}
		return writeJSONAtomic(p, st)
	})
}

// userArg strips a leading "--user N" (N a number or "current"); only the
// system user 0 exists on a simulated device.
func userArg(args []string) (rest []string, user string, ok bool) {
	user = "0"
	if len(args) >= 2 && args[0] == "--user" {
		user, args = args[1], args[2:]
		if user == "current" || user == "cur" {
			user = "0"
		}
	}
	return args, user, user == "0"
}

const settingsUsage = "usage:  settings [--user <USER_ID> | current] get namespace key\n" +
	"        settings [--user <USER_ID> | current] put namespace key value\n" +
	"        settings [--user <USER_ID> | current] delete namespace key\n" +
	"        settings [--user <USER_ID> | current] list namespace\n" +
	"\n'namespace' is one of {system, secure, global}, case-insensitive\n"

func (sh *devShell) settings(args []string, stdout, stderr io.Writer) int {
	args, user, ok := userArg(args)
	if !ok {
		fmt.Fprintf(stderr, "Invalid user: %s\n", user)
		return 255
	}
	if len(args) < 2 {
		fmt.Fprint(stderr, settingsUsage)
		return 255
	}
	verb, ns := args[0], strings.ToLower(args[1])
	if !slices.Contains(settingsNamespaces, ns) {
		fmt.Fprint(stderr, settingsUsage)
		return 255
	}
	want := map[string]int{"get": 3, "put": 4, "delete": 3, "list": 2}
	n, known := want[verb]
	if !known || len(args) < n || (verb != "put" && len(args) != n) {
		fmt.Fprint(stderr, settingsUsage)
		return 255
	}
	switch verb {
	case "get":
		v, ok := readDevState(sh.run).Settings[ns][args[2]]
		if !ok {
			v = "null"
		}
		fmt.Fprintln(stdout, v)
		return 0
	case "list":
		m := readDevState(sh.run).Settings[ns]
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(stdout, "%s=%s\n", k, m[k])
		}
		return 0
	}
	rows := 0
	err := sh.updateDevState(func(st *devState) error {
		if st.Settings[ns] == nil {
			st.Settings[ns] = map[string]string{}
		}
		if verb == "put" {
			// Extra words after the value are a tag and "default" in
			// the real command; the value is the fourth word.
			st.Settings[ns][args[2]] = args[3]
			return nil
		}
		if _, ok := st.Settings[ns][args[2]]; ok {
			rows = 1
			delete(st.Settings[ns], args[2])
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "settings: %v\n", err)
		return 255
	}
	if verb == "delete" {
		fmt.Fprintf(stdout, "Deleted %d rows\n", rows)
	}
	return 0
}

// cmd SERVICE ARGS: the role and activity services.
func (sh *devShell) cmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "cmd: No service specified; use -l to list all services")
		return 20
	}
	switch args[0] {
	case "role":
		if _, fired, _ := sh.s.fire(faultRoleUnavailable); fired {
			fmt.Fprintln(stderr, "cmd: Can't find service: role")
			return 20
		}
		return sh.role(args[1:], stdout, stderr)
	case "clipboard":
		// The images' clipboard service answers no shell commands.
		fmt.Fprintln(stderr, "cmd: Can't find service: clipboard")
		return 20
	case "activity":
		if len(args) == 2 && args[1] == "get-current-user" {
			fmt.Fprintln(stdout, "0")
			return 0
		}
	}
	return notSimulated("cmd "+args[0], stderr)
}

func (sh *devShell) role(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Role (role) commands: get-role-holders, add-role-holder, remove-role-holder")
		return 255
	}
	verb := args[0]
	rest, user, ok := userArg(args[1:])
	if !ok {
		fmt.Fprintf(stderr, "Exception occurred while executing '%s':\njava.lang.IllegalArgumentException: Invalid user: %s\n", verb, user)
		return 255
	}
	switch {
	case verb == "get-role-holders" && len(rest) == 1:
		for _, p := range readDevState(sh.run).Roles[rest[0]] {
			fmt.Fprintln(stdout, p)
		}
		return 0
	case (verb == "add-role-holder" || verb == "remove-role-holder") && (len(rest) == 2 || len(rest) == 3):
		role, pkg := rest[0], rest[1]
		err := sh.updateDevState(func(st *devState) error {
			if st.Roles == nil {
				st.Roles = map[string][]string{}
			}
			holders := slices.DeleteFunc(st.Roles[role], func(p string) bool { return p == pkg })
			if verb == "add-role-holder" {
				holders = append(holders, pkg)
			}
			st.Roles[role] = holders
			return nil
		})
		if err != nil {
			fmt.Fprintf(stderr, "role: %v\n", err)
			return 255
		}
		return 0
	}
	fmt.Fprintf(stderr, "Exception occurred while executing '%s':\njava.lang.IllegalArgumentException: bad arguments\n", verb)
	return 255
}

// bmgr [--user N] enabled | enable true|false: the Backup Manager switch,
// kept as the secure setting backup_enabled.
func (sh *devShell) bmgr(args []string, stdout, stderr io.Writer) int {
	args, user, ok := userArg(args)
	if !ok {
		fmt.Fprintf(stderr, "Error: user %s does not exist\n", user)
		return 1
	}
	word := func(on bool) string {
		if on {
			return "enabled"
		}
		return "disabled"
	}
	switch {
	case len(args) == 1 && args[0] == "enabled":
		on := readDevState(sh.run).Settings["secure"]["backup_enabled"] == "1"
		fmt.Fprintf(stdout, "Backup Manager currently %s\n", word(on))
		return 0
	case len(args) == 2 && args[0] == "enable" && (args[1] == "true" || args[1] == "false"):
		on := args[1] == "true"
		err := sh.updateDevState(func(st *devState) error {
			if st.Settings["secure"] == nil {
				st.Settings["secure"] = map[string]string{}
			}
			st.Settings["secure"]["backup_enabled"] = map[bool]string{true: "1", false: "0"}[on]
			return nil
		})
		if err != nil {
			fmt.Fprintf(stderr, "bmgr: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "Backup Manager now %s\n", word(on))
		return 0
	}
	fmt.Fprintln(stderr, "usage: bmgr [--user USER_ID] enabled | bmgr [--user USER_ID] enable BOOL (others not simulated)")
	return 1
}

// packageState is a package's enabled state for user: "default",
// "enabled", "disabled" or "disabled-user".
func (st devState) packageState(user, pkg string) string {
	if s, ok := st.Packages[user][pkg]; ok {
		return s
	}
	return "default"
}

// packageEnabledCode is the number `dumpsys package` prints for a state.
func packageEnabledCode(state string) int {
	return map[string]int{"default": 0, "enabled": 1, "disabled": 2, "disabled-user": 3}[state]
}

// setPackageState is pm disable-user|enable|default-state.
func (sh *devShell) setPackageState(verb string, args []string, known []string, stdout, stderr io.Writer) int {
	args, user, ok := userArg(args)
	if !ok || len(args) != 1 {
		fmt.Fprintf(stderr, "Error: usage: pm %s [--user USER_ID] PACKAGE_OR_COMPONENT\n", verb)
		return 1
	}
	pkg := args[0]
	if !slices.Contains(known, pkg) {
		fmt.Fprintf(stderr, "Exception occurred while executing '%s':\njava.lang.IllegalArgumentException: Unknown package: %s\n", verb, pkg)
		return 255
	}
	state := map[string]string{"disable-user": "disabled-user", "disable": "disabled", "enable": "enabled", "default-state": "default"}[verb]
	err := sh.updateDevState(func(st *devState) error {
		if st.Packages == nil {
			st.Packages = map[string]map[string]string{}
		}
		if st.Packages[user] == nil {
			st.Packages[user] = map[string]string{}
		}
		if state == "default" {
			delete(st.Packages[user], pkg)
		} else {
			st.Packages[user][pkg] = state
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "pm: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Package %s new state: %s\n", pkg, state)
	return 0
}

// dumpsys package PKG: the per-user lines of one package, which carry its
// enabled state (0 default, 1 enabled, 2 disabled, 3 disabled-user).
func (sh *devShell) dumpsys(args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == "package" && !strings.HasPrefix(args[1], "-") {
		pkg := args[1]
		if !slices.Contains(append(systemPackages(sh.run.Tag), installedApps(sh.run.DataDir)...), pkg) {
			fmt.Fprintf(stdout, "Unable to find package: %s\n", pkg)
			return 0
		}
		st := readDevState(sh.run)
		fmt.Fprintf(stdout, "Packages:\n  Package [%s]:\n    pkg=Package{%s}\n", pkg, pkg)
		fmt.Fprintf(stdout, "    User 0: ceDataInode=0 installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=%d instant=false virtual=false\n",
			packageEnabledCode(st.packageState("0", pkg)))
		fmt.Fprint(stdout, runtimePermissionLines(st, "0", pkg))
		return 0
	}
	if len(args) == 1 && args[0] == "account" {
		return sh.dumpsysAccount(stdout)
	}
	if len(args) > 0 && args[0] == "window" {
		return sh.dumpsysWindow(args[1:], stdout, stderr) // android_window.go
	}
	return notSimulated("dumpsys "+strings.Join(args, " "), stderr)
}

func (sh *devShell) wm(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "dismiss-keyguard" {
		return sh.dismissKeyguard(stderr) // android_window.go
	}
	return sh.wmCommand(args, stdout, stderr)
}

// procFile answers the kernel files the driver reads; ok is false for any
// other path.
func (sh *devShell) procFile(p string) (string, bool) {
	cur := liveRun(sh.s.runDir(sh.run.ConsolePort))
	if cur == nil {
		cur = sh.run
	}
	switch p {
	case "/proc/sys/kernel/random/boot_id":
		return cur.BootID + "\n", true
	case "/proc/meminfo":
		kb := cur.RAMMB * 1024
		return fmt.Sprintf("MemTotal:       %8s kB\nMemFree:        %8s kB\nMemAvailable:   %8s kB\n",
			strconv.Itoa(kb), strconv.Itoa(kb/2), strconv.Itoa(kb*3/5)), true
	}
	return "", false
}

func notSimulated(name string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: not simulated by the simlock simulated SDK\n", name)
	return 1
}
