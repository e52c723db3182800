package simsdk

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/ios"
)

// cloneRig is the real iOS driver with clone provisioning on, over the
// simulated SDK, with a command log.
type cloneRig struct {
	t    *testing.T
	h    *harness
	d    *ios.Driver
	root string
	log  string
	spec core.Spec
}

func newCloneRig(t *testing.T) *cloneRig {
	t.Helper()
	h := newHarness(t)
	r := &cloneRig{t: t, h: h, root: filepath.Join(t.TempDir(), "ios"), log: filepath.Join(t.TempDir(), "commands.log")}
	h.env[EnvCommandLog] = r.log
	d, err := ios.New(ios.Options{Root: r.root, Runner: inProcRunner{h}, Clone: ios.Clone{Enabled: true},
		Timeouts: ios.Timeouts{Poll: 10 * time.Millisecond, ShutdownVerify: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	t.Cleanup(d.WaitGoldens)
	if r.spec, err = d.ResolveSpec(context.Background(), core.SpecRequest{Platform: "ios", Model: "iPhone 15", OSVersion: "18.0"}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *cloneRig) goldenSet() string { return filepath.Join(r.root, ".golden") }

// goldens reads the driver's golden record.
func (r *cloneRig) goldens() map[string]map[string]any {
	r.t.Helper()
	var f struct {
		Goldens map[string]map[string]any `json:"goldens"`
	}
	b, err := os.ReadFile(filepath.Join(r.root, ".golden.json"))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		r.t.Fatal(err)
	}
	return f.Goldens
}

func (r *cloneRig) golden() map[string]any {
	r.t.Helper()
	gs := r.goldens()
	if len(gs) != 1 {
		r.t.Fatalf("want one golden, have %v", gs)
	}
	for _, g := range gs {
		return g
	}
	return nil
}

// provision provisions one device and reports whether it was cloned, by
// the commands it ran: a clone that failed is followed by a create.
func (r *cloneRig) provision() (core.Provisioned, bool) {
	r.t.Helper()
	before := r.commands()
	p, err := r.d.Provision(context.Background(), r.spec)
	if err != nil {
		r.t.Fatal(err)
	}
	ran := r.commands()[len(before):]
	cloned, created := false, false
	for _, c := range ran {
		cloned = cloned || strings.Contains(c, " clone ")
		created = created || strings.Contains(c, "--set "+r.root+" create ")
	}
	if !cloned && !created {
		r.t.Fatalf("provision neither cloned nor created: %q", ran)
	}
	return p, !created
}

func (r *cloneRig) commands() []string {
	b, err := os.ReadFile(r.log)
	if err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// count counts the logged commands containing all of parts.
func (r *cloneRig) count(parts ...string) int {
	n := 0
next:
	for _, c := range r.commands() {
		for _, p := range parts {
			if !strings.Contains(c, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// Without a golden the driver creates and builds the golden in the
// background, once; from then on it clones, and the clone carries the
// golden's first-boot data, lands in the root, and the golden itself
// never appears among the root's devices.
func TestCloneProvisioningFromGolden(t *testing.T) {
	r := newCloneRig(t)
	ctx := context.Background()
	if r.d.CloneReady(r.spec) {
		t.Fatal("clone ready before any golden")
	}
	if _, err := r.d.CloneDevice(ctx, r.spec); err == nil {
		t.Fatal("CloneDevice without a golden should fail, not create")
	}
	r.d.WaitGoldens() // CloneDevice started the build
	if n := r.count("--set " + r.root + " create "); n != 0 {
		t.Fatalf("CloneDevice created %d devices in the root", n)
	}
	if _, cloned := r.provision(); !cloned {
		t.Fatal("no clone once the golden was built")
	}
	if !r.d.CloneReady(r.spec) {
		t.Fatal("CloneReady false with a fresh golden")
	}
	p, err := r.d.CloneDevice(ctx, r.spec)
	if err != nil || p.Handle == "" || p.Attrs[core.AttrDeviceSet] != r.root {
		t.Fatalf("CloneDevice: %+v %v", p, err)
	}
	r.d.WaitGoldens()
	g := r.golden()
	if g["ready"] != true || g["runtimeBuild"] == "" || !strings.Contains(g["xcode"].(string), "Xcode") {
		t.Fatalf("golden not recorded ready with its fingerprint: %v", g)
	}
	if n := r.count("--set "+r.goldenSet(), " create "); n != 1 {
		t.Fatalf("golden created %d times, want once", n)
	}
	// The core sees the golden (it counts against managed capacity), shut
	// down, and a restarted driver sees it from its record.
	if gs := r.d.Goldens(); len(gs) != 1 || gs[0].Handle != g["udid"] || gs[0].Building {
		t.Fatalf("Goldens() = %+v", gs)
	}
	again, err := ios.New(ios.Options{Root: r.root, Runner: inProcRunner{r.h}, Clone: ios.Clone{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if gs := again.Goldens(); len(gs) != 1 || !again.CloneReady(r.spec) {
		t.Fatalf("restarted driver: Goldens() = %+v, CloneReady %v", gs, again.CloneReady(r.spec))
	}
	if st := r.h.state(g["udid"].(string), "--set", r.goldenSet()); st != "Shutdown" {
		t.Fatalf("golden left %s, want Shutdown", st)
	}
	for i := 0; i < 2; i++ {
		p, cloned := r.provision()
		if !cloned {
			t.Fatalf("provision %d did not clone from a fresh golden", i+3)
		}
		dev, err := deviceSet{dir: r.root}.load(p.Handle)
		if err != nil {
			t.Fatalf("clone not in the root: %v", err)
		}
		if dev.LastBootedAt == nil {
			t.Error("clone lacks the golden's first-boot data")
		}
		if p.Attrs[core.AttrUDID] != p.Handle || p.Attrs[core.AttrDeviceSet] != r.root {
			t.Errorf("clone attrs %v", p.Attrs)
		}
	}
	if n := r.count("--set "+r.goldenSet(), " create "); n != 1 {
		t.Errorf("golden created %d times, want once", n)
	}
	obs, err := r.d.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 4 {
		t.Errorf("ListManaged %v: want the four devices made", obs)
	}
	for _, o := range obs {
		if o.Handle == g["udid"] {
			t.Error("the golden is listed as a managed device")
		}
	}
}

// A golden made with another runtime build is stale: provisioning creates
// and the golden is rebuilt (the old one deleted); a golden deleted
// behind the driver's back makes the clone fail, and provisioning falls
// back to create and rebuilds it.
func TestStaleOrMissingGoldenFallsBackToCreate(t *testing.T) {
	r := newCloneRig(t)
	r.provision()
	r.d.WaitGoldens()
	old := r.golden()["udid"].(string)

	b, err := os.ReadFile(filepath.Join(r.root, ".golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Replace(string(b), `"runtimeBuild": "`, `"runtimeBuild": "OLD`, 1)
	if err := os.WriteFile(filepath.Join(r.root, ".golden.json"), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, cloned := r.provision(); cloned {
		t.Fatal("cloned from a stale golden")
	}
	r.d.WaitGoldens()
	g := r.golden()
	if g["udid"] == old || g["ready"] != true || strings.HasPrefix(g["runtimeBuild"].(string), "OLD") {
		t.Fatalf("stale golden not rebuilt: %v", g)
	}
	if out := r.h.must("--set", r.goldenSet(), "list", "devices"); strings.Contains(out, old) {
		t.Errorf("stale golden %s not deleted:\n%s", old, out)
	}
	if _, cloned := r.provision(); !cloned {
		t.Fatal("no clone from the rebuilt golden")
	}

	r.h.must("--set", r.goldenSet(), "delete", g["udid"].(string))
	if _, cloned := r.provision(); cloned {
		t.Fatal("cloned from a deleted golden")
	}
	r.d.WaitGoldens()
	if ng := r.golden(); ng["udid"] == g["udid"] || ng["ready"] != true {
		t.Fatalf("missing golden not rebuilt: %v", ng)
	}
	if _, cloned := r.provision(); !cloned {
		t.Fatal("no clone after the rebuild")
	}
}
