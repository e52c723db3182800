// Package contract declares every daemon operation once: its name, role,
// input and output types, and the error table. Every frontend (socket, HTTP,
// MCP, gateway uplink) and the typed client speak these types. This package
// imports only the standard library; a test enforces it.
//
// Each operation is an Operation variable (LeaseRequest is "lease.request",
// LeaseRequestIn to Lease); `go doc` folds them into their var blocks, so
// read them with `go doc -all`, Registry() at run time, or the operation
// list in package client's documentation, which names the typed method
// for each.
package contract

import (
	"encoding/json"
	"strconv"
	"time"
)

// Protocol range this build speaks. It widens only when a compatibility path
// is really kept.
const (
	ProtocolMin = 5
	ProtocolMax = 5
)

// Role is a session's authority.
type Role string

const (
	RoleAgent Role = "agent"
	RoleAdmin Role = "admin"
)

// Allows reports whether a session of role r may run an operation of role need.
func (r Role) Allows(need Role) bool {
	return need == RoleAgent || r == RoleAdmin
}

// Device states shared by every platform.
const (
	StateProvisioning = "provisioning"
	StateReady        = "ready"
	StateLeased       = "leased"
	StateReclaiming   = "reclaiming"
	StateShutdown     = "shutdown"
	StateQuarantined  = "quarantined"
	StateDeleted      = "deleted"
)

type ProtocolRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

type HelloIn struct {
	Protocol ProtocolRange `json:"protocol"`
	// Client names the calling program, for logs.
	Client string `json:"client,omitempty"`
	// Principal is the caller's declared identity for this connection
	// (cooperative on the local socket).
	Principal string `json:"principal,omitempty"`
	// Credential is an operator token or the daemon's admin secret; with it
	// the session is admin, without it agent.
	Credential string `json:"credential,omitempty"`
	// Epoch is the leader epoch of the gateway opening an uplink session;
	// zero from a single gateway or any non-gateway client. A worker
	// refuses an epoch older than the newest it has seen (ADR 0103).
	Epoch uint64 `json:"epoch,omitempty"`
}

type HelloOut struct {
	Protocol   ProtocolRange `json:"protocol"`
	Selected   int           `json:"selected"`
	Role       Role          `json:"role"`
	Principal  string        `json:"principal"`
	Version    string        `json:"version"`
	InstanceID string        `json:"instanceId"`
	Mode       string        `json:"mode"`
}

// Device is a managed device as clients see it.
type Device struct {
	ID        string `json:"id"`
	Platform  string `json:"platform"`
	Model     string `json:"model"`
	OSVersion string `json:"osVersion"`
	Name      string `json:"name"`
	// UDID is the iOS simulator's identifier.
	UDID string `json:"udid,omitempty"`
	// Serial is the Android emulator's adb serial.
	Serial string `json:"serial,omitempty"`
	// DeviceSet is the simctl --set root holding an iOS device.
	DeviceSet string `json:"deviceSet,omitempty"`
	// Env holds what a lease holder needs in its environment to reach the
	// device (for example ANDROID_ADB_SERVER_PORT).
	Env          map[string]string `json:"env,omitempty"`
	Simulated    bool              `json:"simulated,omitempty"`
	WorkerID     string            `json:"workerId,omitempty"`
	StateSince   time.Time         `json:"stateSinceAt"`
	LastLeasedAt *time.Time        `json:"lastLeasedAt,omitempty"`
	CreatedAt    time.Time         `json:"createdAt"`
	// OwnerSystem names the system that owns the device beside the
	// general pool ("session": the session broker's); a plain lease is
	// never served such a device. Empty for the general pool.
	OwnerSystem string `json:"ownerSystem,omitempty"`

	// The canonical description (contract/describe.go): facts a driver
	// could not state are null.
	ModelIdentifier *string        `json:"modelIdentifier"` // "iPhone17,3"; the AVD's device profile
	RuntimeID       *string        `json:"runtimeId"`       // simctl runtime id; the system image package
	FormFactor      string         `json:"formFactor"`      // phone, tablet, foldable or unknown
	Display         *DeviceDisplay `json:"display"`
	// Image is the Android image provenance; null on iOS.
	Image   *AndroidImage `json:"image"`
	Runtime DeviceRuntime `json:"runtime"`
}

