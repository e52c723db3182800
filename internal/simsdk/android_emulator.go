package simsdk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/loopback"
	"golang.org/x/sys/unix"
)

// emulator -list-avds | -version | -help | -accel-check
// emulator -avd NAME | @NAME [-port N] [-no-window -no-audio -no-boot-anim
//          -no-snapshot-save -no-snapshot-load -no-snapshot -snapshot NAME
//          -wipe-data -read-only -delay-adb -prop k=v ...]
//
// Texts: the unknown-AVD error and the crash-data line are captures; the
// port messages, "too many emulator instances", "No AVD specified",
// "Running multiple emulators with the same AVD" and "PANIC: Broken AVD
// system path" follow the emulator's sources and public reports; the other
// INFO/WARNING lines (snapshot loading, boot completed, the boot-fail
// error) are modelled.
//
// Like the real one, a launched emulator runs in the foreground until it is
// told to stop (`adb emu kill`, SIGTERM, SIGINT); this process is the
// device, so when it has exited the device is gone. Options that only tune
// the virtual hardware (-netspeed, -camera-back, ...) are accepted and
// have no effect; -memory and -gpu are honoured (android_reshw.go).

// emulatorOpts are the parsed options.
type emulatorOpts struct {
	avd      string
	port     string
	snapshot string
	props    map[string]string
	flags    map[string]bool
	memory   string // -memory MB
	gpu      string // -gpu MODE
	// action is a query instead of a launch: list-avds, version, help,
	// accel-check.
	action string
}

// Options taking a value; -qemu swallows the rest of the line.
var emulatorValued = map[string]bool{
	"avd": true, "port": true, "ports": true, "snapshot": true, "gpu": true, "memory": true,
	"cores": true, "netdelay": true, "netspeed": true, "camera-back": true, "camera-front": true,
	"accel": true, "logcat": true, "partition-size": true, "skin": true, "skindir": true,
	"dns-server": true, "http-proxy": true, "timezone": true, "prop": true, "feature": true,
	"grpc": true, "idle-grpc-timeout": true, "sysdir": true, "system": true, "datadir": true,
	"kernel": true, "ramdisk": true, "data": true, "sdcard": true, "initdata": true, "cache": true,
	"cache-size": true, "shell-serial": true, "radio": true, "gps": true, "keyset": true,
	"report-console": true, "quit-after-boot": true, "screen": true, "selinux": true,
	"debug": true, "stdouterr-file": true, "phone-number": true, "id": true, "encryption-key": true,
	"grpc-tls-key": true, "grpc-tls-cert": true, "grpc-tls-ca": true, "avd-arch": true,
	"snapstorage": true, "logcat-output": true,
}

var emulatorBool = map[string]bool{
	"no-window": true, "no-audio": true, "no-boot-anim": true, "no-snapshot-save": true,
	"no-snapshot-load": true, "no-snapshot": true, "wipe-data": true, "read-only": true,
	"no-accel": true, "verbose": true, "show-kernel": true, "no-cache": true, "no-sim": true,
	"writable-system": true, "delay-adb": true, "no-metrics": true, "no-passive-gps": true,
	"fixed-scale": true, "no-jni": true, "noskin": true, "force-snapshot-load": true,
	"no-hidpi-scaling": true, "qt-hide-window": true, "no-direct-adb": true, "no-location-ui": true,
	"grpc-use-token": true, "grpc-use-jwt": true, "allow-host-audio": true, "no-nested-warnings": true,
	"log-nofilter": true, "no-qt": true,
}

