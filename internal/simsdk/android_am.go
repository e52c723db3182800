package simsdk

import (
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
)

// The activity manager and the package queries third-party clients send
// (agent-device, Appium, Maestro): `am start|start-activity|force-stop|
// kill|broadcast`, `cmd package query-activities|resolve-activity|
// has-feature`, `pm list features` and `pidof`. An emulator run remembers
// which apps are running (emuRun.Running, foreground last); a cold boot
// starts with none, as on a real device.
//
// Texts follow the shapes of AOSP's ActivityManagerShellCommand and
// PackageManagerShellCommand as publicly reported; none is a capture (the
// fixtures hold no am or cmd output). Nothing really runs: an "activity"
// is the app's launcher component, <package>/.MainActivity for an
// installed APK (only the package is read from its manifest, apkPackage).

// launcherActivities are the system packages that have a launcher entry on
// the simulated images (the rest, like android or com.android.shell, have
// none).
var launcherActivities = map[string]string{
	"com.android.settings": "com.android.settings/.Settings",
	"com.android.vending":  "com.android.vending/.AssetBrowserActivity",
}

// launcherOf is pkg's launcher component, or "" when it has none or is not
// installed.
func (sh *devShell) launcherOf(pkg string) string {
	if slices.Contains(installedApps(sh.run.DataDir), pkg) {
		return pkg + "/.MainActivity"
	}
	if c, ok := launcherActivities[pkg]; ok && slices.Contains(systemPackages(sh.run.Tag), pkg) {
		return c
	}
	return ""
}

