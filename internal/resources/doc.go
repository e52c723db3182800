// Package resources is the device-resources system as a home serves it:
// the one projection of a registry record onto contract.Device (Describe,
// ADR 0039), the inventory (Inventory: each platform's device listing and
// catalog as one shared read under the inventory.* budgets, the live facts
// of running devices (ADR 0090), and the enrichment an incomplete read
// answers with; list.get and catalog.get), and the resources.* operations
// on a lease's device (Tuning: resources.get/set/reconcile; and
// CheckLeaseTuning, which lease.request applies before it stores or queues
// a request).
//
// It reaches the engine through the interfaces it declares (ports.go:
// Engine, Leases, which *core.Engine satisfies as it stands, and Path,
// its resource desk core.ResourceDesk); the daemon
// builds it and routes the handlers to it. It may import the contract, the
// core's types, config, ports, the dispatcher (for the handlers' shape) and
// the shared listing (internal/drivers/listcache); never the daemon, a
// concrete driver, a transport, the CLI, the session broker, the slot
// manager or the claims system (internal/arch checks it).
package resources
