package android

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/simlock/simlock/internal/core"
)

// markPath is where the erasable provenance mark lives on the device. It is
// on the data partition, so a wipe (or anyone's factory reset) removes it,
// and it is readable only while the emulator runs.
const markPath = "/data/local/tmp/simlock-mark"

// namePrefix starts the names of AVDs simlock creates. It is for humans:
// ownership is proven by membership in the root, never by this prefix.
const namePrefix = "simlock-"

// provisionedData is the driver-private part of a Provisioned device.
type provisionedData struct {
	ConsolePort int `json:"consolePort"`
}

// Provision implements core.Driver: it creates a new AVD inside the root and
// gives it a console port of its own.
func (d *Driver) Provision(ctx context.Context, spec core.Spec) (core.Provisioned, error) {
	if spec.RuntimeID == "" || spec.ModelID == "" {
		return core.Provisioned{}, fmt.Errorf("android driver: spec needs a system image and a device profile (got %q, %q)", spec.RuntimeID, spec.ModelID)
	}
	d.allocMu.Lock()
	defer d.allocMu.Unlock()

	members, err := d.members()
	if err != nil {
		return core.Provisioned{}, err
	}
	name, err := d.freshName(members, spec.NameHint)
	if err != nil {
		return core.Provisioned{}, err
	}
	port, err := d.newConsolePort(ctx, name, members)
	if err != nil {
		return core.Provisioned{}, err
	}

	cmd := d.command(d.tools.AVDManager, "create", "avd", "-n", name, "-k", spec.RuntimeID, "-d", spec.ModelID)
	// avdmanager asks whether to create a custom hardware profile and dies
	// with an exception when stdin is closed; the profile given by -d is
	// the answer we want.
	cmd.Stdin = strings.NewReader("no\n")
	res, err := d.runner.Run(ctx, cmd)
	if err != nil {
		reason := avdmanagerError(append(append([]byte{}, res.Stdout...), res.Stderr...))
		// The system image may have gone since it was listed: the next
		// resolution reads the SDK again rather than trusting the cache.
		d.installed.Invalidate()
		d.removeAVDFiles(name)
		d.releaseConsole(ctx, name, port)
		if reason != "" {
			return core.Provisioned{}, fmt.Errorf("android driver: create AVD %s: %s: %w", name, reason, err)
		}
		return core.Provisioned{}, fmt.Errorf("android driver: create AVD %s: %w", name, err)
	}
	if !d.isMember(name) {
		// The AVD went somewhere other than the root: an avdmanager that
		// ignores ANDROID_AVD_HOME would otherwise scatter devices simlock
		// cannot find again.
		d.releaseConsole(ctx, name, port)
		return core.Provisioned{}, fmt.Errorf("android driver: avdmanager reported success but %s.ini/%s.avd are not in %s (is ANDROID_AVD_HOME honoured?)", name, name, d.root)
	}
	if hw := specHardware(spec); hw != nil {
		if err := d.writeHardware(name, *hw); err != nil {
			d.deleteAVD(ctx, name)
			d.releaseConsole(ctx, name, port)
			return core.Provisioned{}, err
		}
	}
	if err := d.saveState(name, avdState{ConsolePort: port, Pristine: true}); err != nil {
		d.deleteAVD(ctx, name)
		d.releaseConsole(ctx, name, port)
		return core.Provisioned{}, fmt.Errorf("android driver: record AVD %s: %w", name, err)
	}
	data, _ := json.Marshal(provisionedData{ConsolePort: port})
	attrs := d.attrs(port)
	for k, v := range d.avdFacts(name, spec.RuntimeID) {
		attrs[k] = v
	}
	return core.Provisioned{
		Handle:    name,
		Name:      name,
		Attrs:     attrs,
		Simulated: d.detectSimulated(ctx),
		Data:      data,
		RAMBytes:  d.avdFootprint(name),
	}, nil
}

