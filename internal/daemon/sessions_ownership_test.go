package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/sessions"
)

// refusedAlike fails unless two calls were refused alike: one code and one
// message, byte for byte, or both not refused.
func refusedAlike(t *testing.T, what string, got, want error) {
	t.Helper()
	g, w := contract.AsError(got), contract.AsError(want)
	switch {
	case (g == nil) != (w == nil):
		t.Fatalf("%s: %v, while a wrong token gets %v", what, got, want)
	case g != nil && (g.Code != w.Code || g.Message != w.Message || g.NextAction != w.NextAction):
		t.Fatalf("%s: %s %q, while a wrong token gets %s %q", what, g.Code, g.Message, w.Code, w.Message)
	}
}

// A session is bound to the principal that prepared it as well as to its
// owner token (ADR 0063): bob holding alice's token is answered exactly
// as a wrong token is, on heartbeat, status, release, abandon and a replay
// of the prepare, and alice's session and device are untouched by all of
// it. An admin holding the token still acts for the operator.
func TestSessionIsBoundToItsPrincipalAsWellAsItsToken(t *testing.T) {
	f := sessionDaemon(t, nil)
	ctx := context.Background()
	alice, bob := f.dial("alice", ""), f.dial("bob", "")
	r := prepare(t, alice, "run", "tok-a")
	if r.Status != contract.SessionReady {
		t.Fatalf("alice's session %+v", r)
	}

	_, stolen := client.Do(ctx, bob, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "tok-a"})
	_, wrong := client.Do(ctx, bob, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "nope"})
	if !client.IsCode(stolen, contract.CodeSessionOwnerMismatch) {
		t.Fatalf("bob's heartbeat with alice's token: %v", stolen)
	}
	refusedAlike(t, "heartbeat", stolen, wrong)

	_, stolen = client.Do(ctx, bob, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run", OwnerToken: "tok-a"})
	_, wrong = client.Do(ctx, bob, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run", OwnerToken: "nope"})
	if !client.IsCode(stolen, contract.CodeUnknownRequest) {
		t.Fatalf("bob's status with alice's token: %v", stolen)
	}
	refusedAlike(t, "status", stolen, wrong)

	rs, err := client.Do(ctx, bob, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "tok-a"})
	rw, err2 := client.Do(ctx, bob, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "nope"})
	if err != nil || err2 != nil || rs.Outcome != contract.ReleaseUnknownSession || rw.Outcome != rs.Outcome || rs.Receipt != nil || rw.Receipt != nil {
		t.Fatalf("bob's release with alice's token %+v %v, with a wrong one %+v %v", rs, err, rw, err2)
	}

	as, err := client.Do(ctx, bob, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "run", OwnerToken: "tok-a"})
	aw, err2 := client.Do(ctx, bob, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "run", OwnerToken: "nope"})
	if err != nil || err2 != nil || as.SessionID != "" || aw.SessionID != "" || as.Status != aw.Status || as.Failure == nil ||
		as.Failure.Code != contract.CodeSessionAbandoned || aw.Failure == nil || aw.Failure.Code != as.Failure.Code {
		t.Fatalf("bob's abandon with alice's token %+v %v, with a wrong one %+v %v", as, err, aw, err2)
	}

	// A replay of alice's prepare by bob is not hers: bob's own abandon
	// answers it, as it answers the wrong token's.
	ps, err := client.Do(ctx, bob, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "tok-a"})
	pw, err2 := client.Do(ctx, bob, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "nope"})
	if err != nil || err2 != nil || ps.SessionID == r.SessionID || ps.Device != nil || ps.Failure == nil ||
		ps.Failure.Code != contract.CodeSessionAbandoned || pw.Failure == nil || pw.Failure.Code != ps.Failure.Code {
		t.Fatalf("bob's replay of alice's prepare %+v %v, with a wrong token %+v %v", ps, err, pw, err2)
	}

	// Alice's session went on through all of it.
	if st, err := client.Do(ctx, alice, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run", OwnerToken: "tok-a"}); err != nil ||
		st.Status != contract.SessionReady || st.SessionID != r.SessionID {
		t.Fatalf("alice's session after bob's calls %+v %v", st, err)
	}
	if again := prepare(t, alice, "run", "tok-a"); again.SessionID != r.SessionID {
		t.Fatalf("alice's replay %+v", again)
	}
	if _, err := client.Do(ctx, alice, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "tok-a"}); err != nil {
		t.Fatalf("alice's heartbeat: %v", err)
	}
	if _, there := f.d.engine.Device(r.Device.ID); !there || len(f.d.engine.Leases()) != 1 {
		t.Fatalf("alice's device or lease is gone: %v leases", len(f.d.engine.Leases()))
	}
	// The admin with the token acts for the operator (the CLI's keepers).
	admin := f.dial("ops", f.adminToken())
	if _, err := client.Do(ctx, admin, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "tok-a"}); err != nil {
		t.Fatalf("the admin's heartbeat with the token: %v", err)
	}
	if st, err := client.Do(ctx, admin, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run", OwnerToken: "tok-a"}); err != nil || st.SessionID != r.SessionID {
		t.Fatalf("the admin's status with the token %+v %v", st, err)
	}
	if out, err := client.Do(ctx, admin, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "tok-a"}); err != nil ||
		out.Outcome != contract.ReleaseReleased {
		t.Fatalf("the admin's release with the token %+v %v", out, err)
	}
}