func parseEmulatorArgs(args []string) (emulatorOpts, error) {
	o := emulatorOpts{props: map[string]string{}, flags: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "@") && len(a) > 1 {
			o.avd = a[1:]
			continue
		}
		if !strings.HasPrefix(a, "-") {
			return o, fmt.Errorf("invalid command-line parameter: %s.\nHint: use '@foo' to launch a virtual device named 'foo'.\nplease use -help for more information", a)
		}
		name := strings.TrimLeft(a, "-")
		switch name {
		case "list-avds", "version", "help", "accel-check":
			o.action = name
			continue
		case "qemu":
			i = len(args)
			continue
		}
		if emulatorBool[name] {
			o.flags[name] = true
			continue
		}
		if emulatorValued[name] {
			if i+1 >= len(args) {
				return o, fmt.Errorf("option -%s needs a value", name)
			}
			i++
			v := args[i]
			switch name {
			case "avd":
				o.avd = v
			case "port":
				o.port = v
			case "ports":
				o.port, _, _ = strings.Cut(v, ",") // "<console>,<adb>"
			case "snapshot":
				o.snapshot = v
			case "memory":
				o.memory = v
			case "gpu":
				o.gpu = v
			case "prop":
				k, val, _ := strings.Cut(v, "=")
				o.props[k] = val
			}
			continue
		}
		return o, fmt.Errorf("unknown option: %s\nplease use -help for a list of valid options", a)
	}
	return o, nil
}

// emuLog prints one emulator log line: the level padded to 8 columns, as
// in the captured "INFO    | Storing crashdata in: ..." line.
func (s *sdk) emuLog(level, format string, a ...any) {
	fmt.Fprintf(s.stdout, "%-8s| %s\n", level, fmt.Sprintf(format, a...))
}

func (s *sdk) crashdataLine() {
	s.emuLog("INFO", "Storing crashdata in: /tmp/android-%s/emu-crash-%s.db, detection is enabled for process: %d",
		userName(s.env), emulatorPackageVersion, os.Getpid())
}

func (s *sdk) emulator(ctx context.Context, args []string) int {
	o, err := parseEmulatorArgs(args)
	if err != nil {
		s.emuLog("ERROR", "%v", err)
		return 1
	}
	switch o.action {
	case "list-avds":
		// Only the names, one a line, as emulator 36.x prints them. The
		// crash-data line that 34.1.x put first on stdout (capture:
		// emulator/list-avds-with-info-crashdata-line-2024.txt) is gone
		// from the later releases, and current clients (agent-device
		// 0.21) take every line of this output for an AVD name.
		avds, err := s.listAVDs()
		if err != nil {
			return s.androidReport("emulator", err)
		}
		for _, a := range avds {
			fmt.Fprintln(s.stdout, a.Name)
		}
		return 0
	case "version":
		s.emuLog("INFO", "Android emulator version %s (build_id %s) (CL:N/A)", emulatorVersion, emulatorBuildID)
		s.crashdataLine()
		fmt.Fprintf(s.stdout, "Android emulator version %s (build_id %s) (CL:N/A)\n", emulatorVersion, emulatorBuildID)
		fmt.Fprint(s.stdout, "Copyright (C) 2006-2024 The Android Open Source Project and many others.\n"+
			"This program is a derivative of the QEMU CPU emulator (www.qemu.org).\n"+
			"This is the simlock simulated SDK: no virtual machine runs.\n")
		return 0
	case "help":
		fmt.Fprint(s.stdout, "Android Emulator usage: emulator [options] [-qemu args]\n"+
			"  -avd <name> / @<name>   use a specific Android Virtual Device\n"+
			"  -list-avds              list available AVDs\n"+
			"(simlock simulated SDK: see the simsdk package documentation for the options it honours)\n")
		return 0
	case "accel-check":
		fmt.Fprint(s.stdout, "accel:\n0\nKVM (version 12) is installed and usable.\naccel\n")
		return 0
	}
	if o.avd == "" {
		s.emuLog("ERROR", "No AVD specified. Use '@foo' or '-avd foo' to launch a virtual device named 'foo'.")
		return 1
	}
	return s.runEmulator(ctx, o)
}

