package daemon

import (
	"context"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/sessions"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/testhost"
)

func sessionDaemon(t *testing.T, mutate func(*config.Sessions)) *fixture {
	return startDaemon(t, func(c *config.Config) {
		c.Capacity.Fixed = config.Fixed{MaxRunning: 3, MaxManaged: 3}
		c.Sessions = &config.Sessions{HeartbeatTTLMs: 60_000}
		if mutate != nil {
			mutate(c.Sessions)
		}
	})
}

// sessionDaemonResetting is sessionDaemon over the fake driver with every
// session reset ability (erase and verify, keep-booted cleaning).
func sessionDaemonResetting(t *testing.T, mutate func(*config.Sessions), prep func(*fakedrv.Driver)) *fixture {
	t.Helper()
	home, err := os.MkdirTemp("", "sld-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Capacity.Strategy = "fixed"
	cfg.Capacity.Fixed = config.Fixed{MaxRunning: 3, MaxManaged: 3}
	cfg.Capacity.Host.MaxRunning = 8
	cfg.Sessions = &config.Sessions{HeartbeatTTLMs: 60_000}
	if mutate != nil {
		mutate(cfg.Sessions)
	}
	drv := fakedrv.New("ios")
	if prep != nil {
		prep(drv)
	}
	d, err := Start(context.Background(), Options{Home: home, Config: cfg, Version: "test", Drivers: []core.Driver{fakedrv.NewResetting(drv)}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, d: d, home: home, drv: drv}
	t.Cleanup(func() {
		f.d.Stop()
		os.RemoveAll(home)
	})
	return f
}

func sessionConfig(req string) contract.SessionConfig {
	return contract.SessionConfig{ContractVersion: 1, RequestID: req,
		Device: contract.DeviceRequirement{SchemaVersion: 1, Platform: "ios",
			Hardware: &contract.HardwareRequirement{Kind: contract.HardwareModel, Model: &contract.ModelIdentity{Namespace: "simlock-model", Value: "Phone"}}}}
}

func prepare(t *testing.T, c *client.Client, req, token string) contract.SessionReceipt {
	t.Helper()
	r, err := client.Do(context.Background(), c, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig(req), OwnerToken: token})
	if err != nil {
		t.Fatalf("prepare %s: %v", req, err)
	}
	return r
}

func TestSessionPrepareReplaysOneReceiptAndOneDevice(t *testing.T) {
	f := sessionDaemon(t, nil)
	a := f.dial("alice", "")
	// Concurrent duplicates join the first preparation.
	var wg sync.WaitGroup
	got := make([]contract.SessionReceipt, 3)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = prepare(t, a, "run-1", "owner-a") }()
	}
	wg.Wait()
	first := got[0]
	if first.Status != contract.SessionReady || first.SessionID == "" || first.LeaseID == "" || first.Device == nil {
		t.Fatalf("first receipt %+v", first)
	}
	for _, r := range got[1:] {
		if r.SessionID != first.SessionID || r.LeaseID != first.LeaseID {
			t.Fatalf("a duplicate got another session: %+v vs %+v", r, first)
		}
	}
	again := prepare(t, f.dial("alice", ""), "run-1", "owner-a")
	if again.SessionID != first.SessionID || again.Device.ID != first.Device.ID {
		t.Fatalf("replay got another session: %+v", again)
	}
	other := prepare(t, a, "run-2", "owner-a")
	if other.SessionID == first.SessionID || other.Device.ID == first.Device.ID {
		t.Fatalf("a new request id shares the first session: %+v", other)
	}
	if n := len(f.d.engine.Leases()); n != 2 {
		t.Fatalf("%d leases, want 2", n)
	}
	// The lease's requester is in the agent's namespace, so the agent can
	// name it to device.exec as read back.
	if l, _ := f.d.engine.Lease(first.LeaseID); l.RequesterID != "alice/session/"+first.SessionID || l.OwnerID != "alice" {
		t.Errorf("session lease requester %q owner %q", l.RequesterID, l.OwnerID)
	}
	acq := first.Timing.Acquisition
	if acq.Outcome != contract.SessionReady || acq.TotalMs == nil || acq.CompletedAtMs == nil || acq.QueueMs == nil {
		t.Fatalf("acquisition %+v", acq)
	}
	if acq.Admission != contract.AdmissionCreate || acq.CreateMs == nil {
		t.Errorf("a fresh device's acquisition %+v, want create with createMs", acq)
	}
	st, err := client.Do(context.Background(), a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run-1", OwnerToken: "owner-a"})
	if err != nil || st.SessionID != first.SessionID {
		t.Fatalf("status %+v %v", st, err)
	}
	if _, err := client.Do(context.Background(), a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run-1", OwnerToken: "owner-b"}); !client.IsCode(err, contract.CodeUnknownRequest) {
		t.Fatalf("another owner read the receipt: %v", err)
	}
}

