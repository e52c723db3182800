package devroot

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
)

var start = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// faultyFS is the real filesystem with failures injected per operation.
type faultyFS struct {
	ports.OSFilesystem
	stat, mkdir, read, write, readDir error
}

func (f faultyFS) Stat(p string) (fs.FileInfo, error) {
	if f.stat != nil {
		return nil, f.stat
	}
	return f.OSFilesystem.Stat(p)
}

func (f faultyFS) MkdirAll(p string) error {
	if f.mkdir != nil {
		return f.mkdir
	}
	return f.OSFilesystem.MkdirAll(p)
}

func (f faultyFS) ReadFile(p string) ([]byte, error) {
	if f.read != nil {
		return nil, f.read
	}
	return f.OSFilesystem.ReadFile(p)
}

func (f faultyFS) WriteFileAtomic(p string, b []byte) error {
	if f.write != nil {
		return f.write
	}
	return f.OSFilesystem.WriteFileAtomic(p, b)
}

func (f faultyFS) ReadDir(p string) ([]fs.DirEntry, error) {
	if f.readDir != nil {
		return nil, f.readDir
	}
	return f.OSFilesystem.ReadDir(p)
}

func readMarker(t *testing.T, dir string) (Marker, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	if err != nil {
		t.Fatal(err)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, b
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeMarker(t *testing.T, dir string, m Marker) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, MarkerFile), string(b))
}

// checkNotOwned insists err is a refusal: core.ErrRootNotOwned inside a
// *core.SpecError that names the root.
func checkNotOwned(t *testing.T, err error, dir string) {
	t.Helper()
	if !errors.Is(err, core.ErrRootNotOwned) {
		t.Fatalf("error %v, want ErrRootNotOwned", err)
	}
	var se *core.SpecError
	if !errors.As(err, &se) || se.Details["root"] != dir {
		t.Fatalf("error %#v is not a SpecError naming root %s", err, dir)
	}
}

