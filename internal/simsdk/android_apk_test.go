package simsdk

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"
)

// binaryManifest compiles <manifest package="pkg"> the way aapt does, as
// far as apkPackage reads it: a UTF-16 string pool and one start element.
func binaryManifest(t *testing.T, pkg string) []byte {
	t.Helper()
	le := binary.LittleEndian
	strs := []string{"package", "manifest", pkg}
	var data []byte
	var offsets []uint32
	for _, s := range strs {
		offsets = append(offsets, uint32(len(data)))
		u := utf16.Encode([]rune(s))
		data = le.AppendUint16(data, uint16(len(u)))
		for _, c := range u {
			data = le.AppendUint16(data, c)
		}
		data = le.AppendUint16(data, 0)
	}
	for len(data)%4 != 0 {
		data = append(data, 0)
	}
	var pool []byte
	pool = le.AppendUint16(pool, 0x0001)
	pool = le.AppendUint16(pool, 28)
	pool = le.AppendUint32(pool, uint32(28+4*len(strs)+len(data)))
	pool = le.AppendUint32(pool, uint32(len(strs)))
	pool = le.AppendUint32(pool, 0) // styles
	pool = le.AppendUint32(pool, 0) // flags: UTF-16
	pool = le.AppendUint32(pool, uint32(28+4*len(strs)))
	pool = le.AppendUint32(pool, 0)
	for _, o := range offsets {
		pool = le.AppendUint32(pool, o)
	}
	pool = append(pool, data...)

	var el []byte
	el = le.AppendUint16(el, 0x0102)
	el = le.AppendUint16(el, 16)
	el = le.AppendUint32(el, 16+20+20)
	el = le.AppendUint32(el, 1)          // line
	el = le.AppendUint32(el, 0xffffffff) // comment
	el = le.AppendUint32(el, 0xffffffff) // ns
	el = le.AppendUint32(el, 1)          // name: "manifest"
	el = le.AppendUint16(el, 20)         // attribute start
	el = le.AppendUint16(el, 20)         // attribute size
	el = le.AppendUint16(el, 1)          // count
	el = append(el, 0, 0, 0, 0, 0, 0)    // id, class, style
	el = le.AppendUint32(el, 0xffffffff) // attr ns
	el = le.AppendUint32(el, 0)          // attr name: "package"
	el = le.AppendUint32(el, 2)          // raw value: pkg
	el = append(el, 8, 0, 0, 3)          // typed value: string
	el = le.AppendUint32(el, 2)

	var doc []byte
	doc = le.AppendUint16(doc, 0x0003)
	doc = le.AppendUint16(doc, 8)
	doc = le.AppendUint32(doc, uint32(8+len(pool)+len(el)))
	doc = append(append(doc, pool...), el...)

	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create("AndroidManifest.xml")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(doc)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
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
