package httpapi

import (
	"strings"
	"testing"
)

// TestOpenAPISuccessIsOneMediaType: a generator types a response as the
// union of its media types, so no success response may offer JSON and a
// stream at once (issue 26): each JSON success declares application/json
// alone, and each stream is an operation of its own whose success declares
// application/x-ndjson alone.
func TestOpenAPISuccessIsOneMediaType(t *testing.T) {
	for _, gateway := range []bool{false, true} {
		streams := map[string]bool{}
		for where, op := range operations(generatedDoc(t, gateway)) {
			isStream := strings.HasSuffix(where, streamSuffix)
			for status, r := range op["responses"].(map[string]any) {
				if !strings.HasPrefix(status, "2") {
					continue
				}
				content, _ := r.(map[string]any)["content"].(map[string]any)
				if len(content) != 1 {
					t.Errorf("gateway=%v %s %s: %d media types %v", gateway, where, status, len(content), keys(content))
					continue
				}
				_, nd := content[mediaNDJSON]
				if nd != isStream {
					t.Errorf("gateway=%v %s %s: media %v, a stream twin=%v", gateway, where, status, keys(content), isStream)
				}
				if nd {
					streams[where] = true
				}
			}
			if isStream && !strings.HasSuffix(op["operationId"].(string), "Stream") {
				t.Errorf("%s: operationId %v does not end in Stream", where, op["operationId"])
			}
		}
		for _, want := range []string{"POST /v1/leases:stream", "POST /v1/leases/{id}/exec:stream",
			"POST /v1/ops/lease.request:stream", "POST /v1/ops/device.exec:stream", "POST /v1/ops/events.subscribe:stream"} {
			if !streams[want] {
				t.Errorf("gateway=%v: %s is not a stream operation (have %v)", gateway, want, streams)
			}
		}
		for name := range pushingOps {
			if _, ok := operations(generatedDoc(t, gateway))["POST /v1/ops/"+name]; ok && !streams["POST /v1/ops/"+name+streamSuffix] {
				t.Errorf("gateway=%v: %s pushes but has no :stream twin", gateway, name)
			}
		}
	}
}

// TestOpenAPIStreamTwinOfALeaseRequestHasNoPreferOr202: the stream runs the
// request in the connection, so the twin declares neither the long-poll
// header nor the 202 handle, and the JSON route still declares both.
func TestOpenAPIStreamTwinOfALeaseRequestHasNoPreferOr202(t *testing.T) {
	ops := operations(generatedDoc(t, false))
	header := func(op map[string]any, name string) bool {
		ps, _ := op["parameters"].([]any)
		for _, p := range ps {
			if p.(map[string]any)["name"] == name {
				return true
			}
		}
		return false
	}
	stream, plain := ops["POST /v1/leases:stream"], ops["POST /v1/leases"]
	if stream == nil || plain == nil {
		t.Fatal("POST /v1/leases or its :stream twin is missing")
	}
	if header(stream, "Prefer") || !header(stream, "Idempotency-Key") {
		t.Errorf("the stream twin's parameters: %v", stream["parameters"])
	}
	if !header(plain, "Prefer") || !header(plain, "Idempotency-Key") {
		t.Errorf("POST /v1/leases's parameters: %v", plain["parameters"])
	}
	if _, has := stream["responses"].(map[string]any)["202"]; has {
		t.Error("the stream twin declares a 202")
	}
	if _, has := plain["responses"].(map[string]any)["202"]; !has {
		t.Error("POST /v1/leases lost its 202")
	}
	if stream["requestBody"] == nil {
		t.Error("the stream twin takes no body")
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestOpenAPIErrorBodyCarriesItsError: every refusal has its error, so the
// schema does not let a generated client think it may be null.
func TestOpenAPIErrorBodyCarriesItsError(t *testing.T) {
	doc := generatedDoc(t, false)
	body := doc["components"].(map[string]any)["schemas"].(map[string]any)["ErrorBody"].(map[string]any)
	errProp := body["properties"].(map[string]any)["error"].(map[string]any)
	if _, nullable := errProp["anyOf"]; nullable || errProp["$ref"] != "#/components/schemas/Error" {
		t.Errorf("ErrorBody.error is %v", errProp)
	}
	if req, _ := body["required"].([]any); len(req) == 0 || req[0] != "error" {
		t.Errorf("ErrorBody.required is %v", body["required"])
	}
}
