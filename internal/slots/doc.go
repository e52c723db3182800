// Package slots owns managed slots (issue 12, ADR 0049): a CI runner
// declares scope, slot and device spec, and the daemon keeps a sticky
// slot-to-device assignment across executions, fenced by generations.
//
// Manager serves slot.acquire, slot.heartbeat, slot.release,
// slot.resetScope and slot.list, runs this daemon's executions, hands the
// engine the map that keeps slot devices out of its general pool, and
// guards the rest of the contract off those devices. Reconciler decides
// one slot's device (reuse, create, adopt, replace).
//
// The package reaches its neighbours only through the interfaces it
// declares (ports.go: Engine, HostRegistry; reconcile.go: Registry,
// Devices): *core.Engine and *hostreg.DB satisfy them as they stand, and
// internal/daemon only builds a Manager and routes the slot.* handlers to
// it. It imports the contract, the dispatcher (for the handlers' shape),
// the host registry and the core's record types; never the daemon, a
// driver, a transport or the CLI (internal/arch checks it).
package slots
