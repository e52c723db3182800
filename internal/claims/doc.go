// Package claims is the device-claims reference system and host capacity
// as one home sees it (ADRs 0022, 0023, 0059, 0061, 0064, 0065, 0078): the
// engine's operation hooks that claim a device before it is changed and
// clear the claim after its teardown, the lease ids written onto claims,
// the foreign-claims snapshot, the ownership invariant at startup and from
// the host watcher, the reclaim of other homes' proven orphans, host
// usage, host waiters and host admission of starts, the records a daemon
// leaves outside its databases, `simlock host repair`, and device.release.
//
// It builds on internal/hostreg, which stays the registry's storage and
// pure rules. It reaches the engine, the bus and the daemon's driver
// wiring through the interfaces and Config fields it declares (ports.go),
// so it may import the core, the contract, hostreg, config, the home store
// and ports, and never the daemon, a driver, a transport, the CLI, the
// session broker or the slot manager.
package claims
