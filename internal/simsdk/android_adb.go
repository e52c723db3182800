package simsdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// adb [-a] [-d] [-e] [-s SERIAL] [-t ID] [-H HOST] [-P PORT] [-L SOCKET] COMMAND
//
// Texts: version follows the capture; the devices layouts, the daemon
// start lines and the states are captured; "adb: device 'X' not found",
// "error: no devices/emulators found" and the install/uninstall answers
// ("Performing Streamed Install", "Success", "Failure [...]") are those of
// current platform-tools as publicly reported, not captures; the others
// are modelled.
//
// The simulated adb server is per port (-P, else ANDROID_ADB_SERVER_PORT,
// else 5037); two servers hold separate device lists. A server holds the
// emulators that announced themselves to it while it ran (an emulator
// announces itself once, when it starts, to the server named by its
// ANDROID_ADB_SERVER_PORT), and whatever its discovery finds. Discovery
// follows the environment of the adb client that started the server, as
// in AOSP adb: the emulator scan covers adb ports 5555 up to
// ADB_LOCAL_TRANSPORT_MAX_PORT (default 5585) unless ADB_EMU=0; USB
// devices are attached unless ADB_USB=0; mDNS devices unless ADB_MDNS=0 or
// ADB_MDNS_AUTO_CONNECT leaves out adb-tls-connect. The simulated host's
// USB and mDNS devices are listed in <home>/android/host-devices.json
// (SetAndroidHostDevices).

// adbServerState is what one simulated adb server remembers.
type adbServerState struct {
	Running bool `json:"running"`
	// Transports numbers the devices the server has seen, as adb's
	// transport_id does; keyed by serial and start time.
	NextTransport int            `json:"nextTransport,omitempty"`
	Transports    map[string]int `json:"transports,omitempty"`
	// Announced are the emulators that announced themselves to this
	// server while it ran, by transport key.
	Announced map[string]bool `json:"announced,omitempty"`
	// Discovery, fixed when the server started.
	NoEmuScan bool `json:"noEmuScan,omitempty"`
	ScanMax   int  `json:"scanMax,omitempty"` // highest adb port scanned
	NoUSB     bool `json:"noUSB,omitempty"`
	NoMDNS    bool `json:"noMDNS,omitempty"`
	// Connected maps an `adb connect` address to the transport key of the
	// emulator it reached (android_connect.go).
	Connected map[string]string `json:"connected,omitempty"`
}

const defaultScanMaxADBPort = 5585

// discovery sets the server's scanners from the starting client's
// environment.
func (s *sdk) discovery(srv *adbServerState) {
	srv.NoEmuScan = s.env("ADB_EMU") == "0"
	srv.ScanMax = defaultScanMaxADBPort
	if v := s.env("ADB_LOCAL_TRANSPORT_MAX_PORT"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 65535 {
			srv.ScanMax = n
		}
	}
	srv.NoUSB = s.env("ADB_USB") == "0"
	srv.NoMDNS = s.env("ADB_MDNS") == "0"
	if v, set := s.lookupEnv("ADB_MDNS_AUTO_CONNECT"); set && !slices.Contains(strings.Split(v, ","), "adb-tls-connect") && v != "all" {
		srv.NoMDNS = true
	}
}

// lookupEnv tells an empty variable from an unset one, which the tools'
// env function cannot: an empty value counts as set when the process
// environment has the variable.
func (s *sdk) lookupEnv(k string) (string, bool) {
	if v := s.env(k); v != "" {
		return v, true
	}
	if v, ok := os.LookupEnv(k); ok {
		return v, true
	}
	return "", false
}

// hostDevices are the simulated host's physical devices: phones on USB and
// devices advertising adb over mDNS.
type hostDevices struct {
	USB  []string `json:"usb,omitempty"`  // serials
	MDNS []string `json:"mdns,omitempty"` // service instance names, e.g. adb-SERIAL-abc123._adb-tls-connect._tcp
}

func hostDevicesPath(home string) string {
	return filepath.Join(home, "android", "host-devices.json")
}

// SetAndroidHostDevices configures the simulated host's USB phones and mDNS
// devices: every adb server whose discovery is on lists them.
func SetAndroidHostDevices(home string, usb, mdns []string) error {
	b, err := json.Marshal(hostDevices{USB: usb, MDNS: mdns})
	if err != nil {
		return err
	}
	return writeFileAtomic(hostDevicesPath(home), b)
}