// Lease is one exclusive, TTL-bounded hold on a device.
type Lease struct {
	LeaseID     string `json:"leaseId"`
	RequesterID string `json:"requesterId"`
	OwnerID     string `json:"ownerId"`
	DeviceID    string `json:"deviceId"`
	// Worker names the machine holding the device (through a gateway);
	// WorkerID is its id, as on every device and event a gateway reports.
	Worker        *WorkerRef `json:"worker,omitempty"`
	WorkerID      string     `json:"workerId,omitempty"`
	Platform      string     `json:"platform"`
	GrantedAt     time.Time  `json:"grantedAt"`
	ExpiresAt     time.Time  `json:"expiresAt"`
	LastRenewedAt time.Time  `json:"lastRenewedAt"`
	TTLMs         int64      `json:"ttlMs"`
	Device        *Device    `json:"device,omitempty"`
	// RequestID names the lease request this lease was granted to.
	RequestID string `json:"requestId,omitempty"`
	// Timing records how the lease was served.
	Timing *LeaseTiming `json:"timing,omitempty"`
	// Resources is the result of the request's resources step: applied
	// after boot and verified before the grant (absent without one).
	Resources *ResourceResult `json:"resources,omitempty"`
	// Devices lists every device of a multi-device lease in the order
	// asked for; deviceId and device are its first member. Absent for a
	// lease of one device.
	Devices []Device `json:"devices,omitempty"`
}

// Admission paths a LeaseTiming names.
const (
	PathWarm               = "warm"
	PathBoot               = "boot"
	PathProvision          = "provision"
	PathEvictThenProvision = "evict-then-provision"
	PathDownload           = "download"
)

// LeaseTiming is how a lease was served: the admission path, the wait in
// the queue (admission to the first action on the request's behalf, or to
// the grant), the whole request (arrival to grant), and each phase the
// daemon measured. A phase that was not measured is absent, never zero.
type LeaseTiming struct {
	Path        string `json:"path"` // warm, boot, provision, evict-then-provision, download
	QueueWaitMs int64  `json:"queueWaitMs"`
	TotalMs     int64  `json:"totalMs"`
	DownloadMs  *int64 `json:"downloadMs,omitempty"`
	EvictMs     *int64 `json:"evictMs,omitempty"`
	ProvisionMs *int64 `json:"provisionMs,omitempty"`
	// BootMs covers booting and waiting for readiness while the driver does
	// both in one step; ReadinessMs appears once a driver reports the split.
	BootMs      *int64 `json:"bootMs,omitempty"`
	ReadinessMs *int64 `json:"readinessMs,omitempty"`
}

type LeaseRequestIn struct {
	// Platform is required unless Devices or Device is given.
	Platform  string `json:"platform,omitempty"`
	Model     string `json:"model,omitempty"`
	OSVersion string `json:"osVersion,omitempty"`
	// TTLMs is the lease's width; 0 means lease.defaultTtlMs.
	TTLMs int64 `json:"ttlMs,omitempty"`
	// TimeoutMs bounds the wait in the queue; 0 means wait without a bound.
	TimeoutMs     int64  `json:"timeoutMs,omitempty"`
	NoWait        bool   `json:"noWait,omitempty"`
	RequesterID   string `json:"requesterId,omitempty"`
	AllowDownload bool   `json:"allowDownload,omitempty"`
	// OwnerID sets the lease's owner; only an admin session (a gateway
	// forwarding for its client) may set it.
	OwnerID string `json:"ownerId,omitempty"`
	// IdempotencyKey makes the request safe to repeat: a repeat with the
	// same key (for the same requester) returns the first request's
	// outcome, or waits for it, and never a second device. A different body
	// under the same key is IDEMPOTENCY_KEY_MISMATCH.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Device asks for one device only: a device id of this daemon, a UDID
	// or AVD name, or a host-registry key (ios:udid:..., android:avd:...).
	// Another owner on the host holding it is DEVICE_IN_USE at once; a
	// device in this daemon's device root that it has no record of is
	// claimed and taken into its registry first.
	Device string `json:"device,omitempty"`
	// Resources tunes the device's resource groups after boot and before
	// the grant; on iOS an entry that cannot be proven fails the request
	// with RESOURCE_PROFILE_UNPROVEN. Part of the spec a warm device must
	// match (by its fingerprint).
	Resources map[string]ResourceState `json:"resources,omitempty"`
	// Hardware (Android) is written to the AVD before boot; also part of
	// the spec a warm device must match.
	Hardware *AndroidHardware `json:"hardware,omitempty"`
	// Devices asks for several devices in one lease, granted all at once
	// or not at all (at most queue.maxGroupSize); exclusive with platform,
	// model, osVersion, device, resources and hardware.
	Devices []DeviceSpec `json:"devices,omitempty"`
}

