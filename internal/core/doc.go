// Package core is simlock's platform-independent domain: the device
// registry and its state machine, TTL leases, the FIFO wait queue, capacity
// and the acquisition planner, and the books of every feature built on
// them (ADR 0091).
//
// The Engine is a small centre: one decision section (ADR 0002), the
// registry (registry.go), the queue (queue.go), the planner call
// (planner.go, pure), the single writer that makes facts durable before
// anyone hears of them (writer.go, ADR 0044), and the one device-operation
// path (ops.go). Each feature's state and rules are a book in a file named
// for it (slotbook.go, hostbook.go, resetbook.go, golden.go, ...), run only
// inside the section; systems outside the core reach a book through its
// desk (Engine.Slots, Engine.Host, ...), and the daemon through the
// Engine's own entries.
//
// It may import the contract, core/events, internal/waitq and
// internal/ports, and nothing else of the module: time, processes, files
// and system statistics come through ports, devices through the Driver
// interface declared here, and no platform is named (a driver declares its
// Capabilities). internal/arch enforces each of these.
package core