// hostDevice is a listed physical device.
type hostDevice struct {
	serial    string
	transport string // usb | mdns
}

// visibleHostDevices are the physical devices srv's discovery attaches.
func (s *sdk) visibleHostDevices(srv *adbServerState) []hostDevice {
	var hd hostDevices
	if err := readJSON(hostDevicesPath(s.home), &hd); err != nil || srv == nil {
		return nil
	}
	var out []hostDevice
	if !srv.NoUSB {
		for _, d := range hd.USB {
			out = append(out, hostDevice{serial: d, transport: "usb"})
		}
	}
	if !srv.NoMDNS {
		for _, d := range hd.MDNS {
			out = append(out, hostDevice{serial: d, transport: "mdns"})
		}
	}
	return out
}

func (s *sdk) serverState(port int) *adbServerState {
	st, err := loadHomeState(s.home)
	if err != nil {
		return nil
	}
	return st.ADBServers[serverKey(port)]
}

// announce is an emulator telling the server on port that it started; a
// server that is not running never hears of it.
func (s *sdk) announce(port int, r *emuRun) (bool, error) {
	heard := false
	err := updateHomeState(s.home, func(st *homeState) (bool, error) {
		srv := st.ADBServers[serverKey(port)]
		if srv == nil || !srv.Running {
			return false, nil
		}
		if srv.Announced == nil {
			srv.Announced = map[string]bool{}
		}
		srv.Announced[transportKey(r)], heard = true, true
		return true, nil
	})
	return heard, err
}

type adbOpts struct {
	serial      string
	transportID string
	portFlag    string
	onlyUSB     bool
	port        int
}

const (
	adbProtocolVersion = "1.0.41"
	adbNoDevices       = "error: no devices/emulators found\n"
	adbMoreThanOne     = "error: more than one device/emulator\n"
	adbDeviceOffline   = "error: device offline\n"
)

func adbError(text string) *toolError { return &toolError{text: text, exit: 1} }