// Lease request states.
const (
	RequestQueued       = "queued"
	RequestProvisioning = "provisioning"
	RequestBooting      = "booting"
	RequestGranted      = "granted"
	RequestFailed       = "failed"
	RequestCancelled    = "cancelled"
	RequestExpired      = "expired"
)

type LeaseRequestStatusIn struct {
	RequestID string `json:"requestId"`
}

// LeaseRequestReceipt is a lease request's receipt: where it stands, and
// its outcome once it has one.
type LeaseRequestReceipt struct {
	RequestID      string `json:"requestId"`
	RequesterID    string `json:"requesterId"`
	OwnerID        string `json:"ownerId"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	Platform       string `json:"platform"`
	// State is queued, provisioning, booting, granted, failed, cancelled or
	// expired.
	State string `json:"state"`
	// QueuePosition is set while the request waits its turn.
	QueuePosition int `json:"queuePosition,omitempty"`
	// LeaseID names the granted lease; Lease is set while it lasts.
	LeaseID string `json:"leaseId,omitempty"`
	Lease   *Lease `json:"lease,omitempty"`
	// Error is the refusal of a failed, cancelled or expired request.
	Error *Error `json:"error,omitempty"`
	// Interrupted: no caller received this outcome (the caller went away,
	// or the daemon stopped or restarted), so repeating the request with
	// the same idempotency key admits it again rather than replaying it.
	Interrupted bool         `json:"interrupted,omitempty"`
	CreatedAt   time.Time    `json:"createdAt"`
	UpdatedAt   time.Time    `json:"updatedAt"`
	Timing      *LeaseTiming `json:"timing,omitempty"`
}

type LeaseRenewIn struct {
	LeaseID string `json:"leaseId"`
	// TTLMs, when set, becomes the lease's new width.
	TTLMs int64 `json:"ttlMs,omitempty"`
}

type LeaseReleaseIn struct {
	LeaseID string `json:"leaseId"`
}

type LeaseReleaseOut struct {
	LeaseID  string `json:"leaseId"`
	Released bool   `json:"released"`
}

type LeaseReleaseAllIn struct {
	// RequesterID names whose leases to release; it defaults to the
	// session's principal. A non-admin session releases only leases it
	// owns.
	RequesterID string `json:"requesterId,omitempty"`
	// Everyone releases every lease of every requester (admin only).
	Everyone bool `json:"everyone,omitempty"`
}

type LeaseReleaseAllOut struct {
	Released []string `json:"released"`
}

type LeaseCancelIn struct {
	RequesterID string `json:"requesterId,omitempty"`
}

type LeaseCancelOut struct {
	Cancelled bool `json:"cancelled"`
}

type LeaseGetIn struct {
	LeaseID string `json:"leaseId"`
}

type LeaseListIn struct{}

type LeaseListOut struct {
	Leases []Lease `json:"leases"`
}

// Progress is pushed while a lease request waits or its device is prepared.
type Progress struct {
	Phase string `json:"phase"` // queued, reclaiming, evicting, provisioning, booting, granted
	// LeaseRequestID names the lease request, so a caller that loses its
	// connection can read it (lease.requestStatus) or repeat it. (Not
	// "requestId": on the socket that key routes a push to its call.)
	LeaseRequestID string `json:"leaseRequestId,omitempty"`
	QueuePosition  int    `json:"queuePosition,omitempty"`
	DeviceID       string `json:"deviceId,omitempty"`
	EtaMs          int64  `json:"etaMs,omitempty"`
	Message        string `json:"message,omitempty"`
	// ScopeKey is the admitted scope's key (phase scope-resolved of
	// slot.acquire).
	ScopeKey string `json:"scopeKey,omitempty"`
}

type StatusGetIn struct{}

type DaemonInfo struct {
	Version    string    `json:"version"`
	PID        int       `json:"pid"`
	Health     string    `json:"health"` // starting, running, stopping, failed
	Mode       string    `json:"mode"`
	InstanceID string    `json:"instanceId"`
	StartedAt  time.Time `json:"startedAt"`
	Socket     string    `json:"socket"`
	Home       string    `json:"home"`
	// HTTP is the HTTP API's listen address when it is enabled.
	HTTP string `json:"http,omitempty"`
}

type PlatformCapacity struct {
	MaxRunning int `json:"maxRunning"`
	MaxManaged int `json:"maxManaged"`
	Running    int `json:"running"`
	Managed    int `json:"managed"`
	Reserved   int `json:"reserved"`
	// RAMUsedBytes is this platform's share of the RAM budget: its running
	// devices and reservations, each by its own footprint.
	RAMUsedBytes uint64 `json:"ramUsedBytes"`
}

type Capacity struct {
	Strategy   string                      `json:"strategy"`
	MaxRunning int                         `json:"maxRunning"`
	MaxManaged int                         `json:"maxManaged"`
	Running    int                         `json:"running"`
	Managed    int                         `json:"managed"`
	Reserved   int                         `json:"reserved"`
	Platforms  map[string]PlatformCapacity `json:"platforms"`
	// RAMBudgetBytes is the one RAM budget every platform's running devices
	// share (0: the strategy plans no RAM, as fixed does).
	RAMBudgetBytes uint64 `json:"ramBudgetBytes"`
	// RAMUsedBytes is what running devices and reservations take from it.
	RAMUsedBytes uint64 `json:"ramUsedBytes"`
	// CPUBudgetMilli is the CPU budget running devices share, in
	// thousandths of a CPU (0: the strategy plans no CPU, as fixed does);
	// CPUUsedMilli is what running devices and reservations take from it,
	// each by its platform's share.
	CPUBudgetMilli uint64 `json:"cpuBudgetMilli"`
	CPUUsedMilli   uint64 `json:"cpuUsedMilli"`
	// DeviceRAMBytes is the footprint each running or reserved device is
	// charged, by device id.
	DeviceRAMBytes map[string]uint64 `json:"deviceRamBytes,omitempty"`
	// Host is the machine-wide view a worker plans against: its own
	// devices, other simlock homes' and devices booted outside simlock
	// (absent for a gateway).
	Host *HostCapacity `json:"host,omitempty"`
}

// HostCapacity is capacity.host as the planner counts it.
type HostCapacity struct {
	// MaxRunning is the host-wide running limit in force (capacity.host.maxRunning,
	// or this daemon's own maxRunning when that is 0; 0 here: none).
	MaxRunning int `json:"maxRunning"`
	// Booted is every running device on the host: ours + otherHomes + externalDevices.
	Booted int `json:"booted"`
	// Ours counts this daemon's running devices and boots in flight.
	Ours int `json:"ours"`
	// OtherHomes counts devices other simlock homes hold a host claim on.
	OtherHomes int `json:"otherHomes"`
	// ExternalDevices counts devices running outside simlock.
	ExternalDevices int                             `json:"externalDevices"`
	Platforms       map[string]HostPlatformCapacity `json:"platforms"`
	// Waiters are the lease requests of every home on the host (this one
	// included) held back only by a host limit, oldest first, as this
	// daemon last read them from the host registry (ADR 0061).
	Waiters []HostWaiter `json:"waiters"`
	// Yielded counts the idle warm devices this daemon shut down, since it
	// started, because another home waited for host room.
	Yielded int `json:"yielded"`
}

// HostWaiter is one home's requests of one platform waiting for host room.
type HostWaiter struct {
	Home     string `json:"home"`
	Self     bool   `json:"self"` // this daemon's home
	Platform string `json:"platform"`
	// Limit is the host limit that binds: host.maxRunning or
	// host.platforms.<p>.maxRunning.
	Limit string    `json:"limit"`
	Count int       `json:"count"`
	Since time.Time `json:"since"` // when the oldest of them was queued
	AgeMs int64     `json:"ageMs"`
}

// HostPlatformCapacity is one platform's share of the host view.
type HostPlatformCapacity struct {
	// MaxRunning is capacity.host.platforms.<p>.maxRunning (0: none).
	MaxRunning      int `json:"maxRunning"`
	Booted          int `json:"booted"`
	Ours            int `json:"ours"`
	OtherHomes      int `json:"otherHomes"`
	ExternalDevices int `json:"externalDevices"`
	// ExternalKnown is false until the platform's driver first counted its
	// external devices (externalDevices reads 0 until then), and for a
	// driver that cannot count them.
	ExternalKnown bool `json:"externalKnown"`
	// ExternalError is the last count's failure; externalDevices keeps the
	// last good count.
	ExternalError string `json:"externalError,omitempty"`
}

type QueueEntry struct {
	Position    int       `json:"position"`
	RequesterID string    `json:"requesterId"`
	Platform    string    `json:"platform"`
	Model       string    `json:"model,omitempty"`
	OSVersion   string    `json:"osVersion,omitempty"`
	Phase       string    `json:"phase"`
	EnqueuedAt  time.Time `json:"enqueuedAt"`
}

type StatusGetOut struct {
	Daemon DaemonInfo `json:"daemon"`
	// Workers is set by a gateway: one view per worker it knows.
	Workers  []WorkerView `json:"workers,omitempty"`
	Devices  []Device     `json:"devices"`
	Leases   []Lease      `json:"leases"`
	Capacity Capacity     `json:"capacity"`
	// QueueDepth counts every queued request; Queue lists only the first
	// StatusQueueEntries of them, oldest first, so status.get costs the
	// same behind a long queue. queue.list reads the rest.
	QueueDepth int          `json:"queueDepth"`
	Queue      []QueueEntry `json:"queue"`
	// QueueByPlatform counts the queued requests per platform (a
	// multi-device request under its first device's).
	QueueByPlatform map[string]int `json:"queueByPlatform"`
	// QueueNextCursor is set when the queue is longer than Queue: pass it
	// to queue.list as cursor to read the requests after Queue's last.
	QueueNextCursor string `json:"queueNextCursor,omitempty"`
	// WarmPool explains the warm targets (absent from a gateway).
	WarmPool *WarmPool `json:"warmPool,omitempty"`
	// Goldens shows clone provisioning's golden devices and refused golden
	// builds; absent when there are none (and from a gateway).
	Goldens *Goldens `json:"goldens,omitempty"`
}

// StatusQueueEntries is how many queued requests status.get lists.
const StatusQueueEntries = 50

// QueueListDefaultLimit and QueueListMaxLimit bound one page of queue.list.
const (
	QueueListDefaultLimit = 100
	QueueListMaxLimit     = 1000
)

type QueueListIn struct {
	// Cursor continues a walk: a nextCursor from queue.list or status.get's
	// queueNextCursor. Empty reads from the head of the queue. A cursor
	// names a place in the queue's arrival order, so it stays valid while
	// requests before it leave; it is valid for the daemon run that gave it.
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"` // default 100, at most 1000
}

