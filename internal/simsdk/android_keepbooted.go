package simsdk

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The device commands the Android driver's keep-booted cleaning sends
// (internal/drivers/android/keepbooted.go), on the same per-device state
// as settings and package states (the data partition, so a package
// installed or a permission granted in one lease stays until something
// undoes it, and a snapshot load or -wipe-data brings the old state back):
//
//	pm list users
//	pm grant|revoke [--user N] PKG PERMISSION   (runtime permissions only)
//	dumpsys package PKG   runtime permissions of user 0
//	dumpsys account       the account inventory (none are ever added)
//	wm size [WxH|reset]   wm density [N|reset]
//	find PATH... [-type f|d|l]   toybox find, never following symlinks
//	cmd clipboard ...     the image's clipboard service takes no shell commands
//
// Texts follow the platform's: "Users:" then a tab and UserInfo{id:name:flags};
// pm grant/revoke exceptions as "Exception occurred while executing 'grant':";
// "Physical size: WxH" and "Override size: WxH"; find's "No such file or
// directory" for a missing path.

// runtimePermissions are the permissions pm grant and pm revoke change: the
// dangerous (runtime) ones. Any other android.permission is not a
// changeable type.
var runtimePermissions = []string{
	"android.permission.ACCESS_COARSE_LOCATION", "android.permission.ACCESS_FINE_LOCATION",
	"android.permission.BODY_SENSORS", "android.permission.CALL_PHONE", "android.permission.CAMERA",
	"android.permission.POST_NOTIFICATIONS", "android.permission.READ_CALENDAR", "android.permission.READ_CONTACTS",
	"android.permission.READ_EXTERNAL_STORAGE", "android.permission.READ_MEDIA_AUDIO", "android.permission.READ_MEDIA_IMAGES",
	"android.permission.READ_MEDIA_VIDEO", "android.permission.READ_PHONE_STATE", "android.permission.READ_SMS",
	"android.permission.RECORD_AUDIO", "android.permission.SEND_SMS", "android.permission.WRITE_CALENDAR",
	"android.permission.WRITE_CONTACTS", "android.permission.WRITE_EXTERNAL_STORAGE",
}

// normalPermissions are installed permissions the simulated images know:
// granting one is refused as not changeable.
var normalPermissions = []string{"android.permission.INTERNET", "android.permission.ACCESS_NETWORK_STATE",
	"android.permission.VIBRATE", "android.permission.WAKE_LOCK"}

// pmListUsers answers `pm list users`: the system user only.
func (sh *devShell) pmListUsers(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "Error: unknown option: "+args[0])
		return 1
	}
	fmt.Fprint(stdout, "Users:\n\tUserInfo{0:Owner:c13} running\n")
	return 0
}

