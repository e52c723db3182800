package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

type openAPIDoc struct {
	OpenAPI string                               `json:"openapi"`
	Paths   map[string]map[string]map[string]any `json:"paths"`
}

// The document is checked as generated; TestOpenAPIIsServedAsGenerated
// (over a real daemon) checks GET /v1/openapi.json serves these bytes.
func TestOpenAPIListsEveryRouteAndOperation(t *testing.T) {
	rawDoc, err := json.Marshal(openAPIDocument(routeTable(), "test", false))
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(rawDoc, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	ids := map[string]string{}
	seen := func(path, method string) map[string]any {
		op := doc.Paths[path][strings.ToLower(method)]
		if op == nil {
			t.Errorf("%s %s is missing", method, path)
			return nil
		}
		id, _ := op["operationId"].(string)
		if prev, dup := ids[id]; dup || id == "" {
			t.Errorf("operationId %q of %s %s repeats %s", id, method, path, prev)
		}
		ids[id] = method + " " + path
		return op
	}
	for _, rt := range routeTable() {
		if rt.kind != kindOps {
			seen(rt.path, rt.method)
		}
	}
	gatewayOnly := map[string]bool{}
	for _, name := range contract.GatewayOnly() {
		gatewayOnly[name] = true
	}
	for _, op := range contract.Registry() {
		if _, refused := notOverHTTP[op.Name]; refused || gatewayOnly[op.Name] {
			if doc.Paths["/v1/ops/"+op.Name] != nil {
				t.Errorf("%s is listed but not served by a worker", op.Name)
			}
			continue
		}
		o := seen("/v1/ops/"+op.Name, http.MethodPost)
		if o != nil && o["x-simlock-operation"] != op.Name {
			t.Errorf("%s: x-simlock-operation %v", op.Name, o["x-simlock-operation"])
		}
	}
	if len(notOverHTTP) != 1 || notOverHTTP[contract.Passthrough.Name] == "" {
		t.Errorf("only driver.passthrough stays off HTTP, got %v", notOverHTTP)
	}
	if sec, ok := doc.Paths["/v1/healthz"]["get"]["security"].([]any); !ok || len(sec) != 0 {
		t.Error("healthz must declare no security")
	}
	checkRefsResolve(t, rawDoc)
	// A path wildcard is a parameter, not a body field.
	renew := doc.Paths["/v1/leases/{id}/renew"]["post"]
	body := renew["requestBody"].(map[string]any)["content"].(map[string]any)[mediaJSON].(map[string]any)["schema"].(map[string]any)
	if _, ok := body["properties"].(map[string]any)["leaseId"]; ok {
		t.Error("renew's body schema still lists leaseId")
	}
}

// TestOnlyAGatewayDocumentListsGatewayOperations: worker.* answers 404 on
// a worker, so only a gateway's OpenAPI document may list it.
func TestOnlyAGatewayDocumentListsGatewayOperations(t *testing.T) {
	for _, gateway := range []bool{false, true} {
		paths := openAPIDocument(routeTable(), "x", gateway)["paths"].(map[string]any)
		for _, name := range contract.GatewayOnly() {
			if _, listed := paths["/v1/ops/"+name]; listed != gateway {
				t.Errorf("gateway=%v: /v1/ops/%s listed=%v", gateway, name, listed)
			}
		}
		if _, ok := paths["/v1/ops/lease.request"]; !ok {
			t.Errorf("gateway=%v: lease.request missing", gateway)
		}
	}
}

func TestEveryTableRouteNamesARegisteredOperation(t *testing.T) {
	for _, rt := range routeTable() {
		if rt.op == nil {
			continue
		}
		if _, ok := contract.Lookup(rt.op.Name); !ok {
			t.Errorf("%s names %s, which the contract does not declare", rt.pattern(), rt.op.Name)
		}
		for wildcard, field := range rt.fields {
			if !strings.Contains(rt.path, "{"+wildcard+"}") || fieldType(rt.op.In, field) == nil {
				t.Errorf("%s: wildcard %s -> field %s does not exist", rt.pattern(), wildcard, field)
			}
		}
	}
}

// checkRefsResolve walks the raw document: every $ref points at something,
// and every {wildcard} of a path is declared as a path parameter.
func checkRefsResolve(t *testing.T, doc []byte) {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				node := any(raw)
				for _, part := range strings.Split(strings.TrimPrefix(r, "#/"), "/") {
					m, _ := node.(map[string]any)
					node = m[part]
				}
				if node == nil {
					t.Errorf("$ref %s does not resolve", r)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(raw)
	for path, item := range raw["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			declared := map[string]bool{}
			params, _ := op.(map[string]any)["parameters"].([]any)
			for _, p := range params {
				pm := p.(map[string]any)
				if pm["in"] == "path" {
					declared[pm["name"].(string)] = true
				}
			}
			for _, m := range wildcard.FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s %s does not declare path parameter %s", method, path, m[1])
				}
			}
		}
	}
}