// QueueCursor is cursor n on the wire; "" for 0, no cursor.
func QueueCursor(n uint64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}

// ParseQueueCursor reads a queue.list cursor ("" is 0: the head).
func ParseQueueCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, Errorf(CodeBadRequest, "cursor %q is not a queue.list cursor", s).WithDetails("field", "cursor").
			WithNext("pass nextCursor from queue.list or queueNextCursor from status.get, or no cursor to read from the head")
	}
	return n, nil
}

type QueueListOut struct {
	// Entries are oldest first; position is each one's place in the whole
	// queue when this page was read.
	Entries []QueueEntry `json:"entries"`
	// Depth counts every queued request.
	Depth int `json:"depth"`
	// NextCursor reads the next page; empty when this page reaches the
	// tail of the queue.
	NextCursor string `json:"nextCursor,omitempty"`
}

type ListGetIn struct {
	// Booted narrows the list to the devices observed running (the booted
	// view), answered within inventory.bootedBudgetMs.
	Booted bool `json:"booted,omitempty"`
}

type ListGetOut struct {
	Devices []Device `json:"devices"`
	// Enrichment says whether the live observations finished within the
	// read's budget; absent from a worker that predates it.
	Enrichment *Enrichment `json:"enrichment,omitempty"`
}

type CatalogGetIn struct {
	Platform string `json:"platform,omitempty"`
}

