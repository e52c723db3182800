package ports

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
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
