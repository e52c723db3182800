package client

import (
	"context"
	"time"

	"github.com/simlock/simlock/contract"
)

// KeepClock is the time a session keeper waits by; the system clock when
// KeepSessionOptions.Clock is nil. Tests pass a fake one.
type KeepClock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Heartbeat pacing, shared by every keeper.
const (
	// keepRetry is the wait after a failed heartbeat: short, because a
	// restarted daemon gives a handed-off session only a grace to be
	// found again.
	keepRetry = 500 * time.Millisecond
	// keepMinEvery bounds how fast a keeper heartbeats when the daemon
	// answers with a deadline that is near or already past.
	keepMinEvery = 100 * time.Millisecond
)

// KeepSessionOptions says which session a keeper holds and how it reaches
// the daemon.
type KeepSessionOptions struct {
	SessionID  string
	OwnerToken string
	// Conn returns the client the next heartbeat goes over. The keeper
	// never dials or closes a client itself: the caller decides whether a
	// lost connection is dialled again and whether that may start a
	// daemon. An error counts as a failed heartbeat.
	Conn func(ctx context.Context) (*Client, error)
	// OnRetry, when set, hears about each failed heartbeat that will be
	// tried again (a caller may log it, or dial a new client for Conn).
	OnRetry func(ctx context.Context, err error)
	// GiveUpAfter ends the keeper once heartbeats have failed for this
	// long without a success; zero keeps trying until ctx ends.
	GiveUpAfter time.Duration
	// Clock paces the heartbeats; nil is the system clock.
	Clock KeepClock
}

// SessionGone reports whether a heartbeat's error means the session can
// never be kept again, so a keeper stops instead of retrying: the session
// ended (SESSION_ENDED), the token is not its owner's
// (SESSION_OWNER_MISMATCH), or the daemon serves no sessions at all
// (SESSIONS_NOT_CONFIGURED, which no retry can change).
func SessionGone(err error) bool {
	return IsCode(err, contract.CodeSessionEnded) || IsCode(err, contract.CodeSessionOwnerMismatch) ||
		IsCode(err, contract.CodeSessionsNotConfigured)
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// KeepSession is the keeper loop of a broker session (`simlock session
// hold`, `simlock mcp --session-config`): it sends session.heartbeat at a
// third of the deadline each answer gives, and half a second after a
// failure. It returns nil when ctx ends, leaving the session live for the
// caller to release; the heartbeat's error when the session is gone
// (SessionGone); or the last error once heartbeats failed for
// GiveUpAfter.
func KeepSession(ctx context.Context, o KeepSessionOptions) error {
	clock := o.Clock
	if clock == nil {
		clock = systemClock{}
	}
	// The first heartbeat goes at once: the keeper cannot know how much of
	// the deadline the answer that made the session ready already spent.
	var wait time.Duration
	var failingSince time.Time
	for {
		if wait > 0 {
			select {
			case <-clock.After(wait):
			case <-ctx.Done():
				return nil
			}
		} else if ctx.Err() != nil {
			return nil
		}
		c, err := o.Conn(ctx)
		if err == nil {
			var hb contract.SessionHeartbeatOut
			hb, err = c.SessionHeartbeat(ctx, contract.SessionHeartbeatIn{SessionID: o.SessionID, OwnerToken: o.OwnerToken})
			if err == nil {
				failingSince = time.Time{}
				wait = max(time.UnixMilli(hb.ExpiresAtMs).Sub(clock.Now())/3, keepMinEvery)
				continue
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil // the caller stopped us mid-call; its error is not the session's
		case SessionGone(err):
			return err
		}
		if failingSince.IsZero() {
			failingSince = clock.Now()
		}
		if o.GiveUpAfter > 0 && clock.Now().Sub(failingSince) > o.GiveUpAfter {
			return err
		}
		if o.OnRetry != nil {
			o.OnRetry(ctx, err)
		}
		wait = keepRetry
	}
}