func TestSessionRefusalBeforeAdmissionIsStoredAndReplayed(t *testing.T) {
	f := sessionDaemon(t, nil)
	a := f.dial("alice", "")
	in := contract.SessionPrepareIn{OwnerToken: "o", Config: contract.SessionConfig{ContractVersion: 1, RequestID: "r",
		Device: contract.DeviceRequirement{SchemaVersion: 1, Platform: "ios", Hardware: &contract.HardwareRequirement{Kind: contract.HardwareArchetype, Archetype: "foldable"}}}}
	r1, err := client.Do(context.Background(), a, contract.SessionPrepare, in)
	if err != nil || r1.Status != contract.SessionFailed || r1.Failure == nil || r1.Failure.Code != contract.CodeUnsupportedHardware || r1.Failure.Retryable {
		t.Fatalf("refusal %+v %v", r1, err)
	}
	r2, err := client.Do(context.Background(), a, contract.SessionPrepare, in)
	if err != nil || r2.CreatedAtMs != r1.CreatedAtMs || r2.Failure.Message != r1.Failure.Message {
		t.Fatalf("replay %+v %v, want the stored refusal", r2, err)
	}
	if n := len(f.d.engine.Devices()); n != 0 {
		t.Fatalf("a refusal created %d devices", n)
	}
	in.Config.ContractVersion = 2
	if _, err := client.Do(context.Background(), a, contract.SessionPrepare, in); !client.IsCode(err, contract.CodeContractUnsupported) {
		t.Fatalf("contractVersion 2: %v", err)
	}
}

func TestSessionsNotConfigured(t *testing.T) {
	f := startDaemon(t, nil)
	a := f.dial("alice", "")
	if _, err := client.Do(context.Background(), a, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("r"), OwnerToken: "o"}); !client.IsCode(err, contract.CodeSessionsNotConfigured) {
		t.Fatalf("prepare without sessions: %v", err)
	}
	caps, err := client.Do(context.Background(), a, contract.CapabilitiesGet, contract.CapabilitiesGetIn{})
	if err != nil || slices.Contains(caps.Contracts, contract.ContractSessionBroker) || slices.Contains(caps.Contracts, contract.ContractSessionBrokerExport) {
		t.Fatalf("capabilities without sessions %+v %v", caps, err)
	}
	g := sessionDaemon(t, nil)
	caps, err = client.Do(context.Background(), g.dial("alice", ""), contract.CapabilitiesGet, contract.CapabilitiesGetIn{})
	if err != nil || len(caps.Contracts) < 2 || caps.Contracts[0] != contract.ContractSessionBroker || caps.Contracts[1] != contract.ContractSessionBrokerExport {
		t.Fatalf("capabilities %+v %v", caps, err)
	}
}

