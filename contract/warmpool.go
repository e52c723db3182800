package contract

// WarmPool is the warm pool in status.get: every target the daemon keeps
// ready devices for, and why (docs/user-guide.md, demand-aware warm pool).
type WarmPool struct {
	// Demand is true when targets follow recorded demand
	// (warmPool.demand.enabled); false: only the configured targets.
	Demand bool `json:"demand"`
	// WindowMs is how far back demand is remembered.
	WindowMs int64        `json:"windowMs,omitempty"`
	Targets  []WarmTarget `json:"targets"`
}

// WarmTarget is one spec's warm target.
type WarmTarget struct {
	// Spec names the spec for people, e.g. "iPhone 16 / iOS 26.3".
	Spec      string `json:"spec"`
	Platform  string `json:"platform"`
	Model     string `json:"model,omitempty"`
	OSVersion string `json:"osVersion,omitempty"`
	// Count is how many ready devices the target keeps now.
	Count int `json:"count"`
	// Reason is the term that sets Count: "configured" (the operator's
	// floor), "demand" (p90 of concurrency plus waiting, less leased) or
	// "spare" (one ready device beyond the leased ones).
	Reason string `json:"reason"`
	// Explanation is Reason in a sentence, as the CLI prints it.
	Explanation string `json:"explanation"`
	// Configured is the operator's floor (warmPool.targets), 0 for none.
	Configured int `json:"configured"`
	// DemandP90 is the p90 of concurrent demand (leases held plus requests
	// waiting) over the window.
	DemandP90 int `json:"demandP90"`
	// Leased and Waiting are the spec's leases held and requests waiting now.
	Leased  int `json:"leased"`
	Waiting int `json:"waiting"`
	// Ready counts the spec's ready devices now, with the pool's own
	// provisioning in flight.
	Ready int `json:"ready"`
}
