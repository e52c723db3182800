package android

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampleBaseline is a baseline shaped like a capture: two users, a
// third-party package with a grant, settings of every namespace, files
// and a link.
func sampleBaseline() *kbBaseline {
	return &kbBaseline{
		binding: kbBinding{AVD: "simlock-ab12", Serial: "emulator-5700", Incarnation: "inc-1", BootID: "boot-1", User: 0},
		users:   []int{0, 10},
		packages: map[int]map[string]bool{
			0:  {"android": true, "com.example.fixture": true},
			10: {"android": true},
		},
		grants: map[int]map[string]map[string]bool{
			0:  {"com.example.fixture": {"android.permission.CAMERA": true}, "com.example.none": {}},
			10: {},
		},
		settings: map[int]map[string]map[string]string{
			0:  {"global": {"window_animation_scale": "1.0"}, "system": {"screen_off_timeout": "60000"}, "secure": {"x": "a=b"}},
			10: {"system": {}, "secure": {"y": ""}},
		},
		display:  map[string]string{"size": "", "density": "320"},
		props:    map[string]string{"persist.sys.locale": "", "persist.sys.timezone": "Europe/Paris"},
		accounts: strings.Repeat("ab", 32),
		files:    map[string]bool{"/sdcard/Download/fixture.txt": true, "/sdcard/DCIM/Camera/p.jpg": true},
		links:    map[string]bool{"/sdcard/Download/out": true},
	}
}

// A baseline survives its file: what is read back is what was captured,
// and the bytes are the same every time they are written.
func TestKeepBootedBaselineFileRoundTrips(t *testing.T) {
	bl := sampleBaseline()
	raw, err := encodeBaseline(bl)
	if err != nil {
		t.Fatal(err)
	}
	again, err := encodeBaseline(bl)
	if err != nil || !bytes.Equal(raw, again) {
		t.Fatalf("two encodings differ (%v):\n%s\n%s", err, raw, again)
	}
	back, err := decodeBaseline(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, bl) {
		t.Fatalf("read back %+v\nwant %+v", back, bl)
	}
}