// launchable are all packages with a launcher entry, sorted.
func (sh *devShell) launchable() []string {
	var out []string
	for _, p := range append(systemPackages(sh.run.Tag), installedApps(sh.run.DataDir)...) {
		if sh.launcherOf(p) != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// appPID is a stable pseudo pid for a running package.
func appPID(pkg string) int { return 3000 + int(crc32.ChecksumIEEE([]byte(pkg))%20000) }

// running re-reads the run record: another adb call may have changed it.
func (sh *devShell) running() []string {
	if cur := liveRun(sh.s.runDir(sh.run.ConsolePort)); cur != nil {
		return cur.Running
	}
	return sh.run.Running
}

func (sh *devShell) setRunning(fn func([]string) []string) error {
	return sh.s.updateRun(sh.run.ConsolePort, func(r *emuRun) error {
		r.Running = fn(r.Running)
		return nil
	})
}

// intent is the part of an am intent the simulation resolves.
type intent struct {
	action, data, mimeType, pkg, component string
	categories                             []string
}

func (in intent) String() string {
	var parts []string
	if in.action != "" {
		parts = append(parts, "act="+in.action)
	}
	if len(in.categories) > 0 {
		parts = append(parts, "cat=["+strings.Join(in.categories, ",")+"]")
	}
	if in.data != "" {
		parts = append(parts, "dat="+in.data)
	}
	if in.mimeType != "" {
		parts = append(parts, "typ="+in.mimeType)
	}
	if in.pkg != "" {
		parts = append(parts, "pkg="+in.pkg)
	}
	if in.component != "" {
		parts = append(parts, "cmp="+in.component)
	}
	return "Intent { " + strings.Join(parts, " ") + " }"
}

// intentExtraArity are the am options that take values, by how many.
var intentExtraArity = map[string]int{
	"-e": 2, "--es": 2, "--esn": 1, "--ei": 2, "--el": 2, "--ef": 2, "--ed": 2, "--ez": 2,
	"--eu": 2, "--ecn": 2, "--eia": 2, "--eial": 2, "--ela": 2, "--elal": 2, "--efa": 2,
	"--efal": 2, "--esa": 2, "--esal": 2, "-f": 1, "-i": 1, "--user": 1, "--display": 1,
	"--windowingMode": 1, "--activityType": 1, "-R": 1, "-P": 1, "--start-profiler": 1,
	"--sampling": 1, "--attach-agent": 1, "--attach-agent-bind": 1, "--task": 1, "--splashscreen-icon": 0,
}

// amStartFlags are the options of am start that take no value.
var amStartFlags = map[string]bool{
	"-W": true, "-D": true, "-N": true, "-S": true, "--streaming": true, "--track-allocation": true,
	"--task-overlay": true, "--lock-task": true, "--allow-background-activity-starts": true,
	"--grant-read-uri-permission": true, "--grant-write-uri-permission": true,
	"--activity-clear-task": true, "--activity-clear-top": true, "--activity-new-task": true,
	"--activity-single-top": true, "--activity-no-history": true, "--activity-reorder-to-front": true,
	"--receiver-foreground": true, "--exclude-stopped-packages": true, "--include-stopped-packages": true,
	"--splashscreen-icon": true, "--dismiss-keyguard": true,
}

// amException is how am reports an argument it cannot parse: the Java
// exception escapes the shell command (exit status 255).
func amException(stderr io.Writer, verb, exc string) int {
	fmt.Fprintf(stderr, "Exception occurred while executing '%s':\n%s\n", verb, exc)
	return 255
}

// parseIntent reads am's intent arguments; a trailing bare word is a URI
// or a component, as in Intent.parseCommandArgs.
func parseIntent(verb string, args []string, stderr io.Writer) (intent, bool, int) {
	var in intent
	wait := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		take := func() (string, bool) {
			if i+1 >= len(args) {
				return "", false
			}
			i++
			return args[i], true
		}
		var v string
		ok := true
		switch {
		case a == "-a":
			in.action, ok = take()
		case a == "-c":
			v, ok = take()
			in.categories = append(in.categories, v)
		case a == "-d":
			in.data, ok = take()
		case a == "-t":
			in.mimeType, ok = take()
		case a == "-p":
			in.pkg, ok = take()
		case a == "-n":
			in.component, ok = take()
			if ok && !strings.Contains(in.component, "/") {
				return in, wait, amException(stderr, verb, "java.lang.IllegalArgumentException: Bad component name: "+in.component)
			}
		case a == "-W":
			wait = true
		case amStartFlags[a]:
		case intentExtraArity[a] > 0:
			for n := 0; n < intentExtraArity[a] && ok; n++ {
				_, ok = take()
			}
		case strings.HasPrefix(a, "-"):
			return in, wait, amException(stderr, verb, "java.lang.IllegalArgumentException: Unknown option: "+a)
		case i == len(args)-1:
			// A final bare word is a URI, a component or a package.
			switch {
			case strings.Contains(a, ":"):
				in.data = a
			case strings.Contains(a, "/"):
				in.component = a
			default:
				in.pkg = a
			}
		default:
			return in, wait, amException(stderr, verb, "java.lang.IllegalArgumentException: Unknown option: "+a)
		}
		if !ok {
			return in, wait, amException(stderr, verb, "java.lang.IllegalArgumentException: No argument supplied for option "+a)
		}
	}
	return in, wait, -1
}

// resolve finds the component an intent starts, "" when none matches.
func (sh *devShell) resolve(in intent) string {
	if in.component != "" {
		pkg, act, _ := strings.Cut(in.component, "/")
		l := sh.launcherOf(pkg)
		if l == "" {
			return ""
		}
		// The launcher activity is the only one a simulated app declares,
		// written short (.MainActivity) or in full.
		if _, want, _ := strings.Cut(l, "/"); act == want || act == pkg+want {
			return l
		}
		return ""
	}
	isView := in.action == "android.intent.action.VIEW"
	if in.pkg != "" {
		l := sh.launcherOf(in.pkg)
		if isView && in.data == "" {
			return ""
		}
		return l
	}
	if isView && (strings.HasPrefix(in.data, "http://") || strings.HasPrefix(in.data, "https://")) &&
		slices.Contains(systemPackages(sh.run.Tag), "com.google.android.gms") {
		return "com.android.chrome/com.google.android.apps.chrome.IntentDispatcher"
	}
	return ""
}

func (sh *devShell) amCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stdout, "Activity manager (activity) commands:\n  start [-W] [-S] [-n COMPONENT | -a ACTION -c CATEGORY -p PACKAGE -d URI] ...\n  force-stop [--user <USER_ID> | all | current] <PACKAGE>\n  kill [--user <USER_ID> | all | current] <PACKAGE>\n  broadcast [--user <USER_ID> | all | current] <INTENT>\n(simlock simulated SDK: these are the simulated commands)")
		return 0
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "start", "start-activity":
		return sh.amStart(verb, rest, stdout, stderr)
	case "force-stop", "kill", "stop-app":
		var pkgs []string
		for i := 0; i < len(rest); i++ {
			switch {
			case rest[i] == "--user":
				i++
			case strings.HasPrefix(rest[i], "-"):
				return amException(stderr, verb, "java.lang.IllegalArgumentException: Unknown option: "+rest[i])
			default:
				pkgs = append(pkgs, rest[i])
			}
		}
		if len(pkgs) != 1 {
			return amException(stderr, verb, "java.lang.IllegalArgumentException: Argument expected after \""+verb+"\"")
		}
		// Stopping a package that does not run (or does not exist) is
		// silent, as on a device.
		if err := sh.setRunning(func(r []string) []string {
			return slices.DeleteFunc(r, func(p string) bool { return p == pkgs[0] })
		}); err != nil {
			fmt.Fprintf(stderr, "am: %v\n", err)
			return 1
		}
		return 0
	case "broadcast":
		in, _, code := parseIntent(verb, rest, stderr)
		if code >= 0 {
			return code
		}
		fmt.Fprintf(stdout, "Broadcasting: %s\nBroadcast completed: result=0\n", in)
		return 0
	}
	fmt.Fprintf(stderr, "Unknown command: %s\n", verb)
	return 255
}

