package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
)

// Receipt states, as a gateway stores them. The contract's request states
// (contract.RequestQueued, ...) are what clients read; a receipt adds
// "dispatched": sent to a worker, which has not answered yet.
const (
	ReceiptQueued     = contract.RequestQueued
	ReceiptDispatched = "dispatched"
	ReceiptGranted    = contract.RequestGranted
	ReceiptFailed     = contract.RequestFailed
	ReceiptCancelled  = contract.RequestCancelled
	ReceiptExpired    = contract.RequestExpired
)

// Receipt is one lease request a gateway accepted, as its store keeps it
// (ADR 0101). Everything a restarted gateway needs to put the request
// back in the fleet queue, or to answer a repeat of it, is here.
type Receipt struct {
	ID  string // greq_<hex>
	Seq uint64 // admission order: the fleet queue's order
	// Requester and Owner are client-side (not namespaced).
	Requester string
	Owner     string
	Key       string // idempotency key; empty for none
	// Fingerprint is of the request body, to tell a repeat from a
	// different request under the same key.
	Fingerprint string
	In          contract.LeaseRequestIn // the request, TTL resolved
	State       string                  // one of the Receipt* states
	// Worker and Attempt name the routing attempt under way (dispatched):
	// the worker and the number the forwarded idempotency key carries.
	// AttemptAt is when it was sent.
	Worker    string
	Attempt   int
	AttemptAt time.Time
	// Lease is the granted lease in the gateway's form (granted only).
	Lease *contract.Lease
	// Error is the refusal of a failed, cancelled or expired request.
	Error *contract.Error
	// Interrupted: the outcome reached no caller, so a repeat with the
	// same key admits the request again instead of replaying it.
	Interrupted bool
	Deadline    time.Time // zero: waits without a timeout
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Open reports whether the request still waits for an outcome.
func (r Receipt) Open() bool { return r.State == ReceiptQueued || r.State == ReceiptDispatched }

// ErrDuplicateKey is what PutReceipt returns when another receipt already
// holds the same (requester, key).
var ErrDuplicateKey = errors.New("gateway store: another request holds this requester and idempotency key")

// Store is the gateway's durable state (ADR 0101): the requests it accepted
// and the drained set. Worker views and the lease index are not in it;
// they are rebuilt from the workers. Implementations: the home's SQLite
// store (internal/store) and PostgreSQL. Every method is safe for
// concurrent use; each write is durable when it returns.
type Store interface {
	// PutReceipt inserts or replaces a receipt by id.
	PutReceipt(ctx context.Context, r Receipt) error
	// DeleteReceipt removes a receipt (a keyless one, once settled).
	DeleteReceipt(ctx context.Context, id string) error
	// Receipt reads one receipt by id.
	Receipt(ctx context.Context, id string) (Receipt, bool, error)
	// ReceiptByKey reads the receipt a requester's idempotency key names.
	ReceiptByKey(ctx context.Context, requester, key string) (Receipt, bool, error)
	// OpenReceipts lists the queued and dispatched receipts by Seq.
	OpenReceipts(ctx context.Context) ([]Receipt, error)
	// MaxSeq is the highest Seq ever stored (0 for none), so a restarted
	// gateway numbers new requests after every stored one.
	MaxSeq(ctx context.Context) (uint64, error)
	// PruneReceipts deletes settled receipts updated before cutoff, and
	// then the oldest settled ones beyond keep; it returns how many went.
	PruneReceipts(ctx context.Context, cutoff time.Time, keep int) (int, error)
	// Drained reads the drained set (worker id → label).
	Drained(ctx context.Context) (map[string]string, error)
	// SetDrained adds a worker to the drained set or removes it.
	SetDrained(ctx context.Context, id, label string, drained bool) error
}

// ReceiptJSON is the part of a receipt both stores keep as JSON text:
// the request body, and the lease and refusal (nil: SQL NULL).
type ReceiptJSON struct {
	Body         string
	Lease, Error *string
}

// EncodeJSON is r's JSON columns.
func (r Receipt) EncodeJSON() (ReceiptJSON, error) {
	body, err := json.Marshal(r.In)
	if err != nil {
		return ReceiptJSON{}, fmt.Errorf("receipt %s: body: %w", r.ID, err)
	}
	j := ReceiptJSON{Body: string(body)}
	if j.Lease, err = jsonOrNil(r.Lease); err != nil {
		return ReceiptJSON{}, fmt.Errorf("receipt %s: lease: %w", r.ID, err)
	}
	if j.Error, err = jsonOrNil(r.Error); err != nil {
		return ReceiptJSON{}, fmt.Errorf("receipt %s: error: %w", r.ID, err)
	}
	return j, nil
}

// DecodeInto fills r's body, lease and refusal from j.
func (j ReceiptJSON) DecodeInto(r *Receipt) error {
	if err := json.Unmarshal([]byte(j.Body), &r.In); err != nil {
		return fmt.Errorf("receipt %s: body: %w", r.ID, err)
	}
	r.Lease, r.Error = nil, nil
	if j.Lease != nil {
		r.Lease = new(contract.Lease)
		if err := json.Unmarshal([]byte(*j.Lease), r.Lease); err != nil {
			return fmt.Errorf("receipt %s: lease: %w", r.ID, err)
		}
	}
	if j.Error != nil {
		r.Error = new(contract.Error)
		if err := json.Unmarshal([]byte(*j.Error), r.Error); err != nil {
			return fmt.Errorf("receipt %s: error: %w", r.ID, err)
		}
	}
	return nil
}

func jsonOrNil[T any](v *T) (*string, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}
