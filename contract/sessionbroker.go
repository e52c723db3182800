package contract

// Sessions (the session broker, contract session-broker/v1): a caller asks
// for a device by requirements instead of by model, gets a durable receipt
// it can read again after a crash, and releases the device with the reset
// the operator chose for the platform. A session is a lease underneath:
// its request carries the owner token and the request id, its device was
// chosen by resolving the requirement through the daemon's `sessions`
// defaults, and its release runs the session's reset.

// Contracts a daemon may serve, as capabilities.get lists them.
const (
	ContractSessionBroker       = "session-broker/v1"
	ContractSessionBrokerExport = "session-broker-export/v1"
	ContractManagedSlots        = "managed-slots/v1"
)

// Hardware requirement kinds.
const (
	HardwareArchetype = "archetype"
	HardwareModelType = "modelType"
	HardwareModel     = "model"
)

// Archetypes a hardware requirement or an operator classification names.
const (
	ArchetypePhone    = "phone"
	ArchetypeTablet   = "tablet"
	ArchetypeFoldable = "foldable"
)

// OS requirement kinds.
const (
	OSOmitted = "omitted"
	OSExact   = "exact"
	// OSAtLeast asks for the newest installed version at or above Version.
	OSAtLeast = "atLeast"
	// OSLatest asks for the newest installed version.
	OSLatest = "latest"
)

// DeviceRequirement is what a session asks for: a platform, optionally
// some hardware and an OS. What it leaves out, the operator's defaults for
// the platform fill in.
type DeviceRequirement struct {
	SchemaVersion int                  `json:"schemaVersion"`
	Platform      string               `json:"platform"`
	Hardware      *HardwareRequirement `json:"hardware,omitempty"`
	OS            *OSRequirement       `json:"os,omitempty"`
}

// HardwareRequirement names hardware at one of three levels: an archetype
// (phone, tablet, foldable), a model type (a family and a variant, such as
// iphone/pro), or one exact model (a namespace and a value, such as
// product-model/iPhone17,1 or avd-profile/pixel_9).
type HardwareRequirement struct {
	Kind      string         `json:"kind"`
	Archetype string         `json:"archetype,omitempty"`
	ModelType *ModelTypeRef  `json:"modelType,omitempty"`
	Model     *ModelIdentity `json:"model,omitempty"`
}

// ModelTypeRef is a hardware family and variant.
type ModelTypeRef struct {
	Family  string `json:"family"`
	Variant string `json:"variant,omitempty"`
}

// ModelIdentity names one model inside a namespace.
type ModelIdentity struct {
	Namespace string `json:"namespace"`
	Value     string `json:"value"`
}

// OSRequirement selects the OS: omitted (the operator's default), exact,
// atLeast or latest. Android versions are release versions ("16"), never
// API levels.
type OSRequirement struct {
	Kind    string `json:"kind"`
	Version string `json:"version,omitempty"`
}

// SessionProfile is what a requirement resolved to on this host: the
// model and OS the lease asks the core for, and how it got there. It is
// stored on the receipt.
type SessionProfile struct {
	Platform string `json:"platform"`
	// Archetype the hardware was classified as (phone, tablet, foldable).
	Archetype string        `json:"archetype,omitempty"`
	ModelType *ModelTypeRef `json:"modelType,omitempty"`
	// Model is the catalog model name the lease asks for (an iOS device
	// type name, an Android AVD hardware profile).
	Model string `json:"model"`
	// ModelIdentifier is the model's identity in its namespace
	// (product-model iPhone17,1; avd-profile pixel_9).
	ModelIdentifier *ModelIdentity `json:"modelIdentifier,omitempty"`
	OSVersion       string         `json:"osVersion"`
	// RuntimeID is the iOS runtime identifier or the Android system image
	// package path the OS resolved to.
	RuntimeID string `json:"runtimeId,omitempty"`
	// MemoryMB is an Android profile's RAM requirement (0: none).
	MemoryMB int `json:"memoryMb,omitempty"`
	// PolicyVersion is the operator defaults' policyVersion the
	// resolution used.
	PolicyVersion string `json:"policyVersion,omitempty"`
}

// SessionConfig is one execution attempt's request. The owner token plus
// the whole configuration (its canonical digest) is the operation's
// identity: the same pair is the same operation, forever.
type SessionConfig struct {
	ContractVersion int `json:"contractVersion"`
	// RequestID is new for every execution attempt.
	RequestID string            `json:"requestId"`
	Device    DeviceRequirement `json:"device"`
	// IdleTimeoutMs ends the session after this long without a call on
	// its device (0: the daemon's default).
	IdleTimeoutMs int64 `json:"idleTimeoutMs,omitempty"`
}

