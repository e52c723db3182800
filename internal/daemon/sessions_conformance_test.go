package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/sessions"
)

// Reference, "Request abandonment": an abandoned ready request reaches a
// terminal owner-bound receipt; "the token plus the complete request
// configuration define operation identity" and a replay "returns the
// durable receipt". So after abandon, a replayed prepare, the abandon's
// answer and status are one receipt, with the session id and device.
func TestSessionAbandonedReadySessionReplaysItsOwnReceipt(t *testing.T) {
	f := sessionDaemon(t, nil)
	a := f.dial("alice", "")
	ctx := context.Background()
	live := prepare(t, a, "live", "o")
	ab, err := client.Do(ctx, a, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "live", OwnerToken: "o"})
	if err != nil || ab.SessionID != live.SessionID {
		t.Fatalf("abandon %+v %v", ab, err)
	}
	st := waitReceipt(t, a, "live", "o", func(r contract.SessionReceipt) bool { return !r.CleanupPending })
	replay := prepare(t, a, "live", "o")
	for name, r := range map[string]contract.SessionReceipt{"status": st, "replay": replay} {
		if r.SessionID != live.SessionID || r.Device == nil || r.Device.ID != live.Device.ID || r.Status != contract.SessionFailed ||
			r.Failure == nil || r.Failure.Code != contract.CodeSessionAbandoned {
			t.Fatalf("%s after the abandon: %+v, want the session %s on %s, failed SESSION_ABANDONED", name, r, live.SessionID, live.Device.ID)
		}
	}
	// Another configuration of the abandoned id still gets the tombstone.
	other := sessionConfig("live")
	other.IdleTimeoutMs = 5000
	r, err := client.Do(ctx, a, contract.SessionPrepare, contract.SessionPrepareIn{Config: other, OwnerToken: "o"})
	if err != nil || r.Failure == nil || r.Failure.Code != contract.CodeSessionAbandoned || r.SessionID != "" {
		t.Fatalf("another config of the abandoned id: %+v %v", r, err)
	}
}