// unknownAVD is the captured failure for an AVD name with no .ini
// (emulator/error-unknown-avd-name-2019.txt), printed on stdout. The second
// line names the directory that was searched.
func (s *sdk) unknownAVD(name string) int {
	where := "HOME is defined but there is no file " + name + ".ini in $HOME/.android/avd"
	switch {
	case s.env(envAVDHome) != "":
		where = "ANDROID_AVD_HOME is defined but there is no file " + name + ".ini in $ANDROID_AVD_HOME"
	case s.env(envUserHome) != "":
		where = "ANDROID_USER_HOME is defined but there is no file " + name + ".ini in $ANDROID_USER_HOME/avd"
	}
	fmt.Fprintf(s.stdout, "emulator: ERROR: Unknown AVD name [%s], use -list-avds to see valid list.\n%s\n"+
		"(Note: Directories are searched in the order $ANDROID_AVD_HOME, $ANDROID_SDK_HOME/avd and $HOME/.android/avd)\n",
		name, where)
	return 1
}

// heldLock is a lock this process keeps until it exits.
type heldLock struct{ f *os.File }

// tryLock takes an exclusive flock on path without waiting; ok is false
// when another process holds it. Probes (lockHeld) hold it shared for an
// instant, so a busy answer is retried briefly before it counts.
func tryLock(path string) (*heldLock, bool, error) {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, false, err
	}
	deadline := time.Now().Add(100 * time.Millisecond)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &heldLock{f: f}, true, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, false, err
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, false, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (l *heldLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close() // closing drops the flock
		l.f = nil
	}
}