func TestSessionReleaseChecksTheOwnerAndSettles(t *testing.T) {
	f := sessionDaemon(t, nil)
	a := f.dial("alice", "")
	r := prepare(t, a, "run", "owner")
	ctx := context.Background()
	// Another token's release is told what an unknown id is told, and
	// ends nothing: the owner's release below still finds the session ready.
	if out, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "thief"}); err != nil || out.Outcome != contract.ReleaseUnknownSession || out.Receipt != nil {
		t.Fatalf("another token's release %+v %v", out, err)
	}
	out, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "owner"})
	if err != nil || out.Outcome != contract.ReleaseReleased || out.Receipt.Status != contract.SessionReleased || out.Receipt.CleanupPending {
		t.Fatalf("release %+v %v", out, err)
	}
	rs := out.Receipt.Timing.Reset
	if rs == nil || rs.Outcome == contract.ResetOutcomePending || rs.CompletedAtMs == nil || rs.TotalMs == nil {
		t.Fatalf("reset record %+v", rs)
	}
	if _, held := f.d.engine.Lease(r.LeaseID); held {
		t.Fatal("the session's lease survived its release")
	}
	// Zero pooling: the receipt settles only once the device is gone.
	if rs.Mode != contract.ResetDestroy || rs.Outcome != contract.ResetOutcomeDestroyed {
		t.Errorf("default reset %+v, want destroy/destroyed", rs)
	}
	if _, there := f.d.engine.Device(r.Device.ID); there {
		t.Error("the released session's device is still in the registry")
	}
	if exist, _ := f.drv.Count(); exist != 0 {
		t.Errorf("%d devices left in the fake SDK after a zero-pooling release", exist)
	}
	again, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "owner"})
	if err != nil || again.Outcome != contract.ReleaseReleased {
		t.Fatalf("second release %+v %v", again, err)
	}
	unk, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: "nope", OwnerToken: "owner"})
	if err != nil || unk.Outcome != contract.ReleaseUnknownSession {
		t.Fatalf("unknown %+v %v", unk, err)
	}
	// The replayed prepare answers the released receipt; it never
	// allocates a second device.
	if rp := prepare(t, a, "run", "owner"); rp.Status != contract.SessionReleased || rp.SessionID != r.SessionID {
		t.Fatalf("replay after release %+v", rp)
	}
	if _, err := client.Do(ctx, a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "owner"}); !client.IsCode(err, contract.CodeSessionEnded) {
		t.Fatalf("heartbeat on a released session: %v", err)
	}
	st, err := client.Do(ctx, a, contract.SessionStats, contract.SessionStatsIn{})
	if err != nil || len(st.Groups) != 1 || st.Groups[0].Acquisitions != 1 || st.Groups[0].Resets != 1 || st.Groups[0].Phases["totalMs"].Count != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

func TestSessionAbandonConsumesTheIdentity(t *testing.T) {
	f := sessionDaemon(t, nil)
	a := f.dial("alice", "")
	ctx := context.Background()
	ab, err := client.Do(ctx, a, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "never", OwnerToken: "o"})
	if err != nil || ab.Status != contract.SessionFailed || ab.Failure.Code != contract.CodeSessionAbandoned {
		t.Fatalf("abandon of an unseen id %+v %v", ab, err)
	}
	late := prepare(t, a, "never", "o")
	if late.Status != contract.SessionFailed || late.Failure.Code != contract.CodeSessionAbandoned || len(f.d.engine.Devices()) != 0 {
		t.Fatalf("a late prepare allocated: %+v, %d devices", late, len(f.d.engine.Devices()))
	}
	live := prepare(t, a, "live", "o")
	ab, err = client.Do(ctx, a, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "live", OwnerToken: "o"})
	if err != nil || ab.Status != contract.SessionFailed || ab.Failure.Code != contract.CodeSessionAbandoned || ab.SessionID != live.SessionID {
		t.Fatalf("abandon of a ready session %+v %v", ab, err)
	}
	if _, held := f.d.engine.Lease(live.LeaseID); held {
		t.Fatal("an abandoned session kept its lease")
	}
}

func TestSessionHeartbeatLapseEndsAsOwnerExited(t *testing.T) {
	f := sessionDaemon(t, func(s *config.Sessions) { s.HeartbeatTTLMs = 1500 })
	a := f.dial("alice", "")
	r := prepare(t, a, "run", "o")
	hb, err := client.Do(context.Background(), a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "o"})
	if err != nil || hb.ExpiresAtMs == 0 {
		t.Fatalf("heartbeat %+v %v", hb, err)
	}
	st := waitReceipt(t, a, "run", "o", func(r contract.SessionReceipt) bool { return r.Status == contract.SessionFailed && !r.CleanupPending })
	if st.Failure.Code != contract.CodeSessionOwnerExited || st.SessionID != r.SessionID {
		t.Fatalf("after the lapse %+v", st)
	}
}

