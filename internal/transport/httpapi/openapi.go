package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/simlock/simlock/contract"
)

//go:generate env SIMLOCK_UPDATE_OPENAPI=1 go test -count=1 -run ^TestOpenAPIDescriptionsAreCurrent$ .

// openAPIDocument generates the OpenAPI 3.1 description of the route table.
// Nothing in it is written by hand except prose: every schema comes from a
// contract (or frontend) type by reflection, each struct type once as a
// named component, its descriptions from the Go doc comments
// (openapi_descriptions.go), and every operation of contract.Registry
// appears under /v1/ops/{name}.
func openAPIDocument(routes []route, version string, gateway bool) map[string]any {
	// Gateway-only operations answer UNKNOWN_OPERATION on a worker, so only
	// a gateway's document lists them.
	gatewayOnly := map[string]bool{}
	if !gateway {
		for _, name := range contract.GatewayOnly() {
			gatewayOnly[name] = true
		}
	}
	g := newSchemaGen()
	paths := map[string]any{}
	add := func(path, method string, op map[string]any) {
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		item[strings.ToLower(method)] = op
	}
	for _, rt := range routes {
		if rt.kind == kindOps {
			for _, op := range contract.Registry() {
				if _, refused := notOverHTTP[op.Name]; !refused && !gatewayOnly[op.Name] {
					add("/v1/ops/"+op.Name, http.MethodPost, g.opsOperation(op))
					if _, pushes := pushingOps[op.Name]; pushes {
						add("/v1/ops/"+op.Name+streamSuffix, http.MethodPost, g.opsStreamOperation(op))
					}
				}
			}
			continue
		}
		add(rt.path, rt.method, g.routeOperation(rt))
	}
	g.ref(reflect.TypeFor[ErrorBody](), false)
	g.schemas["NDJSONLine"] = ndjsonLineSchema()
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "simlock HTTP API",
			"version": version,
			"description": "Leases of iOS Simulators and Android Emulators. Every route but GET /v1/healthz and " +
				"GET /v1/openapi.json needs `Authorization: Bearer <token>`; agent tokens get an agent session, " +
				"operator tokens an admin one. Errors are {\"error\": <simlock error>} with the status of the error " +
				"table. Response objects may gain fields in later versions; request objects are decoded strictly. " +
				"See docs/http-api.md.",
			// The project declares no licence yet; this says so rather than
			// guessing one.
			"license": map[string]any{"name": "No licence declared (all rights reserved)"},
		},
		"servers": []any{map[string]any{
			"url":         "http://{listen}",
			"description": "The daemon's http.listen address (loopback by default; simlock terminates no TLS).",
			"variables":   map[string]any{"listen": map[string]any{"default": "127.0.0.1:7420"}},
		}},
		"security": []any{map[string]any{"bearer": []any{}}},
		"paths":    paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "An API token from `simlock token create` (agent or operator)."}},
			"schemas":   g.schemas,
			"responses": errorResponses(),
			"headers":   responseHeaders(),
		},
	}
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// Closed string sets of the contract, each a named enum component. A
// field gets one when its Go type is the set's type (Role, Code) or when
// its "Type.Field" is listed in enumFields.
func enumSchemas() map[string]map[string]any {
	codes := make([]string, 0, len(contract.ErrorTable))
	for c := range contract.ErrorTable {
		codes = append(codes, string(c))
	}
	slices.Sort(codes)
	enum := func(desc string, values ...string) map[string]any {
		return map[string]any{"type": "string", "description": desc, "enum": values}
	}
	return map[string]map[string]any{
		"Platform": enum("A device platform.", "ios", "android"),
		"DeviceState": enum("A managed device's state.", contract.StateProvisioning, contract.StateReady, contract.StateLeased,
			contract.StateReclaiming, contract.StateShutdown, contract.StateQuarantined, contract.StateDeleted),
		"Role":      enum("A session's authority: agent, or admin (an operator token).", string(contract.RoleAgent), string(contract.RoleAdmin)),
		"TokenRole": enum("An API token's role as minted; operator maps to the admin session role.", contract.TokenRoleAgent, contract.TokenRoleOperator, contract.TokenRoleWorker),
		"ErrorCode": enum("A simlock error code; the HTTP status of each is fixed by the error table (docs/protocol.md).", codes...),
		"RequestState": enum("A lease request's state.", contract.RequestQueued, contract.RequestProvisioning, contract.RequestBooting,
			contract.RequestGranted, contract.RequestFailed, contract.RequestCancelled, contract.RequestExpired),
		"AdmissionPath": enum("How a lease was served.", contract.PathWarm, contract.PathBoot, contract.PathProvision,
			contract.PathEvictThenProvision, contract.PathDownload),
		"WorkerState": enum("A worker's connection state as a gateway sees it.", contract.WorkerConnected, contract.WorkerDisconnected, contract.WorkerIncompatible),
		"NoticeType":  enum("A lease-scoped push.", contract.NotifyDeviceUnhealthy, contract.NotifyDeviceRecovered, contract.NotifyLeaseLost),
		"Tool":        enum("A platform tool: simctl (iOS) or adb (Android).", "simctl", "adb"),
	}
}