// attrs are what a lease holder needs to reach the device: its serial and
// the scoping that makes the private adb server and the root visible.
func (d *Driver) attrs(port int) map[string]string {
	serial := serialFor(port)
	return map[string]string{
		core.AttrSerial: serial,
		core.AttrEnvPrefix + "ANDROID_ADB_SERVER_PORT": strconv.Itoa(d.adbPort),
		core.AttrEnvPrefix + "ANDROID_AVD_HOME":        d.root,
		core.AttrEnvPrefix + "ANDROID_SERIAL":          serial,
	}
}

func (d *Driver) freshName(members []string, hint string) (string, error) {
	taken := map[string]bool{}
	for _, m := range members {
		taken[m] = true
	}
	for i := range 16 {
		name := namePrefix + d.newID()
		if i == 0 && hint != "" {
			name = hint // a managed slot's name, tried first
		}
		if !validAVDName(name) || taken[name] {
			continue
		}
		// A leftover .ini or .avd of a half-deleted AVD also blocks a name.
		if _, err := d.fs.Stat(filepath.Join(d.root, name+".ini")); err == nil {
			continue
		}
		if _, err := d.fs.Stat(d.avdDir(name)); err == nil {
			continue
		}
		return name, nil
	}
	return "", errors.New("android driver: could not find an unused AVD name")
}

// freePort returns the lowest console port from the base upward that no
// AVD in the root holds. Called with allocMu held.
func (d *Driver) freePort(members []string) (int, error) {
	used := map[int]bool{}
	for _, m := range members {
		if st, err := d.loadState(m); err == nil && st.ConsolePort != 0 {
			used[st.ConsolePort] = true
		}
	}
	d.mu.Lock()
	for _, p := range d.procs {
		if p.alive() {
			used[p.port] = true
		}
	}
	d.mu.Unlock()
	for p := d.portBase; p+1 <= 65535; p += 2 {
		if inScannedRange(p) || used[p] {
			continue
		}
		return p, nil
	}
	return 0, errors.New("android driver: no free emulator console port")
}

// newConsolePort is a console port for a new AVD: leased from the host
// when the driver has an allocator, else the lowest free one in the root.
// Called with allocMu held.
func (d *Driver) newConsolePort(ctx context.Context, name string, members []string) (int, error) {
	if d.ports == nil {
		return d.freePort(members)
	}
	return d.consolePort(ctx, name, 0)
}

// detectSimulated asks adb whether it is the simulated SDK, once.
func (d *Driver) detectSimulated(ctx context.Context) bool {
	d.cacheMu.Lock()
	if d.simChecked {
		s := d.simulated
		d.cacheMu.Unlock()
		return s
	}
	d.cacheMu.Unlock()
	res, err := d.adb(ctx, "version")
	if err != nil {
		d.log.Warn("adb version failed; assuming a real SDK", "err", err)
		return false
	}
	v := parseADBVersion(res.Stdout)
	d.cacheMu.Lock()
	d.simulated, d.simChecked = v.Simulated, true
	d.cacheMu.Unlock()
	return v.Simulated
}

// device resolves a DeviceRef to its AVD and console port. The port comes
// from the registry's copy of Provisioned.Data, then from the root's state
// file; an adopted AVD that has neither gets one now.
func (d *Driver) device(ctx context.Context, dev core.DeviceRef) (string, int, avdState, error) {
	name := dev.Handle
	if !d.isMember(name) {
		return "", 0, avdState{}, fmt.Errorf("android driver: AVD %q is not in %s: %w", name, d.root, core.ErrDeviceNotFound)
	}
	st, err := d.loadState(name)
	if err != nil {
		return "", 0, avdState{}, err
	}
	port := 0
	if len(dev.Data) > 0 {
		var pd provisionedData
		if json.Unmarshal(dev.Data, &pd) == nil {
			port = pd.ConsolePort
		}
	}
	if port == 0 {
		port = st.ConsolePort
	}
	if port == 0 {
		d.allocMu.Lock()
		members, err := d.members()
		if err == nil {
			port, err = d.newConsolePort(ctx, name, members)
		}
		if err == nil {
			st.ConsolePort = port
			err = d.saveState(name, st)
		}
		d.allocMu.Unlock()
		if err != nil {
			return "", 0, avdState{}, err
		}
	} else {
		if _, err := d.consolePort(ctx, name, port); err != nil {
			return "", 0, avdState{}, err
		}
		if st.ConsolePort != port {
			st.ConsolePort = port
			if err := d.saveState(name, st); err != nil {
				return "", 0, avdState{}, err
			}
		}
	}
	return name, port, st, nil
}

