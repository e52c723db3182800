//go:build linux

package hostreg

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSystemProberOnLinux(t *testing.T) {
	ctx := context.Background()
	var p SystemProber
	self, err := Self("/h")
	if err != nil {
		t.Fatal(err)
	}
	start, alive, err := p.ProcessStart(ctx, os.Getpid())
	if err != nil || !alive || start != self.Start || !strings.HasPrefix(start, "linux:") {
		t.Fatalf("self: %q %v %v (Self %q)", start, alive, err, self.Start)
	}
	// A process that ran and was reaped is dead.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	if _, alive, err := p.ProcessStart(ctx, cmd.Process.Pid); err != nil || alive {
		t.Fatalf("reaped child: alive=%v err=%v", alive, err)
	}
	// The identity is stable for one process, and a child started later
	// than this test has a start no earlier than ours (same boot id).
	child := startOf(t, p)
	ours, _ := strings.CutPrefix(self.Start, "linux:")
	theirs, _ := strings.CutPrefix(child, "linux:")
	bootA, tickA, _ := strings.Cut(ours, ":")
	bootB, tickB, _ := strings.Cut(theirs, ":")
	if bootA != bootB || len(tickB) < len(tickA) || len(tickB) == len(tickA) && tickB < tickA {
		t.Fatalf("child start %q before ours %q", child, self.Start)
	}

	dir := t.TempDir()
	if ok, err := p.HomeExists(ctx, dir); err != nil || !ok {
		t.Fatalf("existing home: %v %v", ok, err)
	}
	if ok, err := p.HomeExists(ctx, filepath.Join(dir, "gone")); err != nil || ok {
		t.Fatalf("missing home: %v %v", ok, err)
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	if ok, err := p.HomeExists(ctx, filepath.Join(file, "home")); err != nil || ok {
		t.Fatalf("home under a file (ENOTDIR): %v %v", ok, err)
	}
	if os.Geteuid() != 0 { // root reads through any mode
		locked := filepath.Join(dir, "locked")
		os.Mkdir(locked, 0o700)
		os.Chmod(locked, 0)
		defer os.Chmod(locked, 0o700)
		if _, err := p.HomeExists(ctx, filepath.Join(locked, "home")); err == nil {
			t.Fatal("a permission error proved a home gone")
		}
	}
}

// startOf starts a sleeping child and returns its start identity.
func startOf(t *testing.T, p SystemProber) string {
	t.Helper()
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep(1):", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	s, alive, err := p.ProcessStart(context.Background(), cmd.Process.Pid)
	if err != nil || !alive {
		t.Fatalf("live child: %v %v", alive, err)
	}
	if again, _, _ := p.ProcessStart(context.Background(), cmd.Process.Pid); again != s {
		t.Fatalf("start identity changed: %q then %q", s, again)
	}
	return s
}

func TestParseStat(t *testing.T) {
	line := "4242 (we) ird (name)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n"
	start, state, err := parseStat([]byte(line))
	if err != nil || start != "987654" || state != 'S' {
		t.Fatalf("%q %c %v", start, state, err)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber 1"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}