// runEmulator boots the AVD and is the device until told to stop.
func (s *sdk) runEmulator(ctx context.Context, o emulatorOpts) int {
	// Signals are caught from the start: one that arrives while the device
	// is being set up still ends it in order, once it is up.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	a, ok := s.loadAVD(o.avd)
	if !ok || !validAVDName(o.avd) {
		return s.unknownAVD(o.avd)
	}
	if a.Config == nil {
		s.emuLog("ERROR", "%s", a.Err)
		return 1
	}
	if code, refused := s.checkHardware(a, o); refused {
		return code
	}
	img, _ := findPackage(a.imagePackage())
	if ok, _ := s.packageInstalled(img.Path); !ok || img.Path == "" {
		fmt.Fprintf(s.stdout, "PANIC: Broken AVD system path. Check your ANDROID_SDK_ROOT value [%s]!\n", s.sdkRootPath())
		return 1
	}
	adbPort, err := s.adbServerPort("")
	if err != nil {
		adbPort = defaultADBServerPort // the emulator falls back rather than failing
	}

	// The console port: the one asked for, or the first free even port.
	ports := []int{}
	if o.port != "" {
		p, err := strconv.Atoi(o.port)
		if err != nil || p < 1 || p > 65535 {
			s.emuLog("ERROR", "option -port must be followed by an integer. '%s' is not a valid input.", o.port)
			return 1
		}
		if p%2 != 0 {
			p &^= 1
			s.emuLog("WARNING", "option -port must be followed by an even integer, using  port number %d", p)
		}
		ports = append(ports, p)
	} else {
		for i := 0; i < emulatorMaxTries; i++ {
			ports = append(ports, emulatorBasePort+2*i)
		}
	}
	// Like the real emulator, a port pair is usable only when both the
	// console port and the adb port after it can be bound on the loopback
	// interface, whoever holds them; with -port there is one try, and the
	// failure reads the same (the emulator's own message).
	var portLock *heldLock
	var listeners []net.Listener
	port := 0
	for _, p := range ports {
		// Bound, not merely held: the console port answers nothing
		// yet, the adb port is served by adbd once the run is published.
		ls, ok := loopback.Bind(p, 2)
		if !ok {
			continue
		}
		l, ok, err := tryLock(procLockPath(s.runDir(p)))
		if err != nil {
			loopback.Close(ls)
			return s.androidReport("emulator", err)
		}
		if ok {
			portLock, port, listeners = l, p, ls
			break
		}
		loopback.Close(ls)
	}
	if portLock == nil {
		s.emuLog("ERROR", "It seems too many emulator instances are running on this machine. Aborting.")
		return 1
	}
	defer portLock.release()
	defer loopback.Close(listeners)
	dir := s.runDir(port)

	readOnly := o.flags["read-only"]
	if !readOnly {
		l, ok, err := tryLock(filepath.Join(a.Dir, avdInstanceLock))
		if err != nil {
			return s.androidReport("emulator", err)
		}
		if !ok {
			s.emuLog("ERROR", "Running multiple emulators with the same AVD is an experimental feature.\nPlease use -read-only flag to enable this feature.")
			return 1
		}
		defer l.release()
	}

	s.emuLog("INFO", "Android emulator version %s (build_id %s) (CL:N/A)", emulatorVersion, emulatorBuildID)
	s.crashdataLine()
	if adb := port + 1; adb < emulatorBasePort+1 || adb > emulatorBasePort+1+(emulatorMaxTries-1)*2+1 {
		// The real emulator's port validation, for consoles outside its
		// recommended range (it still runs, announcing itself to adb).
		s.emuLog("WARNING", "Requested adb port (%d) is outside the recommended range [%d,%d]. ADB may not function properly for the emulator. See -help-port for details.",
			adb, emulatorBasePort+1, emulatorBasePort+1+(emulatorMaxTries-1)*2+1)
	}

	plan, err := s.prepareRun(a, img, o, port, adbPort, dir)
	if err != nil {
		return s.androidReport("emulator", err)
	}
	run := plan.run
	_ = os.Remove(filepath.Join(dir, killRequestName))
	if err := writeRun(dir, run); err != nil {
		return s.androidReport("emulator", err)
	}
	entry := procEntry{Platform: "android", ID: run.serial(), PID: os.Getpid(), Name: a.Name, Dir: dir, StartedAt: run.StartedAt}
	if err := writeJSONAtomic(procEntryPath(s.home, "android", run.serial()), entry); err != nil {
		return s.androidReport("emulator", err)
	}
	// The console answers on its port, behind the auth token in $HOME,
	// as the real console does for `adb emu` and telnet.
	token, err := consoleToken(s.env("HOME"))
	if err != nil {
		return s.androidReport("emulator", err)
	}
	// adbd answers on the adb port from now on; a real adb server that
	// connects before the guest is up sees the device offline until
	// then, as with a booting emulator.
	adbCtx, stopADBD := context.WithCancel(ctx)
	adbdDone := make(chan struct{})
	// After adbd restarts (adb root) the server has dropped the
	// emulator, and it ignores an announcement until it has noticed the
	// old connection is gone; so the emulator announces itself until the
	// server connects again.
	var accepted atomic.Int64
	announceReal := func() {
		before := accepted.Load()
		for range reannounceTries {
			if _, err := announceToServer(adbCtx, adbPort, port+1); err != nil {
				s.emuLog("WARNING", "%v", err)
			}
			if sleepCtx(adbCtx, reannounceEvery) != nil || accepted.Load() != before {
				return
			}
		}
	}
	dev := &emuADBDevice{s: s, dir: dir, announce: announceReal}
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		s.serveConsole(adbCtx, listeners[0], dir, token, filepath.Join(s.env("HOME"), consoleTokenFile))
	}()
	go func() {
		defer close(adbdDone)
		s.serveADBD(adbCtx, listeners[1], dev, func() { accepted.Add(1) })
	}()
	defer func() {
		stopADBD()
		<-adbdDone
		<-consoleDone
	}()
	// Two servers may be listening for the announcement: the simulated
	// one (its state in the home) and a real adb server on the port.
	heardReal, err := announceToServer(ctx, adbPort, port+1)
	if err != nil {
		s.emuLog("WARNING", "%v", err)
	}
	if heard, err := s.announce(adbPort, run); err != nil {
		return s.androidReport("emulator", err)
	} else if heard || heardReal {
		s.emuLog("INFO", "Simulated device %s (AVD %s, %s) registered with the adb server on port %d",
			run.serial(), a.Name, img.Path, adbPort)
	} else {
		// The real emulator gives up quietly when no server answers; the
		// line says so for whoever reads a simulated run.
		s.emuLog("INFO", "Simulated device %s (AVD %s, %s): no adb server on port %d to register with",
			run.serial(), a.Name, img.Path, adbPort)
	}

	exit := s.emulatorLoop(ctx, plan, dir, sigs)

	// An orderly exit saves the automatic snapshot, as a real emulator
	// saves its quickboot state; a crash or a kill -9 saves nothing.
	if exit.orderly {
		if cur, err := readRun(dir); err == nil && cur.SaveOnExit != "" && !cur.ReadOnly {
			if err := s.withDataLock(a.Dir, func() error {
				return saveSnapshot(a.Dir, cur.DataDir, cur.SaveOnExit, cur.bootLeftAt(s.now()), s.now(), cur.BootID)
			}); err != nil {
				s.emuLog("WARNING", "Saving snapshot '%s' failed: %v", cur.SaveOnExit, err)
			} else {
				s.emuLog("INFO", "Saved snapshot '%s'", cur.SaveOnExit)
			}
		}
	}
	s.unregisterProc("android", run.serial())
	_ = os.Remove(filepath.Join(dir, runFileName))
	_ = os.Remove(filepath.Join(dir, killRequestName))
	if readOnly {
		_ = os.RemoveAll(run.DataDir)
	}
	return exit.code
}

