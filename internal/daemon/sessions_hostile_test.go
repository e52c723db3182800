package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/sessions"
	"github.com/simlock/simlock/internal/testhost"
)

// Sessions against callers who are hostile or unlucky: none of them may
// change another's session or slow the daemon down for the others.

// promptly is how long a call of an unrelated client may take while a
// hostile one is busy. A call held behind the flood would wait without
// bound, while a quiet answer takes milliseconds; under -race on a loaded
// 2-core machine a 240-prepare flood slows honest calls to seconds, so
// 10 s (stretched by the machine's measured slowdown) keeps a stall of the
// machine from reading as a block.
func promptly() time.Duration { return testhost.Scale(10 * time.Second) }

// Another agent naming alice's session id (or request id) with its own
// token changes nothing: release answers unknown_session and heartbeat
// SESSION_OWNER_MISMATCH, as for an id that never existed (and so does
// info, which takes no token, for a live session of another principal),
// status reads alice's request as unknown exactly
// like a request that never existed, and an abandon under the other token
// consumes only that token's identity. The receipt, the lease and its
// expiry are as they were.
func TestSessionForeignOwnerTokenChangesNothing(t *testing.T) {
	f := sessionDaemon(t, nil)
	ctx := context.Background()
	a, m := f.dial("alice", ""), f.dial("mallory", "")
	r := prepare(t, a, "run", "owner-a")
	before, _ := f.d.engine.Lease(r.LeaseID)

	if out, err := client.Do(ctx, m, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "owner-m"}); err != nil || out.Outcome != contract.ReleaseUnknownSession || out.Receipt != nil {
		t.Fatalf("foreign release %+v %v", out, err)
	}
	if _, err := client.Do(ctx, m, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "owner-m"}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
		t.Fatalf("foreign heartbeat: %v", err)
	}
	// An empty token is no master key.
	if out, err := client.Do(ctx, m, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID}); err != nil || out.Outcome != contract.ReleaseUnknownSession || out.Receipt != nil {
		t.Fatalf("release with no token %+v %v", out, err)
	}
	_, errKnown := client.Do(ctx, m, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run", OwnerToken: "owner-m"})
	_, errNever := client.Do(ctx, m, contract.SessionStatus, contract.SessionStatusIn{RequestID: "never-was", OwnerToken: "owner-m"})
	ck, cn := contract.AsError(errKnown), contract.AsError(errNever)
	if ck == nil || cn == nil || ck.Code != contract.CodeUnknownRequest || cn.Code != ck.Code || ck.Retryable != cn.Retryable {
		t.Fatalf("status of alice's request under another token %v, of a request that never was %v: they must read alike", errKnown, errNever)
	}
	ab, err := client.Do(ctx, m, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "run", OwnerToken: "owner-m"})
	if err != nil || ab.SessionID != "" || ab.Failure == nil || ab.Failure.Code != contract.CodeSessionAbandoned {
		t.Fatalf("foreign abandon %+v %v: it must answer a tombstone of its own, naming no session", ab, err)
	}

	st, err := client.Do(ctx, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run", OwnerToken: "owner-a"})
	if err != nil || st.Status != contract.SessionReady || st.CleanupPending || st.UpdatedAtMs != r.UpdatedAtMs || st.LeaseID != r.LeaseID {
		t.Fatalf("alice's receipt after the foreign calls %+v %v (before %+v)", st, err, r)
	}
	after, held := f.d.engine.Lease(r.LeaseID)
	if !held || !after.ExpiresAt.Equal(before.ExpiresAt) {
		t.Fatalf("alice's lease after the foreign calls: held %v, expiry %v (was %v)", held, after.ExpiresAt, before.ExpiresAt)
	}
	// info takes no token: the session's principal stands in for it.
	if _, err := client.Do(ctx, m, contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
		t.Fatalf("another agent's session.info: %v", err)
	}
	if in, err := client.Do(ctx, a, contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); err != nil || in.Device == nil || in.Device.ID != r.Device.ID {
		t.Fatalf("alice's session.info %+v %v", in, err)
	}
	if _, err := client.Do(ctx, f.dial("ops", f.adminToken()), contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); err != nil {
		t.Fatalf("an admin's session.info: %v", err)
	}
	// Alice's own token still works.
	if _, err := client.Do(ctx, a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "owner-a"}); err != nil {
		t.Fatalf("alice's heartbeat: %v", err)
	}
}