func waitReceipt(t *testing.T, c *client.Client, req, token string, ok func(contract.SessionReceipt) bool) contract.SessionReceipt {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(10 * time.Second))
	for {
		r, err := client.Do(context.Background(), c, contract.SessionStatus, contract.SessionStatusIn{RequestID: req, OwnerToken: token})
		if err == nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("receipt never settled: %+v %v", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func restartDaemon(t *testing.T, f *fixture, crash bool) {
	t.Helper()
	cfg := f.d.cfg
	drv, _ := f.d.engine.Driver("ios")
	f.d.Stop()
	if crash {
		// What a kill -9 leaves: no handoff mark.
		db, err := store.Open(context.Background(), f.d.paths.DB)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetMeta(context.Background(), sessions.MetaHandoff, ""); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	d, err := Start(context.Background(), Options{Home: f.home, Config: cfg, Version: "test", Drivers: []core.Driver{drv}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	f.d = d
}

func TestSessionGracefulRestartAdoptsTheSameSession(t *testing.T) {
	f := sessionDaemon(t, nil)
	r := prepare(t, f.dial("alice", ""), "run", "o")
	restartDaemon(t, f, false)
	a := f.dial("alice", "")
	st := prepare(t, a, "run", "o")
	if st.Status != contract.SessionReady || st.SessionID != r.SessionID || st.LeaseID != r.LeaseID {
		t.Fatalf("after a graceful restart %+v, want %s ready", st, r.SessionID)
	}
	if _, err := client.Do(context.Background(), a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "o"}); err != nil {
		t.Fatalf("the keeper's heartbeat after the restart: %v", err)
	}
	if n := len(f.d.engine.Leases()); n != 1 {
		t.Fatalf("%d leases after the restart and replay, want 1", n)
	}
}

func TestSessionCrashEndsEverySessionAsOwnerExited(t *testing.T) {
	f := sessionDaemon(t, nil)
	r := prepare(t, f.dial("alice", ""), "run", "o")
	restartDaemon(t, f, true)
	a := f.dial("alice", "")
	st := waitReceipt(t, a, "run", "o", func(r contract.SessionReceipt) bool { return !r.CleanupPending })
	if st.Status != contract.SessionFailed || st.Failure.Code != contract.CodeSessionOwnerExited || st.SessionID != r.SessionID {
		t.Fatalf("after a crash %+v", st)
	}
	if _, held := f.d.engine.Lease(r.LeaseID); held {
		t.Fatal("the crashed daemon's session kept its lease")
	}
	// Also on replay: the same identity never gets a new device.
	if rp := prepare(t, a, "run", "o"); rp.Status != contract.SessionFailed || rp.Failure.Code != contract.CodeSessionOwnerExited {
		t.Fatalf("replay after the crash %+v", rp)
	}
	if n := len(f.d.engine.Leases()); n != 0 {
		t.Fatalf("%d leases after the replay, want 0", n)
	}
}

func TestSessionExportPinsAndAcknowledges(t *testing.T) {
	f := sessionDaemon(t, nil)
	a := f.dial("alice", "")
	ctx := context.Background()
	exp := &contract.SessionExport{PrepareID: "p-1", RequestDigest: "d-1"}
	r, err := client.Do(ctx, a, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "o", Export: exp})
	if err != nil || r.Status != contract.SessionReady {
		t.Fatalf("prepare %+v %v", r, err)
	}
	if _, err := client.Do(ctx, a, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "o",
		Export: &contract.SessionExport{PrepareID: "p-1", RequestDigest: "other"}}); !client.IsCode(err, contract.CodeSessionExportMismatch) {
		t.Fatalf("a conflicting export: %v", err)
	}
	in := contract.SessionExportIn{PrepareID: "p-1", RequestDigest: "d-1", OwnerToken: "o"}
	got, err := client.Do(ctx, a, contract.SessionGetExport, in)
	if err != nil || got.Acknowledged || got.Result.SessionID != r.SessionID {
		t.Fatalf("getExport %+v %v", got, err)
	}
	bad := in
	bad.OwnerToken = "x"
	// Another owner is told the export is not there, as for one never linked.
	if _, err := client.Do(ctx, a, contract.SessionGetExport, bad); !client.IsCode(err, contract.CodeSessionExportNotFound) {
		t.Fatalf("another owner read the export: %v", err)
	}
	ack, err := client.Do(ctx, a, contract.SessionAcknowledgeExport, in)
	if err != nil || ack.Outcome != "acknowledged" {
		t.Fatalf("ack %+v %v", ack, err)
	}
	if got, _ := client.Do(ctx, a, contract.SessionGetExport, in); !got.Acknowledged {
		t.Fatal("the acknowledgement was not kept")
	}
	unk, err := client.Do(ctx, a, contract.SessionAcknowledgeExport, contract.SessionExportIn{PrepareID: "none", RequestDigest: "d", OwnerToken: "o"})
	if err != nil || unk.Outcome != "unknown_export" {
		t.Fatalf("unknown export %+v %v", unk, err)
	}
}

// A prepare id is its owner's own name (store migration 10): mallory's
// prepare with the id alice already linked neither fails (it would tell
// her the id is taken) nor touches alice's link, and mallory linking an id
// first (with a config refused before admission, so its failed receipt
// holds the link) does not block alice's later prepare with it. Each reads
// and acknowledges her own export. The same owner is still refused a
// second digest or a second request under one id, and an admin is still
// told another owner's export from none.
func TestSessionExportIdsAreScopedByOwner(t *testing.T) {
	f := sessionDaemon(t, nil)
	ctx := context.Background()
	a, m, admin := f.dial("alice", ""), f.dial("mallory", ""), f.dial("ops", f.adminToken())
	refused := func(req string) contract.SessionConfig {
		return contract.SessionConfig{ContractVersion: 1, RequestID: req, Device: contract.DeviceRequirement{SchemaVersion: 1, Platform: "ios",
			Hardware: &contract.HardwareRequirement{Kind: contract.HardwareArchetype, Archetype: "foldable"}}}
	}
	prep := func(c *client.Client, cfg contract.SessionConfig, token, prepareID, digest string) (contract.SessionReceipt, error) {
		return client.Do(ctx, c, contract.SessionPrepare, contract.SessionPrepareIn{Config: cfg, OwnerToken: token,
			Export: &contract.SessionExport{PrepareID: prepareID, RequestDigest: digest}})
	}

	// The oracle: alice's id is linked; mallory's probe must not fail.
	ra, err := prep(a, sessionConfig("run"), "owner-a", "p-first", "d-a")
	if err != nil || ra.Status != contract.SessionReady {
		t.Fatalf("alice's prepare %+v %v", ra, err)
	}
	if r, err := prep(m, refused("probe"), "owner-m", "p-first", "d-m"); err != nil || r.Status != contract.SessionFailed {
		t.Fatalf("mallory's prepare with alice's prepare id: %+v %v, want her own refused receipt and no error", r, err)
	}
	// The squat: mallory links an id first; alice's prepare with it works.
	if r, err := prep(m, refused("squat"), "owner-m", "p-squat", "d-m"); err != nil || r.Status != contract.SessionFailed {
		t.Fatalf("mallory's squat %+v %v", r, err)
	}
	rb, err := prep(a, sessionConfig("run-2"), "owner-a", "p-squat", "d-a")
	if err != nil || rb.Status != contract.SessionReady {
		t.Fatalf("alice's prepare with the id mallory linked first: %+v %v", rb, err)
	}

	get := func(c *client.Client, token, prepareID, digest string) (contract.SessionExportOut, error) {
		return client.Do(ctx, c, contract.SessionGetExport, contract.SessionExportIn{PrepareID: prepareID, RequestDigest: digest, OwnerToken: token})
	}
	for id, sid := range map[string]string{"p-first": ra.SessionID, "p-squat": rb.SessionID} {
		if ex, err := get(a, "owner-a", id, "d-a"); err != nil || ex.Result.SessionID != sid || ex.Result.Status != contract.SessionReady || ex.Acknowledged {
			t.Errorf("alice's export %s: %+v %v, want her session %s", id, ex, err, sid)
		}
		if ex, err := get(m, "owner-m", id, "d-m"); err != nil || ex.Result.Status != contract.SessionFailed || ex.Result.SessionID == sid {
			t.Errorf("mallory's export %s: %+v %v, want her own refused receipt", id, ex, err)
		}
	}
	if ack, err := client.Do(ctx, m, contract.SessionAcknowledgeExport, contract.SessionExportIn{PrepareID: "p-first", RequestDigest: "d-m", OwnerToken: "owner-m"}); err != nil || ack.Outcome != "acknowledged" {
		t.Fatalf("mallory acknowledges her own export: %+v %v", ack, err)
	}
	if ex, err := get(a, "owner-a", "p-first", "d-a"); err != nil || ex.Acknowledged {
		t.Errorf("mallory's acknowledgement reached alice's export: %+v %v", ex, err)
	}

	// The same owner, the same prepare id: another digest, or another
	// request, is still a mismatch.
	if _, err := prep(a, sessionConfig("run"), "owner-a", "p-first", "d-other"); !client.IsCode(err, contract.CodeSessionExportMismatch) {
		t.Errorf("alice's replay with another digest: %v", err)
	}
	if _, err := prep(a, sessionConfig("run-3"), "owner-a", "p-first", "d-a"); !client.IsCode(err, contract.CodeSessionExportMismatch) {
		t.Errorf("alice's other request under her prepare id: %v", err)
	}

	// An admin with another token: SESSION_OWNER_MISMATCH for an id some
	// owner linked, not-found for one nobody did.
	if _, err := get(admin, "x", "p-first", "d-a"); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
		t.Errorf("an admin's getExport of another owner's export: %v", err)
	}
	if _, err := client.Do(ctx, admin, contract.SessionAcknowledgeExport, contract.SessionExportIn{PrepareID: "p-first", RequestDigest: "d-a", OwnerToken: "x"}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
		t.Errorf("an admin's acknowledgeExport of another owner's export: %v", err)
	}
	if _, err := get(admin, "x", "p-never", "d-a"); !client.IsCode(err, contract.CodeSessionExportNotFound) {
		t.Errorf("an admin's getExport of an id nobody linked: %v", err)
	}
	if ack, err := client.Do(ctx, admin, contract.SessionAcknowledgeExport, contract.SessionExportIn{PrepareID: "p-never", RequestDigest: "d", OwnerToken: "x"}); err != nil || ack.Outcome != "unknown_export" {
		t.Errorf("an admin's acknowledgeExport of an id nobody linked: %+v %v", ack, err)
	}
}

func TestSessionCapsRefuseWithNewRequestID(t *testing.T) {
	f := sessionDaemon(t, func(s *config.Sessions) { s.Limits.SessionCap = 1 })
	a := f.dial("alice", "")
	prepare(t, a, "one", "o")
	r := prepare(t, a, "two", "o")
	if r.Status != contract.SessionFailed || r.Failure.Code != contract.CodeCapacityExhausted || r.Failure.RetryRequires != "new_request_id" {
		t.Fatalf("past the session cap %+v", r)
	}
}

func TestSessionEraseResetIsReusedByTheNextSession(t *testing.T) {
	f := sessionDaemonResetting(t, func(s *config.Sessions) { s.Reset.IOS = contract.ResetErase; s.Limits.IdlePoolCap = 1 }, nil)
	a := f.dial("alice", "")
	ctx := context.Background()
	one := prepare(t, a, "one", "o")
	out, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: one.SessionID, OwnerToken: "o"})
	if err != nil || out.Outcome != contract.ReleaseReleased {
		t.Fatalf("release %+v %v", out, err)
	}
	if rs := out.Receipt.Timing.Reset; rs.Mode != contract.ResetErase || rs.Outcome != contract.ResetOutcomeClean {
		t.Fatalf("erase reset %+v", rs)
	}
	two := prepare(t, a, "two", "o")
	acq := two.Timing.Acquisition
	if two.Device.ID != one.Device.ID || acq.Admission != contract.AdmissionReuse || acq.ReuseCount != 1 || acq.CreateMs == nil || *acq.CreateMs != 0 {
		t.Fatalf("second session %s %+v, want reuse of %s with reuseCount 1 and zero create", two.Device.ID, acq, one.Device.ID)
	}
	// A keeper that stops heartbeating destroys the device even though the
	// session's reset would keep it.
	f.d.sessions.ExpireHeartbeat(two.SessionID, time.Now().Add(-2*time.Minute))
	st := waitReceipt(t, a, "two", "o", func(r contract.SessionReceipt) bool { return r.Status == contract.SessionFailed && !r.CleanupPending })
	if st.Failure.Code != contract.CodeSessionOwnerExited || st.Timing.Reset.Outcome != contract.ResetOutcomeDestroyed {
		t.Fatalf("owner exit %+v reset %+v", st.Failure, st.Timing.Reset)
	}
	if _, there := f.d.engine.Device(two.Device.ID); there {
		t.Fatal("an exited owner's device was kept")
	}
}

