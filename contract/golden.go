package contract

import "time"

// Goldens is clone provisioning's state in status.get (ADR 0041, ADR
// 0053): the golden devices the daemon keeps, which never serve a lease
// but count against managed capacity, and the specs whose golden the
// engine refused to build. Absent when there is neither.
type Goldens struct {
	Devices []GoldenDevice `json:"devices,omitempty"`
	// NotBuilt lists the specs whose last golden build was refused; their
	// devices are created, not cloned, until it is built.
	NotBuilt []GoldenNotBuilt `json:"notBuilt,omitempty"`
}

// GoldenDevice is one golden and what it is doing now.
type GoldenDevice struct {
	Platform  string `json:"platform"`
	ModelID   string `json:"modelId"`
	RuntimeID string `json:"runtimeId"`
	// Handle is the golden's UDID; a build not yet recorded has a
	// "building:" placeholder.
	Handle string `json:"handle"`
	// State is "ready" (shut down, cloned from), "building" (being made;
	// counts as running while it boots beside the devices), "reclaiming"
	// (deleted to give its managed slot to a request) or "stuck" (its
	// removal failed; chosen again from retryAt on).
	State string `json:"state"`
	// RetryAt and Error are set for a stuck golden: when the planner may
	// try to remove it again, and why the last removal failed.
	RetryAt *time.Time `json:"retryAt,omitempty"`
	Error   string     `json:"error,omitempty"`
	// Worker is set by a gateway: the worker that keeps the golden.
	Worker string `json:"worker,omitempty"`
}

// GoldenNotBuilt is a spec whose golden build the engine refused.
type GoldenNotBuilt struct {
	Platform  string `json:"platform"`
	ModelID   string `json:"modelId"`
	RuntimeID string `json:"runtimeId"`
	// Reason is the gate's last answer, e.g. "a request is waiting for
	// capacity".
	Reason string `json:"reason"`
	// Retrying: the daemon has asked for the build again now that the
	// reason may have cleared, and has no answer yet.
	Retrying bool `json:"retrying,omitempty"`
	// Worker is set by a gateway: the worker that refused the build.
	Worker string `json:"worker,omitempty"`
}