func (s *sdk) adb(ctx context.Context, args []string) int {
	var o adbOpts
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		next := func() (string, bool) {
			if i+1 >= len(args) {
				return "", false
			}
			i++
			return args[i], true
		}
		ok := true
		switch a {
		case "-s":
			o.serial, ok = next()
		case "-t":
			o.transportID, ok = next()
		case "-P":
			o.portFlag, ok = next()
		case "-H", "-L":
			_, ok = next()
		case "-d":
			o.onlyUSB = true
		case "-e", "-a":
		case "--version", "-version":
			return s.adbVersion()
		case "-h", "--help", "help":
			fmt.Fprint(s.stdout, adbUsage)
			return 0
		default:
			if strings.HasPrefix(a, "-s") && len(a) > 2 {
				o.serial = a[2:]
				continue
			}
			if strings.HasPrefix(a, "-P") && len(a) > 2 {
				o.portFlag = a[2:]
				continue
			}
			fmt.Fprintf(s.stderr, "adb: unknown option %s\n", a)
			return 1
		}
		if !ok {
			fmt.Fprintf(s.stderr, "adb: %s requires an argument\n", a)
			return 1
		}
	}
	if len(args[i:]) == 0 {
		fmt.Fprint(s.stderr, adbUsage)
		return 1
	}
	port, err := s.adbServerPort(o.portFlag)
	if err != nil {
		return s.androidReport("adb", err)
	}
	o.port = port
	if o.serial == "" {
		o.serial = s.env(envAndroidSerial)
	}
	cmd, rest := args[i], args[i+1:]
	switch {
	case cmd == "version":
		return s.adbVersion()
	case cmd == "help":
		fmt.Fprint(s.stdout, adbUsage)
		return 0
	case cmd == "kill-server":
		return s.androidReport("adb", s.adbKillServer(port))
	case cmd == "start-server":
		return s.androidReport("adb", s.ensureADBServer(port))
	}
	if err := s.ensureADBServer(port); err != nil {
		return s.androidReport("adb", err)
	}
	switch {
	case cmd == "connect":
		err = s.adbConnect(o, rest)
	case cmd == "disconnect":
		err = s.adbDisconnect(o, rest)
	case cmd == "devices":
		err = s.adbDevices(o, rest)
	case strings.HasPrefix(cmd, "wait-for-"):
		err = s.adbWaitFor(ctx, o, cmd)
	case cmd == "get-state":
		err = s.adbOnDevice(o, false, func(r *emuRun) error {
			fmt.Fprintln(s.stdout, r.state(s.now()))
			return nil
		})
	case cmd == "get-serialno":
		err = s.adbOnDevice(o, false, func(r *emuRun) error {
			fmt.Fprintln(s.stdout, r.serial())
			return nil
		})
	case cmd == "emu":
		err = s.adbOnDevice(o, false, func(r *emuRun) error { return s.adbEmu(ctx, r, rest) })
	case cmd == "shell":
		var code int
		err = s.adbOnDevice(o, true, func(r *emuRun) error {
			code = s.adbShell(ctx, r, rest)
			return nil
		})
		if err == nil {
			return code
		}
	case cmd == "exec-out":
		err = s.adbOnDevice(o, true, func(r *emuRun) error { return s.adbExecOut(ctx, r, rest) })
	case cmd == "install":
		err = s.adbOnDevice(o, true, func(r *emuRun) error { return s.adbInstall(r, rest) })
	case cmd == "uninstall":
		err = s.adbOnDevice(o, true, func(r *emuRun) error { return s.adbUninstall(r, rest) })
	case cmd == "push":
		err = s.adbOnDevice(o, true, func(r *emuRun) error { return s.adbPush(r, rest) })
	case cmd == "pull":
		err = s.adbOnDevice(o, true, func(r *emuRun) error { return s.adbPull(r, rest) })
	case cmd == "root" || cmd == "unroot":
		err = s.adbOnDevice(o, true, func(r *emuRun) error {
			switch {
			case cmd == "unroot":
				fmt.Fprintln(s.stdout, "adbd not running as root")
			case strings.HasPrefix(r.Tag, "google_apis_playstore"):
				return adbError("adbd cannot run as root in production builds\n")
			default:
				fmt.Fprintln(s.stdout, "restarting adbd as root")
			}
			return nil
		})
	default:
		err = adbError(fmt.Sprintf("adb: unknown command %s\n", cmd))
	}
	return s.androidReport("adb", err)
}

const adbUsage = `Android Debug Bridge version ` + adbProtocolVersion + ` (simlock simulated SDK)

global options:
 -s SERIAL  use device with given serial (overrides $ANDROID_SERIAL)
 -P PORT    port of adb server (overrides $ANDROID_ADB_SERVER_PORT, default: 5037)
simulated commands:
 devices [-l], wait-for[-TRANSPORT]-STATE, get-state, get-serialno,
 shell [COMMAND...], exec-out COMMAND, emu COMMAND, install APK, uninstall PACKAGE,
 push LOCAL REMOTE, pull REMOTE [LOCAL], root, unroot,
 version, start-server, kill-server
`

// adbVersion answers in the captured layout
// (adb/version-platform-tools-36.0.0-linux.txt). Its "simulated" is how
// drivers recognise the simulated SDK.
func (s *sdk) adbVersion() int {
	exe, err := selfExecutable()
	if err != nil {
		exe = "adb"
	}
	var u unix.Utsname
	osName, release, machine := runtime.GOOS, "", runtime.GOARCH
	if unix.Uname(&u) == nil {
		osName, release, machine = unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:])
	}
	fmt.Fprintf(s.stdout, "Android Debug Bridge version %s\nVersion %s-%s (simlock simulated SDK)\nInstalled as %s\nRunning on %s %s (%s)\n",
		adbProtocolVersion, platformToolsVersion, platformToolsBuild, exe, osName, release, machine)
	return 0
}

func serverKey(port int) string { return strconv.Itoa(port) }