func TestClaim(t *testing.T) {
	const platform = "ios"
	for _, tc := range []struct {
		name string
		// setup prepares the directory (under a fresh temp dir) and returns
		// the root to claim.
		setup func(t *testing.T, tmp string) string
		fs    func(base ports.OSFilesystem) ports.Filesystem
		opts  []Option
		// refused: the claim must fail with ErrRootNotOwned; fails: with
		// any error; otherwise it must succeed and check runs.
		refused, fails bool
		check          func(t *testing.T, dir string, r *Root)
	}{
		{
			name:  "fresh directory is created 0700 and marked",
			setup: func(t *testing.T, tmp string) string { return filepath.Join(tmp, "a", "b", "ios") },
			check: func(t *testing.T, dir string, r *Root) {
				st, err := os.Stat(dir)
				if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
					t.Fatalf("root %v, %v", st, err)
				}
				m, b := readMarker(t, dir)
				if m.Owner != "simlock" || m.Platform != platform || m.ID == "" || m.ID != r.ID() || !m.CreatedAt.Equal(start) {
					t.Fatalf("marker %s, claimed id %q", b, r.ID())
				}
				if fi, err := os.Stat(filepath.Join(dir, MarkerFile)); err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("marker %v, %v", fi, err)
				}
			},
		},
		{
			name:  "empty existing directory is marked",
			setup: func(t *testing.T, tmp string) string { return tmp },
			check: func(t *testing.T, dir string, r *Root) {
				if m, b := readMarker(t, dir); m.Platform != platform || m.ID == "" || m.ID != r.ID() {
					t.Fatalf("marker %s, claimed id %q", b, r.ID())
				}
			},
		},
		{
			name: "own marked directory with content is adopted as is",
			setup: func(t *testing.T, tmp string) string {
				writeMarker(t, tmp, Marker{Owner: "simlock", Platform: platform, ID: "abc123", CreatedAt: start.Add(-time.Hour)})
				writeFile(t, filepath.Join(tmp, "device_set.plist"), "x")
				return tmp
			},
			check: func(t *testing.T, dir string, r *Root) {
				if m, b := readMarker(t, dir); m.ID != "abc123" || !m.CreatedAt.Equal(start.Add(-time.Hour)) || r.ID() != "abc123" {
					t.Fatalf("marker %s rewritten or id %q not adopted", b, r.ID())
				}
			},
		},
		{
			name: "non-empty unmarked directory is refused",
			setup: func(t *testing.T, tmp string) string {
				writeFile(t, filepath.Join(tmp, "device_set.plist"), "x")
				return tmp
			},
			refused: true,
		},
		{
			name: "non-empty unmarked directory is refused even with AdoptUnnumbered",
			setup: func(t *testing.T, tmp string) string {
				writeFile(t, filepath.Join(tmp, "Pixel.ini"), "x")
				return tmp
			},
			opts:    []Option{AdoptUnnumbered()},
			refused: true,
		},
		{
			name: "marker of another owner is refused",
			setup: func(t *testing.T, tmp string) string {
				writeMarker(t, tmp, Marker{Owner: "someone", Platform: platform, ID: "x"})
				return tmp
			},
			refused: true,
		},
		{
			name: "marker of another platform is refused",
			setup: func(t *testing.T, tmp string) string {
				writeMarker(t, tmp, Marker{Owner: "simlock", Platform: "android", ID: "x"})
				return tmp
			},
			refused: true,
		},
		{
			name: "marker of another platform is refused with AdoptUnnumbered",
			setup: func(t *testing.T, tmp string) string {
				writeMarker(t, tmp, Marker{Owner: "simlock", Platform: "android"})
				return tmp
			},
			opts:    []Option{AdoptUnnumbered()},
			refused: true,
		},
		{
			name: "marker without an id is refused",
			setup: func(t *testing.T, tmp string) string {
				writeMarker(t, tmp, Marker{Owner: "simlock", Platform: platform, CreatedAt: start})
				return tmp
			},
			refused: true,
		},
		{
			name: "marker without an id is numbered under AdoptUnnumbered",
			setup: func(t *testing.T, tmp string) string {
				writeMarker(t, tmp, Marker{Owner: "simlock", Platform: platform, CreatedAt: start.Add(-48 * time.Hour)})
				writeFile(t, filepath.Join(tmp, "Pixel.ini"), "x")
				return tmp
			},
			opts: []Option{AdoptUnnumbered()},
			check: func(t *testing.T, dir string, r *Root) {
				m, b := readMarker(t, dir)
				if m.Owner != "simlock" || m.Platform != platform || m.ID == "" || m.ID != r.ID() || !m.CreatedAt.Equal(start.Add(-48*time.Hour)) {
					t.Fatalf("marker %s, claimed id %q", b, r.ID())
				}
				if err := r.Revalidate(); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "unparseable marker is refused",
			setup: func(t *testing.T, tmp string) string {
				writeFile(t, filepath.Join(tmp, MarkerFile), "not json")
				return tmp
			},
			refused: true,
		},
		{
			name: "marker that is a directory fails the claim",
			setup: func(t *testing.T, tmp string) string {
				if err := os.Mkdir(filepath.Join(tmp, MarkerFile), 0o700); err != nil {
					t.Fatal(err)
				}
				return tmp
			},
			fails: true,
		},
		{
			name:  "marker read failure",
			setup: func(t *testing.T, tmp string) string { return tmp },
			fs: func(base ports.OSFilesystem) ports.Filesystem {
				return faultyFS{OSFilesystem: base, read: fs.ErrPermission}
			},
			fails: true,
		},
		{
			name: "a file is refused",
			setup: func(t *testing.T, tmp string) string {
				p := filepath.Join(tmp, "file")
				writeFile(t, p, "")
				return p
			},
			refused: true,
		},
		{
			name:  "stat failure",
			setup: func(t *testing.T, tmp string) string { return tmp },
			fs: func(base ports.OSFilesystem) ports.Filesystem {
				return faultyFS{OSFilesystem: base, stat: fs.ErrPermission}
			},
			fails: true,
		},
		{
			name:  "create failure",
			setup: func(t *testing.T, tmp string) string { return filepath.Join(tmp, "ios") },
			fs: func(base ports.OSFilesystem) ports.Filesystem {
				return faultyFS{OSFilesystem: base, mkdir: fs.ErrPermission}
			},
			fails: true,
		},
		{
			name:  "marker write failure",
			setup: func(t *testing.T, tmp string) string { return tmp },
			fs: func(base ports.OSFilesystem) ports.Filesystem {
				return faultyFS{OSFilesystem: base, write: fs.ErrPermission}
			},
			fails: true,
		},
		{
			name:  "listing failure",
			setup: func(t *testing.T, tmp string) string { return tmp },
			fs: func(base ports.OSFilesystem) ports.Filesystem {
				return faultyFS{OSFilesystem: base, readDir: fs.ErrPermission}
			},
			fails: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t, t.TempDir())
			var fsys ports.Filesystem = ports.OSFilesystem{}
			if tc.fs != nil {
				fsys = tc.fs(ports.OSFilesystem{})
			}
			before := readMarkerOrNil(dir)
			r, err := Claim(fsys, fake.NewClock(start), nil, dir, platform, tc.opts...)
			switch {
			case tc.refused:
				checkNotOwned(t, err, dir)
			case tc.fails:
				if err == nil {
					t.Fatal("claim succeeded")
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if r.Dir() != dir {
					t.Fatalf("Dir() = %q", r.Dir())
				}
				if err := r.Revalidate(); err != nil {
					t.Fatalf("revalidate right after claim: %v", err)
				}
				tc.check(t, dir, r)
			}
			if err != nil {
				if r != nil {
					t.Error("a Root returned with an error")
				}
				// A directory that is not proved ours is never written to.
				if after := readMarkerOrNil(dir); !bytes.Equal(after, before) {
					t.Errorf("marker changed by a failed claim: %q -> %q", before, after)
				}
				if !strings.HasPrefix(err.Error(), platform+": ") {
					t.Errorf("error %q lacks the platform prefix", err)
				}
			}
		})
	}
}