var enumFields = map[string]string{
	"DeviceRuntime.Lifecycle":      "DeviceState",
	"TokenCreateIn.Role":           "TokenRole",
	"TokenCreateOut.Role":          "TokenRole",
	"TokenInfo.Role":               "TokenRole",
	"LeaseRequestReceipt.State":    "RequestState",
	"LeaseTiming.Path":             "AdmissionPath",
	"WorkerView.State":             "WorkerState",
	"LeaseNotice.Type":             "NoticeType",
	"DeviceExecIn.Tool":            "Tool",
	"PassthroughIn.Tool":           "Tool",
	"Device.Platform":              "Platform",
	"Lease.Platform":               "Platform",
	"LeaseRequestIn.Platform":      "Platform",
	"LeaseRequestReceipt.Platform": "Platform",
	"QueueEntry.Platform":          "Platform",
	"CatalogGetIn.Platform":        "Platform",
	"PlatformCatalog.Platform":     "Platform",
	"DoctorFinding.Platform":       "Platform",
	"PassthroughOut.Platform":      "Platform",
}

// neverNull names the pointer fields without omitempty that are never
// sent as null, so their schema is not nullable: every error response
// carries its error, and a generated client should not make each caller
// check for a null one.
var neverNull = map[string]bool{
	"ErrorBody.Error": true,
}

