package simsdk

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/ios"
	"github.com/simlock/simlock/internal/ports"
)

// inProcRunner runs the driver's commands as the simulated tools, in this
// process, against the harness's SDK home.
type inProcRunner struct{ h *harness }

func (r inProcRunner) Run(ctx context.Context, c ports.Command) (ports.Result, error) {
	var out, errb bytes.Buffer
	stdin := c.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	code := Main(ctx, filepath.Base(c.Name), c.Args, stdin, &out, &errb, func(k string) string { return r.h.env[k] })
	res := ports.Result{Stdout: out.Bytes(), Stderr: errb.Bytes(), ExitCode: code}
	if code != 0 {
		return res, &ports.ExitError{Command: c, Result: res}
	}
	return res, nil
}

func newDefaultSetDriver(t *testing.T, h *harness, root string) *ios.Driver {
	t.Helper()
	d, err := ios.New(ios.Options{Root: root, DefaultSet: true, Runner: inProcRunner{h},
		Timeouts: ios.Timeouts{Poll: 10 * time.Millisecond, ShutdownVerify: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// In default device-set mode the real iOS driver creates its device in the
// default set (plain simctl and xcodebuild see it), marks it, and lists,
// erases and destroys only what it proved its own: a user's simulator in
// the same set, even one named like simlock's, is never listed, touched or
// counted as simlock's, and every verb aimed at it is refused as not
// found.
func TestDefaultSetDriverOwnsOnlyWhatItCreated(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	user := strings.TrimSpace(h.must("create", "simlock-deadbeef", "iPhone 15", "iOS 18.0"))
	h.must("boot", user)
	root := filepath.Join(t.TempDir(), "ios-state")
	d := newDefaultSetDriver(t, h, root)

	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: "ios", Model: "iPhone 15", OSVersion: "18.0"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if set := p.Attrs[core.AttrDeviceSet]; set != filepath.Join(h.home, "devices") {
		t.Fatalf("deviceSet attr %q, want the default set %s", set, filepath.Join(h.home, "devices"))
	}
	// Plain simctl (no --set) sees simlock's device: it is in the default set.
	if out := h.must("list", "devices"); !strings.Contains(out, p.Handle) {
		t.Fatalf("default set does not list %s:\n%s", p.Handle, out)
	}
	if _, err := os.Stat(filepath.Join(h.home, "devices", p.Handle, "data", ios.ProvenanceFile)); err != nil {
		t.Fatalf("no provenance mark: %v", err)
	}
	dev := core.DeviceRef{ID: "d1", Handle: p.Handle, Attrs: p.Attrs}
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}

	handles := func() []string {
		obs, err := d.ListManaged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var hs []string
		for _, o := range obs {
			hs = append(hs, o.Handle)
		}
		return hs
	}
	if got := handles(); !slices.Equal(got, []string{p.Handle}) {
		t.Fatalf("ListManaged = %v, want only %s (the user's %s must not be listed)", got, p.Handle, user)
	}
	if n, err := d.ExternalRunning(ctx); err != nil || n != 1 {
		t.Fatalf("ExternalRunning = %d, %v; want the user's one booted device", n, err)
	}

	// Reclaim erases the data directory; the mark is written again.
	if err := d.Reclaim(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if got := handles(); !slices.Equal(got, []string{p.Handle}) {
		t.Fatalf("after reclaim ListManaged = %v", got)
	}

	// Every verb aimed at the user's device is refused before simctl runs.
	userRef := core.DeviceRef{ID: "u", Handle: user}
	for name, op := range map[string]func() error{
		"shutdown": func() error { return d.Shutdown(ctx, userRef) },
		"erase":    func() error { return d.Erase(ctx, userRef) },
		"boot":     func() error { return d.MakeReady(ctx, userRef) },
	} {
		if err := op(); !errors.Is(err, core.ErrDeviceNotFound) || !errors.Is(err, ios.ErrNotOwned) {
			t.Errorf("%s of the user's device: %v, want ErrNotOwned", name, err)
		}
	}
	if err := d.Destroy(ctx, userRef); err != nil {
		t.Fatalf("destroy of the user's device: %v (it counts as gone to simlock)", err)
	}
	if _, err := d.ResolvePassthrough("simctl", []string{"io", user, "screenshot", "/tmp/x.png"}, core.PassthroughScope{}); !errors.Is(err, core.ErrPassthroughRefused) {
		t.Fatalf("unpinned passthrough at the user's device: %v", err)
	}
	if c, err := d.ResolvePassthrough("simctl", []string{"getenv", p.Handle, "HOME"}, core.PassthroughScope{}); err != nil || slices.Contains(c.Args, "--set") {
		t.Fatalf("passthrough at simlock's device: %+v, %v (want no --set)", c, err)
	}

	// A copied mark does not make a device simlock's: the record decides too.
	mark, err := os.ReadFile(filepath.Join(h.home, "devices", p.Handle, "data", ios.ProvenanceFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.home, "devices", user, "data", ios.ProvenanceFile), mark, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := handles(); !slices.Equal(got, []string{p.Handle}) {
		t.Fatalf("with a copied mark ListManaged = %v", got)
	}

	// And a record entry without the device's mark proves nothing either.
	own := filepath.Join(h.home, "devices", p.Handle, "data", ios.ProvenanceFile)
	if err := os.Remove(own); err != nil {
		t.Fatal(err)
	}
	if got := handles(); len(got) != 0 {
		t.Fatalf("without its mark ListManaged = %v", got)
	}
	if err := os.WriteFile(own, mark, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := d.Destroy(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if got := handles(); len(got) != 0 {
		t.Fatalf("after destroy ListManaged = %v", got)
	}
	if st := h.state(user); st != "Booted" {
		t.Fatalf("the user's device is %s, want it still Booted", st)
	}
	if ids, _ := d.CreatedDevices(); len(ids) != 0 {
		t.Fatalf("created record still lists %v", ids)
	}
	h.must("shutdown", user)
}

// A mark alone, without the record, proves nothing: a device whose record
// entry is lost is never listed, so doctor --purge-orphans cannot reach it.
func TestDefaultSetDriverNeedsTheRecordAsWellAsTheMark(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "ios-state")
	d := newDefaultSetDriver(t, h, root)
	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: "ios", Model: "iPhone 15"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "default-set-devices.json")); err != nil {
		t.Fatal(err)
	}
	obs, err := d.ListManaged(ctx)
	if err != nil || len(obs) != 0 {
		t.Fatalf("ListManaged = %+v, %v; want nothing without the record", obs, err)
	}
	if err := d.Destroy(ctx, core.DeviceRef{ID: "x", Handle: p.Handle}); err != nil {
		t.Fatal(err)
	}
	if out := h.must("list", "devices"); !strings.Contains(out, p.Handle) {
		t.Fatalf("an unproven device was deleted:\n%s", out)
	}
}

// recordingRunner notes every command line it runs.
type recordingRunner struct {
	inProcRunner
	mu   sync.Mutex
	cmds []string
}

func (r *recordingRunner) Run(ctx context.Context, c ports.Command) (ports.Result, error) {
	r.mu.Lock()
	r.cmds = append(r.cmds, filepath.Base(c.Name)+" "+strings.Join(c.Args, " "))
	r.mu.Unlock()
	return r.inProcRunner.Run(ctx, c)
}

// `--os 18 --allow-download` with no 18.x installed downloads the newest
// 18.x runtime by its build (xcodebuild finds nothing for "18"), and the
// lease is served on it; `--os 99` names the versions that exist and runs
// no download even with permission.
func TestIOSDriverDownloadResolvesAVersionPrefix(t *testing.T) {
	h := newHarness(t, EnvIOSRuntimes, "com.apple.CoreSimulator.SimRuntime.iOS-17-5,com.apple.CoreSimulator.SimRuntime.iOS-26-3")
	ctx := context.Background()
	run := &recordingRunner{inProcRunner: inProcRunner{h}}
	d, err := ios.New(ios.Options{Root: filepath.Join(t.TempDir(), "root"), Runner: run})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: "ios", Model: "iPhone 16", OSVersion: "18", AllowDownload: true})
	if err != nil {
		t.Fatal(err)
	}
	if spec.OSVersion != "18.4" || spec.RuntimeID != "com.apple.CoreSimulator.SimRuntime.iOS-18-4" {
		t.Fatalf("spec %+v, want iOS 18.4", spec)
	}
	if !slices.Contains(run.cmds, "xcodebuild -downloadPlatform iOS -buildVersion 22E238") {
		t.Fatalf("commands %q: want the 18.4 build asked for", run.cmds)
	}

	run.cmds = nil
	_, err = d.ResolveSpec(ctx, core.SpecRequest{Platform: "ios", Model: "iPhone 16", OSVersion: "99", AllowDownload: true})
	var se *core.SpecError
	if !errors.As(err, &se) || !errors.Is(err, core.ErrRuntimeMissing) {
		t.Fatalf("--os 99: %v", err)
	}
	for _, v := range []string{"18.4", "26.3.1", "26.5"} {
		if !strings.Contains(se.Error(), v) {
			t.Errorf("--os 99 message %q does not name %s", se.Error(), v)
		}
	}
	if !strings.Contains(se.Next, "--os 26.3.1") {
		t.Errorf("next %q", se.Next)
	}
	for _, c := range run.cmds {
		if strings.HasPrefix(c, "xcodebuild") {
			t.Fatalf("--os 99 ran %q", c)
		}
	}
	// Without permission the answer is the same: no download could help.
	_, err = d.ResolveSpec(ctx, core.SpecRequest{Platform: "ios", Model: "iPhone 16", OSVersion: "99"})
	if err == nil || strings.Contains(err.Error(), "download permission") || !strings.Contains(err.Error(), "26.5") {
		t.Fatalf("--os 99 without permission: %v", err)
	}
}