// readMarkerOrNil returns the marker's bytes, or nil when there are none.
func readMarkerOrNil(dir string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	if err != nil {
		return nil
	}
	return b
}

func TestClaimWarnsAboutASharedRoot(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o700, false}, {0o750, true}, {0o705, true}} {
		dir := filepath.Join(t.TempDir(), "root")
		if err := os.Mkdir(dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tc.mode); err != nil { // past the umask
			t.Fatal(err)
		}
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		if _, err := Claim(ports.OSFilesystem{}, fake.NewClock(start), log, dir, "android"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "accessible to other users"); got != tc.warn {
			t.Errorf("mode %v: warned %v, log %q", tc.mode, got, buf.String())
		}
	}
}

func TestClaimIDsAreUnique(t *testing.T) {
	a, err := Claim(ports.OSFilesystem{}, fake.NewClock(start), nil, t.TempDir(), "ios")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Claim(ports.OSFilesystem{}, fake.NewClock(start), nil, t.TempDir(), "ios")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() == b.ID() {
		t.Fatalf("two claims share id %s", a.ID())
	}
}

func TestRevalidate(t *testing.T) {
	const platform = "android"
	for _, tc := range []struct {
		name string
		// change alters the claimed root; nil leaves it alone.
		change func(t *testing.T, dir string, r *Root)
		ok     bool
	}{
		{name: "untouched", ok: true},
		{
			name: "content added",
			change: func(t *testing.T, dir string, r *Root) {
				writeFile(t, filepath.Join(dir, "Pixel.ini"), "x")
			},
			ok: true,
		},
		{
			name: "marker deleted",
			change: func(t *testing.T, dir string, r *Root) {
				if err := os.Remove(filepath.Join(dir, MarkerFile)); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "root deleted",
			change: func(t *testing.T, dir string, r *Root) {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "marker replaced by another claim's",
			change: func(t *testing.T, dir string, r *Root) {
				writeMarker(t, dir, Marker{Owner: "simlock", Platform: platform, ID: "someone-else"})
			},
		},
		{
			name: "root re-created and claimed again",
			change: func(t *testing.T, dir string, r *Root) {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if _, err := Claim(ports.OSFilesystem{}, fake.NewClock(start), nil, dir, platform); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "marker lost its id",
			change: func(t *testing.T, dir string, r *Root) {
				writeMarker(t, dir, Marker{Owner: "simlock", Platform: platform})
			},
		},
		{
			name: "marker of another platform, same id",
			change: func(t *testing.T, dir string, r *Root) {
				writeMarker(t, dir, Marker{Owner: "simlock", Platform: "ios", ID: r.ID()})
			},
		},
		{
			name: "marker of another owner, same id",
			change: func(t *testing.T, dir string, r *Root) {
				writeMarker(t, dir, Marker{Owner: "someone", Platform: platform, ID: r.ID()})
			},
		},
		{
			name: "marker garbled",
			change: func(t *testing.T, dir string, r *Root) {
				writeFile(t, filepath.Join(dir, MarkerFile), "{")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "avd")
			// AdoptUnnumbered must not make Revalidate accept an id-less
			// marker: it only numbers one at Claim.
			r, err := Claim(ports.OSFilesystem{}, fake.NewClock(start), nil, dir, platform, AdoptUnnumbered())
			if err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				tc.change(t, dir, r)
			}
			err = r.Revalidate()
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			checkNotOwned(t, err, dir)
			if !strings.HasPrefix(err.Error(), platform+": ") {
				t.Errorf("error %q lacks the platform prefix", err)
			}
		})
	}
}

func TestRevalidateReadFailure(t *testing.T) {
	dir := t.TempDir()
	r, err := Claim(ports.OSFilesystem{}, fake.NewClock(start), nil, dir, "ios")
	if err != nil {
		t.Fatal(err)
	}
	r.fs = faultyFS{read: fs.ErrPermission}
	if err := r.Revalidate(); err == nil || !errors.Is(err, fs.ErrPermission) || !strings.HasPrefix(err.Error(), "ios: ") {
		t.Fatalf("error %v", err)
	}
}
