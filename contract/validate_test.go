package contract

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestValidateIdentifierRefusesWhatCouldForgeATerminal(t *testing.T) {
	bad := map[string]string{
		"NUL": "a\x00b", "LF": "row\nforged", "CR": "a\rb", "ESC": "\x1b[2Jcleared", "TAB": "a\tb", "DEL": "a\x7fb",
		"C1 CSI": "a\u009b2J", "NEL": "a\u0085b", "LRE": "a\u202ab", "RLO": "evil\u202egnp.exe", "PDF": "a\u202cb",
		"LRI": "a\u2066b", "PDI": "a\u2069b", "bad UTF-8": "a\xffb", "257 bytes": strings.Repeat("x", MaxIdentifierBytes+1),
	}
	for name, v := range bad {
		err := ValidateIdentifier("requesterId", v)
		ce := AsError(err)
		if ce == nil || ce.Code != CodeBadRequest || ce.NextAction == "" || ce.Details["field"] != "requesterId" {
			t.Errorf("%s: %q gave %v, want BAD_REQUEST naming the field with a next step", name, v, err)
		}
	}
	good := []string{"", "ci-job-42", "token:tok_ab12/job-7", "iPhone 16 Pro Max", "Zoë's runner ✓", "日本語",
		strings.Repeat("x", MaxIdentifierBytes), "a\u200db" /* ZWJ is not a bidi control */}
	for _, v := range good {
		if err := ValidateIdentifier("requesterId", v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
}

// Every string in an input is checked, however deep, except the fields
// that carry data (exec and passthrough arguments, stdin).
func TestDecodeInputValidatesEveryIdentifier(t *testing.T) {
	for _, c := range []struct {
		op  Op
		raw string
	}{
		{LeaseRequest.Op, `{"platform":"ios","requesterId":"job\u001b[31m"}`},
		{LeaseRequest.Op, `{"platform":"ios","ownerId":"` + strings.Repeat("o", 300) + `"}`},
		{LeaseRequest.Op, `{"platform":"ios\n"}`},
		{LeaseCancel.Op, `{"requesterId":"a\u202eb"}`},
		{LeaseReleaseAll.Op, `{"requesterId":"a\rb"}`},
		{LeaseRelease.Op, `{"leaseId":"lse_1\u0000"}`},
		{TokenCreate.Op, `{"role":"agent","name":"x\u0085"}`},
		{DeviceExec.Op, `{"leaseId":"l","tool":"adb","args":[],"requesterId":"\u2066"}`},
		{WorkerDrain.Op, `{"id":"w\n"}`},
	} {
		_, err := c.op.DecodeInput([]byte(c.raw))
		if ce := AsError(err); ce == nil || ce.Code != CodeBadRequest {
			t.Errorf("%s %s: %v, want BAD_REQUEST", c.op.Name, c.raw, err)
		}
	}
	in, err := DeviceExec.DecodeInput([]byte(`{"leaseId":"lse_1","tool":"adb","args":["shell","printf","a\nb\u001b"],"stdin":"line1\nline2\u0000"}`))
	if err != nil || len(in.(DeviceExecIn).Args) != 3 {
		t.Fatalf("exec arguments and stdin are data, not names: %v", err)
	}
}

// FuzzValidateIdentifier checks the validator against an independent
// statement of the rule: accepted exactly when short enough, valid UTF-8
// and free of C0, DEL, C1 and bidi controls.
func FuzzValidateIdentifier(f *testing.F) {
	for _, s := range []string{"", "job-1", "a\x1bb", "\u202e", "\u0085", "é", "\xc3", strings.Repeat("é", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := len(s) <= MaxIdentifierBytes && utf8.ValidString(s)
		for _, r := range s {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
				want = false
			}
		}
		err := ValidateIdentifier("id", s)
		if (err == nil) != want {
			t.Fatalf("%q: accepted=%v, want %v (%v)", s, err == nil, want, err)
		}
		if err != nil {
			if ce := AsError(err); ce == nil || ce.Code != CodeBadRequest {
				t.Fatalf("%q: %v is not BAD_REQUEST", s, err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("the refusal echoes the input (%d bytes)", len(err.Error()))
			}
		}
	})
}

func TestScopeRequesterConfinesAgents(t *testing.T) {
	alice := Session{Principal: "token:tok_a", Role: RoleAgent}
	bob := Session{Principal: "token:tok_b", Role: RoleAgent}
	op := Session{Principal: "cli:host:1", Role: RoleAdmin}
	cases := []struct {
		s        Session
		in, want string
	}{
		{alice, "", "token:tok_a"},
		{alice, "job", "token:tok_a/job"},
		{alice, "token:tok_a/job", "token:tok_a/job"}, // idempotent: an id read back can be passed again
		{alice, "token:tok_a", "token:tok_a"},
		{bob, "token:tok_a", "token:tok_b/token:tok_a"}, // cannot squat alice's default
		{bob, "token:tok_a/job", "token:tok_b/token:tok_a/job"},
		{op, "", ""},
		{op, "anything", "anything"},
	}
	for _, c := range cases {
		if got := ScopeRequester(c.s, c.in); got != c.want {
			t.Errorf("ScopeRequester(%s, %q) = %q, want %q", c.s.Principal, c.in, got, c.want)
		}
	}
	got := ScopeInput(bob, LeaseCancelIn{RequesterID: "x"}).(LeaseCancelIn)
	if got.RequesterID != "token:tok_b/x" {
		t.Errorf("ScopeInput left %q", got.RequesterID)
	}
	if v := ScopeInput(bob, LeaseRenewIn{LeaseID: "l"}); v.(LeaseRenewIn).LeaseID != "l" {
		t.Error("ScopeInput changed an input without a requester")
	}
}

var camelCase = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// Every JSON key the contract puts on the wire is camelCase, and no
// exported field goes out under its Go name for want of a tag.
func TestEveryContractJSONKeyIsCamelCase(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(typ.Elem(), path)
			return
		case reflect.Map:
			walk(typ.Elem(), path)
			return
		case reflect.Struct:
		default:
			return
		}
		if seen[typ] || typ == reflect.TypeFor[time.Time]() {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" && !f.Anonymous {
				t.Errorf("%s.%s has no json tag, so it goes out as %q", typ.Name(), f.Name, f.Name)
			} else if name != "" && !camelCase.MatchString(name) {
				t.Errorf("%s.%s goes out as %q, not camelCase", typ.Name(), f.Name, name)
			}
			walk(f.Type, path+"."+name)
		}
	}
	for _, op := range Registry() {
		walk(op.In, op.Name)
		walk(op.Out, op.Name)
	}
	for _, v := range []any{Error{}, Event{}, LeaseNotice{}, Progress{}, ExecOutput{}} {
		walk(reflect.TypeOf(v), "")
	}
	if len(seen) < 40 {
		t.Fatalf("walked only %d types; the walk is broken", len(seen))
	}
	// The error object's keys, by value rather than by tag.
	b, _ := json.Marshal(Errorf(CodeNoCapacity, "x").WithRetryAfter(1).WithDetails("k", 1))
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for k := range m {
		if !camelCase.MatchString(k) {
			t.Errorf("error key %q", k)
		}
	}
}

func TestParseSinceTimeReadsDurationsDaysAndInstants(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"1h":                        now.Add(-time.Hour),
		"90s":                       now.Add(-90 * time.Second),
		"7d":                        now.Add(-7 * 24 * time.Hour),
		"2026-11-30T08:00:00Z":      time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		"2026-11-30T09:00:00+01:00": time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	} {
		got, err := ParseSinceTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseSinceTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-1h", "1.5d", "2026-11-30"} {
		if _, err := ParseSinceTime(bad, now); err == nil || AsError(err).Code != CodeBadRequest {
			t.Errorf("ParseSinceTime(%q) = %v; want BAD_REQUEST", bad, err)
		}
	}
}
