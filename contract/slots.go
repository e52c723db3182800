package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Managed slots (contract managed-slots/v1): a CI runner declares "I am
// slot N of scope S, and I want this spec", and simlock keeps one device
// assigned to that scoped slot across executions. The assignment lives in
// the host registry, so every daemon on the machine sees it; it takes the
// device out of the general pool even while idle. Each execution is a
// fresh lease on the slot's device.

// SlotLaunchConfig is the trusted launch configuration of one execution
// (`simlock mcp --slot-config`). Parsing is strict; contractVersion is
// checked before any other field.
type SlotLaunchConfig struct {
	ContractVersion   int    `json:"contractVersion"`
	ManagedHostScope  string `json:"managedHostScope"`
	RunnerNamespace   string `json:"runnerNamespace"`
	RunnerIncarnation string `json:"runnerIncarnation"`
	// ExecutionAttempt is correlation only, never authorization.
	ExecutionAttempt  string        `json:"executionAttempt,omitempty"`
	LocalSlotCapacity int           `json:"localSlotCapacity"`
	Requests          []SlotRequest `json:"requests"`
	// PreparationTimeoutMs bounds the whole acquisition.
	PreparationTimeoutMs int64 `json:"preparationTimeoutMs,omitempty"`
	// IdleTimeoutMs is the execution's idle window, 120000..3600000
	// (refused, not clamped, outside it); default 120000.
	IdleTimeoutMs int64 `json:"idleTimeoutMs,omitempty"`
	// ExecutionOwnerPid is the process whose exit ends the execution
	// (default: the launching parent). It must name a running process.
	ExecutionOwnerPid int `json:"executionOwnerPid,omitempty"`
}

// SlotRequest is one slot of a launch configuration.
type SlotRequest struct {
	SlotIndex     int      `json:"slotIndex"`
	Role          string   `json:"role"`
	Platform      string   `json:"platform"`
	RequestedSpec SlotSpec `json:"requestedSpec"`
	// PriorDeviceHint is tried first and never trusted.
	PriorDeviceHint *SlotDeviceHint `json:"priorDeviceHint,omitempty"`
}

// SlotSpec is a slot's requested (or resolved) device. Per platform only
// some keys are allowed: iOS runtime, deviceType, displayCutout; Android
// runtime (a system image package path), deviceType (an AVD hardware
// profile), displayCutout, configuration. An omitted field is
// unconstrained when matching an assigned device.
type SlotSpec struct {
	Runtime       string            `json:"runtime,omitempty"`
	DeviceType    string            `json:"deviceType,omitempty"`
	DisplayCutout string            `json:"displayCutout,omitempty"`
	Configuration map[string]string `json:"configuration,omitempty"`
}

// SlotDeviceHint is a prior assignment's stable id.
type SlotDeviceHint struct {
	StableID string `json:"stableId"`
}

// Slot dispositions.
const (
	SlotCreated  = "created"
	SlotReused   = "reused"
	SlotAdopted  = "adopted"
	SlotReplaced = "replaced"
)

// Slot acquisition outcomes.
const (
	SlotOutcomeReady  = "ready"
	SlotOutcomeFailed = "failed"
)

// SlotPhaseScopeResolved is the progress phase slot.acquire pushes, with
// the scope key, once the daemon admitted the scope. From then on every
// failure of the acquisition names the key, including one its caller
// decides itself (its deadline passed, or the connection was lost).
const SlotPhaseScopeResolved = "scope-resolved"

// SlotScope identifies the runner scope an execution belongs to.
type SlotScope struct {
	ManagedHostScope  string `json:"managedHostScope"`
	RunnerNamespace   string `json:"runnerNamespace"`
	RunnerIncarnation string `json:"runnerIncarnation"`
	// ScopeKey is the SHA-256 hex of the three parts (null when the
	// acquisition failed before the scope resolved).
	ScopeKey *string `json:"scopeKey"`
	// Revived is true when an abandoned scope came back with its
	// incarnation.
	Revived bool `json:"revived,omitempty"`
}

// SlotDevice names a slot's device.
type SlotDevice struct {
	// StableID is the UDID or AVD name; it survives reboots.
	StableID string `json:"stableId"`
	// TransportID is what tools address (a UDID, an adb serial).
	TransportID string `json:"transportId,omitempty"`
	Name        string `json:"name"`
	// DeviceID is this daemon's device id.
	DeviceID string `json:"deviceId,omitempty"`
}

