package httpapi

import (
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/simlock/simlock/contract"
)

// openAPIDocument generates the OpenAPI 3.1 description of the route table.
// Nothing in it is written by hand except prose: every schema is
// contract.Schema of a contract (or frontend) type, and every operation
// of contract.Registry appears under /v1/ops/{name}.
func openAPIDocument(routes []route, version string, gateway bool) map[string]any {
	// Gateway-only operations answer UNKNOWN_OPERATION on a worker, so only
	// a gateway's document lists them.
	gatewayOnly := map[string]bool{}
	if !gateway {
		for _, name := range contract.GatewayOnly() {
			gatewayOnly[name] = true
		}
	}
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
					add("/v1/ops/"+op.Name, http.MethodPost, opsOperation(op))
				}
			}
			continue
		}
		add(rt.path, rt.method, routeOperation(rt))
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "simlock HTTP API",
			"version": version,
			"description": "Leases of iOS Simulators and Android Emulators. Every route but GET /v1/healthz needs " +
				"`Authorization: Bearer <token>`; agent tokens get an agent session, operator tokens an admin one. " +
				"Errors are {\"error\": <simlock error>} with the status of the error table. See docs/http-api.md.",
		},
		"security": []any{map[string]any{"bearer": []any{}}},
		"paths":    paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas": map[string]any{
				"ErrorBody":    schemaOf(reflect.TypeFor[ErrorBody]()),
				"NDJSONLine":   ndjsonLineSchema(),
				"Notice":       schemaOf(reflect.TypeFor[contract.LeaseNotice]()),
				"PendingLease": schemaOf(reflect.TypeFor[PendingRequest]()),
			},
			"responses": map[string]any{
				"Error": map[string]any{
					"description": "A refusal; the status comes from the error table.",
					"content":     map[string]any{mediaJSON: map[string]any{"schema": ref("ErrorBody")}},
				},
			},
		},
	}
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// schemaOf is contract.Schema without the top-level $schema, which OpenAPI
// 3.1 documents take from jsonSchemaDialect instead.
func schemaOf(t reflect.Type) map[string]any {
	s := contract.Schema(t)
	delete(s, "$schema")
	return s
}

