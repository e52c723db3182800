package simsdk

import (
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/ports"
)

// envRunner runs the driver's commands with the simulated SDK's settings
// added, as a daemon started with them in its environment would.
type envRunner struct {
	inner ports.ExecRunner
	env   []string
}

func (r envRunner) Run(ctx context.Context, c ports.Command) (ports.Result, error) {
	c.Env = append(append([]string(nil), r.env...), c.Env...)
	return r.inner.Run(ctx, c)
}

// The real Android driver, unchanged, against the simulated SDK with real
// processes: this is what the simulation is for.
func TestAndroidDriverAgainstTheSimulatedSDK(t *testing.T) {
	t.Parallel()
	a := newAndroid(t)
	root := filepath.Join(t.TempDir(), "root")
	var env []string
	for _, kv := range a.childEnv() {
		if !strings.HasPrefix(kv, "ANDROID_") { // the driver scopes those itself
			env = append(env, kv)
		}
	}
	link := func(tool string) string { return filepath.Join(toolLinks, tool) }
	// Ports come from a host registry of the test's own, from a console
	// port nothing else on the machine holds now.
	hp := testHostPorts(t, openTestHost(t, nil), "/homes/one", 1)
	hp.ConsoleBase = freeConsole(t, 27000, 27400)
	var logs syncBuffer
	var diagMu sync.Mutex
	var diags []string
	d, err := android.New(android.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnDiagnostic: func(dg core.Diagnostic) {
			diagMu.Lock()
			diags = append(diags, dg.Type+": "+dg.Message)
			diagMu.Unlock()
		},
		Root:          root,
		Ports:         hp,
		Runner:        envRunner{env: env},
		Tools:         android.Tools{ADB: link("adb"), Emulator: link("emulator"), AVDManager: link("avdmanager"), SDKManager: link("sdkmanager")},
		PollInterval:  20 * time.Millisecond,
		ShutdownGrace: 5 * time.Second,
		BootTimeout:   30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = d.Close(ctx) })

	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: android.Platform, Model: "pixel_7", OSVersion: "15"})
	if err != nil {
		t.Fatal(err)
	}
	if want := hostImage(35, "google_apis"); spec.RuntimeID != want || spec.ModelID != "pixel_7" {
		t.Fatalf("spec %+v, want image %s", spec, want)
	}
	p, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Simulated {
		t.Error("the driver did not recognise the simulated SDK")
	}
	dev := core.DeviceRef{ID: "dev-1", Handle: p.Handle, Name: p.Name, Spec: spec, Attrs: p.Attrs, Data: p.Data}
	serial := p.Attrs[core.AttrSerial]
	// The harness's adb talks to the driver's private server, wherever the
	// host's registry placed it (5137 may be another program's).
	a.env[envADBServerPort] = p.Attrs[core.AttrEnvPrefix+"ANDROID_ADB_SERVER_PORT"]

	// First boot: cold, then the baseline snapshot is captured.
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	running := func() *core.Observed {
		obs, err := d.ListManaged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(obs, func(o core.Observed) bool { return o.Handle == p.Handle })
		if i < 0 {
			t.Fatalf("%s not managed: %+v", p.Handle, obs)
		}
		return &obs[i]
	}
	if o := running(); o.Run != core.RunRunning || o.MarkOK == nil || !*o.MarkOK {
		t.Errorf("after MakeReady: %+v", o)
	}
	ps, _ := PS(a.home)
	if len(ps) != 1 || ps[0].ID != serial || ps[0].Name != p.Handle {
		t.Errorf("PS: %+v", ps)
	}

	// A lease holder dirties the device; reclaim restores the baseline.
	a.env[envAVDHome] = root
	a.ok("adb", "-s", serial, "shell", "echo dirt > /data/local/tmp/dirt")
	if err := d.Reclaim(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if r := a.shell(serial, "cat /data/local/tmp/dirt"); r.code != 1 {
		t.Errorf("reclaim left the holder's file: %+v", r)
	}
	if o := running(); o.Run != core.RunRunning || o.MarkOK == nil || !*o.MarkOK {
		t.Errorf("after Reclaim: %+v", o)
	}

	// Shutdown proves the process exited; the next boot is from the
	// baseline snapshot.
	if err := d.Shutdown(ctx, dev); err != nil {
		t.Fatal(err)
	}
	noProcs(t, a.home)
	if o := running(); o.Run != core.RunStopped {
		t.Errorf("after Shutdown: %+v", o)
	}
	if err := d.MakeReady(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if o := running(); o.Run != core.RunRunning || o.MarkOK == nil || !*o.MarkOK {
		t.Errorf("after a baseline boot: %+v", o)
	}

	// Every boot used the path the driver chose: cold first, the baseline
	// snapshot after the shutdown; nothing fell back to a wipe.
	launches := regexp.MustCompile(`msg="launching emulator".* mode=(\S+)`).FindAllStringSubmatch(logs.String(), -1)
	var modes []string
	for _, m := range launches {
		modes = append(modes, m[1])
	}
	if !slices.Equal(modes, []string{"cold", "baseline"}) {
		t.Errorf("emulator launches %v, want [cold baseline]\n%s", modes, logs.String())
	}
	diagMu.Lock()
	// The only fact reported is the fast purge path; a cold boot or a
	// failed baseline would show up here too.
	if len(diags) != 1 || !strings.HasPrefix(diags[0], "snapshot.restored") {
		t.Errorf("diagnostics: %q, want one snapshot.restored", diags)
	}
	diagMu.Unlock()

	cat, err := d.Catalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cat.Runtimes, func(r core.CatalogRuntime) bool {
		return r.Identifier == "system-images;android-34;google_apis;"+hostABI() && !r.Available
	}) {
		t.Errorf("catalog lacks the downloadable android-34 image: %+v", cat.Runtimes)
	}

	if err := d.Destroy(ctx, dev); err != nil {
		t.Fatal(err)
	}
	noProcs(t, a.home)
	if out := a.ok("emulator", "-list-avds"); strings.Contains(out, p.Handle) {
		t.Errorf("destroyed AVD still listed: %q", out)
	}
}