// SpecFingerprint identifies a requested spec.
type SpecFingerprint struct {
	Version int    `json:"version"`
	Hash    string `json:"hash"`
}

// SlotFailure is a typed failure of a slot or of the whole acquisition.
type SlotFailure struct {
	Code         Code           `json:"code"`
	Retryable    bool           `json:"retryable"`
	Message      string         `json:"message"`
	NextAction   string         `json:"nextAction,omitempty"`
	RetryAfterMs *int64         `json:"retryAfterMs,omitempty"`
	Details      map[string]any `json:"details,omitempty"`
}

// SlotDecision is one step of the reconciler's decision trail.
type SlotDecision struct {
	Step   string `json:"step"`
	Detail string `json:"detail,omitempty"`
	AtMs   int64  `json:"atMs"`
}

// SlotExecutionEnded is set on a slot (in the managed-slots resource) once
// its execution's lease ended for good.
type SlotExecutionEnded struct {
	Reason     string `json:"reason"`
	Idle       bool   `json:"idle,omitempty"`
	NextAction string `json:"nextAction"` // relaunch_execution
}

// SlotResult is one slot's acquisition evidence.
type SlotResult struct {
	SlotIndex            int         `json:"slotIndex"`
	Role                 string      `json:"role"`
	Platform             string      `json:"platform"`
	AssignmentGeneration int64       `json:"assignmentGeneration"`
	Device               *SlotDevice `json:"device,omitempty"`
	LeaseID              string      `json:"leaseId,omitempty"`
	// RequesterID is the execution lease's requester, which device.exec on
	// the lease must name.
	RequesterID     string              `json:"requesterId,omitempty"`
	RequestedSpec   SlotSpec            `json:"requestedSpec"`
	ResolvedSpec    *SlotSpec           `json:"resolvedSpec,omitempty"`
	SpecFingerprint *SpecFingerprint    `json:"specFingerprint,omitempty"`
	Disposition     string              `json:"disposition,omitempty"`
	Readiness       string              `json:"readiness,omitempty"`
	Decisions       []SlotDecision      `json:"decisions,omitempty"`
	Failure         *SlotFailure        `json:"failure,omitempty"`
	ExecutionEnded  *SlotExecutionEnded `json:"executionEnded,omitempty"`
}

// ManagedSlotsResult is the acquisition result: the initialize capability
// experimental["simlock/managedSlots"] and the MCP resource
// simlock://managed-slots carry it.
type ManagedSlotsResult struct {
	ContractVersion int          `json:"contractVersion"`
	Scope           SlotScope    `json:"scope"`
	Outcome         string       `json:"outcome"` // ready, failed
	IdleTimeoutMs   int64        `json:"idleTimeoutMs"`
	Slots           []SlotResult `json:"slots"`
	Failure         *SlotFailure `json:"failure,omitempty"`
}

type SlotAcquireIn struct {
	Config SlotLaunchConfig `json:"config"`
	// OwnerToken names the execution (the proxy process) for heartbeats
	// and release.
	OwnerToken string `json:"ownerToken"`
}

type SlotHeartbeatIn struct {
	LeaseID    string `json:"leaseId"`
	OwnerToken string `json:"ownerToken"`
}

type SlotHeartbeatOut struct {
	ExpiresAtMs int64 `json:"expiresAtMs"`
}

type SlotReleaseIn struct {
	LeaseID    string `json:"leaseId"`
	OwnerToken string `json:"ownerToken"`
	Reason     string `json:"reason,omitempty"`
}

// slot.release timing, shared by the daemon and its callers so they
// agree. SlotReleaseSettleWaitMs bounds how long the daemon waits for the
// device's released work before it answers settling;
// SlotReleaseReplyBudgetMs is what a caller waits for the answer: that
// wait, plus the host registry write (which may wait up to the registry's
// 5 s busy timeout behind another daemon's transaction), plus a second for
// the round trip. The daemon finishes a release it began even if the
// caller stops waiting.
const (
	SlotReleaseSettleWaitMs  = 5_000
	slotRegistryBusyMs       = 5_000
	SlotReleaseReplyBudgetMs = SlotReleaseSettleWaitMs + slotRegistryBusyMs + 1_000
)

type SlotReleaseOut struct {
	// Outcome is reusable_for_this_slot or settling.
	Outcome string `json:"outcome"`
}