func (s *sdk) withDataLock(avdDir string, fn func() error) error {
	l, err := dataLock(avdDir)
	if err != nil {
		return err
	}
	defer l.Unlock()
	return fn()
}

// bootPlan is how a launch goes: the published run record plus what only
// the emulator process itself acts on.
type bootPlan struct {
	run *emuRun
	// failAt, when set, is when a boot-fail boot gives up.
	failAt *time.Time
	// crashAfter is the crash-after fault's delay (< 0: none).
	crashAfter time.Duration
}

// prepareRun readies the data partition (wipe, snapshot restore) and
// works out the boot timeline, with the boot faults applied.
func (s *sdk) prepareRun(a avd, img sdkPackage, o emulatorOpts, port, adbPort int, dir string) (bootPlan, error) {
	readOnly := o.flags["read-only"]
	noSnap := o.flags["no-snapshot"]
	run := &emuRun{
		AVD: a.Name, AVDDir: a.Dir, ConsolePort: port, ADBServerPort: adbPort, PID: os.Getpid(),
		DataDir: a.userdataDir(), ReadOnly: readOnly, BootAnim: !o.flags["no-boot-anim"],
		API: img.API, Tag: img.Tag, ABI: img.ABI, Props: o.props,
	}
	run.Density, _ = strconv.Atoi(a.Config["hw.lcd.density"])
	run.RAMMB = guestRAM(a, o)
	run.BootID = newBootID()
	if len(run.Props) == 0 {
		run.Props = nil
	}
	plan := bootPlan{run: run, crashAfter: -1}

	restored := false
	var bootLeft time.Duration // of the restored snapshot
	err := s.withDataLock(a.Dir, func() error {
		if _, err := os.Stat(run.DataDir); isNotExist(err) {
			if err := freshUserdata(run.DataDir); err != nil {
				return err
			}
		}
		if o.flags["wipe-data"] && !readOnly {
			s.emuLog("INFO", "Wiping user data (-wipe-data)")
			if err := freshUserdata(run.DataDir); err != nil {
				return err
			}
			// The quickboot state belongs to the old disk.
			_ = os.RemoveAll(snapshotDir(a.Dir, quickbootSnapshot))
		}
		if readOnly {
			// A read-only instance runs on a private copy that is
			// discarded when it exits.
			data := filepath.Join(dir, avdUserdataName)
			if err := os.RemoveAll(data); err != nil {
				return err
			}
			if err := copyTree(run.DataDir, data); err != nil {
				return err
			}
			run.DataDir = data
			if o.flags["wipe-data"] {
				if err := freshUserdata(data); err != nil {
					return err
				}
			}
		} else if err := normalizeConfig(a.configPath()); err != nil {
			return err
		}

		// Boot from -snapshot NAME, else from the quickboot snapshot,
		// unless loading is off or the disk was just wiped.
		load := ""
		switch {
		case noSnap || o.flags["no-snapshot-load"]:
		case o.snapshot != "":
			load = o.snapshot
		case !o.flags["wipe-data"]:
			load = quickbootSnapshot
		}
		if load == "" {
			return nil
		}
		meta, ok := readSnapshot(a.Dir, load)
		if !ok {
			if load != quickbootSnapshot {
				s.emuLog("WARNING", "Snapshot '%s' does not exist; performing a cold boot.", load)
			}
			return nil
		}
		if _, fired, err := s.fire(faultSnapshotFail); err != nil {
			return err
		} else if fired {
			s.emuLog("WARNING", "Failed to load snapshot '%s'; performing a cold boot. %s", load, faultNote(faultSnapshotFail))
			return nil
		}
		if err := loadSnapshot(a.Dir, run.DataDir, load); err != nil {
			return err
		}
		s.emuLog("INFO", "Loading snapshot '%s'", load)
		restored, bootLeft = true, meta.BootLeft
		run.BootID = snapshotBootID(meta)
		return nil
	})
	if err != nil {
		return plan, err
	}

	switch {
	case noSnap || o.flags["no-snapshot-save"] || readOnly:
	case o.snapshot != "":
		run.SaveOnExit = o.snapshot
	default:
		run.SaveOnExit = quickbootSnapshot
	}

	now := s.now().UTC()
	run.StartedAt = now
	if _, fail, err := s.fire(faultBootFail); err != nil {
		return plan, err
	} else if fail {
		t := now.Add(s.scaled(androidBootFailTime))
		plan.failAt = &t
		return plan, nil // never comes online
	}
	_, hang, err := s.fire(faultBootHang)
	if err != nil {
		return plan, err
	}
	if f, fired, err := s.fire(faultCrashAfter); err != nil {
		return plan, err
	} else if fired {
		ms, _ := strconv.Atoi(f.Value) // validated when parsed
		plan.crashAfter = time.Duration(ms) * time.Millisecond
	}
	online := now.Add(s.scaled(androidADBOnlineTime))
	booted := now.Add(s.scaled(androidColdBootTime))
	if restored {
		online = now.Add(s.scaled(androidSnapshotRestoreTime))
		if bootLeft < 0 {
			hang = true // the snapshot was taken in a boot that never finished
		}
		booted = online.Add(max(bootLeft, 0))
	}
	if o.flags["delay-adb"] {
		online = booted
	}
	run.OnlineAt = &online
	if !hang {
		run.BootedAt = &booted
	}
	return plan, nil
}