func TestSessionPrepareInterruptedByAStopStoresATerminalReceipt(t *testing.T) {
	gate := make(chan struct{})
	f := sessionDaemonResetting(t, nil, func(d *fakedrv.Driver) { d.Gate = gate })
	a := f.dial("alice", "")
	ctx := context.Background()
	in := contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "o", WaitMs: 200}
	p, err := client.Do(ctx, a, contract.SessionPrepare, in)
	if err != nil || p.Status != contract.SessionPending || p.SessionID == "" {
		t.Fatalf("a gated prepare %+v %v, want pending", p, err)
	}
	// The gate opens once the stop cancelled the preparation and it
	// stored its receipt, so the engine's stop does not wait on it.
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
	if err != nil || st.Status != contract.SessionFailed || fl == nil || fl.Code != contract.CodeSessionBrokerStopping || !fl.Retryable ||
		fl.RetryAfterMs == nil || *fl.RetryAfterMs != 5000 || fl.RetryRequires != "new_request_id" {
		t.Fatalf("the interrupted preparation %+v %+v %v", st, fl, err)
	}
	in.WaitMs = 0
	if rp, err := client.Do(ctx, a, contract.SessionPrepare, in); err != nil || rp.Failure == nil || rp.Failure.Code != contract.CodeSessionBrokerStopping {
		t.Fatalf("replay %+v %v", rp, err)
	}
}