func tabletConfig(req string) contract.SessionConfig {
	c := sessionConfig(req)
	c.Device.Hardware.Model.Value = "Tablet"
	return c
}

// sessionDevices counts the broker's devices in the registry.
func (f *fixture) sessionDevices() int {
	n := 0
	for _, d := range f.d.engine.Devices() {
		if sessions.IsSessionDevice(d) {
			n++
		}
	}
	return n
}

// totalDeviceCap counts every session device in any state: with cap 1 a
// released phone idling after its erase reset is destroyed, its
// destruction confirmed, before the tablet's device is created, so the
// registry and the fake SDK never hold two (sampled on every event).
func TestSessionDeviceCapCountsIdleDevicesAndEvictsBeforeACreate(t *testing.T) {
	f := sessionDaemonResetting(t, func(s *config.Sessions) {
		s.Reset.IOS = contract.ResetErase
		s.Limits = config.SessionLimits{TotalDeviceCap: 1, IdlePoolCap: 1}
	}, nil)
	ctx := context.Background()
	var most atomic.Int64
	evs, unsub := f.d.bus.Subscribe(1024)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		defer unsub()
		sample := func() {
			n := int64(f.sessionDevices())
			if exist, _ := f.drv.Count(); int64(exist) > n {
				n = int64(exist)
			}
			if n > most.Load() {
				most.Store(n)
			}
		}
		for {
			select {
			case <-evs:
				sample()
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				sample()
			}
		}
	}()
	a := f.dial("alice", "")
	phone := prepare(t, a, "phone", "o")
	out, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: phone.SessionID, OwnerToken: "o"})
	if err != nil || out.Outcome != contract.ReleaseReleased || out.Receipt.Timing.Reset.Mode != contract.ResetErase {
		t.Fatalf("the phone's release %+v %v", out, err)
	}
	if d, there := f.d.engine.Device(phone.Device.ID); !there || d.OwnerSystem != sessions.System {
		t.Fatalf("the phone does not idle as a session device: %+v %v", d, there)
	}
	tablet, err := client.Do(ctx, a, contract.SessionPrepare, contract.SessionPrepareIn{Config: tabletConfig("tablet"), OwnerToken: "o"})
	close(stop)
	<-sampled
	if err != nil || tablet.Status != contract.SessionReady || tablet.Timing.Acquisition.Admission != contract.AdmissionEvictThenCreate {
		t.Fatalf("the tablet %+v %v", tablet, err)
	}
	if _, there := f.d.engine.Device(phone.Device.ID); there {
		t.Fatal("the idle phone outlived the tablet's create")
	}
	if n := most.Load(); n != 1 {
		t.Fatalf("%d session devices at once under totalDeviceCap 1", n)
	}
	// With the tablet live and no idle device, the cap refuses.
	if r := prepare(t, a, "third", "o"); r.Failure == nil || r.Failure.Code != contract.CodeCapacityExhausted {
		t.Fatalf("past the cap with a live session: %+v", r)
	}
}

// Abandoning a preparation while its device boots answers cleanupPending,
// and the device (marked a session device from its first record, never
// served to a plain lease) is destroyed once its boot ends.
func TestSessionAbandonMidPreparationDestroysItsDevice(t *testing.T) {
	gate := make(chan struct{})
	f := sessionDaemonResetting(t, nil, func(d *fakedrv.Driver) { d.Gate = gate })
	ctx := context.Background()
	a, plain := f.dial("alice", ""), f.dial("bob", "")
	p, err := client.Do(ctx, a, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "o", WaitMs: 200})
	if err != nil || p.Status != contract.SessionPending {
		t.Fatalf("a gated prepare %+v %v", p, err)
	}
	devs := f.d.engine.Devices()
	if len(devs) != 1 || devs[0].OwnerSystem != sessions.System {
		t.Fatalf("the device being prepared: %+v", devs)
	}
	id := devs[0].ID
	ab, err := client.Do(ctx, a, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "run", OwnerToken: "o"})
	if err != nil || ab.Status != contract.SessionFailed || ab.Failure == nil || ab.Failure.Code != contract.CodeSessionAbandoned || !ab.CleanupPending {
		t.Fatalf("abandon mid-preparation %+v %v", ab, err)
	}
	close(gate) // the boot ends after its request left
	st := waitReceipt(t, a, "run", "o", func(r contract.SessionReceipt) bool { return !r.CleanupPending })
	if st.Timing.Reset == nil || st.Timing.Reset.Outcome != contract.ResetOutcomeDestroyed {
		t.Fatalf("the abandoned preparation's reset %+v", st.Timing.Reset)
	}
	if _, there := f.d.engine.Device(id); there {
		t.Fatal("the abandoned preparation's device is still registered")
	}
	// A plain lease gets a device of its own.
	l, err := plain.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", NoWait: true}, nil)
	if err != nil || l.DeviceID == id {
		t.Fatalf("the plain lease %+v %v", l, err)
	}
}