// ensureADBServer starts the simulated server on port if it is not
// running, announcing it on stderr as adb does.
func (s *sdk) ensureADBServer(port int) error {
	// Most calls find it running; that needs no lock.
	if st, err := loadHomeState(s.home); err == nil {
		if srv := st.ADBServers[serverKey(port)]; srv != nil && srv.Running {
			return nil
		}
	}
	started := false
	err := updateHomeState(s.home, func(st *homeState) (bool, error) {
		srv := st.ADBServers[serverKey(port)]
		if srv != nil && srv.Running {
			return false, nil
		}
		if st.ADBServers == nil {
			st.ADBServers = map[string]*adbServerState{}
		}
		if srv == nil {
			srv = &adbServerState{}
			st.ADBServers[serverKey(port)] = srv
		}
		srv.Running, started = true, true
		s.discovery(srv)
		return true, nil
	})
	if err == nil && started {
		fmt.Fprintf(s.stderr, "* daemon not running; starting now at tcp:%d\n* daemon started successfully\n", port)
	}
	return err
}

// adbKillServer stops the simulated server. Emulators are not affected:
// the next server finds them again.
func (s *sdk) adbKillServer(port int) error {
	return updateHomeState(s.home, func(st *homeState) (bool, error) {
		srv := st.ADBServers[serverKey(port)]
		if srv == nil || !srv.Running {
			return false, nil
		}
		srv.Running = false
		srv.Transports = nil
		srv.Announced = nil // a new server hears only emulators started after it
		return true, nil
	})
}

// visibleEmulators are the emulators the server on port knows.
func (s *sdk) visibleEmulators(port int) ([]*emuRun, error) {
	all, err := s.runningEmulators()
	if err != nil {
		return nil, err
	}
	srv := s.serverState(port)
	if srv == nil || !srv.Running {
		return nil, nil
	}
	var out []*emuRun
	for _, r := range all {
		scanned := !srv.NoEmuScan && inADBScanRange(r.ConsolePort) && r.ConsolePort+1 <= srv.ScanMax
		if srv.Announced[transportKey(r)] || scanned {
			out = append(out, r)
		}
	}
	return out, nil
}

func transportKey(r *emuRun) string {
	return r.serial() + "@" + strconv.FormatInt(r.StartedAt.UnixNano(), 10)
}

// transportIDs numbers the listed emulators, oldest first, remembering the
// numbers so a device keeps its id for as long as it stays connected.
func (s *sdk) transportIDs(port int, runs []*emuRun, phys []hostDevice) (map[string]int, error) {
	keys := make([]string, 0, len(runs)+len(phys))
	for i := len(runs) - 1; i >= 0; i-- {
		keys = append(keys, transportKey(runs[i]))
	}
	for _, d := range phys {
		keys = append(keys, "host:"+d.serial)
	}
	ids := map[string]int{}
	err := updateHomeState(s.home, func(st *homeState) (bool, error) {
		srv := st.ADBServers[serverKey(port)]
		if srv == nil {
			return false, nil
		}
		live := map[string]bool{}
		changed := false
		for _, k := range keys {
			live[k] = true
			if _, ok := srv.Transports[k]; !ok {
				if srv.Transports == nil {
					srv.Transports = map[string]int{}
				}
				srv.NextTransport++
				srv.Transports[k] = srv.NextTransport
				changed = true
			}
			ids[k] = srv.Transports[k]
		}
		for k := range srv.Transports {
			if !live[k] {
				delete(srv.Transports, k)
				changed = true
			}
		}
		return changed, nil
	})
	return ids, err
}