func TestSessionIdleWindowEndsAnUntouchedSession(t *testing.T) {
	f := sessionDaemon(t, nil)
	a := f.dial("alice", "")
	cfg := sessionConfig("idle")
	// A 6 s window with the touch and the check 3.25 s apart: a stall of
	// up to 2.75 s of the test or the daemon neither ends the window before
	// the touch nor the touched window before the check, while the check
	// still falls 0.5 s past where the untouched window would have ended.
	cfg.IdleTimeoutMs = 6000
	r, err := client.Do(context.Background(), a, contract.SessionPrepare, contract.SessionPrepareIn{Config: cfg, OwnerToken: "o"})
	if err != nil || r.Status != contract.SessionReady || r.IdleTimeoutMs != 6000 {
		t.Fatalf("prepare %+v %v", r, err)
	}
	// A device call restarts the window.
	time.Sleep(3250 * time.Millisecond)
	f.d.sessions.TouchLease(r.LeaseID)
	time.Sleep(3250 * time.Millisecond)
	if st, _ := client.Do(context.Background(), a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "idle", OwnerToken: "o"}); st.Status != contract.SessionReady || st.CleanupPending {
		t.Fatalf("a touched session ended: %+v", st)
	}
	st := waitReceipt(t, a, "idle", "o", func(r contract.SessionReceipt) bool { return r.Status == contract.SessionReleased })
	if st.EndReason != "idle_timeout" {
		t.Fatalf("idle end %+v", st)
	}
}

