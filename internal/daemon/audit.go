package daemon

import (
	"log/slog"

	"github.com/simlock/simlock/internal/core/events"
)

// auditLine writes the durable record of one lease-changing fact to
// daemon.log: every grant, renewal that changes the lease's width,
// release (with its reason), expiry, eviction and quarantine. Each line
// names lease, requester, owner and device (empty when the fact has none,
// so every line has the same keys). It is driven by the recorder's bus
// observer, not by log calls in the core: the facts are what happened, in
// commit order, and nothing in a decision waits for the log.
func auditLine(log *slog.Logger, e events.Event) {
	var extra []any
	switch e.Type {
	case "lease.granted":
		extra = append(extra, "ttlMs", e.Data["ttlMs"])
		if t, ok := e.Data["timing"].(map[string]any); ok {
			extra = append(extra, "path", t["path"], "totalMs", t["totalMs"])
		}
	case "lease.renewed":
		prev, ok := e.Data["previousTtlMs"]
		if !ok {
			return // a plain keep-alive: not worth a line every TTL/3
		}
		extra = append(extra, "ttlMs", e.Data["ttlMs"], "previousTtlMs", prev, "expiresAt", e.Data["expiresAt"])
	case "lease.released", "lease.expired", "device.evicted":
	case "claim.lost":
		extra = append(extra, "deviceKey", e.Data["deviceKey"])
	case "claim.reclaimed":
		// Another home's dead owner's claim, reclaimed by this daemon.
		extra = append(extra, "deviceKey", e.Data["deviceKey"], "ownerHome", e.Data["ownerHome"], "ownerPid", e.Data["ownerPid"],
			"action", e.Data["action"])
	case "device.destroyed":
		if e.Reason != "evicted" {
			return
		}
	case "device.quarantined":
		extra = append(extra, "op", e.Data["op"])
	default:
		return
	}
	owner, _ := e.Data["ownerId"].(string)
	args := []any{"event", e.Type, "seq", e.Seq, "lease", e.LeaseID, "requester", e.RequesterID, "owner", owner,
		"device", e.DeviceID, "platform", e.Platform}
	if e.Reason != "" {
		args = append(args, "reason", e.Reason)
	}
	if w, ok := e.Data["workerId"].(string); ok {
		args = append(args, "worker", w)
	}
	log.Info("audit", append(args, extra...)...)
}
