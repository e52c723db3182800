package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/gwstore/pgstore"
	"github.com/simlock/simlock/internal/pgtest"
	"github.com/simlock/simlock/internal/testhost"
)

// A gateway killed with 50 requests in its fleet queue loses none of them
// (ADR 0101): after the restart the queue is back, in order, and each
// request is served in turn while its caller is away; each caller
// collects its lease by repeating the request with its idempotency key,
// and a further repeat returns the same lease. One device serves them
// all, so a request served out of turn would hold it and the test's
// in-order collection would stall.
func TestGatewayKilledWithFiftyQueuedServesThemAllInOrderAfterItsRestart(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { killedWithFiftyQueued(t, "") })
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.Start(t).NewDatabase(t)
		killedWithFiftyQueued(t, fmt.Sprintf(`,"gateway":{"store":{"postgres":{"dsn":%q,"poolSize":4}}}`, dsn))
		// The receipts are in PostgreSQL, not in the home's file.
		st, err := pgstore.Open(context.Background(), dsn, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		r, ok, err := st.ReceiptByKey(context.Background(), "agent-07/r07", "k07")
		if err != nil || !ok || r.State != gateway.ReceiptGranted {
			t.Fatalf("r07's receipt in PostgreSQL: %+v %v %v", r, ok, err)
		}
	})
}

func killedWithFiftyQueued(t *testing.T, extra string) {
	gw, _, _ := fleetOn(t, 1, `{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":1}}`, extra)
	var holder lease
	gw.json(&holder, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "holder", "--ttl", "10m")
	sock := filepath.Join(gw.home, "simlock.sock")
	req := func(i int) contract.LeaseRequestIn {
		return contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16", TTLMs: 600_000,
			RequesterID: fmt.Sprintf("r%02d", i), IdempotencyKey: fmt.Sprintf("k%02d", i)}
	}
	// One principal per request: queue.maxPerPrincipal (32) applies on a
	// gateway too.
	dial := func(ctx context.Context, i int) *client.Client {
		t.Helper()
		dctx, cancel := context.WithTimeout(ctx, testhost.Scale(10*time.Second))
		defer cancel()
		c, err := client.Dial(dctx, client.Options{Socket: sock, Principal: fmt.Sprintf("agent-%02d", i), Name: "e2e-gateway-durable"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	const n = 50
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost := make(chan error, n)
	for i := range n {
		c := dial(ctx, i)
		go func() {
			defer c.Close()
			var l contract.Lease
			lost <- c.Call(ctx, contract.LeaseRequest.Name, req(i), &l, nil)
		}()
		// One at a time, so the queue's order is the test's.
		eventually(t, fmt.Sprintf("request %d to queue", i), 20*time.Second, func() bool { return gw.status().QueueDepth == i+1 })
	}

	gw.kill9()
	for range n {
		if err := <-lost; err == nil {
			t.Fatal("a queued request was granted while the gateway died")
		}
	}
	gw.mustRun("daemon", "start")
	eventually(t, "the queue to be back", 30*time.Second, func() bool { return gw.status().QueueDepth == n })
	eventually(t, "the worker to rejoin", 30*time.Second, func() bool {
		ws := gw.workers()
		return len(ws) == 1 && ws[0].State == "connected"
	})
	gw.mustRun("release", holder.LeaseID)

	var order []string
	for i := range n {
		c := dial(ctx, i)
		var l contract.Lease
		cctx, ccancel := context.WithTimeout(ctx, testhost.Scale(60*time.Second))
		err := c.Call(cctx, contract.LeaseRequest.Name, req(i), &l, nil)
		ccancel()
		if err != nil {
			t.Fatalf("request %d after the restart: %v", i, err)
		}
		var again contract.Lease
		if err := c.Call(ctx, contract.LeaseRequest.Name, req(i), &again, nil); err != nil || again.LeaseID != l.LeaseID {
			t.Fatalf("request %d repeated: %s %v, want %s", i, again.LeaseID, err, l.LeaseID)
		}
		c.Close()
		order = append(order, l.RequesterID)
		gw.mustRun("release", l.LeaseID)
	}
	if d := gw.status().QueueDepth; d != 0 {
		t.Fatalf("queue depth at the end: %d", d)
	}
	// The grants, as the gateway's journal tells them (one JSON object a
	// line), came in queue order.
	var granted []string
	for _, line := range strings.Split(strings.TrimSpace(gw.mustRun("events", "--json")), "\n") {
		var e struct {
			Type        string `json:"type"`
			RequesterID string `json:"requesterId"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("events --json line %q: %v", line, err)
		}
		if _, r, ok := strings.Cut(e.RequesterID, "/"); e.Type == "lease.granted" && ok {
			granted = append(granted, r)
		}
	}
	if len(granted) != n {
		t.Fatalf("%d grants in the journal, want %d: %v", len(granted), n, granted)
	}
	t.Logf("collected in order: %d; grants in the journal: %d", len(order), len(granted))
	for i, r := range granted {
		if want := fmt.Sprintf("r%02d", i); r != want {
			t.Fatalf("grant %d went to %s, want %s (journal order %v)", i, r, want, granted)
		}
	}
}