type SlotResetScopeIn struct {
	RunnerNamespace   string `json:"runnerNamespace"`
	RunnerIncarnation string `json:"runnerIncarnation"`
	ManagedHostScope  string `json:"managedHostScope,omitempty"`
	// WaitMs is the bounded settle wait, 0..60000 (default 10000).
	WaitMs *int64 `json:"waitMs,omitempty"`
	Force  bool   `json:"force,omitempty"`
}

// SlotForceRefusal says why --force left one slot alone.
type SlotForceRefusal struct {
	SlotIndex   int    `json:"slotIndex"`
	Reason      string `json:"reason"` // live_owner, owner_liveness_unknown, within_settlement_cap, no_release_entry, other_open_journal, abandon_failed
	RemainingMs *int64 `json:"remainingMs,omitempty"`
	Message     string `json:"message"`
}

// SlotScopeReset is one matching scope's state after reset-scope.
type SlotScopeReset struct {
	ScopeKey          string             `json:"scopeKey"`
	ManagedHostScope  string             `json:"managedHostScope"`
	State             string             `json:"state"` // valid, invalidating, invalidated
	LiveOwners        []int              `json:"liveOwners,omitempty"`
	Settling          []int              `json:"settling,omitempty"`
	CleanupPending    []int              `json:"cleanupPending,omitempty"`
	OpenJournal       int                `json:"openJournal,omitempty"`
	ForceRefusals     []SlotForceRefusal `json:"forceRefusals,omitempty"`
	DevicesToFreePool []string           `json:"devicesToFreePool,omitempty"`
}

type SlotResetScopeOut struct {
	// Outcome is invalidated (every matching scope), waiting or
	// no_match.
	Outcome string           `json:"outcome"`
	Scopes  []SlotScopeReset `json:"scopes"`
}

type SlotListIn struct{}

// SlotAssignment is one scoped slot's assignment as the registry holds it.
type SlotAssignment struct {
	ScopeKey             string           `json:"scopeKey"`
	ManagedHostScope     string           `json:"managedHostScope"`
	RunnerNamespace      string           `json:"runnerNamespace"`
	RunnerIncarnation    string           `json:"runnerIncarnation"`
	ScopeState           string           `json:"scopeState"`
	SlotIndex            int              `json:"slotIndex"`
	State                string           `json:"state"` // ready, replacing, settling, cleanup_pending, empty
	AssignmentGeneration int64            `json:"assignmentGeneration"`
	Platform             string           `json:"platform,omitempty"`
	Device               *SlotDevice      `json:"device,omitempty"`
	RequestedSpec        *SlotSpec        `json:"requestedSpec,omitempty"`
	ResolvedSpec         *SlotSpec        `json:"resolvedSpec,omitempty"`
	SpecFingerprint      *SpecFingerprint `json:"specFingerprint,omitempty"`
	// LeaseID is the live execution's lease, if one holds the slot.
	LeaseID string `json:"leaseId,omitempty"`
}

type SlotListOut struct {
	Assignments []SlotAssignment `json:"assignments"`
	// FreePool lists devices of retired scopes that only a slot can adopt.
	FreePool []SlotDevice `json:"freePool"`
}

// ScopeKey is the registry key of a runner scope: the SHA-256 hex of the
// three parts, NUL-separated. NUL can never appear in a part (launch-config
// text refuses control characters), so distinct triples never collide by
// shifting a boundary.
func ScopeKey(managedHostScope, runnerNamespace, runnerIncarnation string) string {
	h := sha256.New()
	h.Write([]byte(managedHostScope))
	h.Write([]byte{0})
	h.Write([]byte(runnerNamespace))
	h.Write([]byte{0})
	h.Write([]byte(runnerIncarnation))
	return hex.EncodeToString(h.Sum(nil))
}

// SpecFingerprintVersion is the version of SlotSpecFingerprint's recipe;
// it changes if the recipe does, so old fingerprints are never compared
// with new ones as if equal.
const SpecFingerprintVersion = 1

// SlotSpecFingerprint fingerprints a platform and requested spec: the
// SHA-256 of their canonical JSON (encoding/json sorts map keys and the
// struct's field order is fixed).
func SlotSpecFingerprint(platform string, spec SlotSpec) SpecFingerprint {
	b, _ := json.Marshal(struct {
		Platform string   `json:"platform"`
		Spec     SlotSpec `json:"spec"`
	}{platform, spec})
	sum := sha256.Sum256(b)
	return SpecFingerprint{Version: SpecFingerprintVersion, Hash: hex.EncodeToString(sum[:])}
}