// With the device cap full only because an earlier session's device is
// not yet confirmed destroyed, a prepare is EVICTION_PENDING (retryable
// after 1000 ms, with a new request id), stored and replayed.
func TestSessionEvictionPendingWhileADestroyIsUnconfirmed(t *testing.T) {
	f := sessionDaemonResetting(t, func(s *config.Sessions) { s.Limits.TotalDeviceCap = 1 }, nil)
	a := f.dial("alice", "")
	ctx := context.Background()
	one := prepare(t, a, "one", "o")
	f.drv.SetFail("destroy", 1000) // the destruction is never confirmed
	zero := int64(0)
	out, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: one.SessionID, OwnerToken: "o", ReplyBudgetMs: &zero})
	if err != nil || out.Outcome != contract.ReleaseCleanupPending {
		t.Fatalf("release %+v %v", out, err)
	}
	two := prepare(t, a, "two", "o")
	fl := two.Failure
	if two.Status != contract.SessionFailed || fl == nil || fl.Code != contract.CodeEvictionPending || !fl.Retryable ||
		fl.RetryAfterMs == nil || *fl.RetryAfterMs != 1000 || fl.RetryRequires != "new_request_id" {
		t.Fatalf("past the device cap with a destroy pending: %+v %+v", two, fl)
	}
	if n := len(f.d.engine.Leases()); n != 0 {
		t.Fatalf("%d leases: the refused session reserved a device", n)
	}
	if again := prepare(t, a, "two", "o"); again.Failure == nil || again.Failure.Code != contract.CodeEvictionPending || again.CreatedAtMs != two.CreatedAtMs {
		t.Fatalf("replay %+v", again)
	}
}

// idlePoolCap 0 is zero pooling even with a reuse reset configured: the
// device is destroyed rather than reset for the next session.
func TestSessionIdlePoolCapZeroDestroysInsteadOfReset(t *testing.T) {
	f := sessionDaemonResetting(t, func(s *config.Sessions) { s.Reset.IOS = contract.ResetErase }, nil)
	a := f.dial("alice", "")
	one := prepare(t, a, "one", "o")
	out, err := client.Do(context.Background(), a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: one.SessionID, OwnerToken: "o"})
	if err != nil || out.Outcome != contract.ReleaseReleased || out.Receipt.Timing.Reset.Mode != contract.ResetDestroy ||
		out.Receipt.Timing.Reset.Outcome != contract.ResetOutcomeDestroyed {
		t.Fatalf("release with idlePoolCap 0: %+v %v", out.Receipt.Timing.Reset, err)
	}
	if _, there := f.d.engine.Device(one.Device.ID); there {
		t.Fatal("the device was kept with no room in the idle pool")
	}
}

