package simsdk

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/ports"
)

// resRunner runs the driver's commands with the simulated SDK's settings,
// records their command lines, and injects a fault into later commands
// when a test asks for one.
type resRunner struct {
	inner ports.ExecRunner
	env   []string

	mu     sync.Mutex
	faults string
	lines  []string
}

func (r *resRunner) Run(ctx context.Context, c ports.Command) (ports.Result, error) {
	r.mu.Lock()
	env := append(append([]string(nil), r.env...), c.Env...)
	if r.faults != "" {
		env = append(env, EnvFaults+"="+r.faults)
	}
	r.lines = append(r.lines, filepath.Base(c.Name)+" "+strings.Join(c.Args, " "))
	r.mu.Unlock()
	c.Env = env
	return r.inner.Run(ctx, c)
}

func (r *resRunner) setFaults(f string) {
	r.mu.Lock()
	r.faults = f
	r.mu.Unlock()
}

func (r *resRunner) commands(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func newResDriver(t *testing.T, a *androidHarness, consoleFrom int, tweak func(*android.Options)) (*android.Driver, *resRunner, string) {
	t.Helper()
	var env []string
	for _, kv := range a.childEnv() {
		if !strings.HasPrefix(kv, "ANDROID_") {
			env = append(env, kv)
		}
	}
	link := func(tool string) string { return filepath.Join(toolLinks, tool) }
	hp := testHostPorts(t, openTestHost(t, nil), "/homes/res", 1)
	hp.ConsoleBase = freeConsole(t, consoleFrom, consoleFrom+400)
	root := filepath.Join(t.TempDir(), "root")
	run := &resRunner{env: env}
	opts := android.Options{
		Logger: slog.New(slog.DiscardHandler), Root: root, Ports: hp, Runner: run,
		Tools:        android.Tools{ADB: link("adb"), Emulator: link("emulator"), AVDManager: link("avdmanager"), SDKManager: link("sdkmanager")},
		PollInterval: 20 * time.Millisecond, ShutdownGrace: 5 * time.Second, BootTimeout: 30 * time.Second,
	}
	if tweak != nil {
		tweak(&opts)
	}
	d, err := android.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d, run, root
}

func allAre(m map[string]contract.ResourceState, want contract.ResourceState) bool {
	for _, s := range m {
		if s != want {
			return false
		}
	}
	return len(m) > 0
}

// The Android resource controller against the simulated SDK's real
// processes: writes are proven by an independent re-read, receipts restore
// exactly and only on the device incarnation that issued them, protected
// packages are never disabled, and hardware lands in the AVD and the guest.
func TestAndroidResourcesAgainstTheSimulatedSDK(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	d, run, root := newResDriver(t, a, 29300, nil)
	ctx := context.Background()

	off := contract.AndroidHardware{AudioInput: ptr(false), AudioOutput: ptr(true)}
	hw := contract.AndroidHardware{MemoryMB: 3072, CPUCores: 2, GPUMode: "swiftshader", ScreenWidth: 1080,
		ScreenHeight: 2400, ScreenDensity: 420, CameraFront: "none", CameraBack: "emulated",
		AudioInput: off.AudioInput, AudioOutput: off.AudioOutput}
	plain, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: android.Platform, Model: "pixel_7", OSVersion: "15"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: android.Platform, Model: "pixel_7", OSVersion: "15", Hardware: &hw})
	if err != nil {
		t.Fatal(err)
	}
	if string(spec.Data) == string(plain.Data) || !strings.Contains(string(spec.Data), hw.Fingerprint()) {
		t.Errorf("hardware does not distinguish the spec: %s vs %s", spec.Data, plain.Data)
	}
	if want := uint64(3072)<<20 + 1<<30; spec.RAMBytes != want {
		t.Errorf("spec RAM %d, want %d (memoryMb plus the emulator's overhead)", spec.RAMBytes, want)
	}
	p, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(root, p.Handle+".avd", "config.ini"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"hw.ramSize=3072", "hw.cpu.ncore=2", "hw.gpu.mode=swiftshader_indirect", "hw.lcd.width=1080",
		"hw.lcd.height=2400", "hw.lcd.density=420", "hw.camera.front=none", "hw.camera.back=emulated",
		"hw.audioInput=no", "hw.audioOutput=yes"} {
		k, v, _ := strings.Cut(kv, "=")
		if got := parseConfigINI(cfg)[k]; got != v {
			t.Errorf("config.ini %s = %q, want %q", k, got, v)
		}
	}
	if p.RAMBytes != spec.RAMBytes {
		t.Errorf("provisioned footprint %d, want %d", p.RAMBytes, spec.RAMBytes)
	}
	dev := core.DeviceRef{ID: "dev-res", Handle: p.Handle, Name: p.Name, Spec: spec, Attrs: p.Attrs, Data: p.Data}
	serial := p.Attrs[core.AttrSerial]
	// The harness's adb talks to the driver's private server, wherever the
	// host's registry placed it (5137 may be another program's).
	a.env[envADBServerPort] = p.Attrs[core.AttrEnvPrefix+"ANDROID_ADB_SERVER_PORT"]
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	a.env[envAVDHome] = root
	if out := a.shell(serial, "cat /proc/meminfo").stdout; !strings.Contains(out, "MemTotal:        3145728 kB") {
		t.Errorf("the guest reports %q, want 3072 MiB", out)
	}
	// Audio follows the AVD unless SIMLOCK_EMULATOR_AUDIO=false.
	for _, l := range run.commands("emulator -avd") {
		if strings.Contains(l, "-no-audio") {
			t.Errorf("launched with -no-audio although audio was not turned off: %s", l)
		}
	}

	get := func(ns, key string) string {
		return strings.TrimSpace(a.ok("adb", "-s", serial, "shell", "settings", "get", ns, key))
	}
	prior := map[string]string{}
	for _, k := range []string{"window_animation_scale", "transition_animation_scale", "animator_duration_scale"} {
		prior[k] = get("global", k)
	}
	if prior["animator_duration_scale"] != "null" {
		t.Fatalf("the fresh image should leave animator_duration_scale unset, got %q", prior["animator_duration_scale"])
	}

	// 1. Disable animations, backup and the mail app; a fresh read agrees.
	req := map[string]contract.ResourceState{"animations": "disabled", "backup": "disabled", "mailApp": "disabled"}
	res, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: req})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || !allAre(states(res, "animations", "backup", "mailApp"), contract.ResourceDisabled) {
		t.Fatalf("apply: %+v", res)
	}
	if !slices.Equal(res.Changed, []string{"animations", "backup", "mailApp"}) || res.Restore == nil {
		t.Errorf("changed %v, receipt %v", res.Changed, res.Restore)
	}
	obs, err := d.ObserveResources(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	if !allAre(states(obs, "animations", "backup", "mailApp"), contract.ResourceDisabled) {
		t.Errorf("independent observation: %+v", obs.Resources)
	}
	if obs.Resources["widgets"].State != contract.ResourceUnsupported {
		t.Errorf("widgets: %+v, want unsupported", obs.Resources["widgets"])
	}
	if got := get("global", "window_animation_scale"); got != "0" {
		t.Errorf("window_animation_scale %q", got)
	}
	if out := a.shell(serial, "pm list packages -d").stdout; !strings.Contains(out, "package:com.google.android.gm\n") {
		t.Errorf("gm not disabled: %q", out)
	}
	if out := a.shell(serial, "bmgr enabled").stdout; out != "Backup Manager currently disabled\n" {
		t.Errorf("bmgr: %q", out)
	}

	// 2. Role holders, the selected keyboard and enabled accessibility
	// services are never disabled.
	a.ok("adb", "-s", serial, "shell", "cmd", "role", "add-role-holder", "android.app.role.ASSISTANT", "com.google.android.apps.maps")
	a.ok("adb", "-s", serial, "shell", "settings", "put", "secure", "enabled_accessibility_services", "com.google.android.apps.photos/.Reader")
	a.ok("adb", "-s", serial, "shell", "settings", "put", "secure", "default_input_method", "com.android.bips/.Keys")
	prot, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: map[string]contract.ResourceState{
		"mapsApp": "disabled", "photosApp": "disabled", "printing": "disabled"}})
	if err != nil {
		t.Fatal(err)
	}
	if prot.Success || prot.Resources["mapsApp"].State != contract.ResourceEnabled ||
		prot.Resources["photosApp"].State != contract.ResourceEnabled || prot.Resources["printing"].State != contract.ResourceUnknown {
		t.Errorf("protected packages: %+v", prot.Resources)
	}
	disabled := a.shell(serial, "pm list packages -d").stdout
	for _, pkg := range []string{"com.google.android.apps.maps", "com.google.android.apps.photos", "com.android.bips"} {
		if strings.Contains(disabled, "package:"+pkg+"\n") {
			t.Errorf("protected %s was disabled", pkg)
		}
	}
	if !strings.Contains(disabled, "package:com.android.printspooler\n") {
		t.Errorf("the unprotected print spooler was not disabled: %q", disabled)
	}
	if _, err := d.ApplyResources(ctx, dev, core.ResourceChange{Restore: prot.Restore}); err != nil {
		t.Fatal(err)
	}

	// 3. The receipt is refused on another serial, then restores exactly:
	// the absent setting is absent again, the package back to its default.
	other := *res.Restore
	other.Serial = "emulator-9998"
	if _, err := d.ApplyResources(ctx, dev, core.ResourceChange{Restore: &other}); !errors.Is(err, core.ErrReceiptMismatch) {
		t.Errorf("receipt for another serial: %v", err)
	}
	back, err := d.ApplyResources(ctx, dev, core.ResourceChange{Restore: res.Restore})
	if err != nil || !back.Success {
		t.Fatalf("restore: %v %+v", err, back)
	}
	for k, v := range prior {
		if got := get("global", k); got != v {
			t.Errorf("after restore %s = %q, want %q", k, got, v)
		}
	}
	if out := a.shell(serial, "bmgr enabled").stdout; out != "Backup Manager currently enabled\n" {
		t.Errorf("bmgr after restore: %q", out)
	}
	if out := a.shell(serial, "dumpsys package com.google.android.gm").stdout; !strings.Contains(out, " enabled=0 ") {
		t.Errorf("gm not back to its default state: %q", out)
	}

	// Dream activation is its own group. Reconcile is not served for
	// emulators (the device-resources reference rejects Android targets
	// before any command): the driver is no ResourceReconciler.
	dream, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: map[string]contract.ResourceState{"screensavers": "disabled"}})
	if err != nil || !dream.Success || get("secure", "screensaver_enabled") != "0" || get("secure", "screensaver_activate_on_dock") != "0" {
		t.Errorf("screensavers: %v %+v", err, dream.Resources)
	}
	if _, ok := any(d).(core.ResourceReconciler); ok {
		t.Error("the Android driver serves resources.reconcile")
	}
	back2, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: map[string]contract.ResourceState{"screensavers": "enabled"}})
	if err != nil || !back2.Success || back2.Resources["screensavers"].State != contract.ResourceEnabled {
		t.Errorf("screensavers back on: %v %+v", err, back2)
	}

	// 4. Fail closed: with roles unreadable no package is disabled, while
	// the settings in the same request are still applied.
	run.setFaults("role-unavailable")
	fc, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: map[string]contract.ResourceState{"mailApp": "disabled", "animations": "disabled"}})
	run.setFaults("")
	if err != nil {
		t.Fatal(err)
	}
	if fc.Success || fc.Resources["mailApp"].State != contract.ResourceEnabled || !strings.Contains(fc.Resources["mailApp"].Reason, "fails closed") ||
		fc.Resources["animations"].State != contract.ResourceDisabled {
		t.Errorf("fail closed: %+v", fc.Resources)
	}
	if strings.Contains(a.shell(serial, "pm list packages -d").stdout, "com.google.android.gm") {
		t.Error("a package was disabled while roles could not be read")
	}

	// 5. A snapshot restore (reclaim) is a new incarnation: the guest's boot
	// id comes back as it was, yet the old receipt is refused.
	bootID := strings.TrimSpace(a.shell(serial, "cat /proc/sys/kernel/random/boot_id").stdout)
	if err := d.Reclaim(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if after := strings.TrimSpace(a.shell(serial, "cat /proc/sys/kernel/random/boot_id").stdout); after != bootID {
		t.Fatalf("the baseline restore changed the boot id (%s → %s); the snapshot case is not exercised", bootID, after)
	}
	if _, err := d.ApplyResources(ctx, dev, core.ResourceChange{Restore: fc.Restore}); !errors.Is(err, core.ErrReceiptMismatch) || !strings.Contains(err.Error(), "snapshot") {
		t.Errorf("receipt from before the snapshot restore: %v", err)
	}
	if got := get("global", "animator_duration_scale"); got != "null" {
		t.Errorf("the restored baseline kept the holder's setting: %q", got)
	}

	// 6. After a cold reboot the boot id changes and the receipt is refused.
	again, err := d.ApplyResources(ctx, dev, core.ResourceChange{Resources: map[string]contract.ResourceState{"animations": "disabled"}})
	if err != nil || again.Restore == nil {
		t.Fatalf("apply: %v %+v", err, again)
	}
	if err := d.Shutdown(ctx, dev); err != nil {
		t.Fatal(err)
	}
	// A configuration edit invalidates the baseline, so the next boot is cold.
	cfgPath := filepath.Join(root, p.Handle+".avd", "config.ini")
	cfg, _ = os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, append(cfg, []byte("hw.test.touch=yes\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if now := strings.TrimSpace(a.shell(serial, "cat /proc/sys/kernel/random/boot_id").stdout); now == bootID || now == "" {
		t.Errorf("a cold boot kept the boot id %q", now)
	}
	if _, err := d.ApplyResources(ctx, dev, core.ResourceChange{Restore: again.Restore}); !errors.Is(err, core.ErrReceiptMismatch) || !strings.Contains(err.Error(), "rebooted") {
		t.Errorf("receipt from before the reboot: %v", err)
	}
	if err := d.Destroy(ctx, dev); err != nil {
		t.Fatal(err)
	}
}

// SIMLOCK_EMULATOR_AUDIO=false (Options.NoAudio) launches with -no-audio,
// and the simulated emulator refuses a GPU mode it does not know.
func TestAndroidAudioFlagAndGPUModeAgainstTheSimulatedSDK(t *testing.T) {
	t.Parallel()
	a := newAndroid(t, EnvSpeed, "0.05")
	d, run, root := newResDriver(t, a, 29800, func(o *android.Options) { o.NoAudio = true })
	ctx := context.Background()
	dev, _, _ := bootOne(t, d)
	launches := run.commands("emulator -avd")
	if len(launches) == 0 || !strings.Contains(launches[0], " -no-audio") {
		t.Errorf("launches %q lack -no-audio", launches)
	}
	if err := d.Destroy(ctx, dev); err != nil {
		t.Fatal(err)
	}

	a.env[envAVDHome] = filepath.Join(t.TempDir(), "gpu")
	a.createAVD("gpu", hostImage(35, "google_apis"), "pixel_7")
	cfgPath := filepath.Join(a.env[envAVDHome], "gpu.avd", "config.ini")
	cfg, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(cfg), "hw.gpu.mode=auto", "hw.gpu.mode=warp", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := a.run("emulator", "-avd", "gpu", "-no-window")
	if r.code != 1 || !strings.Contains(r.stdout, "Invalid GPU mode 'warp'") {
		t.Errorf("unknown GPU mode: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	_ = root
}

func ptr[T any](v T) *T { return &v }

// parseConfigINI reads key=value or key = value lines.
func parseConfigINI(b []byte) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}
