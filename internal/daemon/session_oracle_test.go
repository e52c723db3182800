package daemon

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// wireOf is what a caller reads back from a call: the error's JSON, or
// the answer's when the call succeeded.
func wireOf[T any](t *testing.T, out T, err error) string {
	t.Helper()
	var v any = out
	if err != nil {
		ce := contract.AsError(err)
		if ce == nil {
			t.Fatalf("not a contract error: %v", err)
		}
		v = ce
	}
	b, jerr := json.Marshal(v)
	if jerr != nil {
		t.Fatal(jerr)
	}
	return string(b)
}

// sameAnswer fails unless naming alice's id and naming an id that never
// existed read byte for byte alike, and the answer is the one expected.
func sameAnswer(t *testing.T, what, theirs, never, want string) {
	t.Helper()
	if theirs != never {
		t.Errorf("%s: another owner's id answers %s, an unknown id %s: they must read alike", what, theirs, never)
	}
	if theirs != want {
		t.Errorf("%s answers %s, want %s", what, theirs, want)
	}
}

// An agent that is not a session's owner cannot tell it from an id that
// never existed: session.info, heartbeat, release, getExport and
// acknowledgeExport answer mallory alike, byte for byte, for alice's live
// session, for it once ended, and for a random id; none of them changes
// alice's session. An admin is still told which is which.
func TestSessionCallsTellANonOwnerNothingOfAnotherOwnersSession(t *testing.T) {
	f := sessionDaemon(t, nil)
	ctx := context.Background()
	a, m, admin := f.dial("alice", ""), f.dial("mallory", ""), f.dial("ops", f.adminToken())
	r, err := client.Do(ctx, a, contract.SessionPrepare, contract.SessionPrepareIn{Config: sessionConfig("run"), OwnerToken: "owner-a",
		Export: &contract.SessionExport{PrepareID: "p-alice", RequestDigest: "d-alice"}})
	if err != nil || r.Status != contract.SessionReady {
		t.Fatalf("prepare %+v %v", r, err)
	}
	never := uuid.NewString()
	mismatch := `{"code":"SESSION_OWNER_MISMATCH","message":"no such session under this owner","retryable":false,"nextAction":"check the session id, then use the owner token (or, for session.info, the principal) it was prepared with"}`
	unknownRelease := `{"outcome":"unknown_session"}`
	noExport := `{"code":"SESSION_EXPORT_NOT_FOUND","message":"no such session export under this owner token","retryable":false,"nextAction":"the export was never linked, or was acknowledged and pruned"}`

	probe := func(phase string) {
		t.Helper()
		info := func(sid string) string {
			out, err := client.Do(ctx, m, contract.SessionInfo, contract.SessionInfoIn{SessionID: sid})
			return wireOf(t, out, err)
		}
		sameAnswer(t, phase+" info", info(r.SessionID), info(never), mismatch)
		beat := func(sid string) string {
			out, err := client.Do(ctx, m, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: sid, OwnerToken: "owner-m"})
			return wireOf(t, out, err)
		}
		sameAnswer(t, phase+" heartbeat", beat(r.SessionID), beat(never), mismatch)
		rel := func(sid string) string {
			out, err := client.Do(ctx, m, contract.SessionRelease, contract.SessionReleaseIn{SessionID: sid, OwnerToken: "owner-m"})
			return wireOf(t, out, err)
		}
		sameAnswer(t, phase+" release", rel(r.SessionID), rel(never), unknownRelease)
		get := func(id, digest string) string {
			out, err := client.Do(ctx, m, contract.SessionGetExport, contract.SessionExportIn{PrepareID: id, RequestDigest: digest, OwnerToken: "owner-m"})
			return wireOf(t, out, err)
		}
		sameAnswer(t, phase+" getExport", get("p-alice", "d-alice"), get("p-never", "d-alice"), noExport)
		// A wrong digest is the owner's to learn of, not mallory's.
		sameAnswer(t, phase+" getExport with another digest", get("p-alice", "d-other"), get("p-never", "d-other"), noExport)
		ack := func(id string) string {
			out, err := client.Do(ctx, m, contract.SessionAcknowledgeExport, contract.SessionExportIn{PrepareID: id, RequestDigest: "d-alice", OwnerToken: "owner-m"})
			// The answer echoes the caller's own id; the rest must match.
			if out.PrepareID != id {
				t.Errorf("acknowledgeExport of %s echoes %q", id, out.PrepareID)
			}
			out.PrepareID = "ID"
			return wireOf(t, out, err)
		}
		sameAnswer(t, phase+" acknowledgeExport", ack("p-alice"), ack("p-never"), `{"prepareId":"ID","outcome":"unknown_export"}`)
	}

	probe("live")
	st, err := client.Do(ctx, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "run", OwnerToken: "owner-a"})
	if err != nil || st.Status != contract.SessionReady || st.CleanupPending || st.UpdatedAtMs != r.UpdatedAtMs {
		t.Fatalf("alice's receipt after mallory's probes %+v %v", st, err)
	}
	if ex, err := client.Do(ctx, a, contract.SessionGetExport, contract.SessionExportIn{PrepareID: "p-alice", RequestDigest: "d-alice", OwnerToken: "owner-a"}); err != nil || ex.Acknowledged {
		t.Fatalf("alice's export after mallory's acknowledge %+v %v", ex, err)
	}
	// The owner is still told a wrong digest.
	if _, err := client.Do(ctx, a, contract.SessionGetExport, contract.SessionExportIn{PrepareID: "p-alice", RequestDigest: "d-other", OwnerToken: "owner-a"}); !client.IsCode(err, contract.CodeSessionExportMismatch) {
		t.Fatalf("alice's getExport with another digest: %v", err)
	}

	// An admin is told an unknown id from another token's session.
	if _, err := client.Do(ctx, admin, contract.SessionInfo, contract.SessionInfoIn{SessionID: never}); !client.IsCode(err, contract.CodeSessionEnded) {
		t.Errorf("an admin's session.info of an unknown id: %v", err)
	}
	if _, err := client.Do(ctx, admin, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: never, OwnerToken: "x"}); !client.IsCode(err, contract.CodeSessionEnded) {
		t.Errorf("an admin's heartbeat of an unknown id: %v", err)
	}
	if _, err := client.Do(ctx, admin, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "x"}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
		t.Errorf("an admin's heartbeat under another token: %v", err)
	}
	if _, err := client.Do(ctx, admin, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "x"}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
		t.Errorf("an admin's release under another token: %v", err)
	}
	if _, err := client.Do(ctx, admin, contract.SessionGetExport, contract.SessionExportIn{PrepareID: "p-alice", RequestDigest: "d-alice", OwnerToken: "x"}); !client.IsCode(err, contract.CodeSessionOwnerMismatch) {
		t.Errorf("an admin's getExport under another token: %v", err)
	}

	out, err := client.Do(ctx, a, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "owner-a"})
	if err != nil || out.Outcome != contract.ReleaseReleased {
		t.Fatalf("alice's release %+v %v", out, err)
	}
	probe("ended")
	// Alice still reads her own ended session, by principal and by token.
	if in, err := client.Do(ctx, a, contract.SessionInfo, contract.SessionInfoIn{SessionID: r.SessionID}); err != nil || in.Status != contract.SessionReleased {
		t.Fatalf("alice's session.info after the release %+v %v", in, err)
	}
	if _, err := client.Do(ctx, a, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "owner-a"}); !client.IsCode(err, contract.CodeSessionEnded) {
		t.Fatalf("alice's heartbeat after the release: %v", err)
	}
}
