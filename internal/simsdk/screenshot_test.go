package simsdk

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func decodePNG(t *testing.T, what string, b []byte) (w, h int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s is not a PNG (%d bytes): %v", what, len(b), err)
	}
	return img.Bounds().Dx(), img.Bounds().Dy()
}

// simctl io screenshot writes a real PNG of a booted device, to a file or
// to stdout, and refuses what simctl refuses.
func TestSimctlIOScreenshotWritesAPNG(t *testing.T) {
	h := newHarness(t)
	u := h.create("Phone", "iPhone 16")
	if r := h.simctl("io", u, "screenshot", filepath.Join(t.TempDir(), "s.png")); r.code == 0 {
		t.Fatalf("a shut-down device has no screen: %+v", r)
	}
	h.must("boot", u)
	h.waitState(u, "Booted")

	file := filepath.Join(t.TempDir(), "s.png")
	r := h.simctl("io", u, "screenshot", file)
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "Wrote screenshot to: "+file) {
		t.Fatalf("screenshot to a file: %+v", r)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if w, hh := decodePNG(t, file, b); w != iosScreenW || hh != iosScreenH {
		t.Errorf("size %dx%d", w, hh)
	}
	r = h.simctl("io", u, "screenshot", "--type=png", "-")
	if r.code != 0 || r.stdout != string(b) {
		t.Fatalf("screenshot to stdout: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
	}
	// A second device's screen differs: a client can tell which one it got.
	v := h.create("Other", "iPhone 16")
	h.must("boot", v)
	h.waitState(v, "Booted")
	if r := h.simctl("io", v, "screenshot", "-"); r.code != 0 || r.stdout == string(b) {
		t.Fatalf("two devices, same screen (exit %d)", r.code)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"io", u}, "Usage: simctl io"},
		{[]string{"io", u, "screenshot"}, "Usage: simctl io"},
		{[]string{"io", u, "screenshot", "--bogus", "-"}, "Unrecognized option: --bogus"},
		{[]string{"io", u, "screenshot", "--type=webp", "-"}, "Unknown type: webp"},
		{[]string{"io", u, "record", "x.mov"}, "Unknown IO operation"},
		{[]string{"io", "0BAD0000-0000-0000-0000-000000000000", "screenshot", "-"}, "Invalid device: 0BAD0000"},
	} {
		r := h.simctl(tc.args...)
		if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%q: exit %d stderr %q, want it to mention %q", tc.args, r.code, r.stderr, tc.msg)
		}
	}
}

// screencap -p prints a PNG on stdout, writes one to a device file that
// adb pull fetches, and without -p writes the raw header-plus-pixels form.
func TestScreencapWritesAPNG(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "shooty")
	s := "emulator-5800"
	res := a.adb("-s", s, "shell", "screencap", "-p")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("screencap -p: %+v", res)
	}
	if w, h := decodePNG(t, "screencap -p", []byte(res.stdout)); w != androidScreenW || h != androidScreenH {
		t.Errorf("size %dx%d", w, h)
	}
	a.ok("adb", "-s", s, "shell", "screencap -p /sdcard/shot.png")
	local := filepath.Join(t.TempDir(), "shot.png")
	a.ok("adb", "-s", s, "pull", "/sdcard/shot.png", local)
	b, err := os.ReadFile(local)
	if err != nil || string(b) != res.stdout {
		t.Fatalf("pulled %d bytes (%v), want the same PNG as stdout", len(b), err)
	}
	raw := a.adb("-s", s, "shell", "screencap")
	var hdr [4]uint32
	if err := binary.Read(strings.NewReader(raw.stdout), binary.LittleEndian, &hdr); err != nil ||
		hdr != [4]uint32{androidScreenW, androidScreenH, 1, 1} || len(raw.stdout) != 16+4*androidScreenW*androidScreenH {
		t.Fatalf("raw screencap: header %v (%v), %d bytes", hdr, err, len(raw.stdout))
	}
	if res := a.adb("-s", s, "shell", "screencap", "-x"); res.code != 1 || !strings.HasPrefix(res.stderr, "screencap: invalid option -- 'x'\nusage: screencap") {
		t.Errorf("unknown flag: %+v", res)
	}
	if res := a.adb("-s", s, "shell", "screencap -p /system/x.png"); res.code != 1 {
		t.Errorf("read-only path: %+v", res)
	}
}
