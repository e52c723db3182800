package contract

import (
	"errors"
	"fmt"
)

// Code is a closed set of error codes, UPPER_SNAKE on the wire.
type Code string

// Kind says which layer an error belongs to.
type Kind string

const (
	KindTransport Kind = "transport" // the connection itself failed
	KindProtocol  Kind = "protocol"  // the request was malformed or not allowed
	KindDomain    Kind = "domain"    // the daemon understood and refused
	KindInternal  Kind = "internal"  // a bug or an unexpected failure
)

const (
	CodeBadRequest               Code = "BAD_REQUEST"
	CodeUnknownOperation         Code = "UNKNOWN_OPERATION"
	CodeForbidden                Code = "FORBIDDEN"
	CodeUnauthenticated          Code = "UNAUTHENTICATED"
	CodeAdminAuthFailed          Code = "ADMIN_AUTHENTICATION_FAILED"
	CodeProtocolUnsupported      Code = "PROTOCOL_VERSION_UNSUPPORTED"
	CodeHelloRequired            Code = "HELLO_REQUIRED"
	CodeNoCapacity               Code = "NO_CAPACITY"
	CodeCapacityExhausted        Code = "CAPACITY_EXHAUSTED"
	CodeQueueTimeout             Code = "QUEUE_TIMEOUT"
	CodeRequestCancelled         Code = "REQUEST_CANCELLED"
	CodeNoPendingRequest         Code = "NO_PENDING_REQUEST"
	CodeUnknownLease             Code = "UNKNOWN_LEASE"
	CodeRequesterLeased          Code = "REQUESTER_ALREADY_LEASED"
	CodeRequesterQueued          Code = "REQUESTER_ALREADY_QUEUED"
	CodeQueueLimit               Code = "QUEUE_LIMIT_REACHED"
	CodeUnsupportedPlatform      Code = "UNSUPPORTED_PLATFORM"
	CodeUnknownModel             Code = "UNKNOWN_MODEL"
	CodeOSOutOfRange             Code = "OS_VERSION_OUT_OF_RANGE"
	CodeRuntimeMissing           Code = "RUNTIME_NOT_INSTALLED"
	CodeDownloadForbidden        Code = "DOWNLOAD_FORBIDDEN"
	CodeInsufficientDisk         Code = "INSUFFICIENT_DISK_SPACE"
	CodeDeviceFailed             Code = "DEVICE_FAILED"
	CodeDeviceInUse              Code = "DEVICE_IN_USE"
	CodeUnknownDevice            Code = "UNKNOWN_DEVICE"
	CodeUnknownToken             Code = "UNKNOWN_TOKEN"
	CodeDaemonStartupFailed      Code = "DAEMON_STARTUP_FAILED"
	CodeHostRegistryDamaged      Code = "HOST_REGISTRY_DAMAGED"
	CodeDaemonStopping           Code = "DAEMON_STOPPING"
	CodeDaemonNotRunning         Code = "DAEMON_NOT_RUNNING"
	CodeDaemonAlreadyRunning     Code = "DAEMON_ALREADY_RUNNING"
	CodeConnectionLost           Code = "CONNECTION_LOST"
	CodePassthroughRefused       Code = "PASSTHROUGH_REFUSED"
	CodeUnknownPassthroughTool   Code = "UNKNOWN_PASSTHROUGH_TOOL"
	CodeExecTimeout              Code = "EXEC_TIMEOUT"
	CodeLeaseEnded               Code = "LEASE_ENDED"
	CodeUnsupportedInGateway     Code = "UNSUPPORTED_IN_GATEWAY_MODE"
	CodeWorkerUnreachable        Code = "WORKER_UNREACHABLE"
	CodeStaleGatewayEpoch        Code = "STALE_GATEWAY_EPOCH"
	CodeIdempotencyMismatch      Code = "IDEMPOTENCY_KEY_MISMATCH"
	CodeDaemonRestarted          Code = "DAEMON_RESTARTED"
	CodeUnknownRequest           Code = "UNKNOWN_LEASE_REQUEST"
	CodeResourceUnproven         Code = "RESOURCE_PROFILE_UNPROVEN"
	CodeResourcesDisabled        Code = "RESOURCES_NOT_ENABLED"
	CodeReceiptMismatch          Code = "RESTORE_RECEIPT_MISMATCH"
	CodeLicenseNotAccepted       Code = "LICENSE_NOT_ACCEPTED"
	CodeUploadTooLarge           Code = "UPLOAD_TOO_LARGE"
	CodeUnknownUpload            Code = "UNKNOWN_UPLOAD"
	CodeUnsupportedHardware      Code = "UNSUPPORTED_HARDWARE"
	CodeCatalogMetadataInvalid   Code = "CATALOG_METADATA_INVALID"
	CodeSessionConfigInvalid     Code = "SESSION_CONFIG_INVALID"
	CodeSessionsNotConfigured    Code = "SESSIONS_NOT_CONFIGURED"
	CodeSessionBrokerStopping    Code = "SESSION_BROKER_STOPPING"
	CodeEvictionPending          Code = "EVICTION_PENDING"
	CodeSessionPreparationFailed Code = "SESSION_PREPARATION_FAILED"
	CodeSessionOwnerExited       Code = "SESSION_OWNER_EXITED"
	CodeSessionOwnerMismatch     Code = "SESSION_OWNER_MISMATCH"
	CodeSessionAbandoned         Code = "SESSION_ABANDONED"
	CodeSessionEnded             Code = "SESSION_ENDED"
	CodeSessionExportMismatch    Code = "SESSION_EXPORT_IDENTITY_MISMATCH"
	CodeSessionExportNotFound    Code = "SESSION_EXPORT_NOT_FOUND"
	CodePreparationTimeout       Code = "PREPARATION_TIMEOUT"
	CodeSlotConfigInvalid        Code = "MANAGED_SLOT_CONFIG_INVALID"
	CodeContractUnsupported      Code = "CONTRACT_UNSUPPORTED"
	CodeSlotGroupUnsupported     Code = "MANAGED_SLOT_GROUP_UNSUPPORTED"
	CodeManagedSlotsUnsupported  Code = "MANAGED_SLOTS_UNSUPPORTED"
	CodeSpecUnsupported          Code = "SPEC_UNSUPPORTED"
	CodeRuntimeIncompatible      Code = "RUNTIME_INCOMPATIBLE"
	CodeSlotInUse                Code = "SLOT_IN_USE"
	CodeSlotSettling             Code = "SLOT_SETTLING"
	CodeStaleSession             Code = "STALE_SESSION"
	CodeScopeInvalidated         Code = "SCOPE_INVALIDATED"
	CodeScopeTransitionPending   Code = "SCOPE_TRANSITION_PENDING"
	CodeCleanupPending           Code = "CLEANUP_PENDING"
	CodeDiscoveryIncomplete      Code = "DISCOVERY_INCOMPLETE"
	CodeDeviceAssignedToSlot     Code = "DEVICE_ASSIGNED_TO_MANAGED_SLOT"
	CodeDeviceOutsideSlots       Code = "DEVICE_OUTSIDE_MANAGED_SLOTS"
	CodeSlotAcquisitionFailed    Code = "MANAGED_SLOT_ACQUISITION_FAILED"
	CodeSlotRegistrationRefused  Code = "MANAGED_SLOT_REGISTRATION_REFUSED"
	CodeExecutionEnded           Code = "MANAGED_EXECUTION_ENDED"
	CodeDaemonStalled            Code = "DAEMON_STALLED"
	CodeReconcileInProgress      Code = "RECONCILE_IN_PROGRESS"
	CodeConcurrentModification   Code = "CONCURRENT_MODIFICATION"
	CodeReadinessIncomplete      Code = "READINESS_INCOMPLETE"
	CodeExecutionPolicyFailed    Code = "EXECUTION_POLICY_FAILED"
	CodeInternal                 Code = "INTERNAL"
	CodeUnknownDaemonError       Code = "UNKNOWN_DAEMON_ERROR"
)

