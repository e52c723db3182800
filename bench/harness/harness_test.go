package harness

import (
	"bufio"
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/testhost"
)

// The process-time reading moves with work done, and the machine reading
// never claims more busy time than there was.
func TestCPUReadingsMoveWithWork(t *testing.T) {
	self0, _, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	busy0, total0, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the process has used a few clock ticks (10 ms each).
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	x := 0
	for {
		for i := range 1_000_000 {
			x += i
		}
		self, _, err := CPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if self-self0 >= 50*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s of spinning moved the process's CPU by %s", self-self0)
		}
	}
	busy1, total1, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	if busy1 <= busy0 || total1 <= total0 || busy1-busy0 > total1-total0 {
		t.Fatalf("machine busy %s of %s over the spin (x=%d)", busy1-busy0, total1-total0, x)
	}
}

// Calls on different devices count as one kind of call.
func TestToolVerbDropsDevicesSerialsAndPaths(t *testing.T) {
	for line, want := range map[string]string{
		"xcrun simctl --set /tmp/slb-1/h/devices/ios erase 0B6C1E92-6A51-4F0B-9C66-1D2E3F4A5B6C": "xcrun simctl erase",
		"xcrun simctl --set /tmp/slb-1/h/devices/ios list devices -j":                            "xcrun simctl list",
		"adb -P 5137 -s emulator-5554 shell getprop sys.boot_completed":                          "adb shell getprop",
		"emulator -version": "emulator -version",
	} {
		if got := ToolVerb(line); got != want {
			t.Errorf("ToolVerb(%q) = %q, want %q", line, got, want)
		}
	}
}

// The echo server writes back every line exactly as it came, one frame per
// line, without decoding it: two frames in one write come back as two, and
// a line that is no JSON at all comes back too.
func TestEchoEchoesEachFrameExactly(t *testing.T) {
	e, err := NewEcho(filepath.Join(t.TempDir(), "e.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c, err := net.Dial("unix", e.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frames := []string{floorFrame, "not json, {\"but\": a line}\n", `{"jsonrpc":"2.0","id":1,"method":"x"}` + "\n"}
	if _, err := c.Write([]byte(frames[0] + frames[1])); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(frames[2])); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for i, want := range frames {
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got != want {
			t.Fatalf("frame %d: echoed %q, want %q", i, got, want)
		}
	}
}

// The floor's commit runs on a connection with the daemon store's settings,
// read back with PRAGMA queries: the journal mode the store switches its
// file to (checked against a real store file), its busy_timeout and
// foreign_keys, and synchronous at the driver's default, which the store
// does not change (FULL: every commit is durable).
func TestFloorCommitUsesTheStorePragmas(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFloor(dir, filepath.Join(dir, "floor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	pragma := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}, name string) string {
		t.Helper()
		var v string
		if err := q.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil {
			t.Fatalf("PRAGMA %s: %v", name, err)
		}
		return v
	}

	// The daemon's own file, as the store leaves it.
	st, err := store.Open(ctx, filepath.Join(dir, "simlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	bare, err := sql.Open("sqlite", filepath.Join(dir, "simlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	storeMode, defaultSync := pragma(bare, "journal_mode"), pragma(bare, "synchronous")

	for name, want := range map[string]string{
		"journal_mode": storeMode,
		"synchronous":  defaultSync,
		"busy_timeout": "5000",
		"foreign_keys": "1",
	} {
		if got := pragma(f.tx, name); got != want {
			t.Errorf("floor PRAGMA %s = %s, want %s (the daemon's store)", name, got, want)
		}
	}
	if storeMode != "wal" || defaultSync != "2" {
		t.Errorf("the store's file is journal_mode %s, synchronous %s; want wal and 2 (FULL)", storeMode, defaultSync)
	}

	// Each commit is one durable row, visible to another connection.
	for range 3 {
		if _, err := f.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	other, err := sql.Open("sqlite", filepath.Join(dir, "floor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if n := pragma(other, "journal_mode"); n != "wal" {
		t.Errorf("floor file journal_mode %s after commits", n)
	}
	var rows int
	if err := other.QueryRowContext(ctx, "SELECT count(*) FROM floor").Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("rows after 3 commits: %d, %v", rows, err)
	}
	if _, err := f.RoundTrip(); err != nil {
		t.Fatalf("round trip: %v", err)
	}
}

// A ratio is judged only when the machine was quiet at both ends.
func TestQuietLoadNeedsBothEnds(t *testing.T) {
	for _, c := range []struct {
		start, end float64
		cpus       int
		want       bool
	}{{0.2, 0.9, 2, true}, {1.0, 0.1, 2, false}, {0.1, 1.0, 2, false}, {0.4, 0.4, 1, true}, {0.6, 0.1, 1, false}} {
		if got := QuietLoad(c.start, c.end, c.cpus); got != c.want {
			t.Errorf("QuietLoad(%g, %g, %d) = %v", c.start, c.end, c.cpus, got)
		}
	}
	if _, err := LoadAvg(); err != nil {
		t.Fatal(err)
	}
}