// Any damage to the file is refused, never half read: every truncation,
// and any changed byte of the body (the digest catches it) or of the
// envelope.
func TestKeepBootedBaselineFileRefusesDamage(t *testing.T) {
	raw, err := encodeBaseline(sampleBaseline())
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(raw); n++ {
		if _, err := decodeBaseline(raw[:n]); err == nil {
			t.Fatalf("a file cut at %d of %d bytes was accepted", n, len(raw))
		}
	}
	for i := range raw {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		if bl, err := decodeBaseline(b); err == nil && !reflect.DeepEqual(bl, sampleBaseline()) {
			t.Fatalf("byte %d changed (%q) and a different baseline was accepted", i, b[i])
		}
	}
	body := func(f func(*kbBody)) []byte {
		bl := sampleBaseline()
		b := kbBody{Binding: bl.binding, Users: bl.users, Packages: map[int][]string{0: {"android"}, 10: {"android"}},
			Grants: map[int]map[string][]string{0: {}, 10: {}}, Settings: bl.settings, Display: bl.display,
			Props: bl.props, Accounts: bl.accounts, Files: []string{"/sdcard/Download/a"}, Links: []string{}}
		f(&b)
		return rewrap(t, b)
	}
	if _, err := decodeBaseline(body(func(*kbBody) {})); err != nil {
		t.Fatalf("the well-formed control was refused: %v", err)
	}
	for name, f := range map[string]func(*kbBody){
		"no incarnation":      func(b *kbBody) { b.Binding.Incarnation = "" },
		"no boot id":          func(b *kbBody) { b.Binding.BootID = "" },
		"bad avd name":        func(b *kbBody) { b.Binding.AVD = "../x" },
		"no users":            func(b *kbBody) { b.Users = nil },
		"users out of order":  func(b *kbBody) { b.Users = []int{10, 0} },
		"packages of a stray": func(b *kbBody) { b.Packages = map[int][]string{0: {}, 11: {}} },
		"global for user 10":  func(b *kbBody) { b.Settings = map[int]map[string]map[string]string{0: {}, 10: {"global": {}}} },
		"no density":          func(b *kbBody) { b.Display = map[string]string{"size": ""} },
		"a stray property":    func(b *kbBody) { b.Props = map[string]string{"persist.sys.locale": "", "ro.x": ""} },
		"short digest":        func(b *kbBody) { b.Accounts = "abc" },
		"file outside roots":  func(b *kbBody) { b.Files = []string{"/data/local/tmp/x"} },
		"link at a root":      func(b *kbBody) { b.Links = []string{"/sdcard/Download"} },
	} {
		if _, err := decodeBaseline(body(f)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := decodeBaseline(append(bytes.Clone(raw), []byte(` {}`)...)); err == nil {
		t.Error("trailing data accepted")
	}
	if _, err := decodeBaseline(bytes.Replace(raw, []byte(kbFileFormat), []byte("simlock-keepbooted/2"), 1)); err == nil {
		t.Error("another format accepted")
	}
}

// rewrap gives b a valid envelope, so a test reaches the body's checks.
func rewrap(t *testing.T, b kbBody) []byte {
	t.Helper()
	raw, err := encodeBody(b)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The driver's book: a stored baseline is found again by a new driver on
// the same root only under the same binding; any other binding (each
// field in turn) discards the file, and so does a damaged one. A new
// incarnation and a destroy remove it, with an interrupted write's
// temporary file.
func TestKeepBootedBaselineFileIsBoundToTheDevice(t *testing.T) {
	h := newHarness(t)
	d := h.d
	bl := sampleBaseline()
	name := bl.binding.AVD
	if err := d.saveState(name, avdState{ConsolePort: 5700, Incarnation: bl.binding.Incarnation}); err != nil {
		t.Fatal(err)
	}
	path := d.kbPath(name)
	store := func() {
		t.Helper()
		d.kbStore(bl)
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("baseline file: %v %v", fi, err)
		}
	}
	fresh := func() *Driver {
		d.kb.mu.Lock()
		d.kb.by = nil // what a restarted daemon's driver has
		d.kb.mu.Unlock()
		return d
	}
	store()
	if got := fresh().kbBaselineFor(bl.binding); got == nil || !reflect.DeepEqual(got, bl) {
		t.Fatalf("a restarted driver read back %+v", got)
	}
	for field, change := range map[string]func(*kbBinding){
		"avd":         func(b *kbBinding) { b.AVD = "simlock-other" },
		"serial":      func(b *kbBinding) { b.Serial = "emulator-5702" },
		"incarnation": func(b *kbBinding) { b.Incarnation = "inc-2" },
		"boot id":     func(b *kbBinding) { b.BootID = "boot-2" },
		"user":        func(b *kbBinding) { b.User = 10 },
	} {
		store()
		now := bl.binding
		change(&now)
		if field == "avd" {
			// Another AVD has another file: this one is left alone.
			if fresh().kbBaselineFor(now) != nil {
				t.Fatalf("%s: another AVD's baseline was found", field)
			}
			continue
		}
		if got := fresh().kbBaselineFor(now); got != nil {
			t.Fatalf("%s changed and the baseline was still trusted", field)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s changed and the file was not discarded: %v", field, err)
		}
		// The memory of a running driver obeys the same binding.
		store()
		if d.kbBaselineFor(now) != nil {
			t.Fatalf("%s changed and the remembered baseline was still trusted", field)
		}
	}

	store()
	if err := os.WriteFile(path, []byte(`{"format":"simlock-keepbooted/1","sha256":"00","body":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if fresh().kbBaselineFor(bl.binding) != nil {
		t.Fatal("a damaged file was trusted")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a damaged file was kept: %v", err)
	}

	// A capture that a new incarnation overtook is not written.
	if err := d.saveState(name, avdState{ConsolePort: 5700, Incarnation: "inc-later"}); err != nil {
		t.Fatal(err)
	}
	d.kbStore(bl)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a stale capture was written: %v", err)
	}
	if err := d.saveState(name, avdState{ConsolePort: 5700, Incarnation: bl.binding.Incarnation}); err != nil {
		t.Fatal(err)
	}

	// Nor is one whose bytes would read back otherwise.
	odd := sampleBaseline()
	odd.settings[0]["system"]["bad"] = "\xff"
	d.kbStore(odd)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a baseline JSON cannot carry was written: %v", err)
	}

	store()
	tmp := filepath.Join(h.root, "."+name+".keepbooted.json.tmp123456")
	// An AVD whose name extends this one's file name: its temporary file
	// shares the prefix, and is not this AVD's.
	other := filepath.Join(h.root, "."+name+".keepbooted.json.tmp7.keepbooted.json.tmp99")
	for _, p := range []string{tmp, other} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.newIncarnation(name); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, tmp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s outlived a new incarnation: %v", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another AVD's temporary file was removed: %v", err)
	}
	if d.kbBaselineFor(bl.binding) != nil {
		t.Error("the remembered baseline outlived a new incarnation")
	}
}

// The decoder on arbitrary bytes: it never panics, and whatever it
// accepts passes the body's checks again and reads back unchanged after
// being written, so a baseline the daemon trusts is one it could have
// written itself.
func FuzzDecodeKeepBootedBaseline(f *testing.F) {
	raw, err := encodeBaseline(sampleBaseline())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Add([]byte(`{"format":"simlock-keepbooted/1","sha256":"","body":null}`))
	f.Add([]byte(`{}`))
	var env kbEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(env.Body))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecoded(t, b)
		// The same bytes as a body under a matching digest, so the
		// body's decoder and checks are reached, not only the digest.
		sum := sha256.Sum256(b)
		checkDecoded(t, []byte(`{"format":"`+kbFileFormat+`","sha256":"`+hex.EncodeToString(sum[:])+`","body":`+string(b)+`}`))
	})
}

func checkDecoded(t *testing.T, b []byte) {
	t.Helper()
	{
		bl, err := decodeBaseline(b)
		if err != nil {
			return
		}
		if bl.binding.AVD == "" || len(bl.users) == 0 || len(bl.display) != 2 || len(bl.props) != len(kbProps) {
			t.Fatalf("accepted an incomplete baseline %+v", bl)
		}
		again, err := encodeBaseline(bl)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeBaseline(again)
		if err != nil {
			t.Fatalf("its own encoding is refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(back, bl) {
			t.Fatalf("round trip changed it:\n%+v\n%+v", bl, back)
		}
	}
}