// CodeInfo is one row of the error table.
type CodeInfo struct {
	Kind       Kind
	HTTPStatus int
	ExitCode   int // CLI process exit code
	Retryable  bool
	// NextAction is the default advice when the raising site gives none.
	NextAction string
}

// ErrorTable is the single place that says, for every code, its kind, HTTP
// status, CLI exit code and whether retrying can help.
var ErrorTable = map[Code]CodeInfo{
	CodeBadRequest:               {KindProtocol, 400, 2, false, "fix the request as the message says: it names the field or value at fault"},
	CodeUnknownOperation:         {KindProtocol, 404, 2, false, "upgrade the client or the daemon so they speak the same operations"},
	CodeForbidden:                {KindProtocol, 403, 3, false, "use a credential with the needed role, or act only on your own leases"},
	CodeUnauthenticated:          {KindProtocol, 401, 3, false, "pass a valid token with --token or SIMLOCK_TOKEN"},
	CodeAdminAuthFailed:          {KindProtocol, 401, 3, false, "check --token / SIMLOCK_ADMIN_TOKEN, or omit them to connect as an agent"},
	CodeProtocolUnsupported:      {KindProtocol, 426, 4, false, "run the same simlock version as the daemon: `simlock daemon stop` then retry"},
	CodeHelloRequired:            {KindProtocol, 400, 2, false, "send hello first"},
	CodeNoCapacity:               {KindDomain, 503, 5, true, "retry later, or drop --no-wait to queue for a device"},
	CodeCapacityExhausted:        {KindDomain, 503, 5, true, "the host runs as many devices as its limit allows (counting other simlock homes and devices booted outside simlock); retry after retryAfterMs, or drop --no-wait to queue"},
	CodeQueueTimeout:             {KindDomain, 504, 6, true, "retry with a longer --timeout, or check `simlock status` for who holds the devices"},
	CodeRequestCancelled:         {KindDomain, 409, 7, false, ""},
	CodeNoPendingRequest:         {KindDomain, 404, 7, false, "nothing is queued for that requester"},
	CodeUnknownLease:             {KindDomain, 404, 8, false, "the lease has ended (released or expired); request a new one"},
	CodeRequesterLeased:          {KindDomain, 409, 9, false, "release the existing lease first, or use a different --requester"},
	CodeRequesterQueued:          {KindDomain, 409, 9, false, "cancel the pending request first (`simlock lease cancel`)"},
	CodeQueueLimit:               {KindDomain, 429, 5, true, "wait until one of your waiting requests is granted, or cancel one (`simlock lease cancel --requester ID`); the cap is queue.maxPerPrincipal"},
	CodeUnsupportedPlatform:      {KindDomain, 422, 10, false, "use a platform the catalog lists (`simlock catalog`, GET /v1/catalog, or the list_devices tool)"},
	CodeUnknownModel:             {KindDomain, 422, 10, false, "pick a model the catalog lists (`simlock catalog`, GET /v1/catalog, or the list_devices tool)"},
	CodeOSOutOfRange:             {KindDomain, 422, 10, false, "pick an OS version inside the model's supported range"},
	CodeRuntimeMissing:           {KindDomain, 422, 10, false, "install the runtime, or retry with --allow-download"},
	CodeDownloadForbidden:        {KindDomain, 403, 10, false, "the daemon's downloads.policy is never; install the runtime by hand"},
	CodeInsufficientDisk:         {KindDomain, 507, 11, true, "free disk space and retry"},
	CodeDeviceFailed:             {KindDomain, 502, 12, true, "retry; `simlock daemon logs` shows the driver's error"},
	CodeDeviceInUse:              {KindDomain, 409, 9, true, "see details.recovery.command, or `simlock device status` for who owns the device"},
	CodeUnknownDevice:            {KindDomain, 404, 8, false, "list devices with `simlock list`"},
	CodeUnknownToken:             {KindDomain, 404, 8, false, "list tokens with `simlock token list`"},
	CodeDaemonStartupFailed:      {KindDomain, 503, 13, true, "see `simlock daemon logs`, fix the cause and start the daemon again"},
	CodeHostRegistryDamaged:      {KindDomain, 503, 13, false, "run `simlock host repair` (details.path is the damaged file): it moves the file aside and rebuilds the registry from every home's records; no retry can succeed before that"},
	CodeDaemonStopping:           {KindDomain, 503, 13, true, "retry once the daemon has restarted"},
	CodeDaemonNotRunning:         {KindTransport, 503, 13, true, "start it with `simlock daemon start`"},
	CodeDaemonAlreadyRunning:     {KindDomain, 409, 13, false, "use the running daemon, or stop it first with `simlock daemon stop`"},
	CodeConnectionLost:           {KindTransport, 503, 14, true, "the daemon went away; reconnect and pick your lease up again"},
	CodePassthroughRefused:       {KindDomain, 403, 10, false, "that verb would change the device behind simlock's back; use simlock's own commands"},
	CodeUnknownPassthroughTool:   {KindDomain, 422, 10, false, "no driver wraps that tool"},
	CodeExecTimeout:              {KindDomain, 504, 6, true, "the command ran past exec.timeoutMs"},
	CodeLeaseEnded:               {KindDomain, 410, 8, false, "the lease ended while the command ran, so it was stopped; request a new lease"},
	CodeUnsupportedInGateway:     {KindDomain, 501, 10, false, "run it against the worker daemon instead of the gateway"},
	CodeWorkerUnreachable:        {KindTransport, 502, 14, true, "the worker's uplink is down; retry when it reconnects"},
	CodeStaleGatewayEpoch:        {KindDomain, 409, 9, false, "this gateway is no longer the fleet's leader; send the request through another of the fleet's gateways"},
	CodeIdempotencyMismatch:      {KindDomain, 409, 9, false, "repeat the original request unchanged, or use a new idempotency key for a different one"},
	CodeDaemonRestarted:          {KindDomain, 503, 13, true, "repeat the same request (same idempotency key) to queue it again"},
	CodeUnknownRequest:           {KindDomain, 404, 8, false, "the request was never made to this daemon, or its receipt was pruned after requests.retentionMs"},
	CodeResourceUnproven:         {KindDomain, 422, 10, false, "details.resourceDrift lists the groups that could not be proven; drop them from resources or check `simlock resources get`"},
	CodeResourcesDisabled:        {KindDomain, 403, 10, false, "set resources.enabled in the daemon config, or ask for the lease with --resources"},
	CodeReceiptMismatch:          {KindDomain, 409, 9, false, "a restore receipt only applies to the serial, boot and user it was issued on; inspect with `simlock resources get`"},
	CodeLicenseNotAccepted:       {KindDomain, 422, 10, false, "accept the SDK licences (`sdkmanager --licenses`) or set downloads.acceptLicenses in the daemon config"},
	CodeUploadTooLarge:           {KindDomain, 413, 11, false, "the file exceeds upload.maxBytes or the free disk the guard keeps"},
	CodeUnknownUpload:            {KindDomain, 404, 8, false, "upload the file first (`simlock exec LEASE --upload FILE -- ...`); names are per lease"},
	CodeUnsupportedHardware:      {KindDomain, 422, 10, false, "ask for hardware the operator mapped in sessions.defaults (`simlock capabilities --json`, the daemon config), or have the operator map the archetype"},
	CodeCatalogMetadataInvalid:   {KindDomain, 422, 10, false, "classify the installed device types or AVD profiles in the daemon's sessions config (iosClassifications, androidProfileArchetypes)"},
	CodeSessionConfigInvalid:     {KindProtocol, 400, 2, false, "fix the session configuration as the message says: it names the field at fault"},
	CodeSessionsNotConfigured:    {KindDomain, 501, 10, false, "add a sessions section to the daemon config and restart the daemon"},
	CodeSessionBrokerStopping:    {KindDomain, 503, 13, true, "retry the same request against the restarted daemon after retryAfterMs"},
	CodeEvictionPending:          {KindDomain, 503, 5, true, "retry with a new request id after retryAfterMs"},
	CodeSessionPreparationFailed: {KindDomain, 502, 12, false, "`simlock daemon logs` has the cause; retry with a new request id once it is fixed"},
	CodeSessionOwnerExited:       {KindDomain, 410, 8, false, "start a new execution attempt with a new request id"},
	CodeSessionOwnerMismatch:     {KindDomain, 403, 3, false, "check the session id, then use the owner token (or, for session.info, the principal) it was prepared with"},
	CodeSessionAbandoned:         {KindDomain, 409, 7, false, "start a new execution attempt with a new request id"},
	CodeSessionEnded:             {KindDomain, 410, 8, false, "prepare a new session (new request id)"},
	CodeSessionExportMismatch:    {KindDomain, 409, 9, false, "repeat the original export identity unchanged, or prepare without export"},
	CodeSessionExportNotFound:    {KindDomain, 404, 8, false, "the export was never linked, or was acknowledged and pruned"},
	CodePreparationTimeout:       {KindDomain, 504, 6, true, "retry with a longer preparation budget (a new request id for sessions)"},
	CodeSlotConfigInvalid:        {KindProtocol, 400, 2, false, "fix the launch configuration as the message says: it names the field at fault"},
	CodeContractUnsupported:      {KindProtocol, 422, 4, false, "use contractVersion 1, or a simlock that serves the contract (`simlock capabilities --json`)"},
	CodeSlotGroupUnsupported:     {KindDomain, 422, 10, false, "declare exactly one slot per execution (localSlotCapacity 1, one request)"},
	CodeManagedSlotsUnsupported:  {KindDomain, 501, 10, false, "run a simlock that serves managed-slots/v1"},
	CodeSpecUnsupported:          {KindDomain, 422, 10, false, "name an installed runtime, system image or device type (`simlock catalog`)"},
	CodeRuntimeIncompatible:      {KindDomain, 422, 10, false, "pick a runtime the device type supports (`simlock catalog`)"},
	CodeSlotInUse:                {KindDomain, 409, 9, true, "wait for the slot's live execution to end, or use another slot"},
	CodeSlotSettling:             {KindDomain, 409, 9, true, "retry after retryAfterMs; the previous execution's work is still ending"},
	CodeStaleSession:             {KindDomain, 409, 9, true, "retry; an earlier execution's lease on the slot's device is still being released"},
	CodeScopeInvalidated:         {KindDomain, 410, 8, false, "launch with the runner's current incarnation"},
	CodeScopeTransitionPending:   {KindDomain, 503, 5, true, "retry after retryAfterMs; the old incarnation's owners and cleanup are settling"},
	CodeCleanupPending:           {KindDomain, 503, 5, true, "retry after retryAfterMs; `simlock slot list` shows the slot"},
	CodeDiscoveryIncomplete:      {KindDomain, 503, 5, true, "retry after retryAfterMs; `simlock list` shows which inventory read failed"},
	CodeDeviceAssignedToSlot:     {KindDomain, 403, 3, false, "leave the device to its slot; it frees only when its scope is reset (`simlock slot reset-scope`)"},
	CodeDeviceOutsideSlots:       {KindDomain, 403, 3, false, "act only on your own slot's device; end the execution instead of stopping it"},
	CodeSlotAcquisitionFailed:    {KindDomain, 502, 12, false, "read simlock://managed-slots for the failure, fix it, and relaunch the execution"},
	CodeSlotRegistrationRefused:  {KindDomain, 403, 3, false, "bind only to executions this daemon holds"},
	CodeExecutionEnded:           {KindDomain, 410, 8, false, "relaunch the execution: the slot keeps its device"},
	CodeDaemonStalled:            {KindTransport, 503, 14, true, "wait: the MCP server re-binds its execution once the daemon answers again"},
	CodeReconcileInProgress:      {KindDomain, 409, 9, true, "retry after retryAfterMs"},
	CodeConcurrentModification:   {KindDomain, 409, 9, true, "retry; the slot's assignment changed under this acquisition"},
	CodeReadinessIncomplete:      {KindDomain, 502, 12, true, "retry; `simlock daemon logs` says which readiness check failed"},
	CodeExecutionPolicyFailed:    {KindInternal, 500, 1, false, "this is a bug; `simlock daemon logs` has details"},
	CodeInternal:                 {KindInternal, 500, 1, false, "this is a bug; `simlock daemon logs` has details"},
	CodeUnknownDaemonError:       {KindInternal, 500, 1, false, "the daemon answered with a code this client does not know; upgrade the client"},
}

