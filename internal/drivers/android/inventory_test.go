package android

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
)

func boolPtr(b bool) *bool { return &b }

func TestListManagedFromMembership(t *testing.T) {
	h := newHarness(t)
	h.addAVD("simlock-aaa", &avdState{ConsolePort: 5700, MarkID: "dev-a", Running: true})
	h.addAVD("my_device", &avdState{ConsolePort: 5702, Running: true}) // adopted: no prefix
	h.addAVD("simlock-bbb", &avdState{ConsolePort: 5704, MarkID: "dev-b"})
	h.addAVD("simlock-ccc", &avdState{ConsolePort: 5706, MarkID: "dev-c", Running: true})
	// Things in the root that are not AVDs.
	for name, dir := range map[string]bool{"notes.txt": false, "stray.ini": false, "lonely.avd": true, "simlock-x.simlock.json": false} {
		p := filepath.Join(h.root, name)
		var err error
		if dir {
			err = os.MkdirAll(p, 0o700)
		} else {
			err = os.WriteFile(p, []byte("x"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	h.run.Expect(
		fake.Step{Match: "adb -P 5137 devices", Stdout: "* daemon not running; starting now at tcp:5137\n* daemon started successfully\n" +
			"List of devices attached\nemulator-5700\tdevice\nemulator-5702\toffline\nemulator-5706\tdevice\n\n"},
		fake.Step{Match: adbOn("emulator-5700", "shell cat /data/local/tmp/simlock-mark"), Stdout: "dev-a\r\n"},
		// A wiped data partition: the mark is gone.
		fake.Step{Match: adbOn("emulator-5706", "shell cat /data/local/tmp/simlock-mark"), ExitCode: 1,
			Stderr: "cat: /data/local/tmp/simlock-mark: No such file or directory\n"},
	)
	got, err := h.d.ListManaged(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Observed{
		{Handle: "my_device", Name: "my_device", Run: core.RunTransitioning},
		{Handle: "simlock-aaa", Name: "simlock-aaa", Run: core.RunRunning, MarkOK: boolPtr(true)},
		{Handle: "simlock-bbb", Name: "simlock-bbb", Run: core.RunStopped},
		{Handle: "simlock-ccc", Name: "simlock-ccc", Run: core.RunRunning, MarkOK: boolPtr(false)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %s\nwant %s", observed(got), observed(want))
	}
	h.assertDone()
}

func observed(obs []core.Observed) string {
	var b strings.Builder
	for _, o := range obs {
		mark := "nil"
		if o.MarkOK != nil {
			mark = map[bool]string{true: "true", false: "false"}[*o.MarkOK]
		}
		b.WriteString(o.Handle + ":" + string(o.Run) + ":" + mark + " ")
	}
	return b.String()
}

func TestListManagedSupervision(t *testing.T) {
	h := newHarness(t)
	emu := bootRunning(t, h)

	// Supervised and listed as device → running; while adb is down the
	// answer is uncertain, never "stopped".
	h.run.Expect(
		fake.Step{Match: "adb -P 5137 devices", Stdout: "List of devices attached\nemulator-5700\tdevice\n\n"},
		fake.Step{Match: adbOn("emulator-5700", "shell cat /data/local/tmp/simlock-mark"), Stdout: "dev-1\n"},
		fake.Step{Match: "adb -P 5137 devices", ExitCode: 1, Stderr: "adb: cannot connect to daemon"},
	)
	for _, want := range []core.Observed{
		{Handle: "simlock-a", Name: "simlock-a", Run: core.RunRunning, MarkOK: boolPtr(true)},
		{Handle: "simlock-a", Name: "simlock-a", Run: core.RunTransitioning},
	} {
		got, err := h.d.ListManaged(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []core.Observed{want}) {
			t.Errorf("got %s, want %s", observed(got), observed([]core.Observed{want}))
		}
	}

	// The process ended: stopped, even while adb still shows it offline.
	close(emu.exit)
	<-h.d.proc("simlock-a").done
	h.run.Expect(fake.Step{Match: "adb -P 5137 devices", Stdout: "List of devices attached\nemulator-5700\toffline\n\n"})
	got, err := h.d.ListManaged(context.Background())
	if err != nil || len(got) != 1 || got[0].Run != core.RunStopped {
		t.Errorf("after exit: %s, %v", observed(got), err)
	}
	h.assertDone()
}

func TestCatalog(t *testing.T) {
	h := newHarness(t)
	h.run.Expect(
		fake.Step{Match: "avdmanager list device", Stdout: deviceListFull},
		fake.Step{Match: "sdkmanager --list", Stdout: string(fixture(t, "sdkmanager/list-full-windows-cmdline-tools-19-2026.txt"))},
	)
	cat, err := h.d.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Models) != 5 || cat.Models[3] != (core.CatalogModel{Name: "Pixel 6", Identifier: "pixel_6"}) {
		t.Errorf("models %+v", cat.Models)
	}
	byID := map[string]core.CatalogRuntime{}
	for _, r := range cat.Runtimes {
		if _, dup := byID[r.Identifier]; dup {
			t.Errorf("%s listed twice", r.Identifier)
		}
		byID[r.Identifier] = r
		if !strings.HasSuffix(r.Identifier, ";x86_64") {
			t.Errorf("runtime for another ABI: %s", r.Identifier)
		}
	}
	inst := byID["system-images;android-35;default;x86_64"]
	if !inst.Available || inst.Version != "15" || inst.Build != "API 35" ||
		!reflect.DeepEqual(inst.SupportedModels, []string{"medium_phone", "pixel_2", "pixel_6"}) {
		t.Errorf("installed runtime %+v", inst)
	}
	dl, ok := byID["system-images;android-36;google_apis;x86_64"]
	if !ok || dl.Available || dl.Version != "16" {
		t.Errorf("downloadable runtime %+v (listed %v)", dl, ok)
	}
	for _, absent := range []string{
		"system-images;android-36;google_apis_ps16k;x86_64",     // pre-release page size
		"system-images;android-35-ext15;google_apis;x86_64",     // extension variant
		"system-images;android-CANARY;google_apis;x86_64",       // preview
		"system-images;android-28;google_apis;x86_64",           // older than Android 10
		"system-images;android-36;android-tv;x86_64",            // not a phone image
		"system-images;android-35;google_apis;arm64-v8a",        // other ABI
		"system-images;android-36.0-Baklava;google_apis;x86_64", // codename
	} {
		if _, ok := byID[absent]; ok {
			t.Errorf("%s should not be offered", absent)
		}
	}
	h.assertDone()
}

func TestCatalogOfflineFallsBackToInstalled(t *testing.T) {
	h := newHarness(t)
	h.run.Expect(
		fake.Step{Match: "avdmanager list device", Stdout: deviceListFull},
		fake.Step{Match: "sdkmanager --list", ExitCode: 1, Stderr: "Warning: Failed to download any source lists!"},
		fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
	)
	cat, err := h.d.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Runtimes) != 4 {
		t.Errorf("runtimes %+v", cat.Runtimes)
	}
	for _, r := range cat.Runtimes {
		if !r.Available {
			t.Errorf("%s offered for download offline", r.Identifier)
		}
	}
}

func TestEstimate(t *testing.T) {
	h := newHarness(t)
	want := map[core.DriverOp]time.Duration{
		core.OpProvision: 2 * time.Second, core.OpBoot: 30 * time.Second, core.OpReclaim: 4 * time.Second,
		core.OpShutdown: 3 * time.Second, core.OpDestroy: time.Second,
	}
	for op, d := range want {
		if got := h.d.Estimate(op); got != d {
			t.Errorf("%s: %s, want %s", op, got, d)
		}
	}
}

func TestRootContainment(t *testing.T) {
	newAt := func(root string) (*Driver, error) {
		return New(Options{Root: root, Runner: fake.NewRunner(), FS: ports.OSFilesystem{}, Clock: fake.NewClock(testStart)})
	}
	t.Run("created and marked", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "new", "avd")
		d, err := newAt(root)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close(context.Background())
		st, err := os.Stat(root)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("root %v, %v", st.Mode(), err)
		}
		var m map[string]string
		b, _ := os.ReadFile(filepath.Join(root, ".simlock-root"))
		if err := json.Unmarshal(b, &m); err != nil || m["owner"] != "simlock" || m["platform"] != "android" {
			t.Errorf("marker %s", b)
		}
		if err := d.RevalidateRoot(context.Background()); err != nil {
			t.Errorf("revalidate: %v", err)
		}
		os.Remove(filepath.Join(root, ".simlock-root"))
		if err := d.RevalidateRoot(context.Background()); !errors.Is(err, core.ErrRootNotOwned) {
			t.Errorf("revalidate without marker: %v", err)
		}
	})
	t.Run("empty dir adopted", func(t *testing.T) {
		root := t.TempDir()
		d, err := newAt(root)
		if err != nil {
			t.Fatal(err)
		}
		d.Close(context.Background())
		if _, err := newAt(root); err != nil {
			t.Errorf("reopening a marked root: %v", err)
		}
	})
	t.Run("unmarked content refused", func(t *testing.T) {
		root := t.TempDir()
		os.WriteFile(filepath.Join(root, "Pixel_6_API_35.ini"), []byte("path=x"), 0o600)
		if _, err := newAt(root); !errors.Is(err, core.ErrRootNotOwned) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("another platform's root refused", func(t *testing.T) {
		root := t.TempDir()
		os.WriteFile(filepath.Join(root, ".simlock-root"), []byte(`{"owner":"simlock","platform":"ios"}`), 0o600)
		if _, err := newAt(root); !errors.Is(err, core.ErrRootNotOwned) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("replaced marker fails revalidation", func(t *testing.T) {
		root := t.TempDir()
		d, err := newAt(root)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close(context.Background())
		// Another claim's marker: same owner and platform, another id.
		os.WriteFile(filepath.Join(root, ".simlock-root"), []byte(`{"owner":"simlock","platform":"android","id":"someone-else"}`), 0o600)
		if err := d.RevalidateRoot(context.Background()); !errors.Is(err, core.ErrRootNotOwned) {
			t.Errorf("revalidate with a replaced marker: %v", err)
		}
	})
	t.Run("marker from before ids adopted and numbered", func(t *testing.T) {
		// The form earlier versions wrote, in a root holding an AVD.
		root := t.TempDir()
		legacy := `{"owner":"simlock","platform":"android","createdAt":"2026-04-01T09:00:00Z"}`
		os.WriteFile(filepath.Join(root, ".simlock-root"), []byte(legacy), 0o600)
		os.WriteFile(filepath.Join(root, "simlock-aaa.ini"), []byte("path=x"), 0o600)
		os.Mkdir(filepath.Join(root, "simlock-aaa.avd"), 0o700)
		d, err := newAt(root)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close(context.Background())
		var m map[string]string
		b, _ := os.ReadFile(filepath.Join(root, ".simlock-root"))
		if err := json.Unmarshal(b, &m); err != nil || m["owner"] != "simlock" || m["platform"] != "android" ||
			m["id"] == "" || m["createdAt"] != "2026-04-01T09:00:00Z" {
			t.Errorf("marker %s", b)
		}
		if err := d.RevalidateRoot(context.Background()); err != nil {
			t.Errorf("revalidate: %v", err)
		}
		// Put back an id-less marker: numbering happens only at claim, so
		// revalidation refuses it.
		os.WriteFile(filepath.Join(root, ".simlock-root"), []byte(legacy), 0o600)
		if err := d.RevalidateRoot(context.Background()); !errors.Is(err, core.ErrRootNotOwned) {
			t.Errorf("revalidate with an id-less marker: %v", err)
		}
	})
	t.Run("relative root refused", func(t *testing.T) {
		if _, err := newAt("avd"); err == nil {
			t.Error("accepted")
		}
	})
}

func TestOptionsValidation(t *testing.T) {
	for name, tweak := range map[string]func(*Options){
		"shared adb port":      func(o *Options) { o.ADBServerPort = 5037 },
		"scanned console":      func(o *Options) { o.ConsolePortBase = 5560 },
		"odd console":          func(o *Options) { o.ConsolePortBase = 5701 },
		"top of scanned range": func(o *Options) { o.ConsolePortBase = 5584 },
	} {
		t.Run(name, func(t *testing.T) {
			o := Options{Root: t.TempDir(), Runner: fake.NewRunner(), Clock: fake.NewClock(testStart)}
			tweak(&o)
			if d, err := New(o); err == nil {
				d.Close(context.Background())
				t.Error("accepted")
			}
		})
	}
}