// A flood of prepares with distinct request ids past sessionCap is refused
// (CAPACITY_EXHAUSTED, stored like any pre-admission refusal), allocates
// nothing, and leaves no per-request state in the broker's memory; a plain
// lease and a status call of another client answer promptly meanwhile.
func TestSessionPrepareFloodIsRefusedAndOthersStayPrompt(t *testing.T) {
	f := sessionDaemon(t, func(s *config.Sessions) { s.Limits.SessionCap = 1; s.Limits.TotalDeviceCap = 1 })
	ctx := context.Background()
	a := f.dial("alice", "")
	held := prepare(t, a, "held", "owner-a")

	const conns, each = 6, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[contract.Code]int{}
	stop := make(chan struct{})
	for c := 0; c < conns; c++ {
		mc := f.dial(fmt.Sprintf("mallory-%d", c), "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r, err := client.Do(ctx, mc, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig(fmt.Sprintf("flood-%d-%d", c, i)), OwnerToken: "owner-m"})
				mu.Lock()
				switch {
				case err != nil:
					codes[contract.AsError(err).Code]++
				case r.Failure != nil:
					codes[r.Failure.Code]++
				default:
					codes[contract.Code("granted:"+r.SessionID)]++
				}
				mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(stop) }()

	// Meanwhile bob leases plainly and alice reads her status.
	b := f.dial("bob", "")
	var worst time.Duration
	var bobLease string
	for round := 0; ; round++ {
		start := time.Now()
		if bobLease == "" {
			l, err := b.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", TimeoutMs: promptly().Milliseconds()}, nil)
			if err != nil {
				t.Fatalf("bob's plain lease during the flood: %v", err)
			}
			bobLease = l.LeaseID
		}
		if _, err := client.Do(ctx, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "held", OwnerToken: "owner-a"}); err != nil {
			t.Fatalf("alice's status during the flood: %v", err)
		}
		worst = max(worst, time.Since(start))
		select {
		case <-stop:
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	t.Logf("worst lease/status answer during the flood of %d prepares: %v", conns*each, worst)
	if worst > promptly() {
		t.Fatalf("a call of another client took %v during the flood", worst)
	}
	if codes[contract.CodeCapacityExhausted] != conns*each || len(codes) != 1 {
		t.Fatalf("flood answers %v, want %d CAPACITY_EXHAUSTED", codes, conns*each)
	}
	if n := len(f.d.engine.Leases()); n != 2 {
		t.Fatalf("%d leases after the flood, want alice's session and bob's lease", n)
	}
	if exist, _ := f.drv.Count(); exist != 2 {
		t.Fatalf("%d devices in the fake SDK after the flood, want 2: a refused prepare created one", exist)
	}
	m := f.d.sessions.Memory()
	inflight, live, releases := m.Inflight, m.Live, m.Releases
	if inflight != 0 || live != 1 || releases != 0 {
		t.Fatalf("broker memory after the flood: %d inflight, %d live, %d releases; want 0, 1 (alice's), 0", inflight, live, releases)
	}
	if st := prepare(t, a, "held", "owner-a"); st.SessionID != held.SessionID || st.Status != contract.SessionReady {
		t.Fatalf("alice's replay after the flood %+v", st)
	}
}

// rawConn is a socket client that writes requests and never reads its
// answers: the daemon's replies back up in its socket.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	w  *bufio.Writer
	id int
}

func dialRaw(t *testing.T, f *fixture, principal string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", f.d.Paths().Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawConn{t: t, c: c, w: bufio.NewWriter(c)}
	r.send("hello", contract.HelloIn{Protocol: contract.ProtocolRange{Min: contract.ProtocolMin, Max: contract.ProtocolMax}, Principal: principal})
	return r
}

func (r *rawConn) send(method string, params any) {
	r.t.Helper()
	r.id++
	p, err := json.Marshal(params)
	if err != nil {
		r.t.Fatal(err)
	}
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.id, "method": method, "params": json.RawMessage(p)})
	_ = r.c.SetWriteDeadline(time.Now().Add(testhost.Scale(time.Second)))
	if _, err := r.w.Write(append(line, '\n')); err == nil {
		_ = r.w.Flush()
	}
}

