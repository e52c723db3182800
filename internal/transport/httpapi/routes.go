package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/simlock/simlock/contract"
)

// kind says how a route turns its operation's outcome into a response.
type kind int

const (
	kindCall         kind = iota // run op; JSON, or NDJSON when accepted
	kindHealth                   // liveness, no auth
	kindOpenAPI                  // the generated document
	kindHello                    // protocol negotiation; role from the token
	kindLeaseRequest             // Prefer: wait, then 201 or 202 + handle
	kindRequestPoll              // long-poll a 202 handle
	kindRequestDrop              // give a 202 handle up
	kindRenew                    // lease.renew plus buffered notices
	kindEvents                   // events.subscribe as Server-Sent Events
	kindOps                      // POST /v1/ops/{name}: any operation
	kindUpload                   // PUT of a raw body, fed to device.upload in chunks
)

// route is one row of the table. Routes backed by an operation take their
// input and output schemas from it; path wildcards and query parameters
// fill input fields by their JSON names.
type route struct {
	method, path string
	op           *contract.Op
	// id is the OpenAPI operationId; default op.Name.
	id string
	// fields maps path wildcards to input fields.
	fields  map[string]string
	created bool // success is 201 Created
	kind    kind
	public  bool
	summary string
	// stream marks a route's :stream twin: the same operation answered as
	// NDJSON whatever Accept says, so the document can describe it as an
	// operation of its own (ADR 0094).
	stream bool
}

func (rt route) pattern() string { return rt.method + " " + rt.path }

func (rt route) operationID() string {
	if rt.id != "" {
		return rt.id
	}
	if rt.op != nil {
		return rt.op.Name
	}
	return strings.ToLower(rt.method) + strings.ReplaceAll(rt.path, "/", ".")
}

func opRef[In, Out any](o contract.Operation[In, Out]) *contract.Op { op := o.Op; return &op }

var leaseID = map[string]string{"id": "leaseId"}

