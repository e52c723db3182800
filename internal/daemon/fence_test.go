package daemon

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/transport/uplink"
)

// gatewaySession opens a fake gateway's uplink session of the given epoch
// on the worker f, as the Connector would serve it.
func gatewaySession(t *testing.T, f *fixture, fence *uplink.EpochFence, epoch uint64) (*client.Client, error) {
	t.Helper()
	worker, gw := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	publish := func(typ, reason string, data map[string]any) {
		f.d.bus.Publish(events.Event{Type: typ, Reason: reason, Data: data})
	}
	go func() {
		defer close(done)
		fence.Serve(ctx, uplinkAdapter{socketAdapter{f.d}}, publish, f.d.log, worker)
	}()
	t.Cleanup(func() { cancel(); gw.Close(); worker.Close(); <-done })
	c, err := client.NewConn(context.Background(), gw, client.Options{Name: "gateway", Epoch: epoch})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func TestAWorkerFencesOlderGatewayEpochs(t *testing.T) {
	f := startDaemon(t, nil)
	fence, err := uplink.LoadEpochFence(context.Background(), f.d.db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Epoch 0 passes while no gateway has presented an epoch.
	if _, err := gatewaySession(t, f, fence, 0); err != nil {
		t.Fatalf("epoch 0 before any epoch: %v", err)
	}
	one, err := gatewaySession(t, f, fence, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Do(ctx, one, contract.StatusGet, contract.StatusGetIn{}); err != nil {
		t.Fatalf("the leader of epoch 1 was refused: %v", err)
	}
	two, err := gatewaySession(t, f, fence, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Do(ctx, two, contract.StatusGet, contract.StatusGetIn{}); err != nil {
		t.Fatalf("the leader of epoch 2 was refused: %v", err)
	}
	// The session of epoch 1 was overtaken: its next command is refused.
	if _, err := client.Do(ctx, one, contract.StatusGet, contract.StatusGetIn{}); !client.IsCode(err, contract.CodeStaleGatewayEpoch) {
		t.Fatalf("a command of the overtaken epoch 1: %v", err)
	}
	for _, e := range []uint64{1, 0} {
		if _, err := gatewaySession(t, f, fence, e); !client.IsCode(err, contract.CodeStaleGatewayEpoch) {
			t.Fatalf("a hello of epoch %d after epoch 2: %v", e, err)
		}
	}
	var fenced int
	evs, _ := f.d.bus.Since(0)
	for _, e := range evs {
		if e.Type == "gateway.fenced" {
			fenced++
		}
	}
	if fenced != 3 {
		t.Fatalf("%d gateway.fenced events, want 3 (one command, two hellos)", fenced)
	}
}

func TestTheNewestGatewayEpochSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	fence, err := uplink.LoadEpochFence(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if stale, err := fence.Admit(ctx, 7); stale || err != nil {
		t.Fatalf("admit 7: %v %v", stale, err)
	}
	db.Close()
	if db, err = store.Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if fence, err = uplink.LoadEpochFence(ctx, db); err != nil {
		t.Fatal(err)
	}
	if stale, err := fence.Admit(ctx, 6); !stale || err != nil {
		t.Fatalf("epoch 6 after a restart that had seen 7: stale=%v %v", stale, err)
	}
	if stale, err := fence.Admit(ctx, 7); stale || err != nil {
		t.Fatalf("epoch 7 again: stale=%v %v", stale, err)
	}
}

// A deposed leader's request waiting in the worker's queue is withdrawn
// the moment a newer leader's session is admitted, so it is never granted.
func TestAnOvertakenSessionsQueuedRequestIsWithdrawn(t *testing.T) {
	f := startDaemon(t, nil)
	ctx := context.Background()
	fence, err := uplink.LoadEpochFence(ctx, f.d.db)
	if err != nil {
		t.Fatal(err)
	}
	// The one running slot is taken, so the old leader's request queues.
	if _, err := f.dial("alice", "").LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil); err != nil {
		t.Fatal(err)
	}
	one, err := gatewaySession(t, f, fence, 1)
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := one.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", RequesterID: "fleet-job"}, func(p contract.Progress) {
			if p.Phase == "queued" {
				select {
				case queued <- struct{}{}:
				default:
				}
			}
		})
		done <- err
	}()
	<-queued
	if _, err := gatewaySession(t, f, fence, 2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the overtaken leader's queued request was granted")
	}
}
