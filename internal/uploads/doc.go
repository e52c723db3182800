// Package uploads owns device.upload's per-lease scratch directories
// (ADR 0034): <home>/uploads/<leaseId>, the chunks of each file received
// in order under the cap (upload.maxBytes) and the disk guard, committed
// in one rename, the directory removed when its lease ends and swept at
// startup for leases that did not survive, and the {upload:NAME}
// substitution device.exec applies to its arguments.
//
// It reaches the engine's lease book through the interface it declares
// (Leases), which *core.Engine satisfies as it stands; the daemon builds a
// Store and routes device.upload to it. It may import the contract, the
// core's types and the dispatcher (for the handler's shape); never the
// daemon, a driver, a transport, the CLI, the session broker, the slot
// manager or the claims system (internal/arch checks it).
package uploads
