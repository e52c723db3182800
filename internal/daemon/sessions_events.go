package daemon

import (
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// The broker's business facts on the daemon's event bus (docs/events.md):
// session.prepared once a receipt is ready, session.released once a
// session's end is committed (its teardown may still run), and
// session.ended once the teardown is confirmed or an admitted preparation
// failed. Each is published after the receipt that records it was
// written. The session's principal goes in data.ownerId, so an agent sees
// the events of its own sessions and no one else's.
const (
	evSessionPrepared = "session.prepared"
	evSessionReleased = "session.released"
	evSessionEnded    = "session.ended"
)

// emit publishes one session fact. owner is the session's principal when
// the caller knows it; otherwise it is read from the broker's memory of
// the session or from its lease.
func (b *broker) emit(typ, sid, owner, reason string, r *contract.SessionReceipt, extra map[string]any) {
	if owner == "" {
		b.mu.Lock()
		if s, ok := b.live[sid]; ok {
			owner = s.owner
		}
		b.mu.Unlock()
	}
	if owner == "" && r.LeaseID != "" {
		if l, ok := b.d.engine.Lease(r.LeaseID); ok {
			owner = l.OwnerID
		}
	}
	data := map[string]any{"sessionId": sid, "requestId": r.RequestID, "status": string(r.Status)}
	if owner != "" {
		data["ownerId"] = owner
	}
	if r.Failure != nil {
		data["code"] = string(r.Failure.Code)
	}
	for k, v := range extra {
		data[k] = v
	}
	e := events.Event{Type: typ, LeaseID: r.LeaseID, DeviceID: deviceOf(r), Reason: reason, Data: data}
	if r.Profile != nil {
		e.Platform = r.Profile.Platform
	}
	b.d.bus.Publish(e)
}
