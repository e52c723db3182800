package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// stoppedHolder starts `simlock lease` holding a lease (or `simlock events
// --follow`), waits for its first line and freezes it with SIGSTOP: a
// client that stops reading without closing its connection.
func (w *world) stopped(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	c := w.cmd(args...)
	c.Env = append(c.Env, env...)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Signal(syscall.SIGCONT); c.Process.Kill(); c.Wait() })
	if args[0] == "lease" {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("%v printed no lease: %v", args, err)
		}
		var l lease
		if json.Unmarshal([]byte(line), &l) != nil || l.LeaseID == "" {
			t.Fatalf("%v printed %q", args, line)
		}
	} else {
		go func() { bufio.NewReader(out).WriteTo(discard{}) }()
	}
	if err := c.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return c
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestAStoppedLeaseHolderDelaysNobody: a `simlock lease` holder and an
// event follower frozen with SIGSTOP keep their connections open and read
// nothing; meanwhile another client's leases are granted and its
// lease-lost notices arrive on time, cycle after cycle. After SIGCONT the
// holder is either still holding or cleanly disconnected, and its lease
// stayed either way.
func TestAStoppedLeaseHolderDelaysNobody(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":4}}}`)
	holder := w.stopped(t, []string{"SIMLOCK_PRINCIPAL=slow"}, "lease", "--platform", "ios", "--ttl", "10m")
	w.stopped(t, nil, "events", "--follow")
	held := w.status().Leases
	if len(held) != 1 {
		t.Fatalf("%d leases before the cycles, want the stopped holder's one", len(held))
	}

	ctx := context.Background()
	c, err := client.Dial(ctx, client.Options{Socket: filepath.Join(w.home, "simlock.sock"), Principal: "fast", Name: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	notices := make(chan contract.LeaseNotice, 16)
	c.OnNotice(func(n contract.LeaseNotice) { notices <- n })
	var worstGrant, worstNotice time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, testhost.Scale(20*time.Second))
		l, err := c.LeaseRequest(rctx, contract.LeaseRequestIn{Platform: "ios", TTLMs: 1000, RequesterID: "fast"}, nil)
		cancel()
		if err != nil {
			t.Fatalf("cycle %d: lease request while a client is stopped: %v", i, err)
		}
		worstGrant = max(worstGrant, time.Since(start))
		granted := time.Now()
		select {
		case n := <-notices:
			if n.LeaseID != l.LeaseID || n.Type != contract.NotifyLeaseLost {
				t.Fatalf("cycle %d: notice %+v, want lease-lost for %s", i, n, l.LeaseID)
			}
			worstNotice = max(worstNotice, time.Since(granted))
		case <-time.After(testhost.Scale(15 * time.Second)):
			t.Fatalf("cycle %d: no lease-lost notice 15s after a 1s lease was granted", i)
		}
	}
	t.Logf("with two stopped clients: slowest grant %s, slowest lease-lost notice %s after a 1s TTL", worstGrant, worstNotice)
	if worstGrant > testhost.Scale(10*time.Second) {
		t.Fatalf("a grant took %s", worstGrant)
	}

	// The stopped holder's lease is untouched by all of this.
	if st := w.status(); len(st.Leases) != 1 || st.Leases[0].LeaseID != held[0].LeaseID {
		t.Fatalf("leases %+v, want only the stopped holder's %s", st.Leases, held[0].LeaseID)
	}
	// Resumed, it is still holding (or was disconnected cleanly and says
	// so); a SIGTERM ends it either way.
	holder.Process.Signal(syscall.SIGCONT)
	holder.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- holder.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
			t.Fatalf("the resumed holder ended with %v", err)
		}
	case <-time.After(testhost.Scale(15 * time.Second)):
		t.Fatal("the resumed holder did not end on SIGTERM")
	}
}
