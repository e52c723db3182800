package simsdk

import (
	"os"
	"path/filepath"
	"testing"
)

// binaryManifest is SampleAPK for a test.
func binaryManifest(t *testing.T, pkg string) []byte {
	t.Helper()
	b, err := SampleAPK(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A real APK installs under its manifest's package, whatever the file is
// called; other bytes fall back to the file name. adb install and pm
// install agree.
func TestInstallTakesThePackageFromTheManifest(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "apky")
	dir := t.TempDir()
	real := filepath.Join(dir, "app-debug.apk")
	if err := os.WriteFile(real, binaryManifest(t, "com.example.real"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "com.example.named.apk")
	if err := os.WriteFile(fake, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.ok("adb", "-s", "emulator-5800", "install", real)
	a.ok("adb", "-s", "emulator-5800", "install", fake)
	a.ok("adb", "-s", "emulator-5800", "push", real, "/data/local/tmp/other.apk")
	if r := a.adb("-s", "emulator-5800", "shell", "pm uninstall com.example.real && pm install /data/local/tmp/other.apk && pm list packages -3"); r.stdout != "Success\nSuccess\npackage:com.example.named\npackage:com.example.real\n" {
		t.Errorf("packages: %+v", r)
	}
}