type CatalogModel struct {
	Name       string `json:"name"`
	Identifier string `json:"identifier"`
	MinOS      string `json:"minOsVersion,omitempty"`
	MaxOS      string `json:"maxOsVersion,omitempty"`
	// Workers is set by a gateway: the ids of the connected workers whose
	// catalog has the model.
	Workers []string `json:"workers,omitempty"`
}

type CatalogRuntime struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	Build      string `json:"build,omitempty"`
	Identifier string `json:"identifier"`
	Available  bool   `json:"available"`
	// SupportedModels lists model identifiers the runtime can run, when known.
	SupportedModels []string `json:"supportedModels,omitempty"`
	// Workers is set by a gateway: the ids of the connected workers whose
	// catalog has the runtime.
	Workers []string `json:"workers,omitempty"`
}

type PlatformCatalog struct {
	Platform string           `json:"platform"`
	Models   []CatalogModel   `json:"models"`
	Runtimes []CatalogRuntime `json:"runtimes"`
	Error    string           `json:"error,omitempty"`
}

type CatalogGetOut struct {
	Platforms []PlatformCatalog `json:"platforms"`
	// Enrichment names the platforms whose catalog did not finish within
	// inventory.catalogBudgetMs.
	Enrichment *Enrichment `json:"enrichment,omitempty"`
}