// SessionExport links a prepare to a caller's own export identity; an
// export the caller has not acknowledged pins its receipt past the normal
// retention (up to sessions.exportMaxAgeMs).
type SessionExport struct {
	PrepareID     string `json:"prepareId"`
	RequestDigest string `json:"requestDigest"`
}

type SessionPrepareIn struct {
	Config     SessionConfig  `json:"config"`
	OwnerToken string         `json:"ownerToken"`
	Export     *SessionExport `json:"export,omitempty"`
	// WaitMs bounds how long the call waits for the device before it
	// answers with the pending receipt (0: until ready or failed).
	WaitMs int64 `json:"waitMs,omitempty"`
}

// refineDecodeError answers a refused field inside config as the CLI and
// the MCP server answer it in a config file: SESSION_CONFIG_INVALID, with
// the path within the configuration.
func (*SessionPrepareIn) refineDecodeError(e *Error) *Error {
	return SessionConfigDecodeError(e, "config")
}

// Session receipt states.
const (
	SessionPending  = "pending"
	SessionReady    = "ready"
	SessionFailed   = "failed"
	SessionReleased = "released"
)

// SessionFailure is a receipt's typed refusal or ending.
type SessionFailure struct {
	Code         Code   `json:"code"`
	Message      string `json:"message"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMs *int64 `json:"retryAfterMs,omitempty"`
	// RetryRequires is "new_request_id" when a retry must come as a new
	// execution attempt.
	RetryRequires string `json:"retryRequires,omitempty"`
	NextAction    string `json:"nextAction,omitempty"`
}

// Acquisition admission kinds.
const (
	AdmissionReuse           = "reuse"
	AdmissionCreate          = "create"
	AdmissionEvictThenCreate = "evict-then-create"
	AdmissionWait            = "wait"
)

// SessionAcquisition is how a session's device was obtained. A phase that
// was not measured is absent, never zero; a reuse reports zero create and
// boot.
type SessionAcquisition struct {
	Admission       string `json:"admission"`
	Outcome         string `json:"outcome"` // pending, ready, failed
	ReuseCount      int    `json:"reuseCount"`
	StartedAtMs     int64  `json:"startedAtMs"`
	CompletedAtMs   *int64 `json:"completedAtMs,omitempty"`
	QueueMs         *int64 `json:"queueMs,omitempty"`
	AdmissionWaitMs *int64 `json:"admissionWaitMs,omitempty"`
	CreateMs        *int64 `json:"createMs,omitempty"`
	BootMs          *int64 `json:"bootMs,omitempty"`
	ReadyMs         *int64 `json:"readyMs,omitempty"`
	TotalMs         *int64 `json:"totalMs,omitempty"`
}

// Reset modes and outcomes of a session's release.
const (
	ResetDestroy    = "destroy"
	ResetErase      = "erase"
	ResetKeepBooted = "keep-booted"
	ResetSnapshot   = "snapshot"
	ResetWipeData   = "wipe-data"
	ResetNone       = "none"

	ResetOutcomeClean     = "clean"
	ResetOutcomeDestroyed = "destroyed"
	ResetOutcomePending   = "pending"
	// A clean fallback reads "fallback:<mode>".
	ResetOutcomeFallbackPrefix = "fallback:"
)

// SessionReset is what a session's release did to its device.
type SessionReset struct {
	Mode           string           `json:"mode"`
	Outcome        string           `json:"outcome"`
	Phases         map[string]int64 `json:"phases,omitempty"`
	FallbackReason string           `json:"fallbackReason,omitempty"`
	ReuseCount     int              `json:"reuseCount"`
	StartedAtMs    int64            `json:"startedAtMs"`
	CompletedAtMs  *int64           `json:"completedAtMs,omitempty"`
	TotalMs        *int64           `json:"totalMs,omitempty"`
}

// SessionTiming is a receipt's timing: the acquisition, and the reset once
// the session was released.
type SessionTiming struct {
	Acquisition *SessionAcquisition `json:"acquisition,omitempty"`
	Reset       *SessionReset       `json:"reset,omitempty"`
}

// SessionReceipt is the durable answer to one operation identity.
type SessionReceipt struct {
	ContractVersion int    `json:"contractVersion"`
	RequestID       string `json:"requestId"`
	// SessionID names the session once one was admitted.
	SessionID string          `json:"sessionId,omitempty"`
	Status    string          `json:"status"` // pending, ready, failed, released
	Failure   *SessionFailure `json:"failure,omitempty"`
	Profile   *SessionProfile `json:"profile,omitempty"`
	LeaseID   string          `json:"leaseId,omitempty"`
	Device    *Device         `json:"device,omitempty"`
	Timing    *SessionTiming  `json:"timing,omitempty"`
	// CleanupPending is true while the session's device teardown has not
	// been confirmed.
	CleanupPending bool   `json:"cleanupPending"`
	CreatedAtMs    int64  `json:"createdAtMs"`
	UpdatedAtMs    int64  `json:"updatedAtMs"`
	IdleTimeoutMs  int64  `json:"idleTimeoutMs,omitempty"`
	EndReason      string `json:"endReason,omitempty"`
}

type SessionStatusIn struct {
	RequestID  string `json:"requestId"`
	OwnerToken string `json:"ownerToken"`
}

type SessionAbandonIn struct {
	RequestID  string `json:"requestId"`
	OwnerToken string `json:"ownerToken"`
}

// Release answers.
const (
	ReleaseReleased       = "released"
	ReleaseCleanupPending = "cleanup_pending"
	ReleaseUnknownSession = "unknown_session"
)

type SessionReleaseIn struct {
	SessionID  string `json:"sessionId"`
	OwnerToken string `json:"ownerToken"`
	// Reason is "session_owner_exited" when a keeper reports its owner
	// gone; a client release leaves it empty.
	Reason string `json:"reason,omitempty"`
	// ReplyBudgetMs bounds the wait for cleanup (clamped to 0..30000).
	ReplyBudgetMs *int64 `json:"replyBudgetMs,omitempty"`
}

type SessionReleaseOut struct {
	Outcome string          `json:"outcome"` // released, cleanup_pending, unknown_session
	Receipt *SessionReceipt `json:"receipt,omitempty"`
}

// SessionHeartbeatIn is a keeper's proof that the session's owner lives.
type SessionHeartbeatIn struct {
	SessionID  string `json:"sessionId"`
	OwnerToken string `json:"ownerToken"`
}

type SessionHeartbeatOut struct {
	SessionID string `json:"sessionId"`
	// ExpiresAtMs is when the session ends without another heartbeat.
	ExpiresAtMs int64 `json:"expiresAtMs"`
}

type SessionInfoIn struct {
	SessionID string `json:"sessionId"`
}

// SessionInfoOut describes a session's device; descriptive only, it
// grants no control.
type SessionInfoOut struct {
	SessionID string          `json:"sessionId"`
	Status    string          `json:"status"`
	Profile   *SessionProfile `json:"profile,omitempty"`
	Device    *Device         `json:"device,omitempty"`
}

type SessionStatsIn struct {
	WindowMs int64 `json:"windowMs,omitempty"` // default 24 h, at most 30 d
	Limit    int   `json:"limit,omitempty"`    // default 5000, at most 10000
}

// PhaseStats summarises one phase over the sampled receipts.
type PhaseStats struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
}

// SessionStatsGroup is one platform and resolved profile.
type SessionStatsGroup struct {
	Platform     string                `json:"platform"`
	Profile      string                `json:"profile"`
	Acquisitions int                   `json:"acquisitions"`
	Resets       int                   `json:"resets"`
	ReuseHitRate float64               `json:"reuseHitRate"`
	FallbackRate float64               `json:"fallbackRate"`
	Retirements  int                   `json:"retirements"`
	Phases       map[string]PhaseStats `json:"phases"`
}

type SessionStatsOut struct {
	SinceMs   int64               `json:"sinceMs"`
	UntilMs   int64               `json:"untilMs"`
	Limit     int                 `json:"limit"`
	Truncated bool                `json:"truncated"`
	Groups    []SessionStatsGroup `json:"groups"`
}

type SessionExportIn struct {
	PrepareID     string `json:"prepareId"`
	RequestDigest string `json:"requestDigest"`
	OwnerToken    string `json:"ownerToken"`
}

type SessionExportOut struct {
	ContractVersion int            `json:"contractVersion"`
	PrepareID       string         `json:"prepareId"`
	RequestDigest   string         `json:"requestDigest"`
	Acknowledged    bool           `json:"acknowledged"`
	Result          SessionReceipt `json:"result"`
}

type SessionAcknowledgeOut struct {
	PrepareID string `json:"prepareId"`
	Outcome   string `json:"outcome"` // acknowledged, unknown_export
}

type CapabilitiesGetIn struct{}

// CapabilitiesGetOut lists the contracts this daemon serves; a launcher
// checks it before relying on one.
type CapabilitiesGetOut struct {
	Contracts []string `json:"contracts"`
}