// devices [-l]: "List of devices attached", TAB-separated rows (or the
// -l layout of the captures: serial padded to 22 columns), a blank line.
func (s *sdk) adbDevices(o adbOpts, args []string) error {
	long := false
	for _, a := range args {
		if a != "-l" {
			return adbError(fmt.Sprintf("adb: devices: unknown option %s\n", a))
		}
		long = true
	}
	runs, err := s.visibleEmulators(o.port)
	if err != nil {
		return err
	}
	phys := s.visibleHostDevices(s.serverState(o.port))
	var ids map[string]int
	if long {
		if ids, err = s.transportIDs(o.port, runs, phys); err != nil {
			return err
		}
	}
	now := s.now()
	var b strings.Builder
	b.WriteString("List of devices attached\n")
	for _, r := range runs {
		st := r.state(now)
		if !long {
			b.WriteString(r.serial() + "\t" + st + "\n")
			continue
		}
		fmt.Fprintf(&b, "%-22s %s", r.serial(), st)
		if st == "device" {
			product, device := productNames(r.ABI)
			fmt.Fprintf(&b, " product:%s model:%s device:%s", product, product, device)
		}
		fmt.Fprintf(&b, " transport_id:%d\n", ids[transportKey(r)])
	}
	conn, err := s.connectedRuns(o.port)
	if err != nil {
		return err
	}
	for _, addr := range slices.Sorted(maps.Keys(conn)) {
		r := conn[addr]
		st := r.state(now)
		if !long {
			b.WriteString(addr + "\t" + st + "\n")
			continue
		}
		fmt.Fprintf(&b, "%-22s %s", addr, st)
		if st == "device" {
			product, device := productNames(r.ABI)
			fmt.Fprintf(&b, " product:%s model:%s device:%s", product, product, device)
		}
		b.WriteString("\n")
	}
	for _, d := range phys {
		if !long {
			b.WriteString(d.serial + "\tdevice\n")
			continue
		}
		where := "usb:1-1 "
		if d.transport == "mdns" {
			where = ""
		}
		fmt.Fprintf(&b, "%-22s device %sproduct:husky model:Pixel_8_Pro device:husky transport_id:%d\n", d.serial, where, ids["host:"+d.serial])
	}
	b.WriteString("\n")
	_, err = io.WriteString(s.stdout, b.String())
	return err
}

// productNames are the emulator images' product and device names, as
// `adb devices -l` and getprop show them.
func productNames(abi string) (product, device string) {
	if abi == "arm64-v8a" {
		return "sdk_gphone64_arm64", "emu64a"
	}
	return "sdk_gphone64_x86_64", "emu64xa"
}

// pickDevice resolves which emulator a command targets.
func (s *sdk) pickDevice(o adbOpts) (*emuRun, error) {
	runs, err := s.visibleEmulators(o.port)
	if err != nil {
		return nil, err
	}
	phys := s.visibleHostDevices(s.serverState(o.port))
	// A physical device is listed, never driven: the simulation has no
	// device behind it.
	physical := func(serial string) error {
		return adbError(fmt.Sprintf("adb: %s is a simulated physical device; the simlock simulated SDK only lists it\n", serial))
	}
	if o.onlyUSB {
		for _, d := range phys {
			if d.transport == "usb" {
				return nil, physical(d.serial)
			}
		}
		return nil, adbError(adbNoDevices)
	}
	conn, err := s.connectedRuns(o.port)
	if err != nil {
		return nil, err
	}
	switch {
	case o.serial != "":
		for _, r := range runs {
			if r.serial() == o.serial {
				return r, nil
			}
		}
		if r := conn[o.serial]; r != nil {
			return r, nil
		}
		for _, d := range phys {
			if d.serial == o.serial {
				return nil, physical(d.serial)
			}
		}
		return nil, adbError(fmt.Sprintf("adb: device '%s' not found\n", o.serial))
	case o.transportID != "":
		ids, err := s.transportIDs(o.port, runs, phys)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			if strconv.Itoa(ids[transportKey(r)]) == o.transportID {
				return r, nil
			}
		}
		return nil, adbError(fmt.Sprintf("adb: no device with transport id '%s'\n", o.transportID))
	}
	for _, r := range conn {
		runs = append(runs, r)
	}
	switch {
	case len(runs)+len(phys) == 0:
		return nil, adbError(adbNoDevices)
	case len(runs)+len(phys) > 1:
		return nil, adbError(adbMoreThanOne)
	case len(phys) == 1:
		return nil, physical(phys[0].serial)
	}
	return runs[0], nil
}

// adbOnDevice runs fn against the target device; online requires adbd to
// answer (state "device"), which emulator console commands do not.
func (s *sdk) adbOnDevice(o adbOpts, online bool, fn func(*emuRun) error) error {
	r, err := s.pickDevice(o)
	if err != nil {
		return err
	}
	if online && r.state(s.now()) != "device" {
		return adbError(adbDeviceOffline)
	}
	return fn(r)
}