type ConfigGetIn struct{}

type ConfigGetOut struct {
	Path   string          `json:"path"`
	Config json.RawMessage `json:"config"`
}

type EventsSubscribeIn struct {
	// Since returns only events with a sequence number above it. Sequence
	// numbers continue across daemon restarts, so a since from an earlier
	// run replays what the durable journal still holds after it; 0 (the
	// default) reads this run's buffer only.
	Since uint64 `json:"since,omitempty"`
	// SinceTime returns only events at or after a moment: a duration back
	// from now ("90s", "1h", "7d") or an RFC 3339 instant, read from the
	// durable journal and then the buffer, so it reaches across restarts.
	// It cannot be combined with since.
	SinceTime string `json:"sinceTime,omitempty"`
	// Follow keeps the subscription open; new events arrive as "event"
	// notifications tied to the request.
	Follow bool `json:"follow,omitempty"`
}

type Event struct {
	Seq         uint64         `json:"seq"`
	WorkerID    string         `json:"workerId,omitempty"`
	Type        string         `json:"type"`
	At          time.Time      `json:"at"`
	DeviceID    string         `json:"deviceId,omitempty"`
	LeaseID     string         `json:"leaseId,omitempty"`
	RequesterID string         `json:"requesterId,omitempty"`
	Platform    string         `json:"platform,omitempty"`
	Reason      string         `json:"reason,omitempty"`
	Data        map[string]any `json:"data,omitempty"`
}

type EventsSubscribeOut struct {
	Events []Event `json:"events"`
	// Dropped is true when events between Since and the oldest buffered one
	// have already left the ring buffer; Gap names them.
	Dropped bool       `json:"dropped,omitempty"`
	Gap     *EventsGap `json:"gap,omitempty"`
}

// EventsGap names events a subscriber will never receive, FromSeq through
// ToSeq inclusive: they left the daemon's ring buffer before the subscriber
// read them. A follower that reads too slowly gets one as a "gap"
// notification, in sequence order with the events around it, and then goes
// on with the oldest event still buffered. State those events changed is
// best re-read (status.get) rather than reconstructed.
type EventsGap struct {
	FromSeq uint64 `json:"fromSeq"`
	ToSeq   uint64 `json:"toSeq"`
}

// Token roles as minted; operator maps to the admin session role.
const (
	TokenRoleAgent    = "agent"
	TokenRoleOperator = "operator"
	TokenRoleWorker   = "worker"
)

type TokenCreateIn struct {
	Role string `json:"role"`
	Name string `json:"name,omitempty"`
}

type TokenCreateOut struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Name      string    `json:"name"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"createdAt"`
}

type TokenInfo struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

type TokenListIn struct{}

type TokenListOut struct {
	Tokens []TokenInfo `json:"tokens"`
}

type TokenRevokeIn struct {
	ID string `json:"id"`
}

