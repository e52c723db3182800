package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Android keep-booted across daemon restarts (ADR 0056): a session that a
// graceful restart hands over is still cleaned by the baseline the first
// daemon captured (a package it installed before the restart is gone),
// and after a kill -9 between sessions the next session reuses the warm
// emulator, cleaned.
func TestSessionAndroidKeepBootedSurvivesDaemonRestarts(t *testing.T) {
	w, prepare, release := androidKeepBootedSessions(t, 5)
	install := func(serial, pkg string) {
		apk := filepath.Join(t.TempDir(), pkg+".apk")
		if err := os.WriteFile(apk, []byte("not a real apk"), 0o644); err != nil {
			t.Fatal(err)
		}
		w.mustRun("adb", "-s", serial, "install", apk)
		// The cleaning checks below prove nothing unless the package was
		// really there to clean.
		if out := w.mustRun("adb", "-s", serial, "shell", "pm", "list", "packages", "-3"); !strings.Contains(out, "package:"+pkg) {
			t.Fatalf("%s not installed: %q", pkg, out)
		}
	}
	packages := func(serial string) string {
		return w.mustRun("adb", "-s", serial, "shell", "pm", "list", "packages", "-3")
	}
	baselines := func() []string {
		m, err := filepath.Glob(filepath.Join(w.home, "devices", "android", "*.keepbooted.json"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	one := prepare("r1")
	if n := len(baselines()); n != 1 {
		t.Fatalf("%d baseline files after the first grant, want 1", n)
	}
	install(one.Device.Serial, "com.example.before_restart")
	w.mustRun("daemon", "stop")
	w.mustRun("daemon", "start")
	eventually(t, "the restarted daemon to adopt the session", 30*time.Second, func() bool {
		st := w.sessionStatus("r1", "o")
		return st.Status == "ready" && st.SessionID == one.SessionID
	})
	if r := release(one.SessionID); r.Timing.Reset.Mode != "keep-booted" || r.Timing.Reset.Outcome != "clean" {
		t.Fatalf("the release after a graceful restart: %+v, want a clean keep-booted reset", r.Timing.Reset)
	}
	if out := packages(one.Device.Serial); strings.Contains(out, "com.example.before_restart") {
		t.Fatalf("the package installed before the restart survived the cleaning: %q", out)
	}

	w.kill9()
	w.mustRun("daemon", "start")
	two := prepare("r2")
	if two.Device.ID != one.Device.ID || two.Timing.Acquisition.Admission != "reuse" {
		t.Fatalf("after kill -9: %+v on %s, want a reuse of %s", two.Timing.Acquisition, two.Device.ID, one.Device.ID)
	}
	if out := packages(two.Device.Serial); strings.Contains(out, "com.example.") {
		t.Fatalf("the reused emulator carries an earlier session's package: %q", out)
	}
	install(two.Device.Serial, "com.example.after_kill")
	if r := release(two.SessionID); r.Timing.Reset.Mode != "keep-booted" || r.Timing.Reset.Outcome != "clean" {
		t.Fatalf("the release after kill -9: %+v, want a clean keep-booted reset", r.Timing.Reset)
	}
	if out := packages(two.Device.Serial); strings.Contains(out, "com.example.") {
		t.Fatalf("the package of the session after kill -9 survived the cleaning: %q", out)
	}
}
