package backbone

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/test/harness"
)

type leaseView struct {
	LeaseID   string    `json:"leaseId"`
	TTLMs     int64     `json:"ttlMs"`
	ExpiresAt time.Time `json:"expiresAt"`
}

func leases(w *harness.World) []leaseView {
	w.T.Helper()
	var st struct{ Leases []leaseView }
	w.JSON(&st, "status", "--json")
	return st.Leases
}

// Holding is the CLI's policy over one TTL lease: a `simlock lease` that
// stays in the foreground renews its lease well before the TTL runs out
// (at a third of it), sending no TTL of its own, so the lease outlives
// its TTL several times with its width unchanged; and when the process
// that started it dies, the holder notices and releases the lease.
func TestBackboneAHolderRenewsAtAThirdAndReleasesWhenItsParentDies(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/1.4", "backbone/27.4")
	w := harness.NewWorld(t, quiet)
	w.MustRun("daemon", "start")
	out := filepath.Join(w.Root, "lease.out")
	// The parent: a shell that starts the holder and then only waits.
	parent := exec.Command("sh", "-c", `"$0" lease --platform ios --ttl 3s > "$1" 2>/dev/null & wait`, harness.Bin(t), out)
	parent.Env = w.Env
	parent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-parent.Process.Pid, syscall.SIGKILL) })

	var first leaseView
	harness.Eventually(t, "the holder's lease", 60*time.Second, func() bool {
		ls := leases(w)
		if len(ls) == 1 {
			first = ls[0]
		}
		return len(ls) == 1
	})
	if first.TTLMs != 3000 {
		t.Fatalf("the lease: %+v", first)
	}
	// Three TTLs later it is still there, renewed, at the same width.
	time.Sleep(9 * time.Second)
	ls := leases(w)
	if len(ls) != 1 || ls[0].LeaseID != first.LeaseID || ls[0].TTLMs != 3000 || !ls[0].ExpiresAt.After(first.ExpiresAt.Add(5*time.Second)) {
		t.Fatalf("after three TTLs the holder's lease reads %+v (first %+v)", ls, first)
	}

	// The parent dies (the holder is left running, reparented).
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	harness.Eventually(t, "the orphaned holder to release its lease", 20*time.Second, func() bool {
		ls := leases(w)
		return len(ls) == 0
	})
	// Released by the holder, not left to expire.
	if b := w.MustRun("events", "--json"); !strings.Contains(b, "lease.released") || strings.Contains(b, "lease.expired") {
		t.Fatalf("the lease did not end by its holder's release:\n%s", b)
	}
}

// No reconnection by the client: a foreground `simlock lease` whose
// daemon is killed exits 1, and the lease it held is still there when a
// daemon starts again, renewable from a new invocation.
func TestBackboneAHolderExitsOneWhenItsDaemonGoesAndTheLeaseStays(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/23.3")
	w := harness.NewWorld(t, quiet)
	holder := w.Cmd("lease", "--platform", "ios", "--ttl", "10m")
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill() })
	var l leaseView
	if err := json.NewDecoder(stdout).Decode(&l); err != nil {
		t.Fatal(err)
	}
	var st struct{ Daemon struct{ PID int } }
	w.JSON(&st, "status", "--json")
	if err := syscall.Kill(st.Daemon.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- holder.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("the holder ended with %v, want exit status 1", err)
		}
	case <-time.After(testhost.Scale(30 * time.Second)):
		t.Fatal("the holder did not notice its daemon was gone")
	}
	w.MustRun("daemon", "start")
	ls := leases(w)
	if len(ls) != 1 || ls[0].LeaseID != l.LeaseID {
		t.Fatalf("after the restart: %+v, want %s", ls, l.LeaseID)
	}
	w.MustRun("lease", "renew", l.LeaseID)
}