// MakeReady implements core.Driver. A device simlock is already running is
// only waited on; otherwise the emulator is launched from the baseline when
// the last run ended in an orderly shutdown and the baseline is still valid.
// After a crash the current disk is booted instead, so a lease recovering
// from it finds the holder's apps and data where it left them. The first
// boot of a fresh AVD becomes the baseline.
func (d *Driver) MakeReady(ctx context.Context, dev core.DeviceRef) error {
	name, port, st, err := d.device(ctx, dev)
	if err != nil {
		return err
	}
	serial := serialFor(port)
	p, orphan, err := d.liveness(ctx, name, serial)
	switch {
	case err != nil:
		return err
	case p != nil:
		if err := d.waitReady(ctx, serial, p); err != nil {
			return err
		}
		return d.captureIfPristine(ctx, dev, name, serial, p.mode)
	case orphan:
		// It cannot be relaunched on the same port, so wait for it instead.
		d.log.Info("emulator already running outside supervision; waiting for it", "avd", name, "serial", serial)
		return d.waitReady(ctx, serial, nil)
	}

	mode := bootCold
	switch {
	case st.Running:
		d.log.Warn("previous emulator run ended without an orderly shutdown; booting the current disk to keep its data", "avd", name)
	case st.Baseline != nil:
		if ok, _ := d.baselineValid(ctx, name, dev, st); ok {
			mode = bootBaseline
		}
	}
	return d.boot(ctx, dev, name, port, mode)
}

// boot launches the emulator in mode, waits for readiness and, for a
// pristine disk, captures the baseline.
func (d *Driver) boot(ctx context.Context, dev core.DeviceRef, name string, port int, mode bootMode) error {
	// A boot, from a snapshot or not, is a new incarnation.
	inc, err := d.nextIncarnation(name)
	if err != nil {
		return err
	}
	if err := d.updateState(name, func(s *avdState) {
		s.Running = true
		s.Incarnation = inc
		if mode == bootWipe {
			s.Pristine = true
			s.Baseline = nil
		}
	}); err != nil {
		return err
	}
	if err := d.proveConsoleFree(ctx, name, port); err != nil {
		return err
	}
	if err := d.startServer(ctx); err != nil {
		return err
	}
	p, err := d.launch(name, port, mode)
	if err != nil {
		return err
	}
	serial := serialFor(port)
	if err := d.waitReady(ctx, serial, p); err != nil {
		return err
	}
	return d.captureIfPristine(ctx, dev, name, serial, mode)
}

// captureIfPristine turns the first boot of an unused disk into the
// baseline. Only a cold or wiped boot of a pristine disk qualifies: anything
// else may carry a previous holder's data.
func (d *Driver) captureIfPristine(ctx context.Context, dev core.DeviceRef, name, serial string, mode bootMode) error {
	st, err := d.loadState(name)
	if err != nil {
		return err
	}
	if !st.Pristine || mode == bootBaseline {
		return nil
	}
	return d.captureBaseline(ctx, dev, name, serial)
}