// pmGrant is pm grant and pm revoke of one runtime permission.
func (sh *devShell) pmGrant(verb string, args []string, stdout, stderr io.Writer) int {
	exception := func(kind, msg string) int {
		fmt.Fprintf(stderr, "Exception occurred while executing '%s':\njava.lang.%s: %s\n", verb, kind, msg)
		return 255
	}
	args, user, ok := userArg(args)
	if !ok {
		return exception("IllegalArgumentException", "Unknown user "+user)
	}
	if len(args) != 2 {
		fmt.Fprintf(stderr, "Error: usage: pm %s [--user USER_ID] PACKAGE PERMISSION\n", verb)
		return 1
	}
	pkg, perm := args[0], args[1]
	known := append(systemPackages(sh.run.Tag), installedApps(sh.run.DataDir)...)
	switch {
	case !slices.Contains(known, pkg):
		return exception("IllegalArgumentException", "Unknown package: "+pkg)
	case slices.Contains(normalPermissions, perm):
		return exception("SecurityException", fmt.Sprintf("Permission %s requested by %s is not a changeable permission type", perm, pkg))
	case !slices.Contains(runtimePermissions, perm):
		return exception("IllegalArgumentException", "Unknown permission: "+perm)
	}
	err := sh.updateDevState(func(st *devState) error {
		if st.Grants == nil {
			st.Grants = map[string]map[string][]string{}
		}
		if st.Grants[user] == nil {
			st.Grants[user] = map[string][]string{}
		}
		g := slices.DeleteFunc(st.Grants[user][pkg], func(p string) bool { return p == perm })
		if verb == "grant" {
			g = append(g, perm)
			sort.Strings(g)
		}
		if len(g) == 0 {
			delete(st.Grants[user], pkg)
		} else {
			st.Grants[user][pkg] = g
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "pm: %v\n", err)
		return 1
	}
	return 0
}

// dropGrants forgets a package's permissions once it is uninstalled.
func (sh *devShell) dropGrants(pkg string) {
	_ = sh.updateDevState(func(st *devState) error {
		for _, g := range st.Grants {
			delete(g, pkg)
		}
		return nil
	})
}

// runtimePermissionLines are the "runtime permissions:" block of a
// package's user section in `dumpsys package`, empty without grants.
func runtimePermissionLines(st devState, user, pkg string) string {
	g := st.Grants[user][pkg]
	if len(g) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("      runtime permissions:\n")
	for _, p := range g {
		fmt.Fprintf(&b, "        %s: granted=true, flags=[ USER_SET ]\n", p)
	}
	return b.String()
}

// dumpsysAccount is `dumpsys account`: the simulated images carry no
// accounts.
func (sh *devShell) dumpsysAccount(stdout io.Writer) int {
	fmt.Fprint(stdout, "User UserInfo{0:Owner:c13}:\n  Accounts: 0\n\n  Active Sessions: 0\n")
	return 0
}

var wmSizeRe = regexp.MustCompile(`^[1-9][0-9]*x[1-9][0-9]*$`)

// wmCommand is `wm size` and `wm density`: the physical values come from
// the AVD, an override lives on the data partition until reset.
func (sh *devShell) wmCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "size" && args[0] != "density") {
		name := "wm"
		if len(args) > 0 {
			name += " " + args[0]
		}
		return notSimulated(name, stderr)
	}
	what, rest := args[0], args[1:]
	phys := sh.physicalDisplay(what)
	if len(rest) > 1 {
		fmt.Fprintf(stderr, "Error: too many arguments for wm %s\n", what)
		return 1
	}
	if len(rest) == 0 {
		label := map[string]string{"size": "size", "density": "density"}[what]
		fmt.Fprintf(stdout, "Physical %s: %s\n", label, phys)
		if o := readDevState(sh.run).Display[what]; o != "" {
			fmt.Fprintf(stdout, "Override %s: %s\n", label, o)
		}
		return 0
	}
	v := rest[0]
	if v != "reset" {
		valid := wmSizeRe.MatchString(v)
		if what == "density" {
			n, err := strconv.Atoi(v)
			valid = err == nil && n > 0
		}
		if !valid {
			if what == "size" {
				fmt.Fprintf(stderr, "Error: bad size %s\n", v)
			} else {
				fmt.Fprintf(stderr, "Error: bad number %s\n", v)
			}
			return 1
		}
	}
	err := sh.updateDevState(func(st *devState) error {
		if st.Display == nil {
			st.Display = map[string]string{}
		}
		if v == "reset" || v == phys {
			delete(st.Display, what)
		} else {
			st.Display[what] = v
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "wm: %v\n", err)
		return 1
	}
	return 0
}

// physicalDisplay is the AVD's own screen size or density.
func (sh *devShell) physicalDisplay(what string) string {
	cfg, _ := readINI(filepath.Join(sh.run.AVDDir, "config.ini"))
	if what == "density" {
		if sh.run.Density > 0 {
			return strconv.Itoa(sh.run.Density)
		}
		if d := cfg["hw.lcd.density"]; d != "" {
			return d
		}
		return "420"
	}
	w, h := cfg["hw.lcd.width"], cfg["hw.lcd.height"]
	if w == "" || h == "" {
		return "1080x2400"
	}
	return w + "x" + h
}

// find is toybox find over the data partition: PATH... then an optional
// -type f|d|l. Like find -P it never follows a symbolic link, a named
// path that is one included, and lists entries in directory order
// (sorted here).
func (sh *devShell) find(args []string, stdout, stderr io.Writer) int {
	var roots []string
	kind := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-type":
			if i+1 >= len(args) || !slices.Contains([]string{"f", "d", "l"}, args[i+1]) {
				fmt.Fprintf(stderr, "find: bad -type '%s'\n", strings.Join(args[i+1:min(i+2, len(args))], ""))
				return 1
			}
			kind = args[i+1]
			i++
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "find: Unknown option '%s'\n", a)
			return 1
		case kind != "":
			fmt.Fprintf(stderr, "find: Unknown option '%s'\n", a)
			return 1
		default:
			roots = append(roots, a)
		}
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	status := 0
	for _, root := range roots {
		host, ok := devicePath(sh.run, root)
		if _, err := os.Lstat(host); !ok || err != nil {
			fmt.Fprintf(stderr, "find: %s: No such file or directory\n", root)
			status = 1
			continue
		}
		_ = filepath.WalkDir(host, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(host, p)
			shown := root
			if rel != "." {
				shown = path.Join(root, filepath.ToSlash(rel))
			}
			t := e.Type()
			match := kind == "" || (kind == "f" && t.IsRegular()) || (kind == "d" && t.IsDir()) || (kind == "l" && t&fs.ModeSymlink != 0)
			if match {
				fmt.Fprintln(stdout, shown)
			}
			return nil
		})
	}
	return status
}