func generatedDoc(t *testing.T, gateway bool) map[string]any {
	t.Helper()
	b, err := json.Marshal(openAPIDocument(routeTable(), "test", gateway))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func operations(doc map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			out[strings.ToUpper(method)+" "+path] = op.(map[string]any)
		}
	}
	return out
}

var camelID = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)

// TestOpenAPIOperationIDsAreIdentifiers: generators turn operationIds into
// method names, so each is a unique lowerCamel identifier, no dots.
func TestOpenAPIOperationIDsAreIdentifiers(t *testing.T) {
	for _, gateway := range []bool{false, true} {
		seen := map[string]string{}
		for where, op := range operations(generatedDoc(t, gateway)) {
			id, _ := op["operationId"].(string)
			if !camelID.MatchString(id) {
				t.Errorf("%s: operationId %q is not a lowerCamel identifier", where, id)
			}
			if prev, dup := seen[strings.ToLower(id)]; dup {
				t.Errorf("%s: operationId %q repeats %s", where, id, prev)
			}
			seen[strings.ToLower(id)] = where
		}
	}
}

func TestOpenAPIRefsResolveInBothModes(t *testing.T) {
	for _, gateway := range []bool{false, true} {
		b, _ := json.Marshal(openAPIDocument(routeTable(), "test", gateway))
		checkRefsResolve(t, b)
	}
}

// TestOpenAPIErrorCodeEnumIsTheErrorTable: the ErrorCode enum lists every
// code of the table and nothing else, and each status of the table has a
// response naming its codes.
func TestOpenAPIErrorCodeEnumIsTheErrorTable(t *testing.T) {
	doc := generatedDoc(t, true)
	comps := doc["components"].(map[string]any)
	enum := map[string]bool{}
	for _, c := range comps["schemas"].(map[string]any)["ErrorCode"].(map[string]any)["enum"].([]any) {
		enum[c.(string)] = true
	}
	if len(enum) != len(contract.ErrorTable) {
		t.Errorf("ErrorCode enum has %d codes, the table %d", len(enum), len(contract.ErrorTable))
	}
	responses := comps["responses"].(map[string]any)
	for code, info := range contract.ErrorTable {
		if !enum[string(code)] {
			t.Errorf("%s is missing from the ErrorCode enum", code)
		}
		r, _ := responses[statusName(info.HTTPStatus)].(map[string]any)
		if r == nil || !strings.Contains(r["description"].(string), string(code)) {
			t.Errorf("%s: response %s does not name it", code, statusName(info.HTTPStatus))
		}
	}
	errSchema := comps["schemas"].(map[string]any)["Error"].(map[string]any)
	if got := errSchema["properties"].(map[string]any)["code"].(map[string]any)["$ref"]; got != "#/components/schemas/ErrorCode" {
		t.Errorf("Error.code is %v, want the ErrorCode enum", got)
	}
}

// TestOpenAPIClosedSetsAreEnums: the platform, device state, role and
// token role fields refer to their enum components.
func TestOpenAPIClosedSetsAreEnums(t *testing.T) {
	schemas := generatedDoc(t, false)["components"].(map[string]any)["schemas"].(map[string]any)
	for _, c := range []struct{ schema, field, enum string }{
		{"Device", "platform", "Platform"}, {"DeviceRuntime", "lifecycle", "DeviceState"}, {"Lease", "platform", "Platform"},
		{"LeaseRequestIn", "platform", "Platform"}, {"HelloOut", "role", "Role"}, {"TokenCreateIn", "role", "TokenRole"},
		{"LeaseRequestReceipt", "state", "RequestState"}, {"LeaseTiming", "path", "AdmissionPath"},
	} {
		s, _ := schemas[c.schema].(map[string]any)
		if s == nil {
			t.Errorf("no component %s", c.schema)
			continue
		}
		p := s["properties"].(map[string]any)[c.field].(map[string]any)
		if p["$ref"] != "#/components/schemas/"+c.enum {
			t.Errorf("%s.%s is %v, want enum %s", c.schema, c.field, p, c.enum)
		}
		if _, ok := schemas[c.enum].(map[string]any)["enum"]; !ok {
			t.Errorf("%s has no enum", c.enum)
		}
	}
}

