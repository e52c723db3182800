package ports

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

func TestWriteFileAtomicIsOwnerOnlyAndReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "f")
	if err := WriteFileAtomic(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "two" || st.Mode().Perm() != 0o600 {
		t.Fatalf("%q %v", b, st.Mode())
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

// The directory is synced after the rename, when the new file already
// has its name: that is what makes the replacement survive a power loss.
// A failed directory sync is reported, with the new content in place.
func TestWriteFileAtomicSyncsTheDirectoryAfterTheRename(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	p := filepath.Join(dir, "f")
	var synced []string
	sync := func(d string) error {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "new" {
			t.Errorf("directory synced before the rename: %q %v", b, err)
		}
		synced = append(synced, d)
		return syncDir(d)
	}
	if err := writeFileAtomic(p, []byte("new"), sync); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directories synced %q, want [%s]", synced, dir)
	}
	boom := errors.New("disk gone")
	err := writeFileAtomic(p, []byte("newer"), func(string) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("a failed directory sync answered %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "newer" {
		t.Fatalf("content after a failed directory sync %q", b)
	}
}

// A filesystem that cannot sync a directory at all (the *os.File Sync of
// some FUSE, 9p and network mounts answers EINVAL or ENOTSUP) does not
// fail the write; a sync that failed (EIO) still does.
func TestDirSyncUnsupportedIsNotAFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		skip bool
	}{
		{&os.PathError{Op: "sync", Path: "/d", Err: syscall.EINVAL}, true},
		{&os.PathError{Op: "sync", Path: "/d", Err: syscall.ENOTSUP}, true},
		{&os.PathError{Op: "sync", Path: "/d", Err: syscall.EIO}, false},
		{errors.New("disk gone"), false},
	} {
		if got := dirSyncUnsupported(c.err); got != c.skip {
			t.Errorf("%v: unsupported %v, want %v", c.err, got, c.skip)
		}
	}
}

func TestRotatingFileKeepsOneGeneration(t *testing.T) {
	p := filepath.Join(t.TempDir(), "daemon.log")
	r, err := OpenRotatingFile(p, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	line := strings.Repeat("x", 39) + "\n"
	for i := 0; i < 10; i++ {
		r.Write([]byte(line))
	}
	cur, _ := os.Stat(p)
	old, err := os.Stat(p + ".1")
	if err != nil || cur.Size() > 100 || old.Size() > 100 {
		t.Fatalf("current %d, rotated %v (%v)", cur.Size(), old, err)
	}
}

func TestExecRunnerReportsExitAndKillsTheGroupOnCancel(t *testing.T) {
	r := ExecRunner{Grace: 200 * time.Millisecond}
	res, err := r.Run(context.Background(), Command{Name: "sh", Args: []string{"-c", "echo out; echo err >&2; exit 3"}})
	var ee *ExitError
	if !errors.As(err, &ee) || res.ExitCode != 3 || strings.TrimSpace(string(res.Stdout)) != "out" || !strings.Contains(ee.Error(), "err") {
		t.Fatalf("res %+v err %v", res, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	// The grandchild sleep must die too, or Run would wait for its pipe.
	_, err = r.Run(ctx, Command{Name: "sh", Args: []string{"-c", "sleep 30 & sleep 30"}})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > testhost.Scale(10*time.Second) {
		t.Fatalf("cancel: %v after %s", err, time.Since(start))
	}
}

func TestHostStatsAreSane(t *testing.T) {
	s := HostStats{}
	if s.CPUCount() < 1 || s.TotalRAMBytes() == 0 {
		t.Fatal("no CPUs or RAM")
	}
	if free, err := s.FreeDiskBytes(t.TempDir()); err != nil || free == 0 {
		t.Fatalf("disk %d %v", free, err)
	}
}