// captureBaseline writes the provenance mark, saves the baseline snapshot,
// proves it restores, and tags it. A baseline that cannot be captured is
// not fatal: the device is ready and the next reclaim wipes instead.
func (d *Driver) captureBaseline(ctx context.Context, dev core.DeviceRef, name, serial string) error {
	if err := d.writeMark(ctx, serial, dev.ID); err != nil {
		return err
	}
	giveUp := func(reason string) error {
		d.log.Warn("no baseline snapshot; reclaims will wipe data", "avd", name, "reason", reason)
		d.diag(core.Diagnostic{Type: "snapshot.baseline-failed", Message: reason,
			Data: map[string]any{"platform": Platform, "avd": name}})
		return d.updateState(name, func(s *avdState) {
			s.MarkID, s.Pristine, s.Baseline = dev.ID, false, nil
		})
	}
	// The tag is taken after the boot because the emulator normalizes
	// config.ini on first boot; a tag from before would never match again.
	tag, err := d.baselineTag(ctx, name, dev)
	if err != nil {
		return giveUp("compute baseline tag: " + err.Error())
	}
	if err := d.console(ctx, serial, "avd", "snapshot", "save", baselineSnapshot); err != nil {
		return giveUp("save snapshot: " + err.Error())
	}
	// Restore it once now, so a snapshot that cannot load is found before
	// any lease depends on it. The load rewinds the guest: a new incarnation.
	if _, err := d.newIncarnation(name); err != nil {
		return err
	}
	if err := d.console(ctx, serial, "avd", "snapshot", "load", baselineSnapshot); err != nil {
		return giveUp("restore new snapshot: " + err.Error())
	}
	if err := d.waitLoaded(ctx, serial, d.proc(name)); err != nil {
		return err
	}
	d.log.Info("baseline snapshot captured", "avd", name, "tag", tag)
	return d.updateState(name, func(s *avdState) {
		s.MarkID, s.Pristine = dev.ID, false
		s.Baseline = &baselineState{Snapshot: baselineSnapshot, Tag: tag}
	})
}

