package contract

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCommittedSchemasMatchTheDeclarations(t *testing.T) {
	want := OperationSchemas()
	files, _ := filepath.Glob("schema/*.json")
	if len(files) != len(want) {
		t.Errorf("schema/ has %d files, the contract declares %d schemas; run go generate ./contract", len(files), len(want))
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join("schema", name+".json"))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("schema/%s.json is stale; run go generate ./contract", name)
		}
	}
}

func TestUnknownFieldIsBadRequest(t *testing.T) {
	_, err := LeaseRequest.DecodeInput([]byte(`{"platform":"ios","colour":"red"}`))
	ce := AsError(err)
	if ce == nil || ce.Code != CodeBadRequest || !strings.Contains(ce.Message, "colour") {
		t.Fatalf("got %v", err)
	}
	if _, err := LeaseRequest.DecodeInput([]byte(`{"platform":"ios"} {}`)); AsError(err) == nil {
		t.Fatal("trailing data accepted")
	}
	v, err := LeaseRequest.DecodeInput(nil)
	if err != nil || v.(LeaseRequestIn).Platform != "" {
		t.Fatalf("empty params: %v %v", v, err)
	}
}

func TestEveryCodeHasATableRowWithAdvice(t *testing.T) {
	for code, info := range ErrorTable {
		if info.HTTPStatus < 400 || info.ExitCode == 0 {
			t.Errorf("%s: status %d exit %d", code, info.HTTPStatus, info.ExitCode)
		}
		if strings.ToUpper(string(code)) != string(code) {
			t.Errorf("%s is not UPPER_SNAKE", code)
		}
	}
}

func TestUnknownWireCodeIsWrapped(t *testing.T) {
	e := Normalize(&Error{Code: "SOMETHING_NEW", Message: "x"})
	if e.Code != CodeUnknownDaemonError || e.Details["daemonCode"] != "SOMETHING_NEW" {
		t.Fatalf("%+v", e)
	}
}

func TestRegistryNamesAreUniqueAndDotted(t *testing.T) {
	seen := map[string]bool{}
	for _, op := range Registry() {
		if seen[op.Name] {
			t.Errorf("duplicate %s", op.Name)
		}
		seen[op.Name] = true
		if op.Name != "hello" && !strings.Contains(op.Name, ".") {
			t.Errorf("%s is not a dotted name", op.Name)
		}
	}
}

func TestSchemaRequiredFollowsOmitempty(t *testing.T) {
	// LeaseRequestIn's platform became optional with devices[] (ADR
	// 0043); a group member still requires its own.
	s := Schema(reflect.TypeFor[DeviceSpec]())
	b, _ := json.Marshal(s["required"])
	if string(b) != `["platform"]` {
		t.Fatalf("required = %s", b)
	}
	if r := Schema(reflect.TypeFor[LeaseRequestIn]())["required"]; r != nil {
		t.Fatalf("lease.request requires %v; every field is omitempty", r)
	}
	if s["additionalProperties"] != false {
		t.Fatal("strict decoding must show as additionalProperties false")
	}
}

func FuzzDecodeLeaseRequest(f *testing.F) {
	f.Add([]byte(`{"platform":"ios","model":"iPhone 16","ttlMs":1000}`))
	f.Add([]byte(`{"platform":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := LeaseRequest.DecodeInput(b)
		if err != nil {
			if ce := AsError(err); ce == nil || ce.Code != CodeBadRequest {
				t.Fatalf("decode error is not BAD_REQUEST: %v", err)
			}
			return
		}
		if _, ok := v.(LeaseRequestIn); !ok {
			t.Fatalf("decoded %T", v)
		}
	})
}

// Every operation declares how it relates to host-global device claims, and
// only with a known policy: an operation added without one fails here.
func TestEveryOperationDeclaresAClaimPolicy(t *testing.T) {
	known := map[ClaimPolicy]bool{}
	for _, p := range ClaimPolicies() {
		known[p] = true
	}
	for _, op := range Registry() {
		if !known[op.Claim] {
			t.Errorf("%s declares claim policy %q; want one of %v", op.Name, op.Claim, ClaimPolicies())
		}
	}
	// The operations that hand out or take back devices say so.
	for name, want := range map[string]ClaimPolicy{LeaseRequest.Name: ClaimAcquire, LeaseRelease.Name: ClaimRelease,
		DeviceExec.Name: ClaimRequireOwner, LeaseRenew.Name: ClaimRequireOwner, StatusGet.Name: ClaimObserve} {
		if op, _ := Lookup(name); op.Claim != want {
			t.Errorf("%s: claim policy %q, want %q", name, op.Claim, want)
		}
	}
}

// docs/protocol.md lists every operation's claim policy, and lists it right.
func TestProtocolDocListsEveryClaimPolicy(t *testing.T) {
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range Registry() {
		row := "| `" + op.Name + "` | `" + string(op.Claim) + "` |"
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/protocol.md lacks the claim policy row %s", row)
		}
	}
}
