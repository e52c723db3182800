// Package daemon is the wiring of one simlock home (ADR 0091): it opens the
// home's store and the host registry, builds the drivers, the engine and
// each reference system (internal/sessions, internal/slots,
// internal/claims, internal/resources, internal/uploads), serves the
// handler table over the socket and HTTP transports, and runs start,
// readiness and stop in their order. It holds no system's rules:
// internal/arch names the files it may hold and caps its size.
package daemon