// fallbackDocs describe fields whose Go declaration carries no comment,
// by JSON name, so every property has a description.
var fallbackDocs = map[string]string{
	"leaseId":           "The lease's id (lse_...).",
	"requestId":         "The lease request's id (req_...).",
	"requesterId":       "Who asked: the requester the lease or request belongs to.",
	"ownerId":           "The principal owning the lease (the token's principal over HTTP).",
	"deviceId":          "The managed device's id.",
	"platform":          "The device platform.",
	"model":             "The device model.",
	"osVersion":         "The OS version.",
	"state":             "The current state.",
	"name":              "A human-readable name.",
	"id":                "The id.",
	"version":           "A version string.",
	"createdAt":         "When it was created.",
	"updatedAt":         "When it last changed.",
	"grantedAt":         "When the lease was granted.",
	"expiresAt":         "When the lease expires unless renewed.",
	"lastRenewedAt":     "When the lease was last renewed.",
	"stateSinceAt":      "When the device entered its current state.",
	"lastLeasedAt":      "When the device was last leased.",
	"enqueuedAt":        "When the request joined the queue.",
	"lastSeenAt":        "When the gateway last heard from the worker.",
	"ttlMs":             "The lease's width in milliseconds.",
	"min":               "The lowest protocol version.",
	"max":               "The highest protocol version.",
	"mode":              "The daemon's mode: worker or gateway.",
	"instanceId":        "The daemon instance's id, new on every start.",
	"role":              "The role.",
	"principal":         "The session's principal.",
	"selected":          "The protocol version both sides speak.",
	"protocol":          "A protocol version range.",
	"released":          "Whether (or which) leases were released.",
	"cancelled":         "Whether a request was cancelled.",
	"revoked":           "Whether the token was revoked.",
	"stopping":          "Whether the daemon is stopping.",
	"leases":            "Leases.",
	"devices":           "Devices.",
	"tokens":            "Tokens.",
	"workers":           "Workers.",
	"events":            "Events.",
	"findings":          "What the check found.",
	"actions":           "What the pass did (or would do).",
	"healthy":           "Whether nothing needs attention.",
	"exitCode":          "The command's exit code.",
	"position":          "1-based position in the queue.",
	"phase":             "Where the request stands (queued, reclaiming, evicting, provisioning, booting, granted).",
	"queueDepth":        "Requests waiting in the queue.",
	"queue":             "The waiting requests, in order.",
	"capacity":          "Capacity against the configured limits.",
	"daemon":            "The daemon's own state.",
	"running":           "Devices running.",
	"managed":           "Devices managed (running or not).",
	"reserved":          "Device slots reserved for requests being served.",
	"maxRunning":        "The limit on running devices.",
	"maxManaged":        "The limit on managed devices.",
	"strategy":          "The capacity strategy.",
	"platforms":         "Per-platform figures.",
	"pid":               "The daemon's process id.",
	"health":            "Health: starting, running, stopping or failed.",
	"startedAt":         "When the daemon started.",
	"socket":            "The daemon's socket path.",
	"home":              "The daemon's SIMLOCK_HOME.",
	"identifier":        "The platform's identifier for it.",
	"minOsVersion":      "The lowest OS version the model runs.",
	"maxOsVersion":      "The highest OS version the model runs.",
	"build":             "The OS build.",
	"available":         "Whether it is installed and usable.",
	"models":            "Models.",
	"runtimes":          "OS runtimes.",
	"error":             "An error, when there is one.",
	"path":              "A path.",
	"config":            "The effective configuration as JSON.",
	"seq":               "The event's sequence number; it continues across restarts.",
	"workerId":          "The worker the fact is about (through a gateway).",
	"type":              "The kind of fact.",
	"at":                "When it happened.",
	"reason":            "Why.",
	"data":              "Further facts, by kind.",
	"fromSeq":           "The first missed sequence number.",
	"toSeq":             "The last missed sequence number.",
	"token":             "The token's secret; shown only once.",
	"rule":              "The cleanup rule.",
	"action":            "The action.",
	"executed":          "Whether it was carried out.",
	"skipped":           "Why it was skipped, if it was.",
	"dryRun":            "Whether this was a preview.",
	"kind":              "The kind of finding.",
	"handle":            "The platform's handle for the device.",
	"detail":            "What was found.",
	"fixed":             "Whether it was repaired.",
	"releasedLeases":    "The leases released.",
	"cancelledRequests": "The requests cancelled.",
	"destroyedDevices":  "The devices destroyed.",
	"failed":            "What failed, by id, and why.",
	"code":              "The error code.",
	"message":           "What went wrong, for a person.",
	"retryable":         "Whether retrying can help.",
	"retryAfterMs":      "When retrying makes sense, in milliseconds (also the Retry-After header).",
	"nextAction":        "What to do next.",
	"details":           "Structured facts about the error.",
	"notices":           "Lease notices buffered for the caller.",
	"label":             "The worker's label.",
	"drained":           "Whether the worker takes no new leases.",
	"downloadPolicy":    "The worker's downloads.policy.",
	"command":           "The command to run.",
	"args":              "Its arguments.",
	"env":               "Environment entries.",
	"deviceKey":         "The host registry's key of the device.",
	"status":            "The status.",
	"chunk":             "A piece of output.",
	"stream":            "stdout or stderr.",
	"shutDown":          "The devices shut down.",
	"simulated":         "Whether the device was made by a simulated SDK (simlock simsdk) rather than the real tools.",
	"allowDownload":     "Let the daemon download a missing runtime or system image (subject to downloads.policy).",
	"noWait":            "Refuse at once (NO_CAPACITY, CAPACITY_EXHAUSTED) instead of queueing when no device can be served now.",
	"idempotencyKey":    "The request's idempotency key, when it was given one.",
	"queueWaitMs":       "Milliseconds spent waiting in the queue.",
	"totalMs":           "Milliseconds from the request's arrival to the grant.",
	"downloadMs":        "Milliseconds spent downloading a runtime or system image.",
	"evictMs":           "Milliseconds spent evicting an idle device to make room.",
	"provisionMs":       "Milliseconds spent creating the device.",
	"readinessMs":       "Milliseconds spent waiting for the booted device to become ready.",
	"etaMs":             "The estimated milliseconds until the grant, when known.",
	"queuePosition":     "1-based position in the queue while the request waits.",
}

// schemaGen turns Go types into JSON Schemas, registering each named
// struct type once under components/schemas and referring to it by $ref.
// Request types are strict (additionalProperties false, as the decoder
// is); response types leave additional properties open so a client
// generated today keeps decoding what a later daemon adds.
type schemaGen struct {
	schemas map[string]any
	owner   map[string]string // component -> the Go type and direction it describes
	docs    map[string]string
	enums   map[string]map[string]any
	// opDocs describes an undocumented input or output type by its
	// operation.
	opDocs map[reflect.Type]string
}