func (sh *devShell) amStart(verb string, args []string, stdout, stderr io.Writer) int {
	in, wait, code := parseIntent(verb, args, stderr)
	if code >= 0 {
		return code
	}
	fmt.Fprintf(stdout, "Starting: %s\n", in)
	comp := sh.resolve(in)
	if comp == "" {
		fmt.Fprintf(stderr, "Error: Activity not started, unable to resolve %s\n", in)
		return 1
	}
	pkg, _, _ := strings.Cut(comp, "/")
	wasRunning := slices.Contains(sh.running(), pkg)
	if err := sh.setRunning(func(r []string) []string {
		return append(slices.DeleteFunc(r, func(p string) bool { return p == pkg }), pkg)
	}); err != nil {
		fmt.Fprintf(stderr, "am: %v\n", err)
		return 1
	}
	if wait {
		state := "COLD"
		if wasRunning {
			state = "HOT"
		}
		fmt.Fprintf(stdout, "Status: ok\nLaunchState: %s\nActivity: %s\nTotalTime: 250\nWaitTime: 260\nComplete\n", state, comp)
	}
	return 0
}

// cmdApps answers the `cmd package` queries that list and launch apps; ok
// is false for everything else, which the device-state cmd handles.
func (sh *devShell) cmdApps(args []string, stdout, stderr io.Writer, stdin io.Reader) (code int, ok bool) {
	if len(args) < 2 || args[0] != "package" {
		return 0, false
	}
	switch args[1] {
	case "query-activities", "resolve-activity":
	case "has-feature":
		return sh.hasFeature(args[2:], stdout), true
	case "list", "path", "install", "uninstall":
		// `cmd package X` is what `pm X` runs on the device.
		return sh.pm(args[1:], stdout, stderr, stdin), true
	default:
		return 0, false
	}
	verb := args[1]
	var rest []string
	brief := false
	for _, a := range args[2:] {
		switch a {
		case "--brief":
			brief = true
		case "--components":
		default:
			rest = append(rest, a)
		}
	}
	in, _, c := parseIntent(verb, rest, stderr)
	if c >= 0 {
		return c, true
	}
	var comps []string
	for _, p := range sh.launchable() {
		q := in
		if q.pkg == "" && q.component == "" {
			q.pkg = p
		}
		if (q.pkg != "" && q.pkg != p) || !launcherIntent(q) {
			continue
		}
		if comp := sh.resolve(q); comp != "" {
			comps = append(comps, comp)
		}
	}
	if verb == "resolve-activity" {
		if len(comps) == 0 {
			fmt.Fprintln(stdout, "No activity found")
			return 0, true
		}
		if brief {
			fmt.Fprintln(stdout, "priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false")
		}
		fmt.Fprintln(stdout, comps[0])
		return 0, true
	}
	if len(comps) == 0 {
		fmt.Fprintln(stdout, "No activities found")
		return 0, true
	}
	fmt.Fprintf(stdout, "%d activities found:\n", len(comps))
	for i, c := range comps {
		fmt.Fprintf(stdout, "  Activity #%d:\n", i)
		if brief {
			fmt.Fprintln(stdout, "    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false")
		}
		fmt.Fprintf(stdout, "    %s\n", c)
	}
	return 0, true
}

// launcherIntent is true for the MAIN/LAUNCHER intents the simulated
// launcher activities answer (an intent with no action or category
// matches too).
func launcherIntent(in intent) bool {
	if in.action != "" && in.action != "android.intent.action.MAIN" {
		return false
	}
	for _, c := range in.categories {
		if c != "android.intent.category.LAUNCHER" && c != "android.intent.category.DEFAULT" {
			return false
		}
	}
	return true
}

// deviceFeatures are the system features a simulated phone image has
// (no leanback or television: it is not a TV).
var deviceFeatures = []string{
	"android.hardware.audio.output", "android.hardware.camera", "android.hardware.camera.any",
	"android.hardware.faketouch", "android.hardware.location", "android.hardware.location.gps",
	"android.hardware.microphone", "android.hardware.screen.landscape", "android.hardware.screen.portrait",
	"android.hardware.sensor.accelerometer", "android.hardware.touchscreen", "android.hardware.touchscreen.multitouch",
	"android.hardware.wifi", "android.software.app_widgets", "android.software.home_screen",
	"android.software.input_methods", "android.software.webview",
}

// hasFeature prints true or false; the exit status says the same.
func (sh *devShell) hasFeature(args []string, stdout io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stdout, "false")
		return 1
	}
	if slices.Contains(deviceFeatures, args[0]) {
		fmt.Fprintln(stdout, "true")
		return 0
	}
	fmt.Fprintln(stdout, "false")
	return 1
}

// pidof prints the pids of the named running packages; exit 1 when none
// runs.
func (sh *devShell) pidof(args []string, stdout io.Writer) int {
	var pids []string
	run := sh.running()
	for _, a := range args {
		if slices.Contains(run, a) {
			pids = append(pids, fmt.Sprint(appPID(a)))
		}
	}
	if len(pids) == 0 {
		return 1
	}
	fmt.Fprintln(stdout, strings.Join(pids, " "))
	return 0
}