type TokenRevokeOut struct {
	Revoked bool `json:"revoked"`
}

type DaemonStopIn struct {
	// Clean also releases every lease and shuts down every running device
	// of this home before the daemon exits, so its claims are cleared by
	// the ordinary teardown; the answer comes once that is done.
	Clean bool `json:"clean,omitempty"`
}

type DaemonStopOut struct {
	Stopping bool `json:"stopping"`
	// Clean reports the clean pass; nil without clean.
	Clean *DaemonCleanReport `json:"clean,omitempty"`
}

// DaemonCleanReport is what daemon.stop's clean pass did, device by device.
type DaemonCleanReport struct {
	// ReleasedLeases are the leases released through the ordinary path.
	ReleasedLeases []string `json:"releasedLeases"`
	// ShutDown are the device ids shut down (or found already stopped).
	ShutDown []string `json:"shutDown"`
	// Failed maps a device id to why it could not be shut down: its claim
	// stays, and the CLI reports it as not proven.
	Failed map[string]string `json:"failed,omitempty"`
}

type DeviceReleaseIn struct {
	// DeviceKey is the host registry's canonical key (see
	// `simlock device status`).
	DeviceKey string `json:"deviceKey"`
}

type DeviceReleaseOut struct {
	DeviceKey string `json:"deviceKey"`
	DeviceID  string `json:"deviceId,omitempty"`
	// Action is what the daemon did last: "shut-down" (the device was
	// shut down: its claim is cleared), "already-stopped" (it was not
	// running), "lease-released" (the lease ended, but the device is still
	// being reclaimed or was not left running: its teardown clears the
	// claim when it settles).
	Action string `json:"action"`
	// LeaseID is the lease that held the device and was released first
	// through the ordinary release; empty when it was idle.
	LeaseID string `json:"leaseId,omitempty"`
}

type PassthroughIn struct {
	// Tool is the platform tool to run: "simctl" or "adb".
	Tool string   `json:"tool"`
	Args []string `json:"args" contract:"freeform"`
	// Terminal says whether the caller will run the command with a terminal
	// attached (some commands, like a bare adb shell, need one).
	Terminal bool `json:"terminal,omitempty"`
}

// PassthroughOut is the root-scoped command for the caller to spawn.
type PassthroughOut struct {
	Platform string   `json:"platform"`
	Command  string   `json:"command"`
	Args     []string `json:"args"`
	// Env holds KEY=VALUE entries to add to the caller's environment.
	Env []string `json:"env,omitempty"`
}

type CleanupRunIn struct {
	// DryRun reports what would be done without doing it.
	DryRun bool `json:"dryRun,omitempty"`
	// Rule limits the pass to one named rule (idle-shutdown, idle-destroy).
	Rule string `json:"rule,omitempty"`
}

type CleanupAction struct {
	Rule     string `json:"rule"`
	DeviceID string `json:"deviceId"`
	Action   string `json:"action"` // shutdown, destroy
	Reason   string `json:"reason"`
	Executed bool   `json:"executed"`
	Skipped  string `json:"skipped,omitempty"`
	Error    string `json:"error,omitempty"`
}

type CleanupRunOut struct {
	DryRun  bool            `json:"dryRun"`
	Actions []CleanupAction `json:"actions"`
}

type DoctorRunIn struct {
	// Fix repairs what can be repaired (admin).
	Fix bool `json:"fix,omitempty"`
	// PurgeOrphans destroys devices in simlock's roots that the registry
	// does not know, after re-proving root ownership (admin).
	PurgeOrphans bool `json:"purgeOrphans,omitempty"`
}

type DoctorFinding struct {
	Kind     string `json:"kind"`
	Platform string `json:"platform"`
	DeviceID string `json:"deviceId,omitempty"`
	Handle   string `json:"handle,omitempty"`
	Detail   string `json:"detail"`
	Action   string `json:"action,omitempty"`
	Fixed    bool   `json:"fixed"`
	Error    string `json:"error,omitempty"`
}