// A client that sends a prepare and then stops reading (while piling up
// more requests whose answers fill its socket) blocks no one: its
// preparation still completes and is readable from another connection,
// and another client's prepare, plain lease and status answer promptly.
func TestSessionPrepareFromAClientThatStopsReadingBlocksNobody(t *testing.T) {
	f := sessionDaemon(t, nil)
	ctx := context.Background()
	raw := dialRaw(t, f, "sloth")
	raw.send(contract.SessionPrepare.Name, contract.SessionPrepareIn{Config: sessionConfig("slow-1"), OwnerToken: "owner-s"})
	// Answers nobody reads (each a whole receipt, about a kilobyte), more
	// than the socket's buffers hold.
	for i := 0; i < 1000; i++ {
		raw.send(contract.SessionStatus.Name, contract.SessionStatusIn{RequestID: "slow-1", OwnerToken: "owner-s"})
	}

	a := f.dial("alice", "")
	start := time.Now()
	r := prepare(t, a, "brisk", "owner-a")
	if _, err := client.Do(ctx, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "brisk", OwnerToken: "owner-a"}); err != nil {
		t.Fatalf("status: %v", err)
	}
	l, err := f.dial("bob", "").LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", TimeoutMs: promptly().Milliseconds()}, nil)
	if err != nil {
		t.Fatalf("bob's lease next to a stalled reader: %v", err)
	}
	took := time.Since(start)
	t.Logf("prepare, status and lease next to a stalled reader: %v", took)
	if r.Status != contract.SessionReady || l.LeaseID == "" || took > promptly() {
		t.Fatalf("next to a stalled reader: receipt %+v, lease %q, %v", r, l.LeaseID, took)
	}
	// The stalled client's own preparation ran to its end all the same,
	// as its principal reads it from another connection (a session is
	// bound to its principal as well as its token, ADR 0063).
	st := waitReceipt(t, f.dial("sloth", ""), "slow-1", "owner-s", func(r contract.SessionReceipt) bool { return r.Status == contract.SessionReady })
	if st.LeaseID == "" || st.LeaseID == r.LeaseID {
		t.Fatalf("the stalled client's receipt %+v", st)
	}
}

// A keeper killed mid-prepare (its connection drops while the device is
// still booting) leaves no orphan: the preparation completes, nobody
// heartbeats, and the session ends SESSION_OWNER_EXITED with its device
// destroyed and its capacity free again.
func TestSessionKeeperGoneMidPrepareEndsTypedAndLeaksNothing(t *testing.T) {
	f := sessionDaemon(t, func(s *config.Sessions) { s.HeartbeatTTLMs = 1500 })
	f.drv.Gate = make(chan struct{})
	keeper, err := client.Dial(context.Background(), client.Options{Socket: f.d.Paths().Socket, Principal: "keeper"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := client.Do(context.Background(), keeper, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("k"), OwnerToken: "owner-k"})
		done <- err
	}()
	deadline := time.Now().Add(testhost.Scale(10 * time.Second))
	for len(f.d.engine.Devices()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	keeper.Close() // the keeper dies mid-boot
	<-done
	close(f.drv.Gate)
	// Read back by the keeper's principal on a new connection: the
	// session is bound to it as well as to its token (ADR 0063).
	a := f.dial("keeper", "")
	st := waitReceipt(t, a, "k", "owner-k", func(r contract.SessionReceipt) bool { return r.Status == contract.SessionFailed && !r.CleanupPending })
	if st.Failure == nil || st.Failure.Code != contract.CodeSessionOwnerExited || st.EndReason != sessions.OwnerExited {
		t.Fatalf("a keeper gone mid-prepare: %+v", st)
	}
	if len(f.d.engine.Leases()) != 0 || len(f.d.engine.Devices()) != 0 {
		t.Fatalf("left behind: %d leases, %d devices", len(f.d.engine.Leases()), len(f.d.engine.Devices()))
	}
	if exist, _ := f.drv.Count(); exist != 0 {
		t.Fatalf("%d devices left in the fake SDK", exist)
	}
}

// A destroy that fails for good (the quarantine's retries are spent)
// while a released session's device holds the last of totalDeviceCap is
// not a pending eviction a retry could outwait: the next prepare is
// refused with non-retryable SESSION_PREPARATION_FAILED, stored and
// replayed like any refusal before admission.
func TestSessionPermanentDestroyFailureIsPreparationFailed(t *testing.T) {
	f := startDaemon(t, func(c *config.Config) {
		c.Capacity.Fixed = config.Fixed{MaxRunning: 3, MaxManaged: 3}
		c.WarmPool.Quarantine = config.Quarantine{Retries: 1, BackoffMs: 10, Multiplier: 1, CapMs: 600_000}
		c.Sessions = &config.Sessions{HeartbeatTTLMs: 60_000, Limits: config.SessionLimits{TotalDeviceCap: 1}}
	})
	ctx := context.Background()
	a := f.dial("alice", "")
	one := prepare(t, a, "one", "o")
	f.drv.SetFail("destroy", 1000)
	zero := int64(0)
	if _, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: one.SessionID, OwnerToken: "o", ReplyBudgetMs: &zero}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testhost.Scale(10 * time.Second))
	for {
		d, ok := f.d.engine.Device(one.Device.ID)
		if ok && d.State == core.StateQuarantined && d.Health.QuarantineAttempts >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the device never spent its destroy retries: %+v %v", d, ok)
		}
		time.Sleep(5 * time.Millisecond)
	}
	two := prepare(t, a, "two", "o")
	fl := two.Failure
	if two.Status != contract.SessionFailed || fl == nil || fl.Code != contract.CodeSessionPreparationFailed || fl.Retryable || fl.RetryAfterMs != nil {
		t.Fatalf("past the device cap behind a failed destroy: %+v %+v", two, fl)
	}
	if again := prepare(t, a, "two", "o"); again.Failure == nil || again.Failure.Code != contract.CodeSessionPreparationFailed || again.CreatedAtMs != two.CreatedAtMs {
		t.Fatalf("replay %+v", again)
	}
	if n := len(f.d.engine.Leases()); n != 0 {
		t.Fatalf("%d leases: the refused prepare reserved a device", n)
	}
}