// routeTable is the single declaration of the HTTP surface. Every operation
// is also reachable through POST /v1/ops/{name}, so a new contract operation
// needs no row here to be callable; a row only gives it a resource-style
// address. driver.passthrough is not served: it answers a command line for
// the daemon's own machine, meaningless to a remote caller.
func routeTable() []route {
	return []route{
		{method: "GET", path: "/v1/healthz", kind: kindHealth, public: true, id: "healthz",
			summary: "Liveness and version; the only route that needs no token."},
		{method: "GET", path: "/v1/openapi.json", kind: kindOpenAPI, public: true, id: "openapi",
			summary: "This document, generated from the contract; public, like healthz."},
		{method: "POST", path: "/v1/hello", op: opRef(contract.Hello), kind: kindHello},
		{method: "GET", path: "/v1/status", op: opRef(contract.StatusGet)},
		{method: "GET", path: "/v1/catalog", op: opRef(contract.CatalogGet)},
		{method: "GET", path: "/v1/devices", op: opRef(contract.ListGet)},
		{method: "GET", path: "/v1/config", op: opRef(contract.ConfigGet)},
		{method: "POST", path: "/v1/leases", op: opRef(contract.LeaseRequest), kind: kindLeaseRequest, created: true},
		{method: "POST", path: "/v1/leases:stream", op: opRef(contract.LeaseRequest), kind: kindLeaseRequest, stream: true,
			id: "lease.request.stream", summary: "Request a lease and stream its progress as NDJSON lines, then the lease; runs while the connection stays open."},
		{method: "GET", path: "/v1/leases", op: opRef(contract.LeaseList)},
		{method: "POST", path: "/v1/leases/release-all", op: opRef(contract.LeaseReleaseAll)},
		{method: "GET", path: "/v1/leases/{id}", op: opRef(contract.LeaseGet), fields: leaseID},
		{method: "POST", path: "/v1/leases/{id}/renew", op: opRef(contract.LeaseRenew), fields: leaseID, kind: kindRenew},
		{method: "DELETE", path: "/v1/leases/{id}", op: opRef(contract.LeaseRelease), fields: leaseID},
		{method: "POST", path: "/v1/leases/{id}/release", op: opRef(contract.LeaseRelease), fields: leaseID, id: "lease.release.post"},
		{method: "GET", path: "/v1/lease-requests/{id}", op: opRef(contract.LeaseRequestStatus), fields: map[string]string{"id": "requestId"},
			summary: "A lease request's receipt by its request id: state, and the lease or the refusal; a keyed request's stays readable after a restart."},
		{method: "GET", path: "/v1/requests/{id}", op: opRef(contract.LeaseRequest), kind: kindRequestPoll, id: "lease.request.poll",
			summary: "Long-poll a lease request answered 202: waits up to ?wait= seconds (default 20, cap 60)."},
		{method: "DELETE", path: "/v1/requests/{id}", op: opRef(contract.LeaseRequest), kind: kindRequestDrop, id: "lease.request.drop",
			summary: "Cancel a lease request answered 202 (it ends as REQUEST_CANCELLED) and give up its handle; a lease granted meanwhile is released."},
		{method: "POST", path: "/v1/leases/{id}/exec", op: opRef(contract.DeviceExec), fields: leaseID,
			summary: "Run simctl or adb against the leased device; the answer is the exit code (the :stream twin streams the output)."},
		{method: "POST", path: "/v1/leases/{id}/exec:stream", op: opRef(contract.DeviceExec), fields: leaseID, stream: true, id: "device.exec.stream",
			summary: "Run simctl or adb against the leased device, its output streamed as NDJSON lines, then the exit code."},
		{method: "PUT", path: "/v1/leases/{id}/uploads/{name}", op: opRef(contract.DeviceUpload), kind: kindUpload,
			fields: map[string]string{"id": "leaseId", "name": "name"}, id: "device.upload.put",
			summary: "Stream a file (the raw body) into the lease's scratch directory; device.exec names it as {upload:NAME}."},
		{method: "GET", path: "/v1/leases/{id}/resources", op: opRef(contract.ResourcesGet), fields: leaseID,
			summary: "Observe the leased device's resource groups: enabled, disabled, unsupported or unknown, with per-service evidence."},
		{method: "PUT", path: "/v1/leases/{id}/resources", op: opRef(contract.ResourcesSet), fields: leaseID,
			summary: "Enable or disable resource groups (a partial map), or restore an Android receipt; answered with an independent re-read."},
		{method: "POST", path: "/v1/leases/{id}/resources/reconcile", op: opRef(contract.ResourcesReconcile), fields: leaseID,
			summary: "Compare a requested resource map with the device's observed state as typed drift; repair on request."},
		{method: "POST", path: "/v1/requests/cancel", op: opRef(contract.LeaseCancel)},
		{method: "GET", path: "/v1/events", op: opRef(contract.EventsSubscribe), kind: kindEvents,
			summary: "Business events as Server-Sent Events: the backlog after ?since= (or Last-Event-ID), then live."},
		{method: "GET", path: "/v1/capabilities", op: opRef(contract.CapabilitiesGet),
			summary: "The contracts this daemon serves (session-broker/v1, ...); a gateway lists its own, none today."},
		{method: "POST", path: "/v1/sessions", op: opRef(contract.SessionPrepare),
			summary: "Prepare a session by requirements under an owner token; the same token and config answer with the same durable receipt."},
		{method: "GET", path: "/v1/sessions/stats", op: opRef(contract.SessionStats),
			summary: "Acquisition and reset statistics over recent session receipts (?windowMs=, ?limit=)."},
		{method: "POST", path: "/v1/session-requests/{requestId}/status", op: opRef(contract.SessionStatus), fields: map[string]string{"requestId": "requestId"},
			summary: "A session request's receipt; the owner token goes in the body, never the URL."},
		{method: "POST", path: "/v1/session-requests/{requestId}/abandon", op: opRef(contract.SessionAbandon), fields: map[string]string{"requestId": "requestId"},
			summary: "Consume a session request id, seen or not; a late prepare of it allocates nothing."},
		{method: "GET", path: "/v1/sessions/{id}", op: opRef(contract.SessionInfo), fields: map[string]string{"id": "sessionId"},
			summary: "A session's bound device, descriptive only."},
		{method: "POST", path: "/v1/sessions/{id}/release", op: opRef(contract.SessionRelease), fields: map[string]string{"id": "sessionId"},
			summary: "Release a session through its reset: released, cleanup_pending or unknown_session."},
		{method: "POST", path: "/v1/sessions/{id}/heartbeat", op: opRef(contract.SessionHeartbeat), fields: map[string]string{"id": "sessionId"},
			summary: "A keeper's heartbeat for the session's owner."},
		{method: "POST", path: "/v1/session-exports/{prepareId}", op: opRef(contract.SessionGetExport), fields: map[string]string{"prepareId": "prepareId"},
			summary: "Read a pinned session export (requestDigest and ownerToken in the body)."},
		{method: "POST", path: "/v1/session-exports/{prepareId}/acknowledge", op: opRef(contract.SessionAcknowledgeExport), fields: map[string]string{"prepareId": "prepareId"},
			summary: "Acknowledge a pinned session export so its receipt may be pruned."},
		{method: "POST", path: "/v1/tokens", op: opRef(contract.TokenCreate), created: true},
		{method: "GET", path: "/v1/tokens", op: opRef(contract.TokenList)},
		{method: "DELETE", path: "/v1/tokens/{id}", op: opRef(contract.TokenRevoke), fields: map[string]string{"id": "id"}},
		{method: "POST", path: "/v1/doctor", op: opRef(contract.DoctorRun)},
		{method: "POST", path: "/v1/cleanup", op: opRef(contract.CleanupRun)},
		{method: "POST", path: "/v1/nuke", op: opRef(contract.NukeRun)},
		{method: "POST", path: "/v1/daemon/stop", op: opRef(contract.DaemonStop)},
		{method: "POST", path: "/v1/ops/{name}", kind: kindOps, id: "ops",
			summary: "Run any contract operation by name with its input as the body."},
	}
}

