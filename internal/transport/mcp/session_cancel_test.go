package mcp

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/testhost"
)

// gatedSessionHarness serves sessions whose device preparation waits on
// the returned gate, so a keeper can be cut off mid-preparation.
func gatedSessionHarness(t *testing.T) (*harness, chan struct{}) {
	t.Helper()
	h := newHarness(t)
	h.stop()
	h.cfg.Sessions = &config.Sessions{HeartbeatTTLMs: 60_000}
	gate := make(chan struct{})
	h.drv.Gate = gate
	h.start()
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	return h, gate
}

// Reference, consumer contract: "EOF and execution-owner exit cancel
// preparation". A keeper whose stdin ends, whose signal context ends, or
// whose parent exits while the daemon still prepares its session cancels
// that preparation (it abandons the request): the receipt ends
// SESSION_ABANDONED, never ready, and no lease is handed to nobody.
func TestSessionKeeperCutOffMidPreparationCancelsIt(t *testing.T) {
	for _, how := range []string{"eof", "signal", "owner exit"} {
		t.Run(how, func(t *testing.T) {
			h, _ := gatedSessionHarness(t)
			o := h.options("agent-s", newLogs())
			parent := o.ParentWatch.(*fakeParent)
			o.Session = &SessionOptions{Config: sessionCfg("cut", &contract.HardwareRequirement{Kind: contract.HardwareModel,
				Model: &contract.ModelIdentity{Namespace: "simlock-model", Value: "Phone"}}), OwnerToken: "tok"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			inR, inW := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- Run(ctx, o, inR, io.Discard) }()
			adm := h.admin()
			status := func() (contract.SessionReceipt, error) {
				return client.Do(context.Background(), adm, contract.SessionStatus, contract.SessionStatusIn{RequestID: "cut", OwnerToken: "tok"})
			}
			deadline := time.Now().Add(testhost.Scale(10 * time.Second))
			for {
				if st, err := status(); err == nil && st.Status == contract.SessionPending {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the preparation never started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			switch how {
			case "eof":
				inW.Close()
			case "signal":
				cancel()
			case "owner exit":
				parent.die()
			}
			select {
			case <-done:
			case <-time.After(testhost.Scale(15 * time.Second)):
				t.Fatal("the keeper did not return")
			}
			inW.Close()
			st, err := status()
			if err != nil || st.Status != contract.SessionFailed || st.Failure == nil || st.Failure.Code != contract.CodeSessionAbandoned {
				t.Fatalf("after the keeper was cut off (%s): %+v %v, want failed SESSION_ABANDONED", how, st, err)
			}
			if n := len(h.leases()); n != 0 {
				t.Fatalf("%d leases after the cancelled preparation", n)
			}
		})
	}
}