// TestOpenAPISchemasAreNamedDescribedAndOpenOnResponses: every struct is a
// component (no inline Lease or Device anywhere in paths), every property
// has a description, response schemas allow added fields and request
// schemas do not.
func TestOpenAPISchemasAreNamedDescribedAndOpenOnResponses(t *testing.T) {
	doc := generatedDoc(t, true)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range []string{"Lease", "Device", "Error", "ErrorBody", "LeaseRequestReceipt", "PendingRequest", "LeaseNotice", "WorkerView"} {
		if schemas[name] == nil {
			t.Errorf("no component %s", name)
		}
	}
	for name, s := range schemas {
		sm := s.(map[string]any)
		if d, _ := sm["description"].(string); d == "" {
			t.Errorf("component %s has no description", name)
		}
		props, _ := sm["properties"].(map[string]any)
		for field, p := range props {
			if d, _ := p.(map[string]any)["description"].(string); d == "" {
				t.Errorf("%s.%s has no description", name, field)
			}
		}
		strict := sm["additionalProperties"] == false
		request := strings.HasSuffix(name, "In") || strings.HasSuffix(name, "Input")
		if props != nil && strict != request {
			t.Errorf("%s: additionalProperties false is %v, want %v (requests strict, responses open)", name, strict, request)
		}
	}
	// Lease's own fields appear inline nowhere: it is always a $ref.
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if props, ok := x["properties"].(map[string]any); ok {
				if _, a := props["grantedAt"]; a {
					if _, b := props["expiresAt"]; b {
						t.Errorf("%s inlines a Lease", where)
					}
				}
			}
			for k, e := range x {
				walk(where+"/"+k, e)
			}
		case []any:
			for _, e := range x {
				walk(where, e)
			}
		}
	}
	walk("#/paths", doc["paths"])
	// The doc comment reaches the document.
	if d := schemas["LeaseRequestIn"].(map[string]any)["properties"].(map[string]any)["idempotencyKey"].(map[string]any)["description"]; !strings.Contains(d.(string), "safe to repeat") {
		t.Errorf("idempotencyKey's description %q is not its doc comment", d)
	}
}

// TestOpenAPIOperationsDeclareErrorsAndHeaders: every operation behind a
// token has 4xx and 5xx responses with the error body; the lease request
// routes name Location and Preference-Applied, retryable statuses
// Retry-After; the document has servers and a licence.
func TestOpenAPIOperationsDeclareErrorsAndHeaders(t *testing.T) {
	doc := generatedDoc(t, false)
	comps := doc["components"].(map[string]any)
	for where, op := range operations(doc) {
		responses := op["responses"].(map[string]any)
		if sec, ok := op["security"].([]any); ok && len(sec) == 0 {
			continue
		}
		var has4, has5 bool
		for status, r := range responses {
			if _, isDefault := r.(map[string]any)["$ref"]; status == "default" && isDefault {
				t.Errorf("%s still answers errors as default", where)
			}
			has4 = has4 || status[0] == '4'
			has5 = has5 || status[0] == '5'
		}
		if !has4 || !has5 {
			t.Errorf("%s: 4xx %v, 5xx %v", where, has4, has5)
		}
		if r, _ := responses["401"].(map[string]any); r["$ref"] != "#/components/responses/UnauthorizedError" {
			t.Errorf("%s: 401 is %v", where, r)
		}
	}
	for name, r := range comps["responses"].(map[string]any) {
		schema := r.(map[string]any)["content"].(map[string]any)[mediaJSON].(map[string]any)["schema"].(map[string]any)
		if schema["$ref"] != "#/components/schemas/ErrorBody" {
			t.Errorf("response %s: schema %v", name, schema)
		}
	}
	unavailable := comps["responses"].(map[string]any)["ServiceUnavailableError"].(map[string]any)
	if _, ok := unavailable["headers"].(map[string]any)["Retry-After"]; !ok {
		t.Error("503 declares no Retry-After")
	}
	ops := operations(doc)
	for where, statuses := range map[string][]string{"POST /v1/leases": {"201", "202"}, "GET /v1/requests/{id}": {"200", "202"}} {
		for _, st := range statuses {
			h, _ := ops[where]["responses"].(map[string]any)[st].(map[string]any)["headers"].(map[string]any)
			for _, name := range []string{"Location", "Preference-Applied"} {
				if h[name] == nil {
					t.Errorf("%s %s declares no %s header", where, st, name)
				}
			}
		}
	}
	if servers, _ := doc["servers"].([]any); len(servers) == 0 {
		t.Error("no servers")
	}
	if lic, _ := doc["info"].(map[string]any)["license"].(map[string]any); lic["name"] == nil {
		t.Error("no info.license")
	}
	if sec, ok := ops["GET /v1/openapi.json"]["security"].([]any); !ok || len(sec) != 0 {
		t.Error("the document's own route must declare no security")
	}
}