// notOverHTTP lists operations the generic route refuses, with the reason.
var notOverHTTP = map[string]string{
	contract.Passthrough.Name: "driver.passthrough answers a command line for the daemon's own machine; run `simlock simctl|adb` there",
}

func (s *Server) buildMux(uplink http.Handler) http.Handler {
	mux := http.NewServeMux()
	if uplink != nil {
		mux.Handle("GET /v1/uplink", uplink)
	}
	for _, rt := range s.routes {
		h := s.handlerFor(rt)
		if rt.stream {
			h = streamed(h)
		}
		mux.Handle(rt.pattern(), s.wrap(rt, h))
	}
	s.mountConsole(mux)
	if s.metrics != nil {
		// Any valid token may scrape: the figures are what status shows.
		mux.Handle("GET /metrics", s.wrap(route{method: "GET", path: "/metrics", summary: "Prometheus metrics"}, s.metrics.ServeHTTP))
	}
	// Anything else gets the contract's error shape too (after auth, so an
	// unauthenticated caller learns nothing about the route space).
	fallback := route{method: "", path: "/", summary: "no route"}
	mux.Handle("/", s.wrap(fallback, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, contract.Errorf(contract.CodeUnknownOperation, "no route %s %s", r.Method, r.URL.Path).
			WithNext("GET /v1/openapi.json lists every route"), nil)
	}))
	return mux
}