// readCountingStore counts the receipt reads the broker makes, and
// apart the reads by session id (the one an unknown id's heartbeat makes).
type readCountingStore struct {
	sessions.Store
	reads, bySession atomic.Int64
}

func (s *readCountingStore) SessionReceipt(ctx context.Context, id string) (sessions.Record, bool, error) {
	s.reads.Add(1)
	return s.Store.SessionReceipt(ctx, id)
}

func (s *readCountingStore) SessionReceiptByRequest(ctx context.Context, od, req string) (sessions.Record, bool, error) {
	s.reads.Add(1)
	return s.Store.SessionReceiptByRequest(ctx, od, req)
}

func (s *readCountingStore) SessionReceiptBySession(ctx context.Context, sid string) (sessions.Record, bool, error) {
	s.reads.Add(1)
	s.bySession.Add(1)
	return s.Store.SessionReceiptBySession(ctx, sid)
}

// A keeper's heartbeats on a live session are answered from the broker's
// memory: they renew the lease (its expiry moves on) and none of them
// reads a receipt from the store (the hot path). A foreign token is still
// SESSION_OWNER_MISMATCH, and its heartbeat reads exactly what an unknown
// id's does, one receipt by session id: this pin used to be that a foreign
// heartbeat reads none, which made it one indexed read faster than an
// unknown id's, so averaged probes told live ids apart (ADR 0058, section
// 3). Once the session is released the receipt answers again:
// SESSION_ENDED.
func TestSessionHeartbeatsOfALiveSessionReadNoReceipt(t *testing.T) {
	f := sessionDaemon(t, nil)
	ctx := context.Background()
	a := f.dial("alice", "")
	r := prepare(t, a, "run", "owner-a")
	before, _ := f.d.engine.Lease(r.LeaseID)
	// Once the session is ready no broker goroutine reads the field until
	// its lease ends (the startup recovery is over: prepare waited for it).
	st := &readCountingStore{}
	f.d.sessions.SwapStore(func(cur sessions.Store) sessions.Store { st.Store = cur; return st })
	var last contract.SessionHeartbeatOut
	for i := range 20 {
		hb, err := client.Do(ctx, a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "owner-a"})
		if err != nil || hb.SessionID != r.SessionID || hb.ExpiresAtMs <= 0 {
			t.Fatalf("heartbeat %d: %+v %v", i, hb, err)
		}
		last = hb
	}
	if n := st.reads.Load(); n != 0 {
		t.Fatalf("20 heartbeats of a live session by its owner read %d receipts from the store, want 0", n)
	}
	// What one heartbeat reads: every read, and those by session id.
	cost := func(what, sid string) (int64, int64) {
		t.Helper()
		reads, bySession := st.reads.Load(), st.bySession.Load()
		if _, err := client.Do(ctx, a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: sid, OwnerToken: "not-alice"}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
			t.Fatalf("%s: %v", what, err)
		}
		return st.reads.Load() - reads, st.bySession.Load() - bySession
	}
	foreign, foreignBySession := cost("a heartbeat under another token", r.SessionID)
	unknown, unknownBySession := cost("a heartbeat of an unknown id", uuid.NewString())
	if foreign != unknown || foreignBySession != unknownBySession || unknown != 1 || unknownBySession != 1 {
		t.Fatalf("a foreign heartbeat on a live session read %d receipts (%d by session id), an unknown id's %d (%d): want one by session id for both",
			foreign, foreignBySession, unknown, unknownBySession)
	}
	after, held := f.d.engine.Lease(r.LeaseID)
	if !held || after.ExpiresAt.Before(before.ExpiresAt) || last.ExpiresAtMs < before.LastRenewedAt.UnixMilli() {
		t.Fatalf("the lease after the heartbeats: held %v, expiry %v (was %v)", held, after.ExpiresAt, before.ExpiresAt)
	}
	if _, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "owner-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Do(ctx, a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "owner-a"}); !client.IsCode(err, contract.CodeSessionEnded) {
		t.Fatalf("a heartbeat after the release: %v", err)
	}
	if _, err := client.Do(ctx, a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "not-alice"}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
		t.Fatalf("a foreign heartbeat after the release: %v", err)
	}
}
