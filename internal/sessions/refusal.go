package sessions

import (
	"fmt"

	"github.com/simlock/simlock/contract"
)

// RetryNewRequest is the retryRequires of a stored failure that a retry
// could cure: the identity is spent, so the retry needs a new request id.
const RetryNewRequest = "new_request_id"

// CapRefusal is the stored failure of a prepare admission refused at a
// broker cap (SessionCapReached or DeviceCapReached). The error table's
// advice for CAPACITY_EXHAUSTED is about the host's running limit and
// --no-wait, neither of which a session caller has; this one names the
// cap that is full, paces the retry and says it needs a new request id.
func CapRefusal(r Refusal, l Limits, retryAfterMs int64) contract.SessionFailure {
	msg := fmt.Sprintf("the session broker already holds %d live sessions (sessions.limits.sessionCap is %d)", l.SessionCap, l.SessionCap)
	next := "release or abandon one of your sessions, or wait for one to end; then prepare again with a new request id after retryAfterMs"
	if r == DeviceCapReached {
		msg = fmt.Sprintf("every one of the session broker's %d devices is in use (sessions.limits.totalDeviceCap is %d)", l.TotalDeviceCap, l.TotalDeviceCap)
		next = "release or abandon a session so its device frees, then prepare again with a new request id after retryAfterMs"
	}
	ms := retryAfterMs
	return contract.SessionFailure{Code: contract.CodeCapacityExhausted, Message: msg, Retryable: true, RetryAfterMs: &ms,
		RetryRequires: RetryNewRequest, NextAction: next}
}

// StoppedFailure is the stored failure of an admitted preparation that a
// daemon stop interrupted. Its identity is spent (retryRequires
// new_request_id), so its advice says so, unlike the unstored stopping
// refusal of a prepare that arrives once the stop began, which is retried
// unchanged.
func StoppedFailure(retryAfterMs int64) contract.SessionFailure {
	ms := retryAfterMs
	return contract.SessionFailure{Code: contract.CodeSessionBrokerStopping, Message: "the daemon stopped during the preparation",
		Retryable: true, RetryAfterMs: &ms, RetryRequires: RetryNewRequest,
		NextAction: "prepare again with a new request id (this one is spent) against the restarted daemon after retryAfterMs"}
}
