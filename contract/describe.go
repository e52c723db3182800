package contract

// The canonical device description (docs/protocol.md, "Device"): static
// facts sit at the top level of Device and live state under Runtime. A
// fact nobody could state is an explicit JSON null, never an omitted key
// and never a guess, so the pointer fields below carry no omitempty.

// Form factors a Device may state.
const (
	FormFactorPhone    = "phone"
	FormFactorTablet   = "tablet"
	FormFactorFoldable = "foldable"
	FormFactorUnknown  = "unknown"
)

// DeviceDisplay is the device's configured screen. Android states a
// density (dpi); iOS a scale factor. The one a platform does not use is
// null.
type DeviceDisplay struct {
	WidthPx  *int     `json:"widthPx"`
	HeightPx *int     `json:"heightPx"`
	Density  *int     `json:"density"`
	Scale    *float64 `json:"scale"`
}

// AndroidImage is where an Android device's system comes from: the system
// image directory the AVD boots (path), its API target ("android-35") and
// the SDK package it was created from (basedOn).
type AndroidImage struct {
	Path    *string `json:"path"`
	Target  *string `json:"target"`
	BasedOn *string `json:"basedOn"`
}

// Orientations a DeviceRuntime may state: the shape the screen has now,
// after its current rotation (portrait: taller than wide).
const (
	OrientationPortrait  = "portrait"
	OrientationLandscape = "landscape"
)

// Readiness values of DeviceRuntime: what the driver's own listing last
// showed of the device process.
const (
	ReadinessRunning       = "running"
	ReadinessStopped       = "stopped"
	ReadinessTransitioning = "transitioning"
)

// DeviceRuntime is a device's live state.
type DeviceRuntime struct {
	// Lifecycle is the registry state (ready, leased, reclaiming, ...).
	Lifecycle string `json:"lifecycle"`
	// Readiness is the device process as the driver's listing observed it
	// (running, stopped, transitioning); null when the observation did not
	// finish within the read's budget (see Enrichment).
	Readiness *string `json:"readiness"`
	// Lease is the id of the lease holding the device, null when idle.
	Lease *string `json:"lease"`
	// Locked says whether the keyguard (lock screen) is showing, and
	// Orientation is portrait or landscape, as the driver's live probe read
	// them (Android: dumpsys window, docs/adr/0090). Null where the probe
	// could not tell, did not finish in time, or the platform has no safe
	// way to read them (iOS).
	Locked      *bool   `json:"locked"`
	Orientation *string `json:"orientation"`
	// ServiceStatus is present only when a driver observed it.
	ServiceStatus map[string]string `json:"serviceStatus,omitempty"`
}

// LeaseID is the id of the lease holding the device, "" when idle.
func (r DeviceRuntime) LeaseID() string {
	if r.Lease == nil {
		return ""
	}
	return *r.Lease
}

// Enrichment reports what an inventory read could not finish within its
// budget. Complete is true when nothing is missing; otherwise Pending names
// the stages a shared background fetch is still running (retry after
// RetryAfterMs to get them without new processes) and Missing those that
// failed or were superseded. Code is "timeout", "failed" or "superseded".
type Enrichment struct {
	Complete     bool     `json:"complete"`
	Pending      []string `json:"pending,omitempty"`
	Missing      []string `json:"missing,omitempty"`
	Retryable    bool     `json:"retryable,omitempty"`
	RetryAfterMs int64    `json:"retryAfterMs,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	Code         string   `json:"code,omitempty"`
}

// Enrichment codes.
const (
	EnrichmentTimeout    = "timeout"
	EnrichmentFailed     = "failed"
	EnrichmentSuperseded = "superseded"
)