// emulatorLoop is the running device: the shared device loop, polling the
// run directory for an `adb emu kill` and for the boot's milestones.
func (s *sdk) emulatorLoop(ctx context.Context, plan bootPlan, dir string, sigs chan os.Signal) loopExit {
	run := plan.run
	announced := false
	poll := func() *loopExit {
		now := s.now()
		if plan.failAt != nil && !now.Before(*plan.failAt) {
			s.emuLog("ERROR", "The guest failed to boot: the kernel did not bring up adbd. %s", faultNote(faultBootFail))
			return &loopExit{code: 1, why: "boot failed"}
		}
		// The boot is announced before a kill is looked at: a device that
		// answered boot_completed has booted, even if the kill arrived
		// before this poll saw either (a loaded machine).
		if !announced {
			if cur, err := readRun(dir); err == nil && cur.booted(now) {
				announced = true
				s.emuLog("INFO", "Boot completed in %d ms", now.Sub(cur.StartedAt).Milliseconds())
			}
		}
		if _, err := os.Stat(filepath.Join(dir, killRequestName)); err == nil {
			s.emuLog("INFO", "Shutting down (console 'kill' command).")
			return &loopExit{code: 0, orderly: true, why: "emu kill"}
		}
		return nil
	}
	o := deviceOpts{platform: "android", id: run.serial(), name: run.AVD, dir: dir, boot: -1, crash: plan.crashAfter}
	logf := func(format string, a ...any) { s.emuLog("INFO", format, a...) }
	return deviceLoop(ctx, o, deviceHooks{logf: logf, poll: poll, sigs: sigs})
}

// An emulator whose adbd restarted announces itself every
// reannounceEvery, at most reannounceTries times, until the server
// connects again.
const (
	reannounceEvery = 250 * time.Millisecond
	reannounceTries = 120
)
