package simsdk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/ios"
)

// The erase-and-reuse session reset against the simulated SDK: a file a
// session wrote into the simulator's data is gone after the erase, the
// fresh read verifies the same device type and runtime, available and
// booted, and a device that is not booted or not the spec's fails it.
func TestIOSEraseResetWipesDataAndVerifies(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "ios")
	d, ref := readyIPhone(t, h, root)
	written := filepath.Join(root, ref.Handle, "data", "Documents", "from-session-1.txt")
	if err := os.MkdirAll(filepath.Dir(written), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(written, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The core's erase reset: stop, erase, boot, verify.
	if err := d.Shutdown(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Erase(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.MakeReady(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.VerifyErased(ctx, ref); err != nil {
		t.Fatalf("verify after a clean erase: %v", err)
	}
	if _, err := os.Stat(written); !os.IsNotExist(err) {
		t.Fatalf("the first session's file survived the erase: %v", err)
	}
	wrong := ref
	wrong.Spec.RuntimeID = "com.apple.CoreSimulator.SimRuntime.iOS-17-0"
	if err := d.VerifyErased(ctx, wrong); err == nil || !strings.Contains(err.Error(), "runtime") {
		t.Fatalf("verify of a device on another runtime: %v", err)
	}
	wrong = ref
	wrong.Spec.ModelID = "com.apple.CoreSimulator.SimDeviceType.iPad-Air"
	if err := d.VerifyErased(ctx, wrong); err == nil || !strings.Contains(err.Error(), "device type") {
		t.Fatalf("verify of a device of another type: %v", err)
	}
	if err := d.Shutdown(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.VerifyErased(ctx, ref); err == nil || !strings.Contains(err.Error(), "state Shutdown") {
		t.Fatalf("verify of a shut-down device: %v", err)
	}
}

// readyIPhone builds the real iOS driver on root over h and brings up one
// iPhone 15 / iOS 18.0 simulator, booted and ready.
func readyIPhone(t *testing.T, h *harness, root string) (*ios.Driver, core.DeviceRef) {
	t.Helper()
	ctx := context.Background()
	d, err := ios.New(ios.Options{Root: root, Runner: inProcRunner{h},
		Timeouts: ios.Timeouts{Poll: 10 * time.Millisecond, ShutdownVerify: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := d.ResolveSpec(ctx, core.SpecRequest{Platform: "ios", Model: "iPhone 15", OSVersion: "18.0"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	ref := core.DeviceRef{ID: "dev_1", Handle: p.Handle, Name: p.Name, Spec: spec, Attrs: p.Attrs, Data: p.Data}
	if err := d.MakeReady(ctx, ref); err != nil {
		t.Fatal(err)
	}
	return d, ref
}
