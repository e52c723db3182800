package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A program in a module of its own (test/clientmod, which imports only the
// public client and contract packages) leases a device with a 3s TTL and
// holds it while the daemon is killed with -9 and started again; twice the
// TTL after the restart the lease is still there, so the program's holder
// reconnected and renewed it on the new daemon; then it releases it.
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
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s from the program within 30s", what)
		}
		return ""
	}

	held := strings.Fields(next("the held line"))
	if len(held) != 2 || held[0] != "held" {
		t.Fatalf("first line %q, want held <leaseId>", strings.Join(held, " "))
	}
	id := held[1]

	w.kill9()
	w.mustRun("daemon", "start")
	restarted := time.Now()
	time.Sleep(6 * time.Second) // twice the TTL: only renewing keeps it
	st := w.status()
	if len(st.Leases) != 1 || st.Leases[0].LeaseID != id {
		t.Fatalf("two TTLs after the restart the daemon holds %+v, want lease %s", st.Leases, id)
	}
	if exp := st.Leases[0].ExpiresAt; !exp.After(restarted.Add(6 * time.Second)) {
		t.Fatalf("lease expires at %s: not renewed since the restart at %s", exp, restarted)
	}

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
