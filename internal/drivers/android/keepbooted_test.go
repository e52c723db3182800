package android

import (
	"reflect"
	"testing"
)

// The path guard of keep-booted file removal: only clean paths strictly
// inside the root, through no listed link, are ever removed.
func TestKeepBootedPathGuard(t *testing.T) {
	links := map[string]bool{"/sdcard/Download/out": true}
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"/sdcard/Download/new.txt", true},
		{"/sdcard/Download/a/b/c.jpg", true},
		{"/sdcard/Download/out", true}, // the link itself: rm unlinks it
		{"/sdcard/Download/out/victim.txt", false},
		{"/sdcard/Download/../Android/data/x", false},
		{"/sdcard/Download/./x", false},
		{"/sdcard/Download", false},
		{"/sdcard/DownloadX/x", false},
		{"/sdcard/Pictures/x", false},
		{"/sdcard/Download//x", false},
	} {
		if got := guardedPath(c.path, "/sdcard/Download", links); got != c.ok {
			t.Errorf("guardedPath(%q) = %v, want %v", c.path, got, c.ok)
		}
	}
	if guardedPath("/sdcard/Download/x", "/sdcard/Download", map[string]bool{"/sdcard/Download": true}) {
		t.Error("a root that is itself a link was trusted")
	}
}

// Runtime grants are read from the user's own "runtime permissions:"
// block only: install permissions and other users' grants do not count.
func TestParseRuntimeGrants(t *testing.T) {
	out := `Packages:
  Package [com.example.app] (1a2b):
    install permissions:
      android.permission.INTERNET: granted=true
    User 0: ceDataInode=1 installed=true enabled=0
      gids=[3003]
      runtime permissions:
        android.permission.CAMERA: granted=true, flags=[ USER_SET ]
        android.permission.RECORD_AUDIO: granted=false, flags=[ USER_SET ]
    User 10: ceDataInode=2 installed=true enabled=0
      runtime permissions:
        android.permission.READ_CONTACTS: granted=true, flags=[ USER_SET ]
`
	if got, want := parseRuntimeGrants(out, 0), map[string]bool{"android.permission.CAMERA": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("user 0: %v, want %v", got, want)
	}
	if got, want := parseRuntimeGrants(out, 10), map[string]bool{"android.permission.READ_CONTACTS": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("user 10: %v, want %v", got, want)
	}
}