// The broker's facts reach the event bus in order, each after the receipt
// that records it: session.prepared, session.released (reason released)
// and session.ended (with the reset's outcome), all naming the session and
// its principal as ownerId.
func TestSessionFactsAreOnTheEventBus(t *testing.T) {
	f := sessionDaemon(t, nil)
	evs, unsub := f.d.bus.Subscribe(256)
	defer unsub()
	a := f.dial("alice", "")
	r := prepare(t, a, "run", "owner-a")
	if _, err := client.Do(context.Background(), a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "owner-a"}); err != nil {
		t.Fatal(err)
	}
	var got []events.Event
	deadline := time.After(testhost.Scale(10 * time.Second))
	for len(got) < 3 {
		select {
		case e := <-evs:
			if strings.HasPrefix(e.Type, "session.") {
				got = append(got, e)
			}
		case <-deadline:
			t.Fatalf("session events %+v", got)
		}
	}
	want := []string{sessions.EvSessionPrepared, sessions.EvSessionReleased, sessions.EvSessionEnded}
	for i, e := range got {
		if e.Type != want[i] || e.Data["sessionId"] != r.SessionID || e.Data["ownerId"] != "alice" || e.LeaseID != r.LeaseID || e.Platform != "ios" {
			t.Fatalf("event %d %+v, want %s of session %s owned by alice", i, e, want[i], r.SessionID)
		}
	}
	if got[1].Reason != contract.SessionReleased || got[2].Reason != contract.SessionReleased || got[2].Data["resetOutcome"] != contract.ResetOutcomeDestroyed {
		t.Fatalf("release facts %+v / %+v", got[1], got[2])
	}
	if got[0].Data["admission"] != contract.AdmissionCreate {
		t.Fatalf("prepared %+v", got[0])
	}
}

// Agent mallory names alice's session id after the session ended: its
// lease is gone, but the receipt recorded alice as the principal, so
// session.info refuses mallory with the error a live session gives, while
// alice and an admin still read it. A receipt that recorded no principal
// (written before migration 9) is an admin's to read only.
func TestSessionInfoOfAnEndedSessionAnswersOnlyItsPrincipal(t *testing.T) {
	f := sessionDaemon(t, nil)
	ctx := context.Background()
	a, m, admin := f.dial("alice", ""), f.dial("mallory", ""), f.dial("ops", f.adminToken())
	r := prepare(t, a, "run", "owner-a")
	out, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "owner-a"})
	if err != nil || out.Outcome != contract.ReleaseReleased {
		t.Fatalf("release %+v %v", out, err)
	}
	if _, held := f.d.engine.Lease(r.LeaseID); held {
		t.Fatal("the released session's lease is still held")
	}
	_, live := client.Do(ctx, m, contract.SessionInfo, contract.SessionInfoIn{SessionID: "no-such-session"})
	_, ended := client.Do(ctx, m, contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID})
	if !client.IsCode(ended, contract.CodeSessionOwnerMismatch) {
		t.Fatalf("mallory's session.info of alice's ended session: %v (a session that never was: %v)", ended, live)
	}
	if in, err := client.Do(ctx, a, contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); err != nil || in.Status != contract.SessionReleased || in.Device == nil || in.Device.ID != r.Device.ID {
		t.Fatalf("alice's session.info of her ended session %+v %v", in, err)
	}
	if in, err := client.Do(ctx, admin, contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); err != nil || in.Status != contract.SessionReleased {
		t.Fatalf("an admin's session.info of an ended session %+v %v", in, err)
	}

	// The receipt as a store from before migration 9 reads it: no principal.
	f.d.sessions.SwapStore(func(cur sessions.Store) sessions.Store { return principalAs{Store: cur, sid: r.SessionID} })
	for _, c := range []*client.Client{a, m} {
		if _, err := client.Do(ctx, c, contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
			t.Errorf("%s's session.info of an ended session without a recorded principal: %v", c.Hello().Principal, err)
		}
	}
	if _, err := client.Do(ctx, admin, contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); err != nil {
		t.Errorf("an admin's session.info of a receipt without a recorded principal: %v", err)
	}
}