func newSchemaGen() *schemaGen {
	g := &schemaGen{schemas: map[string]any{}, owner: map[string]string{}, docs: goDocs(), enums: enumSchemas(),
		opDocs: map[reflect.Type]string{}}
	for _, op := range contract.Registry() {
		g.opDocs[op.In] = "The input of " + op.Name + ": " + op.Doc
		if _, taken := g.opDocs[op.Out]; !taken {
			g.opDocs[op.Out] = "The output of " + op.Name + "."
		}
	}
	return g
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
	roleType = reflect.TypeFor[contract.Role]()
	codeType = reflect.TypeFor[contract.Code]()
)

// componentName names t's component. A request type used only as a
// request keeps its Go name (its name ends in In); any other type reached
// from a request gets an Input variant, since its response twin is open.
func componentName(t reflect.Type, strict bool) string {
	if strict && !strings.HasSuffix(t.Name(), "In") {
		return t.Name() + "Input"
	}
	return t.Name()
}

func (g *schemaGen) enumRef(name string) map[string]any {
	g.schemas[name] = g.enums[name]
	return ref(name)
}

// ref returns a schema for t: a $ref for named structs and enums, inline
// otherwise.
func (g *schemaGen) ref(t reflect.Type, strict bool) map[string]any {
	if t.Kind() == reflect.Pointer {
		return g.ref(t.Elem(), strict)
	}
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case rawType:
		return map[string]any{}
	case roleType:
		return g.enumRef("Role")
	case codeType:
		return g.enumRef("ErrorCode")
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.ref(t.Elem(), strict)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.ref(t.Elem(), strict)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := componentName(t, strict)
		who := fmt.Sprintf("%s strict=%v", t, strict)
		if prev, ok := g.owner[name]; ok {
			if prev != who {
				panic(fmt.Sprintf("openapi: component %s names both %s and %s", name, prev, who))
			}
			return ref(name)
		}
		g.owner[name] = who
		g.schemas[name] = g.object(t, strict)
		return ref(name)
	}
	return map[string]any{}
}

// object is the component schema of struct t.
func (g *schemaGen) object(t reflect.Type, strict bool) map[string]any {
	props := map[string]any{}
	required := []string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, omitempty, ok := contract.WireName(f)
		if !ok {
			continue
		}
		var p map[string]any
		if enum, ok := enumFields[t.Name()+"."+f.Name]; ok {
			p = g.enumRef(enum)
		} else {
			p = g.ref(f.Type, strict)
		}
		// A sibling of $ref is allowed in OpenAPI 3.1; copy so the
		// shared map is never changed.
		p = clone(p)
		// A field without omitempty is always sent, a pointer too: the
		// encoder writes null for it, which the device description uses
		// for an unknown fact (contract/describe.go).
		if !omitempty && f.Type.Kind() == reflect.Pointer && !neverNull[t.Name()+"."+f.Name] {
			p = map[string]any{"anyOf": []any{p, map[string]any{"type": "null"}}}
		}
		p["description"] = g.fieldDoc(t, f, name)
		props[name] = p
		if !omitempty {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if strict {
		s["additionalProperties"] = false
	}
	if len(required) > 0 {
		s["required"] = required
	}
	if d := g.docs[t.Name()]; d != "" {
		s["description"] = d
	} else if d := g.opDocs[t]; d != "" {
		s["description"] = d
	} else {
		s["description"] = splitCamel(t.Name()) + "."
	}
	return s
}

func (g *schemaGen) fieldDoc(t reflect.Type, f reflect.StructField, jsonName string) string {
	if d, ok := g.docs[t.Name()+"."+f.Name]; ok {
		// The comment opens with the Go name; a reader of the document
		// knows the field by its JSON name.
		if rest, ok := strings.CutPrefix(d, f.Name+" "); ok {
			return jsonName + " " + rest
		}
		return d
	}
	if d, ok := fallbackDocs[jsonName]; ok {
		return d
	}
	// An undocumented field of a documented struct type reads as that
	// type's doc.
	ft := f.Type
	for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
		ft = ft.Elem()
	}
	if d := g.docs[ft.Name()]; d != "" && ft.Kind() == reflect.Struct {
		return d
	}
	return splitCamel(f.Name) + "."
}