// Error is the one error shape every frontend speaks.
type Error struct {
	Code         Code           `json:"code"`
	Message      string         `json:"message"`
	Retryable    bool           `json:"retryable"`
	RetryAfterMs *int64         `json:"retryAfterMs,omitempty"`
	NextAction   string         `json:"nextAction,omitempty"`
	Details      map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Is matches another *Error by code, so errors.Is(err, &Error{Code: X}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Info returns the table row for e's code; unknown codes get the
// UNKNOWN_DAEMON_ERROR row.
func (e *Error) Info() CodeInfo { return InfoFor(e.Code) }

// InfoFor returns the table row for c.
func InfoFor(c Code) CodeInfo {
	if info, ok := ErrorTable[c]; ok {
		return info
	}
	return ErrorTable[CodeUnknownDaemonError]
}

// Errorf builds an Error with the table's defaults for retryable and next action.
func Errorf(code Code, format string, args ...any) *Error {
	info := InfoFor(code)
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: info.Retryable, NextAction: info.NextAction}
}

// WithDetails returns e with the details map set (for chaining).
func (e *Error) WithDetails(kv ...any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Details[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return e
}

// WithNext overrides the next action.
func (e *Error) WithNext(next string) *Error { e.NextAction = next; return e }

// WithRetryAfter sets the retry hint.
func (e *Error) WithRetryAfter(ms int64) *Error { e.RetryAfterMs = &ms; return e }

// AsError extracts an *Error from err, or nil.
func AsError(err error) *Error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// Normalize returns err as an *Error whose code is known to this build:
// an unknown wire code is wrapped as UNKNOWN_DAEMON_ERROR rather than trusted.
func Normalize(e *Error) *Error {
	if _, ok := ErrorTable[e.Code]; ok {
		return e
	}
	out := *e
	out.Details = map[string]any{"daemonCode": string(e.Code)}
	for k, v := range e.Details {
		out.Details[k] = v
	}
	out.Code = CodeUnknownDaemonError
	return &out
}
