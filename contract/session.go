package contract

// Session is who is calling, as a frontend established it: over the socket
// from hello, over HTTP from the bearer token.
type Session struct {
	// Principal is the caller's identity for ownership checks.
	Principal string
	Role      Role
	// Compatible is false when hello failed on the protocol range; such a
	// session may still run daemon.stop, the frozen upgrade path.
	Compatible bool
}

// Notification methods pushed to a connection, tied to a request id.
const (
	NotifyProgress = "progress"
	NotifyEvent    = "event"
	// NotifyGap carries an EventsGap to a follower of events.subscribe.
	NotifyGap = "gap"
)