// baselineTag hashes what silently invalidates a snapshot: the AVD's
// configuration, its system image and the emulator version. fastboot.* keys
// only choose how the next boot starts, so they are left out.
func (d *Driver) baselineTag(ctx context.Context, name string, dev core.DeviceRef) (string, error) {
	cfg, err := d.fs.ReadFile(filepath.Join(d.avdDir(name), "config.ini"))
	if err != nil {
		return "", err
	}
	ini := parseINI(cfg)
	ver, err := d.emulatorVersion(ctx)
	if err != nil {
		return "", err
	}
	image := dev.Spec.RuntimeID
	if image == "" {
		image = ini["image.sysdir.1"]
	}
	h := sha256.New()
	fmt.Fprintf(h, "image=%s\nemulator=%s\n", image, ver)
	for _, k := range ini.keys() {
		if strings.HasPrefix(k, "fastboot.") {
			continue
		}
		fmt.Fprintf(h, "%s=%s\n", k, ini[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// baselineValid reports whether the stored baseline still matches the AVD.
func (d *Driver) baselineValid(ctx context.Context, name string, dev core.DeviceRef, st avdState) (bool, string) {
	if st.Baseline == nil {
		return false, "no baseline captured"
	}
	tag, err := d.baselineTag(ctx, name, dev)
	if err != nil {
		return false, "cannot compute baseline tag: " + err.Error()
	}
	if tag != st.Baseline.Tag {
		return false, "AVD configuration, system image or emulator version changed since the baseline"
	}
	return true, ""
}

// console sends an emulator console command through adb and checks the
// console's OK/KO verdict; adb exits 0 either way.
func (d *Driver) console(ctx context.Context, serial string, args ...string) error {
	res, err := d.adbOn(ctx, serial, append([]string{"emu"}, args...)...)
	if err != nil {
		return err
	}
	r := parseConsoleReply(res.Stdout)
	if !r.OK {
		if r.Err != "" {
			return errors.New(r.Err)
		}
		return fmt.Errorf("no OK from console: %q", strings.TrimSpace(string(res.Stdout)))
	}
	return nil
}

func (d *Driver) writeMark(ctx context.Context, serial, id string) error {
	if id == "" {
		return errors.New("android driver: device has no id to mark it with")
	}
	if _, err := d.adbOn(ctx, serial, "shell", "echo "+shellQuote(id)+" > "+markPath); err != nil {
		return fmt.Errorf("android driver: write provenance mark: %w", err)
	}
	return nil
}

// readMark returns the mark on a running device; present is false when the
// file is gone. An error means the device could not be asked.
func (d *Driver) readMark(ctx context.Context, serial string) (mark string, present bool, err error) {
	res, err := d.adbOn(ctx, serial, "shell", "cat", markPath)
	out := string(res.Stdout) + string(res.Stderr)
	// Without shell_v2, adb exits 0 and the error is in stdout; with it,
	// cat's exit status comes through.
	if strings.Contains(out, "No such file") {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(strings.Join(lines(res.Stdout), "\n")), true, nil
}

// shellQuote quotes s for the device's sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// adbLists reports whether the private adb server knows serial.
func (d *Driver) adbLists(ctx context.Context, serial string) (bool, error) {
	devs, err := d.adbDevices(ctx)
	if err != nil {
		return false, err
	}
	for _, dv := range devs {
		if dv.Serial == serial {
			return true, nil
		}
	}
	return false, nil
}

func (d *Driver) adbDevices(ctx context.Context) ([]adbDevice, error) {
	res, err := d.adb(ctx, "devices")
	if err != nil {
		return nil, fmt.Errorf("android driver: adb devices: %w", err)
	}
	return parseADBDevices(res.Stdout)
}

// bootCompleted is the readiness rule: Android says it finished booting and
// the boot animation is stopped or never ran (-no-boot-anim leaves it unset).
func bootCompleted(props map[string]string) bool {
	anim := props["init.svc.bootanim"]
	return props["sys.boot_completed"] == "1" && (anim == "" || anim == "stopped")
}

// waitLoaded is waitReady after a snapshot load the console has just
// answered, into an emulator adb already served. One getprop that answers
// with a finished boot proves both halves of the readiness rule at once
// (adb reaches serial in the device state, and Android is booted), so the
// wait-for-device in front of it would add a process and no fact. Any
// other answer (the device briefly offline, still booting) gets the full
// wait, which proves readiness from the start.
func (d *Driver) waitLoaded(ctx context.Context, serial string, p *emulatorProc) error {
	if res, err := d.adbOn(ctx, serial, "shell", "getprop"); err == nil && bootCompleted(parseGetprop(res.Stdout)) {
		return nil
	}
	return d.waitReady(ctx, serial, p)
}

// waitReady waits until serial answers adb and has finished booting. p, when
// set, is the supervised emulator: its exit ends the wait at once.
func (d *Driver) waitReady(ctx context.Context, serial string, p *emulatorProc) error {
	var exited <-chan struct{}
	if p != nil {
		exited = p.done
	}
	deadline := d.clock.Now().Add(d.bootLimit)

	// wait-for-device blocks until adb sees the device, which may be never
	// if the emulator died; bound it by the boot limit and the exit.
	wctx, cancel := context.WithCancel(ctx)
	timer := d.clock.AfterFunc(d.bootLimit, cancel)
	watchDone := make(chan struct{})
	go func() {
		select {
		case <-exited:
			cancel()
		case <-watchDone:
		}
	}()
	_, err := d.adbOn(wctx, serial, "wait-for-device")
	timer.Stop()
	close(watchDone)
	cancel()
	if err != nil {
		switch {
		case p != nil && !p.alive():
			return p.exitError()
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return fmt.Errorf("android driver: %s did not appear in adb within %s", serial, d.bootLimit)
		default:
			return fmt.Errorf("android driver: adb wait-for-device %s: %w", serial, err)
		}
	}

	var last map[string]string
	for {
		res, err := d.adbOn(ctx, serial, "shell", "getprop")
		if err == nil {
			last = parseGetprop(res.Stdout)
			if bootCompleted(last) {
				return nil
			}
		}
		if p != nil && !p.alive() {
			return p.exitError()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !d.clock.Now().Before(deadline) {
			return fmt.Errorf("android driver: %s not booted after %s (sys.boot_completed=%q, init.svc.bootanim=%q)",
				serial, d.bootLimit, last["sys.boot_completed"], last["init.svc.bootanim"])
		}
		if err := d.sleep(ctx, d.poll, exited); err != nil {
			if errors.Is(err, errEmulatorExited) {
				return p.exitError()
			}
			return err
		}
	}
}

// Reclaim implements core.Driver: restore the baseline snapshot when its tag
// still matches (seconds), otherwise wipe the data partition with a cold
// boot and capture a new baseline (tens of seconds).
func (d *Driver) Reclaim(ctx context.Context, dev core.DeviceRef) error {
	name, port, _, err := d.device(ctx, dev)
	if err != nil {
		return err
	}
	why, err := d.restoreBaseline(ctx, dev)
	if err == nil || why == "" {
		return err
	}
	return d.wipeData(ctx, dev, name, port, why)
}

// restoreBaseline restores the baseline snapshot, or boots from it a
// device that is not running, without falling back to anything. why is
// set when a -wipe-data would be the way on: there is no valid baseline,
// or loading it failed.
func (d *Driver) restoreBaseline(ctx context.Context, dev core.DeviceRef) (why string, err error) {
	name, port, st, err := d.device(ctx, dev)
	if err != nil {
		return "", err
	}
	serial := serialFor(port)
	p, orphan, err := d.liveness(ctx, name, serial)
	if err != nil {
		return "", err
	}
	running := p != nil || orphan
	if ok, why := d.baselineValid(ctx, name, dev, st); !ok {
		return why, fmt.Errorf("android driver: no baseline snapshot to restore: %s", why)
	}
	if !running {
		return "", d.boot(ctx, dev, name, port, bootBaseline)
	}
	// The restore rewinds the guest, boot id included: receipts and
	// anything else keyed by the current incarnation end before it.
	if _, err := d.newIncarnation(name); err != nil {
		return "", err
	}
	err = d.console(ctx, serial, "avd", "snapshot", "load", baselineSnapshot)
	if err == nil {
		if err = d.waitLoaded(ctx, serial, p); err == nil {
			// Reported so an operator can see purges take the fast path.
			d.diag(core.Diagnostic{Type: "snapshot.restored", Message: "restored the clean baseline " + baselineSnapshot,
				Data: map[string]any{"avd": name, "serial": serial}})
			return "", nil
		}
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	why = "restoring the baseline failed: " + err.Error()
	return why, errors.New("android driver: " + why)
}

// wipeData stops the emulator and cold-boots it with its data partition
// wiped, capturing a new baseline; why is logged and reported.
func (d *Driver) wipeData(ctx context.Context, dev core.DeviceRef, name string, port int, why string) error {
	serial := serialFor(port)
	d.log.Info("reclaiming with -wipe-data", "avd", name, "reason", why)
	d.diag(core.Diagnostic{Type: "snapshot.cold-boot", Message: why,
		Data: map[string]any{"platform": Platform, "avd": name}})
	if err := d.shutdown(ctx, name, serial); err != nil {
		return err
	}
	return d.boot(ctx, dev, name, port, bootWipe)
}

// Shutdown implements core.Driver. For an emulator simlock supervises, the
// proof of exit is its process ending, not its leaving `adb devices`.
func (d *Driver) Shutdown(ctx context.Context, dev core.DeviceRef) error {
	name, port, _, err := d.device(ctx, dev)
	if err != nil {
		return err
	}
	if err := d.shutdown(ctx, name, serialFor(port)); err != nil {
		return err
	}
	// An emulator an earlier daemon left running gave its ports up only
	// now; a supervised one's are held again already.
	d.hold(name, port)
	return nil
}

func (d *Driver) shutdown(ctx context.Context, name, serial string) error {
	p, orphan, err := d.liveness(ctx, name, serial)
	switch {
	case err != nil:
		return err
	case p != nil:
		return d.stopProc(ctx, p)
	case orphan:
		if err := d.stopUnsupervised(ctx, name, serial); err != nil {
			return err
		}
	}
	return d.updateState(name, func(s *avdState) { s.Running = false })
}

// liveness finds the emulator running for name: the supervised process if
// it is alive, or else, when this driver never launched one, an emulator an
// earlier daemon left running that adb still lists. Once a supervised
// process has exited, adb is not asked: its entry for the serial may linger
// after the process is provably gone.
func (d *Driver) liveness(ctx context.Context, name, serial string) (alive *emulatorProc, orphan bool, err error) {
	if p := d.proc(name); p != nil {
		if p.alive() {
			return p, false, nil
		}
		return nil, false, nil
	}
	listed, err := d.adbLists(ctx, serial)
	return nil, listed, err
}

// stopUnsupervised stops an emulator an earlier daemon launched. Its process
// is not simlock's child, so the best evidence available is adb losing it
// for good; that is weaker than a supervised exit, and logged as such.
func (d *Driver) stopUnsupervised(ctx context.Context, name, serial string) error {
	if _, err := d.adbOn(ctx, serial, "emu", "kill"); err != nil {
		return fmt.Errorf("android driver: emu kill %s: %w", serial, err)
	}
	deadline := d.clock.Now().Add(d.grace)
	for {
		listed, err := d.adbLists(ctx, serial)
		if err != nil {
			return err
		}
		if !listed {
			d.log.Warn("unsupervised emulator left adb; its process exit could not be observed directly", "avd", name)
			return nil
		}
		if !d.clock.Now().Before(deadline) {
			return fmt.Errorf("android driver: %s still listed by adb %s after emu kill", serial, d.grace)
		}
		if err := d.sleep(ctx, d.poll, nil); err != nil {
			return err
		}
	}
}

// Destroy implements core.Driver: stop the emulator if it runs, then delete
// the AVD. Destroying an AVD that is already gone succeeds.
func (d *Driver) Destroy(ctx context.Context, dev core.DeviceRef) error {
	name := dev.Handle
	if !validAVDName(name) {
		return fmt.Errorf("android driver: invalid AVD name %q: %w", name, core.ErrDeviceNotFound)
	}
	port := 0
	if d.isMember(name) {
		_, p, _, err := d.device(ctx, dev)
		if err != nil && !errors.Is(err, errPortLost) {
			return err
		}
		port = p
		if err == nil {
			if err := d.Shutdown(ctx, dev); err != nil {
				return err
			}
		}
		d.deleteAVD(ctx, name)
	}
	if d.isMember(name) {
		return fmt.Errorf("android driver: AVD %s is still in %s after delete", name, d.root)
	}
	// The port goes back last, once nothing can listen on it for this AVD.
	d.releaseConsole(ctx, name, port)
	if err := d.fs.Remove(d.statePath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := d.kbForget(name); err != nil {
		return err
	}
	d.mu.Lock()
	delete(d.procs, name)
	d.mu.Unlock()
	return nil
}

// deleteAVD runs avdmanager delete; if that fails, the AVD's files are
// removed directly — they are inside the root simlock owns.
func (d *Driver) deleteAVD(ctx context.Context, name string) {
	if _, err := d.runner.Run(ctx, d.command(d.tools.AVDManager, "delete", "avd", "-n", name)); err != nil {
		d.log.Warn("avdmanager delete failed; removing the AVD files directly", "avd", name, "err", err)
	}
	d.removeAVDFiles(name)
}

func (d *Driver) removeAVDFiles(name string) {
	if !validAVDName(name) {
		return
	}
	for _, p := range []string{d.avdDir(name), filepath.Join(d.root, name+".ini")} {
		if err := d.fs.RemoveAll(p); err != nil {
			d.log.Warn("remove AVD file", "path", p, "err", err)
		}
	}
}
