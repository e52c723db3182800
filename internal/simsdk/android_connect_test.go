package simsdk

import (
	"strings"
	"testing"
)

// adb connect introduces an emulator to another server by its adb port:
// the default server (5037) then lists and drives it under HOST:PORT,
// until it is disconnected. An address nothing listens on is refused.
func TestADBConnectReachesAnEmulatorFromAnotherServer(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "conn") // console 5800, announced to the private server 5137
	if out := a.ok("adb", "-P", "5037", "devices"); strings.Contains(out, "5800") || strings.Contains(out, "5801") {
		t.Fatalf("the default server sees the emulator before any connect:\n%s", out)
	}
	if out := a.ok("adb", "-P", "5037", "connect", "127.0.0.1:5801"); out != "connected to 127.0.0.1:5801\n" {
		t.Fatalf("connect: %q", out)
	}
	if out := a.ok("adb", "-P", "5037", "connect", "localhost:5801"); out != "already connected to 127.0.0.1:5801\n" {
		t.Fatalf("second connect: %q", out)
	}
	if out := a.ok("adb", "-P", "5037", "devices"); !strings.Contains(out, "127.0.0.1:5801\tdevice\n") {
		t.Fatalf("devices after connect:\n%s", out)
	}
	if r := a.adb("-P", "5037", "-s", "127.0.0.1:5801", "get-state"); r.code != 0 || r.stdout != "device\n" {
		t.Fatalf("get-state through the connection: %+v", r)
	}
	if r := a.adb("-P", "5037", "-s", "127.0.0.1:5801", "shell", "getprop", "ro.boot.qemu.avd_name"); r.stdout != "conn\n" {
		t.Fatalf("shell through the connection reached %q", r.stdout)
	}
	if r := a.adb("-P", "5037", "connect", "127.0.0.1:5901"); r.code != 1 || r.stderr != "failed to connect to '127.0.0.1:5901': Connection refused\n" {
		t.Fatalf("connect to nothing: %+v", r)
	}
	if out := a.ok("adb", "-P", "5037", "disconnect", "127.0.0.1:5801"); out != "disconnected 127.0.0.1:5801\n" {
		t.Fatalf("disconnect: %q", out)
	}
	if r := a.adb("-P", "5037", "-s", "127.0.0.1:5801", "get-state"); r.code == 0 {
		t.Fatalf("get-state after disconnect: %+v", r)
	}
	if r := a.adb("-P", "5037", "disconnect", "127.0.0.1:5801"); r.code != 1 || !strings.Contains(r.stderr, "no such device '127.0.0.1:5801'") {
		t.Fatalf("second disconnect: %+v", r)
	}
}