func (s *Server) handlerFor(rt route) func(http.ResponseWriter, *http.Request) {
	switch rt.kind {
	case kindHealth:
		return s.serveHealth
	case kindOpenAPI:
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(s.openapi())
		}
	case kindHello:
		return func(w http.ResponseWriter, r *http.Request) { s.serveHello(w, r, rt) }
	case kindLeaseRequest:
		return func(w http.ResponseWriter, r *http.Request) { s.serveLeaseRequest(w, r, rt) }
	case kindRequestPoll:
		return s.servePoll
	case kindRequestDrop:
		return s.serveDrop
	case kindRenew:
		return func(w http.ResponseWriter, r *http.Request) { s.serveRenew(w, r, rt) }
	case kindEvents:
		return func(w http.ResponseWriter, r *http.Request) { s.serveEvents(w, r, rt) }
	case kindOps:
		return s.serveOps
	case kindUpload:
		return s.serveUpload
	}
	return func(w http.ResponseWriter, r *http.Request) {
		params, err := rt.input(w, r)
		if err != nil {
			writeError(w, err, nil)
			return
		}
		s.call(w, r, rt.op.Name, params, rt.successStatus())
	}
}

// streamSuffix names a route's stream twin: POST /v1/leases:stream,
// POST /v1/ops/lease.request:stream.
const streamSuffix = ":stream"

// streamed serves h as if the client had sent Accept: application/x-ndjson.
func streamed(h func(http.ResponseWriter, *http.Request)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { h(w, asStream(r)) }
}

// asStream is r asking for NDJSON. Every route decides on a stream by the
// Accept header (existing clients send it), so a twin only has to set it;
// the request is cloned because a handler must not change the one it was
// given.
func asStream(r *http.Request) *http.Request {
	r = r.Clone(r.Context())
	r.Header.Set("Accept", mediaNDJSON)
	return r
}

func (rt route) successStatus() int {
	if rt.created {
		return http.StatusCreated
	}
	return http.StatusOK
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Health{Status: "ok", Version: s.version})
}

// Health is GET /v1/healthz's body.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// serveHello negotiates the protocol through the daemon; the role and
// principal are the bearer token's, so the body may carry neither a
// credential nor a principal.
func (s *Server) serveHello(w http.ResponseWriter, r *http.Request, rt route) {
	params, cerr := rt.input(w, r)
	if cerr != nil {
		writeError(w, cerr, nil)
		return
	}
	var in contract.HelloIn
	if err := contract.Decode(params, &in); err != nil {
		writeError(w, contract.AsError(err), nil)
		return
	}
	if in.Credential != "" || in.Principal != "" {
		writeError(w, contract.Errorf(contract.CodeBadRequest, "over HTTP the bearer token is the credential and names the principal; send neither in hello"), nil)
		return
	}
	out, _, herr := s.b.Hello(r.Context(), contract.HelloIn{Protocol: in.Protocol, Client: in.Client})
	if herr != nil {
		writeError(w, herr, nil)
		return
	}
	sess := sessionOf(r)
	out.Role, out.Principal = sess.Role, sess.Principal
	writeJSON(w, http.StatusOK, out)
}

// serveOps runs any operation by name: the body is its input, the answer
// its output (or NDJSON pushes and result when accepted).
func (s *Server) serveOps(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if base, ok := strings.CutSuffix(name, streamSuffix); ok {
		// POST /v1/ops/<name>:stream: the mux cannot match a suffix inside
		// a wildcard segment, so the generic route takes it apart here.
		name, r = base, asStream(r)
	}
	if why, refused := notOverHTTP[name]; refused {
		writeError(w, contract.Errorf(contract.CodeUnknownOperation, "%s is not served over HTTP", name).WithNext(why), nil)
		return
	}
	if name == contract.Hello.Name {
		s.serveHello(w, r, route{method: "POST", op: opRef(contract.Hello)})
		return
	}
	params, cerr := readBody(w, r)
	if cerr != nil {
		writeError(w, cerr, nil)
		return
	}
	if len(r.URL.RawQuery) > 0 {
		writeError(w, contract.Errorf(contract.CodeBadRequest, "POST /v1/ops/%s takes its input in the JSON body, not the query", name), nil)
		return
	}
	s.call(w, r, name, params, http.StatusOK)
}

