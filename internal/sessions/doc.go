// Package sessions is the session broker (session-broker/v1, ADR 0045,
// 0047, 0063): admission against the operator's caps, the durable
// receipts and their export links, the keepers' heartbeats and idle
// windows, the release and the reset as the broker sees it, restart
// handoff and recovery, and the statistics over receipts.
//
// Its rules are pure functions (identity.go, receipt.go, prune.go,
// stats.go, refusal.go); Broker (broker*.go) runs them. A session is an
// ordinary core lease, so the Broker reaches the core's engine, the
// receipt store, the event bus and the daemon through small interfaces
// declared in deps.go, which the daemon satisfies when it builds the
// Broker (internal/daemon/sessions.go) and whose handler table calls the
// Broker's exported operations.
//
// It may import contract, config, core and core/events, dispatch, ports
// and requirements; never the daemon, a driver, a frontend, the store or
// the CLI (internal/arch's TestSessionsReachTheDaemonOnlyThroughTheirInterfaces).
package sessions
