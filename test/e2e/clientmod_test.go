package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// A program in a module of its own (test/clientmod, which imports only the
// public client and contract packages) leases a device with a 10s TTL and
// holds it while the daemon is killed with -9 and started again; the lease
// then comes to expire later than any renew before the kill could have set
// it, so the program's holder reconnected and renewed it on the new daemon;
// then it releases it. The 10s TTL (renewed every ~3.3s) leaves a stall of
// several seconds in the program or the daemon room before the lease would
// lapse; the check polls for the renewed deadline instead of sleeping a
// fixed multiple of the TTL, so it costs only as long as the reconnect.
func TestAnotherModuleHoldsALeaseAcrossARestart(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "clientmod")
	build := exec.Command("go", "build", "-o", prog, ".")
	build.Dir = filepath.Join("..", "clientmod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test/clientmod: %v\n%s", err, out)
	}

	w := newWorld(t, oneRunning)
	w.mustRun("daemon", "start")
	cmd := exec.Command(prog)
	cmd.Env = append(append([]string{}, w.env...), "SIMLOCK_PRINCIPAL=clientmod", "SIMLOCK_URL=", "SIMLOCK_TOKEN=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the program exited before %s", what)
			}
			return l
		case <-time.After(testhost.Scale(30 * time.Second)):
			t.Fatalf("no %s from the program within 30s", what)
		}
		return ""
	}

	held := strings.Fields(next("the held line"))
	if len(held) != 2 || held[0] != "held" {
		t.Fatalf("first line %q, want held <leaseId>", strings.Join(held, " "))
	}
	id := held[1]

	// Every renew before the kill set a deadline earlier than killed+TTL, and
	// a restart keeps the persisted deadline, so a later one proves a renew
	// on the new daemon. 30s bounds the reconnect, which takes about a second.
	// The TTL is the daemon's record of the lease, not a copy of what
	// test/clientmod asks for: a copy that fell behind the program's could
	// pass this check with no renew at all.
	before := w.status().Leases
	if len(before) != 1 || before[0].LeaseID != id || before[0].TTLMs <= 0 {
		t.Fatalf("before the kill the daemon holds %+v, want lease %s", before, id)
	}
	ttl := time.Duration(before[0].TTLMs) * time.Millisecond
	killed := time.Now()
	w.kill9()
	w.mustRun("daemon", "start")
	eventually(t, "the lease renewed on the restarted daemon", 30*time.Second, func() bool {
		last := w.status().Leases
		if len(last) != 1 || last[0].LeaseID != id {
			t.Fatalf("after the restart the daemon holds %+v, want lease %s", last, id)
		}
		return last[0].ExpiresAt.After(killed.Add(ttl))
	})

	if _, err := stdin.Write([]byte("release\n")); err != nil {
		t.Fatal(err)
	}
	released := strings.Fields(next("the released line"))
	if len(released) != 3 || released[0] != "released" || released[1] != id || released[2] == "reconnects=0" {
		t.Fatalf("last line %q, want released %s reconnects=<at least 1>", strings.Join(released, " "), id)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the program: %v", err)
	}
	if st := w.status(); len(st.Leases) != 0 {
		t.Fatalf("after the release the daemon still holds %+v", st.Leases)
	}
}