// readBody reads a bounded JSON body. GET requests must not carry one.
func readBody(w http.ResponseWriter, r *http.Request) (json.RawMessage, *contract.Error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, contract.Errorf(contract.CodeBadRequest, "the request body exceeds %d bytes", MaxBodyBytes)
		}
		return nil, contract.Errorf(contract.CodeBadRequest, "reading the request body: %v", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	if r.Method == http.MethodGet {
		return nil, contract.Errorf(contract.CodeBadRequest, "a GET request takes no body; pass inputs as query parameters")
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, contract.Errorf(contract.CodeBadRequest, "the body must be JSON (Content-Type: application/json), not %q", ct)
		}
	}
	return b, nil
}

// input assembles the operation's raw input: the JSON body, then path
// wildcards, then (for GET and DELETE) query parameters, all as fields of
// one object. The dispatcher decodes the result strictly, so an unknown
// field anywhere is BAD_REQUEST.
func (rt route) input(w http.ResponseWriter, r *http.Request) (json.RawMessage, *contract.Error) {
	body, cerr := readBody(w, r)
	if cerr != nil {
		return nil, cerr
	}
	query := r.URL.Query()
	takesQuery := r.Method == http.MethodGet || r.Method == http.MethodDelete
	if len(query) > 0 && !takesQuery {
		return nil, contract.Errorf(contract.CodeBadRequest, "%s takes its input in the JSON body, not the query", rt.pattern())
	}
	if len(rt.fields) == 0 && len(query) == 0 {
		return body, nil
	}
	obj := map[string]json.RawMessage{}
	if len(body) > 0 {
		if body[0] != '{' {
			return nil, contract.Errorf(contract.CodeBadRequest, "the body must be a JSON object")
		}
		if err := json.Unmarshal(body, &obj); err != nil {
			return nil, contract.Errorf(contract.CodeBadRequest, "invalid input: %v", err)
		}
	}
	for wildcard, field := range rt.fields {
		v, _ := json.Marshal(r.PathValue(wildcard))
		if prev, ok := obj[field]; ok && !bytes.Equal(bytes.TrimSpace(prev), v) {
			return nil, contract.Errorf(contract.CodeBadRequest, "%s in the body disagrees with the path", field)
		}
		obj[field] = v
	}
	for key, vals := range query {
		if len(vals) != 1 {
			return nil, contract.Errorf(contract.CodeBadRequest, "query parameter %q given %d times", key, len(vals))
		}
		if _, dup := obj[key]; dup {
			return nil, contract.Errorf(contract.CodeBadRequest, "%s is given twice", key)
		}
		v, err := queryValue(rt.op, key, vals[0])
		if err != nil {
			return nil, err
		}
		obj[key] = v
	}
	b, _ := json.Marshal(obj)
	return b, nil
}

// queryValue encodes a query parameter as the JSON value of the input field
// of the same name, typed by the field's Go kind.
func queryValue(op *contract.Op, key, val string) (json.RawMessage, *contract.Error) {
	var ft reflect.Type
	if op != nil {
		ft = fieldType(op.In, key)
	}
	if ft == nil {
		name := "this route"
		if op != nil {
			name = op.Name
		}
		return nil, contract.Errorf(contract.CodeBadRequest, "unknown query parameter %q for %s", key, name)
	}
	bad := func() (json.RawMessage, *contract.Error) {
		return nil, contract.Errorf(contract.CodeBadRequest, "query parameter %s=%q is not a valid %s", key, val, ft.Kind())
	}
	switch ft.Kind() {
	case reflect.String:
		b, _ := json.Marshal(val)
		return b, nil
	case reflect.Bool:
		v, err := strconv.ParseBool(val)
		if err != nil {
			return bad()
		}
		return json.RawMessage(strconv.FormatBool(v)), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return bad()
		}
		return json.RawMessage(strconv.FormatInt(v, 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return bad()
		}
		return json.RawMessage(strconv.FormatUint(v, 10)), nil
	}
	return nil, contract.Errorf(contract.CodeBadRequest, "%s cannot be passed as a query parameter; use POST /v1/ops/ with a JSON body", key)
}

// fieldType finds the struct field whose JSON name is name.
func fieldType(t reflect.Type, name string) reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, ok := contract.WireName(f); ok && tag == name {
			return f.Type
		}
	}
	return nil
}
