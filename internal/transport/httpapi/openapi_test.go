package httpapi

import (
	"encoding/json"
	"net/http"
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