// wait-for[-TRANSPORT]-STATE: blocks until the target reaches the state
// (device) or leaves (disconnect). States an emulator never reaches
// (recovery, bootloader, ...) and the usb transport wait until cancelled,
// as the real adb does.
func (s *sdk) adbWaitFor(ctx context.Context, o adbOpts, verb string) error {
	parts := strings.Split(strings.TrimPrefix(verb, "wait-for-"), "-")
	state := parts[len(parts)-1]
	transport := "any"
	if len(parts) == 2 {
		transport = parts[0]
	}
	if len(parts) > 2 || !slices.Contains([]string{"any", "local", "usb"}, transport) ||
		!slices.Contains([]string{"device", "recovery", "rescue", "sideload", "bootloader", "disconnect"}, state) {
		return adbError(fmt.Sprintf("adb: invalid wait-for command %s\n", verb))
	}
	never := transport == "usb" || (state != "device" && state != "disconnect")
	for {
		if !never {
			r, err := s.pickDevice(o)
			switch {
			case state == "disconnect" && err != nil:
				return nil
			case state == "device" && err == nil && r.state(s.now()) == "device":
				return nil
			case err != nil && !strings.Contains(err.Error(), "not found") && !strings.Contains(err.Error(), "no devices"):
				return err // more than one device: ambiguous, as in adb
			}
		}
		if err := sleepCtx(ctx, pollInterval); err != nil {
			return err
		}
	}
}

// exec-out runs a device command over adb's raw exec service: no pty and
// no shell protocol, so the bytes arrive untouched (a PNG from screencap
// stays a PNG), the command's stderr shares the one stream, and the exit
// status is not carried back: adb exits 0 once the command has run.
func (s *sdk) adbExecOut(ctx context.Context, r *emuRun, args []string) error {
	if len(args) == 0 {
		return adbError("adb: exec-out requires a command (the simlock simulated SDK has no interactive raw shell)\n")
	}
	sh := &devShell{s: s, ctx: ctx, run: r}
	out := &lockedWriter{w: s.stdout}
	sh.runLine(strings.Join(args, " "), out, out, nil)
	return nil
}

// adbInstall records an APK on the device's data partition, under the
// package its manifest names (apkPackage).
func (s *sdk) adbInstall(r *emuRun, args []string) error {
	var apks []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case slices.Contains(adbInstallFlags, a):
		case a == "--abi" || a == "--user" || a == "--local-agent" || a == "-i" || a == "--install-reason":
			i++
		case strings.HasPrefix(a, "-"):
			// adb hands options it does not know to the device's package
			// manager, which refuses them.
			return adbError(fmt.Sprintf("adb: failed to install: Error: Unknown option: %s\n", a))
		default:
			apks = append(apks, a)
		}
	}
	if len(apks) != 1 {
		return adbError("adb: install requires an apk argument\n")
	}
	apk := apks[0]
	// The real adb announces the streamed install before it looks at
	// the file.
	fmt.Fprintln(s.stdout, "Performing Streamed Install")
	if _, err := os.Stat(apk); err != nil {
		return adbError(fmt.Sprintf("adb: failed to stat %s: No such file or directory\n", apk))
	}
	if _, fired, err := s.fire(faultInstallFail); err != nil {
		return err
	} else if fired {
		return adbError(fmt.Sprintf("adb: failed to install %s: Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE: Failed to override installation location] %s\n",
			apk, faultNote(faultInstallFail)))
	}
	b, err := os.ReadFile(apk)
	if err != nil {
		return err
	}
	if err := s.storeAPK(r, apkPackage(apk, b), b); err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, "Success")
	return nil
}

// adbInstallFlags are adb install's options without a value.
var adbInstallFlags = []string{"-l", "-r", "-t", "-s", "-d", "-g", "-p", "--instant", "--no-streaming", "--streaming",
	"--fastdeploy", "--no-fastdeploy", "--force-agent", "--date-check-agent", "--version-check-agent",
	"--incremental", "--no-incremental", "--wait", "--dont-kill", "--force-queryable", "--bypass-low-target-sdk-block"}

// storeAPK records pkg as installed on r's data partition; adb install and
// pm install share it, so both see the same packages.
func (s *sdk) storeAPK(r *emuRun, pkg string, apk []byte) error {
	if !validPackageName(pkg) {
		return fmt.Errorf("invalid package name %q", pkg)
	}
	return s.withDataLock(r.AVDDir, func() error {
		dir := filepath.Join(r.DataDir, "app", pkg)
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "base.apk"), apk, fileMode)
	})
}