// splitCamel turns "QueueWaitMs" into "Queue wait ms".
func splitCamel(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) && !unicode.IsUpper(rune(s[i-1])) {
			b.WriteByte(' ')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func ndjsonLineSchema() map[string]any {
	return map[string]any{
		"description": "One line of an application/x-ndjson answer: pushes (progress, event, ...) as {method, params}, " +
			"then exactly one {result} or {error}.",
		"oneOf": []any{
			map[string]any{"type": "object", "required": []string{"method", "params"},
				"properties": map[string]any{
					"method": map[string]any{"type": "string", "description": "The push's kind: progress, event, output, ..."},
					"params": map[string]any{"description": "The push's payload."}}},
			map[string]any{"type": "object", "required": []string{"result"},
				"properties": map[string]any{"result": map[string]any{"description": "The operation's output."}}},
			ref("ErrorBody"),
		},
	}
}

func jsonContent(schema any) map[string]any {
	return map[string]any{mediaJSON: map[string]any{"schema": schema}}
}

func response(desc string, content map[string]any) map[string]any {
	r := map[string]any{"description": desc}
	if content != nil {
		r["content"] = content
	}
	return r
}

// statusName names the shared response component of an error status.
func statusName(status int) string {
	return strings.ReplaceAll(http.StatusText(status), " ", "") + "Error"
}

// errorResponses are components/responses, one per HTTP status of the
// error table, each naming the codes answered with it. A status with a
// retryable code may carry Retry-After.
func errorResponses() map[string]any {
	codes := map[int][]string{}
	retry := map[int]bool{}
	for c, info := range contract.ErrorTable {
		codes[info.HTTPStatus] = append(codes[info.HTTPStatus], string(c))
		retry[info.HTTPStatus] = retry[info.HTTPStatus] || info.Retryable
	}
	out := map[string]any{}
	for status, cs := range codes {
		slices.Sort(cs)
		r := response(http.StatusText(status)+": a refusal with one of the codes "+strings.Join(cs, ", ")+".",
			jsonContent(ref("ErrorBody")))
		if retry[status] {
			r["headers"] = map[string]any{"Retry-After": map[string]any{"$ref": "#/components/headers/Retry-After"}}
		}
		out[statusName(status)] = r
	}
	return out
}

func responseHeaders() map[string]any {
	return map[string]any{
		"Retry-After": map[string]any{"description": "Seconds to wait before retrying (the error's retryAfterMs, rounded up).",
			"schema": map[string]any{"type": "integer", "minimum": 0}},
		"Location": map[string]any{"description": "Where to read the outcome: the lease once granted, or the handle to long-poll.",
			"schema": map[string]any{"type": "string"}},
		"Preference-Applied": map[string]any{"description": "The Prefer value honoured: wait=N or respond-async.",
			"schema": map[string]any{"type": "string"}},
	}
}

func headerRefs(names ...string) map[string]any {
	h := map[string]any{}
	for _, n := range names {
		h[n] = map[string]any{"$ref": "#/components/headers/" + n}
	}
	return h
}

// errorStatuses lists the statuses an operation may refuse with: those any
// authenticated call can meet, plus the codes its kind raises.
func errorStatuses(op string) []int {
	s := []int{400, 401, 403, 404, 500, 503}
	switch op {
	case contract.Hello.Name:
		s = append(s, 426)
	case contract.LeaseRequest.Name:
		s = append(s, 409, 422, 429, 502, 504, 507)
	case contract.DeviceExec.Name:
		s = append(s, 410, 422, 502, 504)
	case contract.DeviceRelease.Name, contract.TokenCreate.Name, contract.WorkerRemove.Name, contract.LeaseRenew.Name, contract.LeaseRelease.Name:
		s = append(s, 409, 502)
	case contract.Passthrough.Name:
		s = append(s, 422)
	case contract.CatalogGet.Name:
		// A platform no driver serves (?platform=junk).
		s = append(s, 422)
	case contract.SessionPrepare.Name, contract.SlotAcquire.Name:
		// Requirements or a spec this host cannot serve, an unserved
		// contract version; a replay under a consumed identity; a failed
		// or timed-out preparation.
		s = append(s, 409, 410, 422, 502, 504)
	case contract.SessionStatus.Name, contract.SessionAbandon.Name, contract.SessionRelease.Name,
		contract.SessionHeartbeat.Name, contract.SessionInfo.Name, contract.SessionGetExport.Name,
		contract.SessionAcknowledgeExport.Name, contract.SlotHeartbeat.Name, contract.SlotRelease.Name,
		contract.SlotResetScope.Name:
		s = append(s, 409, 410)
	case contract.ResourcesGet.Name, contract.ResourcesSet.Name, contract.ResourcesReconcile.Name:
		s = append(s, 409, 410, 422, 502)
	case contract.DeviceUpload.Name:
		s = append(s, 410, 413)
	}
	if slices.Contains(contract.WorkerOnly(), op) {
		s = append(s, 501)
	} else if op != contract.Hello.Name && op != "" {
		// Through a gateway, anything forwarded may find the worker gone.
		s = append(s, 502)
	}
	slices.Sort(s)
	return slices.Compact(s)
}

func addErrors(responses map[string]any, op string) {
	for _, st := range errorStatuses(op) {
		responses[strconv.Itoa(st)] = map[string]any{"$ref": "#/components/responses/" + statusName(st)}
	}
}

// operationID turns a dotted name into lowerCamel: lease.request.poll ->
// leaseRequestPoll.
func operationID(name string) string {
	parts := strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '-' || r == '_' || r == '/' })
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

