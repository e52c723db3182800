package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
)

// Record is one stored receipt with what the broker keeps beside it: the
// identity it answers, the owner token's digest, the principal that
// prepared it, and the daemon instance that admitted it (a crash is told
// from a handoff by it).
type Record struct {
	Identity    string `json:"identity"`
	OwnerDigest string `json:"ownerDigest"`
	// Abandoned marks a tombstone written by session.abandon: it answers
	// every configuration with the same owner and request id.
	Abandoned bool `json:"abandoned,omitempty"`
	// Instance is the daemon instance that owns the live session.
	Instance string `json:"instance,omitempty"`
	// HandedOff is set by a graceful stop: the next daemon adopts it.
	HandedOff bool `json:"handedOff,omitempty"`
	// Releasing is set when a plain release committed: the receipt reads
	// ready with cleanupPending until the reset settles, then released. A
	// crash in between ends it as an owner exit.
	Releasing bool                    `json:"releasing,omitempty"`
	Receipt   contract.SessionReceipt `json:"receipt"`
	// Principal is the caller that prepared the session: session.info,
	// which takes no owner token, answers only it (and admins). The store
	// keeps it in its own column, written once with the receipt; "" is a
	// receipt from before it was recorded.
	Principal string `json:"-"`
}

// Terminal reports whether a receipt status is final.
func Terminal(status string) bool {
	return status == contract.SessionFailed || status == contract.SessionReleased
}

// next lists the statuses a receipt may move to.
var next = map[string][]string{
	contract.SessionPending: {contract.SessionReady, contract.SessionFailed},
	contract.SessionReady:   {contract.SessionReleased, contract.SessionFailed},
}

// CanMove reports whether a receipt may go from one status to another;
// staying put is allowed (a cleanup flag or timing update).
func CanMove(from, to string) bool {
	if from == to {
		return true
	}
	for _, s := range next[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Move applies a status change, refusing one the state machine forbids:
// a terminal receipt is never rewritten into another outcome.
func Move(r *contract.SessionReceipt, to string, now time.Time) error {
	if !CanMove(r.Status, to) {
		return fmt.Errorf("sessions: a %s receipt cannot become %s", r.Status, to)
	}
	r.Status = to
	r.UpdatedAtMs = now.UnixMilli()
	return nil
}

// Fail ends a receipt with a typed failure (a no-op on a terminal one).
func Fail(r *contract.SessionReceipt, f contract.SessionFailure, now time.Time) bool {
	if Terminal(r.Status) {
		return false
	}
	_ = Move(r, contract.SessionFailed, now)
	r.Failure = &f
	if r.Timing != nil && r.Timing.Acquisition != nil && r.Timing.Acquisition.Outcome == contract.SessionPending {
		a := r.Timing.Acquisition
		a.Outcome = contract.SessionFailed
		ms := now.UnixMilli()
		a.CompletedAtMs = &ms
	}
	return true
}

// DecodeRecord reads a stored record back, refusing one that breaks the
// receipt's invariants rather than serving it.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("sessions: receipt: %w", err)
	}
	if len(r.Identity) != 64 || len(r.OwnerDigest) != 64 {
		return Record{}, fmt.Errorf("sessions: receipt without a full identity")
	}
	switch r.Receipt.Status {
	case contract.SessionPending, contract.SessionReady, contract.SessionFailed, contract.SessionReleased:
	default:
		return Record{}, fmt.Errorf("sessions: receipt status %q", r.Receipt.Status)
	}
	if r.Receipt.Status == contract.SessionFailed && r.Receipt.Failure == nil {
		return Record{}, fmt.Errorf("sessions: failed receipt without its failure")
	}
	return r, nil
}

// Encode is DecodeRecord's inverse.
func (r Record) Encode() ([]byte, error) { return json.Marshal(r) }

// Store errors the daemon maps onto contract codes.
var (
	// ErrExportMismatch: the export identity is linked differently already.
	ErrExportMismatch = errors.New("sessions: export identity linked to another request or digest")
	// ErrTerminal: a committed terminal receipt cannot be replaced.
	ErrTerminal = errors.New("sessions: the receipt is already terminal")
)

// Store is what the broker needs from durable storage (the daemon's
// database implements it, migration 8).
type Store interface {
	CommitSessionReceipt(ctx context.Context, r Record, exp *Export) (Record, bool, error)
	UpdateSessionReceipt(ctx context.Context, r Record) error
	SessionReceipt(ctx context.Context, identity string) (Record, bool, error)
	SessionReceiptByRequest(ctx context.Context, ownerDigest, requestID string) (Record, bool, error)
	SessionReceiptBySession(ctx context.Context, sessionID string) (Record, bool, error)
	// SessionReceiptsByRequestID is for an admin's lookup of an agent's
	// request by its token (ADR 0063); agents never call it.
	SessionReceiptsByRequestID(ctx context.Context, requestID string) ([]Record, error)
	OpenSessionReceipts(ctx context.Context) ([]Record, error)
	RecentSessionReceipts(ctx context.Context, since time.Time, limit int) ([]Record, bool, error)
	// Export links are scoped by the owner digest (store migration 10):
	// a prepare id names an export only within one owner's links.
	SessionExport(ctx context.Context, ownerDigest, prepareID string) (Export, bool, error)
	SessionExportLinked(ctx context.Context, prepareID string) (bool, error)
	AcknowledgeSessionExport(ctx context.Context, ownerDigest, prepareID string, at time.Time) error
	PruneSessionReceipts(ctx context.Context, now time.Time, retention, exportMaxAge time.Duration) (int, error)
}