// Reference, "Shutdown refusals": an interrupted preparation stores
// session_broker_stopping with retryRequires new_request_id, and "first
// reply and replays carry identical guidance": its next step says the
// same thing as retryRequires, a new request id.
func TestSessionStopInterruptedPreparationAdvisesANewRequestID(t *testing.T) {
	gate := make(chan struct{})
	f := sessionDaemonResetting(t, nil, func(d *fakedrv.Driver) { d.Gate = gate })
	a := f.dial("alice", "")
	ctx := context.Background()
	in := contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "o", WaitMs: 200}
	if p, err := client.Do(ctx, a, contract.SessionPrepare, in); err != nil || p.Status != contract.SessionPending {
		t.Fatalf("a gated prepare %+v %v, want pending", p, err)
	}
	b := f.d.sessions
	go func() {
		for {
			m := b.Memory()
			settled := m.Stopping && m.Inflight == 0
			if settled {
				close(gate)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	restartDaemon(t, f, false)
	a = f.dial("alice", "")
	st, err := client.Do(ctx, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run", OwnerToken: "o"})
	fl := st.Failure
	if err != nil || fl == nil || fl.Code != contract.CodeSessionBrokerStopping || fl.RetryRequires != "new_request_id" {
		t.Fatalf("the interrupted preparation %+v %v", st, err)
	}
	if !strings.Contains(fl.NextAction, "new request id") || strings.Contains(fl.NextAction, "same request") {
		t.Fatalf("the stored next step %q contradicts retryRequires %q", fl.NextAction, fl.RetryRequires)
	}
}

// Reference, "Shutdown refusals": once the stop begins, a new prepare is
// refused session_broker_stopping, retryable, retryAfterMs 5000, storing
// nothing, also before the broker's own stop has run.
func TestSessionPrepareOnceTheDaemonStopBeganIsBrokerStopping(t *testing.T) {
	f := sessionDaemon(t, nil)
	a := f.dial("alice", "")
	ctx := context.Background()
	prepare(t, a, "warm", "o")
	// The stop has begun (what requestStop does first), but its shutdown
	// has not reached the broker yet.
	f.d.stopOnce.Do(func() { close(f.d.stopping) })
	defer func() { go f.d.shutdown() }()
	for i := range 8 { // the readiness park used to pick at random between serving and refusing
		_, err := client.Do(ctx, a, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("r"), OwnerToken: "o"})
		ce := contract.AsError(err)
		if ce == nil || ce.Code != contract.CodeSessionBrokerStopping || !ce.Retryable || ce.RetryAfterMs == nil || *ce.RetryAfterMs != 5000 {
			t.Fatalf("prepare %d once the stop began: %v", i, err)
		}
	}
	if recs, err := f.d.db.SessionReceiptsByRequestID(ctx, "r"); err != nil || len(recs) != 0 {
		t.Fatalf("a stopping refusal was stored: %d receipts, %v", len(recs), err)
	}
}

// Once a stop has begun the readiness park refuses every request, ready
// or not, and always the same way (it used to pick at random between
// serving and refusing): DAEMON_STOPPING with the retry pacing of every
// stopping refusal, and for the broker's prepare and abandon the broker's
// own SESSION_BROKER_STOPPING.
func TestParkedRequestRefusedByAStopCarriesRetryAfter(t *testing.T) {
	d := &Daemon{readyCh: make(chan struct{}), stopping: make(chan struct{}), sessions: sessions.NewBroker(sessions.Config{Sessions: &config.Sessions{}})}
	close(d.stopping)
	for _, ready := range []bool{false, true} {
		if ready {
			close(d.readyCh)
		}
		for range 8 {
			ce := contract.AsError(d.awaitReady(context.Background()))
			if ce == nil || ce.Code != contract.CodeDaemonStopping || ce.RetryAfterMs == nil || *ce.RetryAfterMs != sessions.StoppingRetryMs {
				t.Fatalf("parked request during a stop (ready %v): %+v", ready, ce)
			}
			if own := d.parkRefusal(contract.SessionPrepare.Name, ce); own == nil || own.Code != contract.CodeSessionBrokerStopping ||
				own.RetryAfterMs == nil || *own.RetryAfterMs != sessions.StoppingRetryMs {
				t.Fatalf("a parked prepare during a stop: %+v", own)
			}
			if own := d.parkRefusal(contract.LeaseRequest.Name, ce); own != nil {
				t.Fatalf("a parked lease request is the broker's: %+v", own)
			}
		}
	}
}

// Reference, "Caps are optional nonnegative integers" and the
// capacity_exhausted refusal: a refusal at sessionCap paces its retry
// (retryAfterMs) and its next step is about the session cap, not the
// host's running limit and --no-wait, which a session caller has not.
func TestSessionCapRefusalPacesTheRetryAndNamesTheCap(t *testing.T) {
	f := sessionDaemon(t, func(s *config.Sessions) { s.Limits.SessionCap = 1 })
	a := f.dial("alice", "")
	prepare(t, a, "one", "o")
	r := prepare(t, a, "two", "o")
	fl := r.Failure
	if fl == nil || fl.Code != contract.CodeCapacityExhausted || !fl.Retryable || fl.RetryAfterMs == nil || *fl.RetryAfterMs <= 0 ||
		fl.RetryRequires != "new_request_id" {
		t.Fatalf("past the session cap %+v", fl)
	}
	if !strings.Contains(fl.Message, "sessionCap") || strings.Contains(fl.NextAction, "--no-wait") || !strings.Contains(fl.NextAction, "new request id") {
		t.Fatalf("the refusal's message %q / next step %q", fl.Message, fl.NextAction)
	}
}

// Reference, daemon/releaseBrokerSession: with reason
// session_owner_exited the daemon commits the terminal failed receipt,
// "answers cleanup_pending, and finishes drain and destruction as tracked
// release work", whatever the session's reset would have been.
func TestSessionOwnerExitedReleaseAnswersCleanupPending(t *testing.T) {
	f := sessionDaemonResetting(t, func(s *config.Sessions) { s.Reset.IOS = contract.ResetErase; s.Limits.IdlePoolCap = 1 }, nil)
	a := f.dial("alice", "")
	ctx := context.Background()
	r := prepare(t, a, "one", "o")
	budget := int64(30000)
	out, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "o",
		Reason: "session_owner_exited", ReplyBudgetMs: &budget})
	if err != nil || out.Outcome != contract.ReleaseCleanupPending || out.Receipt == nil || out.Receipt.Status != contract.SessionFailed ||
		out.Receipt.Failure == nil || out.Receipt.Failure.Code != contract.CodeSessionOwnerExited {
		t.Fatalf("owner-exit release %+v %v", out, err)
	}
	st := waitReceipt(t, a, "one", "o", func(r contract.SessionReceipt) bool { return !r.CleanupPending })
	if st.Timing.Reset.Outcome != contract.ResetOutcomeDestroyed {
		t.Fatalf("the tracked release ended %+v", st.Timing.Reset)
	}
	// Released again, it is settled: released, never a second cleanup.
	again, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "o", Reason: "session_owner_exited"})
	if err != nil || again.Outcome != contract.ReleaseReleased {
		t.Fatalf("a second owner-exit release %+v %v", again, err)
	}
}