func ndjsonLineSchema() map[string]any {
	return map[string]any{
		"description": "One line of an application/x-ndjson answer: pushes (progress, event, ...) as {method, params}, " +
			"then exactly one {result} or {error}.",
		"oneOf": []any{
			map[string]any{"type": "object", "required": []string{"method", "params"},
				"properties": map[string]any{"method": map[string]any{"type": "string"}, "params": map[string]any{}}},
			map[string]any{"type": "object", "required": []string{"result"}, "properties": map[string]any{"result": map[string]any{}}},
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

var errorResponse = map[string]any{"$ref": "#/components/responses/Error"}

// opsOperation describes POST /v1/ops/{name} for one operation.
func opsOperation(op contract.Op) map[string]any {
	return map[string]any{
		"operationId": "ops." + op.Name,
		"summary":     op.Doc,
		"description": "Role: " + string(op.Role) + ". The body is the operation's input; with Accept: application/x-ndjson " +
			"pushes stream as lines before the result (Prefer: keep-open keeps the stream after it).",
		"x-simlock-operation": op.Name,
		"requestBody":         map[string]any{"required": false, "content": jsonContent(schemaOf(op.In))},
		"responses": map[string]any{
			"200": response("The operation's output.", map[string]any{
				mediaJSON:   map[string]any{"schema": schemaOf(op.Out)},
				mediaNDJSON: map[string]any{"schema": ref("NDJSONLine")},
			}),
			"default": errorResponse,
		},
	}
}

var wildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// routeOperation describes one table row.
func routeOperation(rt route) map[string]any {
	o := map[string]any{"operationId": rt.operationID()}
	summary := rt.summary
	if rt.op != nil {
		if summary == "" {
			summary = rt.op.Doc
		}
		o["x-simlock-operation"] = rt.op.Name
		o["description"] = "Role: " + string(rt.op.Role) + "."
	}
	o["summary"] = summary
	var params []any
	for _, m := range wildcard.FindAllStringSubmatch(rt.path, -1) {
		schema := map[string]any{"type": "string"}
		if f, ok := rt.fields[m[1]]; ok && rt.op != nil {
			if ft := fieldType(rt.op.In, f); ft != nil {
				schema = schemaOf(ft)
			}
		}
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": schema})
	}
	input := map[string]any(nil)
	if rt.op != nil {
		input = withoutFields(schemaOf(rt.op.In), rt.fields)
	}
	takesQuery := rt.method == http.MethodGet || rt.method == http.MethodDelete
	responses := map[string]any{"default": errorResponse}
	o["responses"] = responses
	switch rt.kind {
	case kindHealth:
		o["security"] = []any{}
		responses["200"] = response("The daemon answers.", jsonContent(schemaOf(reflect.TypeFor[Health]())))
		delete(responses, "default")
		return o
	case kindOpenAPI:
		responses["200"] = response("This document.", jsonContent(map[string]any{"type": "object"}))
		return o
	case kindRequestPoll:
		params = append(params, map[string]any{"name": "wait", "in": "query", "required": false,
			"description": "Seconds to wait for an outcome (default 20, capped at 60).", "schema": map[string]any{"type": "integer", "minimum": 0}})
		responses["200"] = response("Granted.", jsonContent(schemaOf(reflect.TypeFor[contract.Lease]())))
		responses["202"] = response("Still waiting; poll again.", jsonContent(ref("PendingLease")))
		o["parameters"] = params
		return o
	case kindRequestDrop:
		responses["200"] = response("The handle is given up.", jsonContent(schemaOf(reflect.TypeFor[DropReply]())))
		o["parameters"] = params
		return o
	case kindHello:
		// Over HTTP the token is the credential and names the principal.
		input = withoutFields(input, map[string]string{"c": "credential", "p": "principal"})
		responses["200"] = response("The negotiated protocol, with the token's role and principal.", jsonContent(schemaOf(rt.op.Out)))
	case kindEvents:
		input = withoutFields(input, map[string]string{"follow": "follow"})
		params = append(params, map[string]any{"name": "Last-Event-ID", "in": "header", "required": false,
			"description": "Resume after this event seq (overrides ?since=).", "schema": map[string]any{"type": "string"}})
		responses["200"] = response("Server-Sent Events; each data line is one Event.",
			map[string]any{mediaSSE: map[string]any{"schema": schemaOf(reflect.TypeFor[contract.Event]())}})
	case kindLeaseRequest:
		params = append(params, map[string]any{"name": "Prefer", "in": "header", "required": false,
			"description": "wait=N (seconds, capped at 60; default 20) or respond-async.", "schema": map[string]any{"type": "string"}})
		params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false,
			"description": "The body's idempotencyKey: a repeat with the same key returns the first request's outcome.",
			"schema":      map[string]any{"type": "string", "maxLength": 256}})
		responses["201"] = response("Granted.", map[string]any{
			mediaJSON:   map[string]any{"schema": schemaOf(rt.op.Out)},
			mediaNDJSON: map[string]any{"schema": ref("NDJSONLine")},
		})
		responses["202"] = response("Still waiting; long-poll the Location.", jsonContent(ref("PendingLease")))
	case kindRenew:
		reply := schemaOf(reflect.TypeFor[contract.Lease]())
		props, _ := reply["properties"].(map[string]any)
		props["notices"] = map[string]any{"type": "array", "items": ref("Notice")}
		reply["required"] = append(reply["required"].([]string), "notices")
		responses["200"] = response("The renewed lease and the notices buffered since the last renew.", jsonContent(reply))
	default:
		status := "200"
		if rt.created {
			status = "201"
		}
		responses[status] = response("The operation's output.", map[string]any{
			mediaJSON:   map[string]any{"schema": schemaOf(rt.op.Out)},
			mediaNDJSON: map[string]any{"schema": ref("NDJSONLine")},
		})
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
		out = append(out, map[string]any{"name": n, "in": "query", "required": slices.Contains(reqs, n), "schema": props[n]})
	}
	return out
}