type DoctorRunOut struct {
	Findings []DoctorFinding `json:"findings"`
	Healthy  bool            `json:"healthy"`
	// Goldens lists the golden devices clone provisioning keeps. They are
	// not in the registry and not findings: a healthy daemon has them.
	Goldens []DoctorGolden `json:"goldens,omitempty"`
	// GoldensNotBuilt says, per "platform|deviceType|runtime", why the
	// engine last refused to let a golden be built (ADR 0053), so a spec
	// whose devices are created rather than cloned is explained.
	GoldensNotBuilt map[string]string `json:"goldensNotBuilt,omitempty"`
}

// DoctorGolden is one golden device (ADR 0041): never leased, counted
// against managed capacity, deleted by nuke.
type DoctorGolden struct {
	Platform  string `json:"platform"`
	Handle    string `json:"handle"`
	ModelID   string `json:"modelId"`
	RuntimeID string `json:"runtimeId"`
	// Building: being made (booted once) now.
	Building bool `json:"building,omitempty"`
	// Reclaiming: the planner is deleting it to give its managed slot to
	// a request (ADR 0053).
	Reclaiming bool `json:"reclaiming,omitempty"`
	// Stuck: its last removal failed; the planner tries again after a
	// backoff (status.get's goldens says when).
	Stuck bool `json:"stuck,omitempty"`
}

type NukeRunIn struct{}

type NukeRunOut struct {
	ReleasedLeases    []string          `json:"releasedLeases"`
	CancelledRequests []string          `json:"cancelledRequests"`
	DestroyedDevices  []string          `json:"destroyedDevices"`
	Failed            map[string]string `json:"failed,omitempty"`
}

// LeaseNotice is a lease-scoped fact pushed to the owner's connections
// (methods device-unhealthy, device-recovered, lease-lost).
type LeaseNotice struct {
	Type     string    `json:"type"`
	LeaseID  string    `json:"leaseId"`
	DeviceID string    `json:"deviceId,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// Lease-scoped push methods.
const (
	NotifyDeviceUnhealthy = "device-unhealthy"
	NotifyDeviceRecovered = "device-recovered"
	NotifyLeaseLost       = "lease-lost"
)

type DeviceExecIn struct {
	LeaseID string `json:"leaseId"`
	// Tool is the platform tool: "simctl" (iOS) or "adb" (Android).
	Tool string   `json:"tool"`
	Args []string `json:"args" contract:"freeform"`
	// Stdin is sent to the command whole; there is no interactive channel.
	Stdin string `json:"stdin,omitempty" contract:"freeform"`
	// RequesterID must match the lease's requester; it defaults to the
	// session principal. Admin does not bypass this check.
	RequesterID string `json:"requesterId,omitempty"`
}

type DeviceExecOut struct {
	ExitCode int `json:"exitCode"`
}

// ExecOutput is one chunk of a running command's output, pushed as an
// "output" notification tied to the device.exec request.
type ExecOutput struct {
	Stream string `json:"stream"` // stdout or stderr
	Chunk  string `json:"chunk"`
}

// NotifyOutput carries ExecOutput pushes.
const NotifyOutput = "output"

// Worker connection states as a gateway sees them.
const (
	WorkerConnected    = "connected"
	WorkerDisconnected = "disconnected"
	WorkerIncompatible = "incompatible"
)

// WorkerRef names the worker a lease or device lives on (gateway mode).
type WorkerRef struct {
	ID    string `json:"id"`
	Label string `json:"label,omitempty"`
}

// WorkerView is what a gateway knows about one worker.
type WorkerView struct {
	ID             string                      `json:"id"`
	Label          string                      `json:"label,omitempty"`
	State          string                      `json:"state"`
	Drained        bool                        `json:"drained"`
	Version        string                      `json:"version,omitempty"`
	Protocol       ProtocolRange               `json:"protocol"`
	Health         string                      `json:"health,omitempty"`
	DownloadPolicy string                      `json:"downloadPolicy,omitempty"`
	Capacity       map[string]PlatformCapacity `json:"capacity,omitempty"`
	QueueDepth     int                         `json:"queueDepth"`
	Devices        int                         `json:"devices"`
	Leases         int                         `json:"leases"`
	LastSeenAt     time.Time                   `json:"lastSeenAt"`
}

type WorkerListIn struct{}

type WorkerListOut struct {
	Workers []WorkerView `json:"workers"`
}

type WorkerIn struct {
	ID string `json:"id"`
}

type WorkerOut struct {
	Worker WorkerView `json:"worker"`
}