func (s *sdk) adbUninstall(r *emuRun, args []string) error {
	var pkgs []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			pkgs = append(pkgs, a)
		}
	}
	if len(pkgs) != 1 {
		return adbError("adb: usage: adb uninstall [-k] PACKAGE\n")
	}
	removed := false
	err := s.withDataLock(r.AVDDir, func() error {
		dir := filepath.Join(r.DataDir, "app", pkgs[0])
		if _, err := os.Stat(dir); err != nil || !validPackageName(pkgs[0]) {
			return nil
		}
		removed = true
		return os.RemoveAll(dir)
	})
	if err != nil {
		return err
	}
	if removed {
		// An uninstalled app stops running.
		_ = s.updateRun(r.ConsolePort, func(cur *emuRun) error {
			cur.Running = slices.DeleteFunc(cur.Running, func(p string) bool { return p == pkgs[0] })
			return nil
		})
	}
	if !removed {
		fmt.Fprintln(s.stdout, "Failure [DELETE_FAILED_INTERNAL_ERROR]")
		return &toolError{exit: 1}
	}
	fmt.Fprintln(s.stdout, "Success")
	return nil
}

func validPackageName(p string) bool {
	return p != "" && p != "." && p != ".." && !strings.ContainsAny(p, "/\\")
}

// installedApps lists the packages installed on the data partition.
func installedApps(dataDir string) []string {
	ents, err := os.ReadDir(filepath.Join(dataDir, "app"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// push LOCAL REMOTE and pull REMOTE [LOCAL]: files on the data partition.
// Like the real adb's file-transfer client, they print their errors on
// stdout (adb's line printer writes every kind of line there), and the
// summary line gives a transfer rate; the simulation's transfers take a
// nominal millisecond.
func syncSummary(what string, files, bytes int, verb string) string {
	noun := "files"
	if files == 1 {
		noun = "file"
	}
	secs := 0.001
	if files == 0 {
		secs = 0
	}
	rate := 0.0
	if secs > 0 {
		rate = float64(bytes) / (1 << 20) / secs
	}
	return fmt.Sprintf("%s: %d %s %s, 0 skipped. %.1f MB/s (%d bytes in %.3fs)\n", what, files, noun, verb, rate, bytes, secs)
}

// syncError is a push or pull failure as adb reports it: on stdout.
func (s *sdk) syncError(text string) error {
	fmt.Fprint(s.stdout, text)
	return &toolError{exit: 1}
}

func (s *sdk) adbPush(r *emuRun, args []string) error {
	if len(args) != 2 {
		return adbError("adb: push requires LOCAL and REMOTE arguments\n")
	}
	src, dst := args[0], args[1]
	b, err := os.ReadFile(src)
	if err != nil {
		return s.syncError(fmt.Sprintf("adb: error: cannot stat '%s': No such file or directory\n", src))
	}
	if strings.HasSuffix(dst, "/") {
		dst += filepath.Base(src)
	}
	host, ok := devicePath(r, dst)
	if !ok {
		return s.syncError(fmt.Sprintf("adb: error: failed to copy '%s' to '%s': remote couldn't create file: Read-only file system\n", src, dst) +
			syncSummary(src, 0, len(b), "pushed"))
	}
	if fi, err := os.Stat(host); err == nil && fi.IsDir() {
		host = filepath.Join(host, filepath.Base(src))
	}
	err = s.withDataLock(r.AVDDir, func() error {
		if err := os.MkdirAll(filepath.Dir(host), dirMode); err != nil {
			return err
		}
		return os.WriteFile(host, b, fileMode)
	})
	if err != nil {
		return err
	}
	fmt.Fprint(s.stdout, syncSummary(src, 1, len(b), "pushed"))
	return nil
}

func (s *sdk) adbPull(r *emuRun, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return adbError("adb: pull requires REMOTE [LOCAL] arguments\n")
	}
	src := args[0]
	dst := filepath.Base(src)
	if len(args) == 2 {
		dst = args[1]
	}
	host, _ := devicePath(r, src)
	b, err := os.ReadFile(host)
	if host == "" || err != nil {
		return s.syncError(fmt.Sprintf("adb: error: failed to stat remote object '%s': No such file or directory\n", src))
	}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, filepath.Base(src))
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return err
	}
	fmt.Fprint(s.stdout, syncSummary(src, 1, len(b), "pulled"))
	return nil
}
