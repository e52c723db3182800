package sessions

import (
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
	EvSessionPrepared = "session.prepared"
	EvSessionReleased = "session.released"
	EvSessionEnded    = "session.ended"
)

// emit publishes one session fact of rec, whose principal (principalOf)
// goes in data.ownerId.
func (b *Broker) emit(typ string, rec Record, reason string, extra map[string]any) {
	r := &rec.Receipt
	sid := r.SessionID
	owner := b.principalOf(rec)
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
	b.bus.Publish(e)
}