// pushingOps are the operations that push while they run, with what they
// push. Each gets a :stream twin in the document; any operation still
// streams with Accept: application/x-ndjson, but only these have anything
// to stream.
var pushingOps = map[string]string{
	contract.LeaseRequest.Name:    "progress lines",
	contract.DeviceExec.Name:      "output lines (stdout and stderr chunks)",
	contract.EventsSubscribe.Name: "event and gap lines (with follow and Prefer: keep-open, for as long as the connection stays open)",
	contract.SlotAcquire.Name:     "progress lines",
}

// A success response declares application/json alone: generators type a
// response as the union of its media types, so a stream media type beside
// it would make every answer Out | NDJSONLine. The stream is a separate
// operation (the :stream twin), whose only media type is NDJSON.
const acceptNote = " (Accept: application/x-ndjson still streams this route for clients written before the :stream twins.)"

// opsOperation describes POST /v1/ops/{name} for one operation.
func (g *schemaGen) opsOperation(op contract.Op) map[string]any {
	responses := map[string]any{
		"200": response("The operation's output.", jsonContent(g.ref(op.Out, false))),
	}
	addErrors(responses, op.Name)
	desc := "Role: " + string(op.Role) + ". The body is the operation's input."
	if _, pushes := pushingOps[op.Name]; pushes {
		desc += " POST /v1/ops/" + op.Name + streamSuffix + " streams its pushes before the result." + acceptNote
	}
	return map[string]any{
		"operationId":         opsOperationID(op.Name),
		"tags":                []string{"ops"},
		"summary":             op.Doc,
		"description":         desc,
		"x-simlock-operation": op.Name,
		"requestBody":         map[string]any{"required": false, "content": jsonContent(g.ref(op.In, true))},
		"responses":           responses,
	}
}

func opsOperationID(name string) string {
	return "ops" + strings.ToUpper(name[:1]) + operationID(name)[1:]
}

// ndjsonContent is the one media type of a stream twin's success.
func ndjsonContent() map[string]any {
	return map[string]any{mediaNDJSON: map[string]any{"schema": ref("NDJSONLine")}}
}

// opsStreamOperation describes POST /v1/ops/{name}:stream, the operation
// answered as NDJSON lines.
func (g *schemaGen) opsStreamOperation(op contract.Op) map[string]any {
	responses := map[string]any{
		"200": response("NDJSON: "+pushingOps[op.Name]+", then one {result} line with the operation's output, or one {error} line.",
			ndjsonContent()),
	}
	addErrors(responses, op.Name)
	return map[string]any{
		"operationId": opsOperationID(op.Name) + "Stream",
		"tags":        []string{"ops"},
		"summary":     op.Doc + " Streamed.",
		"description": "Role: " + string(op.Role) + ". The body is the operation's input; the answer is NDJSON whatever Accept says: " +
			pushingOps[op.Name] + " as {method, params}, then the result. A refusal before the first line keeps its table status; " +
			"a later one is the {error} line. Prefer: keep-open keeps the stream open after the result.",
		"x-simlock-operation": op.Name,
		"requestBody":         map[string]any{"required": false, "content": jsonContent(g.ref(op.In, true))},
		"responses":           responses,
	}
}

var wildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// inputSchema is the inline schema of an operation's input without the
// fields the route supplies itself (path wildcards, headers).
func (g *schemaGen) inputSchema(t reflect.Type, drop map[string]string) map[string]any {
	g.ref(t, true)
	full := g.schemas[componentName(t, true)].(map[string]any)
	if len(drop) == 0 {
		return ref(componentName(t, true))
	}
	return withoutFields(full, drop)
}

// routeOperation describes one table row.
func (g *schemaGen) routeOperation(rt route) map[string]any {
	o := map[string]any{"operationId": operationID(rt.operationID())}
	summary := rt.summary
	opName := ""
	if rt.op != nil {
		opName = rt.op.Name
		if summary == "" {
			summary = rt.op.Doc
		}
		o["x-simlock-operation"] = rt.op.Name
		o["description"] = "Role: " + string(rt.op.Role) + "."
		o["tags"] = []string{strings.SplitN(rt.op.Name, ".", 2)[0]}
	}
	o["summary"] = summary
	var params []any
	for _, m := range wildcard.FindAllStringSubmatch(rt.path, -1) {
		schema := map[string]any{"type": "string"}
		if f, ok := rt.fields[m[1]]; ok && rt.op != nil {
			if ft := fieldType(rt.op.In, f); ft != nil {
				schema = g.ref(ft, true)
			}
		}
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": schema,
			"description": "The " + m[1] + " the route acts on."})
	}
	var input map[string]any
	if rt.op != nil {
		input = g.inputSchema(rt.op.In, rt.fields)
	}
	takesQuery := rt.method == http.MethodGet || rt.method == http.MethodDelete
	responses := map[string]any{}
	o["responses"] = responses
	lease := g.ref(reflect.TypeFor[contract.Lease](), false)
	pending := g.ref(reflect.TypeFor[PendingRequest](), false)
	switch rt.kind {
	case kindHealth:
		o["security"] = []any{}
		o["tags"] = []string{"meta"}
		responses["200"] = response("The daemon answers.", jsonContent(g.ref(reflect.TypeFor[Health](), false)))
		return o
	case kindOpenAPI:
		o["security"] = []any{}
		o["tags"] = []string{"meta"}
		responses["200"] = response("This document.", jsonContent(map[string]any{"type": "object"}))
		return o
	case kindRequestPoll:
		params = append(params, map[string]any{"name": "wait", "in": "query", "required": false,
			"description": "Seconds to wait for an outcome (default 20, capped at 60).", "schema": map[string]any{"type": "integer", "minimum": 0}})
		ok := response("Granted.", jsonContent(lease))
		ok["headers"] = headerRefs("Location", "Preference-Applied")
		responses["200"] = ok
		wait := response("Still waiting; poll again.", jsonContent(pending))
		wait["headers"] = headerRefs("Location", "Preference-Applied")
		responses["202"] = wait
		addErrors(responses, contract.LeaseRequest.Name)
		o["parameters"] = params
		return o
	case kindRequestDrop:
		responses["200"] = response("The handle is given up.", jsonContent(g.ref(reflect.TypeFor[DropReply](), false)))
		addErrors(responses, opName)
		o["parameters"] = params
		return o
	case kindHello:
		// Over HTTP the token is the credential and names the principal.
		input = withoutFields(g.schemas[componentName(rt.op.In, true)].(map[string]any), map[string]string{"c": "credential", "p": "principal"})
		responses["200"] = response("The negotiated protocol, with the token's role and principal.", jsonContent(g.ref(rt.op.Out, false)))
	case kindEvents:
		input = withoutFields(g.schemas[componentName(rt.op.In, true)].(map[string]any), map[string]string{"follow": "follow"})
		params = append(params, map[string]any{"name": "Last-Event-ID", "in": "header", "required": false,
			"description": "Resume after this event seq (overrides ?since=).", "schema": map[string]any{"type": "string"}})
		responses["200"] = response("Server-Sent Events; each data line is one Event.",
			map[string]any{mediaSSE: map[string]any{"schema": g.ref(reflect.TypeFor[contract.Event](), false)}})
	case kindLeaseRequest:
		if !rt.stream {
			params = append(params, map[string]any{"name": "Prefer", "in": "header", "required": false,
				"description": "wait=N (seconds, capped at 60; default 20) or respond-async.", "schema": map[string]any{"type": "string"}})
		}
		params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false,
			"description": "The body's idempotencyKey: a repeat with the same key returns the first request's outcome.",
			"schema":      map[string]any{"type": "string", "maxLength": 256}})
		if rt.stream {
			// The stream runs the request in the connection: no Prefer,
			// no 202 handle.
			responses["200"] = response("NDJSON: progress lines, then one {result} line with the Lease, or one {error} line.",
				ndjsonContent())
			o["description"] = o["description"].(string) + " The answer is NDJSON whatever Accept says; closing the connection withdraws the request."
			break
		}
		created := response("Granted.", jsonContent(g.ref(rt.op.Out, false)))
		created["headers"] = headerRefs("Location", "Preference-Applied")
		responses["201"] = created
		wait := response("Still waiting; long-poll the Location.", jsonContent(pending))
		wait["headers"] = headerRefs("Location", "Preference-Applied")
		responses["202"] = wait
		o["description"] = o["description"].(string) + " POST /v1/leases:stream streams the progress instead." + acceptNote
	case kindUpload:
		o["requestBody"] = map[string]any{"required": true, "description": "The file's bytes, streamed; Content-Length, when sent, is checked against the cap before anything is stored.",
			"content": map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
		responses["200"] = response("The file is stored; its size and SHA-256.", jsonContent(g.ref(rt.op.Out, false)))
		addErrors(responses, opName)
		o["parameters"] = params
		return o
	case kindRenew:
		g.schemas["RenewedLease"] = map[string]any{
			"description": "A renewed lease, with the notices buffered for its owner since the last renew.",
			"allOf": []any{lease, map[string]any{"type": "object", "required": []string{"notices"},
				"properties": map[string]any{"notices": map[string]any{"type": "array",
					"description": "Lease-scoped facts (device-unhealthy, device-recovered, lease-lost) buffered since the last renew.",
					"items":       g.ref(reflect.TypeFor[contract.LeaseNotice](), false)}}}},
		}
		responses["200"] = response("The renewed lease and the notices buffered since the last renew.", jsonContent(ref("RenewedLease")))
	default:
		status := "200"
		if rt.created {
			status = "201"
		}
		switch {
		case rt.stream:
			responses[status] = response("NDJSON: "+pushingOps[opName]+", then one {result} line with the operation's output, or one {error} line.",
				ndjsonContent())
			o["description"] = o["description"].(string) + " The answer is NDJSON whatever Accept says."
		default:
			responses[status] = response("The operation's output.", jsonContent(g.ref(rt.op.Out, false)))
			if _, pushes := pushingOps[opName]; pushes {
				o["description"] = o["description"].(string) + " POST " + rt.path + streamSuffix + " streams its " + pushingOps[opName] + "." + acceptNote
			}
		}
	}
	addErrors(responses, opName)
	if input != nil {
		if _, isRef := input["$ref"]; isRef {
			input = g.schemas[componentName(rt.op.In, true)].(map[string]any)
			if !takesQuery {
				if props, _ := input["properties"].(map[string]any); len(props) > 0 {
					_, hasRequired := input["required"]
					o["requestBody"] = map[string]any{"required": hasRequired, "content": jsonContent(ref(componentName(rt.op.In, true)))}
				}
				input = nil
			}
		}
	}
	if input != nil {
		if takesQuery {
			params = append(params, queryParams(input)...)
		} else if props, _ := input["properties"].(map[string]any); len(props) > 0 {
			_, hasRequired := input["required"]
			o["requestBody"] = map[string]any{"required": hasRequired, "content": jsonContent(input)}
		}
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	return o
}

// withoutFields drops the properties that path wildcards (or the route
// itself) supply.
func withoutFields(s map[string]any, fields map[string]string) map[string]any {
	if s == nil || len(fields) == 0 {
		return s
	}
	out := map[string]any{}
	for k, v := range s {
		out[k] = v
	}
	props := map[string]any{}
	for k, v := range s["properties"].(map[string]any) {
		props[k] = v
	}
	var req []string
	reqs, _ := s["required"].([]string)
	for _, f := range fields {
		delete(props, f)
	}
	for _, r := range reqs {
		if _, ok := props[r]; ok {
			req = append(req, r)
		}
	}
	out["properties"] = props
	delete(out, "required")
	if len(req) > 0 {
		out["required"] = req
	}
	return out
}

func queryParams(input map[string]any) []any {
	props, _ := input["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	reqs, _ := input["required"].([]string)
	var out []any
	for _, n := range names {
		p := clone(props[n].(map[string]any))
		desc, _ := p["description"].(string)
		delete(p, "description")
		out = append(out, map[string]any{"name": n, "in": "query", "required": slices.Contains(reqs, n), "schema": p, "description": desc})
	}
	return out
}
