package sessions

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
)

func cfg(req string) contract.SessionConfig {
	return contract.SessionConfig{ContractVersion: 1, RequestID: req, IdleTimeoutMs: 60000,
		Device: contract.DeviceRequirement{SchemaVersion: 1, Platform: "ios",
			Hardware: &contract.HardwareRequirement{Kind: contract.HardwareArchetype, Archetype: "phone"}}}
}

func TestIdentityIsTheOwnerAndTheWholeConfig(t *testing.T) {
	a := OwnerDigest("tok-a")
	if strings.Contains(a, "tok-a") || len(a) != 64 {
		t.Fatalf("owner digest %q", a)
	}
	id1, _ := Identity(a, cfg("r1"))
	id1again, _ := Identity(a, cfg("r1"))
	if id1 != id1again {
		t.Fatal("the same owner and config gave two identities")
	}
	other := cfg("r1")
	other.IdleTimeoutMs = 1
	for name, id := range map[string]func() string{
		"request id": func() string { s, _ := Identity(a, cfg("r2")); return s },
		"owner":      func() string { s, _ := Identity(OwnerDigest("tok-b"), cfg("r1")); return s },
		"idle":       func() string { s, _ := Identity(a, other); return s },
	} {
		if id() == id1 {
			t.Errorf("a different %s kept the identity", name)
		}
	}
}

func TestCanonicalSortsKeys(t *testing.T) {
	c, err := Canonical(cfg("r"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contractVersion":1,"device":{"hardware":{"archetype":"phone","kind":"archetype"},"platform":"ios","schemaVersion":1},"idleTimeoutMs":60000,"requestId":"r"}`
	if string(c) != want {
		t.Fatalf("canonical\n got %s\nwant %s", c, want)
	}
}

func TestDecodeConfigIsStrict(t *testing.T) {
	for raw, code := range map[string]contract.Code{
		`{"contractVersion":2,"requestId":"r","device":{"schemaVersion":1,"platform":"ios"}}`:                              contract.CodeContractUnsupported,
		`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios"},"extra":1}`:                    contract.CodeSessionConfigInvalid,
		`{"contractVersion":1,"requestId":"","device":{"schemaVersion":1,"platform":"ios"}}`:                               contract.CodeSessionConfigInvalid,
		`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"windows"}}`:                          contract.CodeSessionConfigInvalid,
		`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios","os":{"kind":"exact"}}}`:        contract.CodeSessionConfigInvalid,
		`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios","hardware":{"kind":"model"}}}`:  contract.CodeSessionConfigInvalid,
		`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios","hardware":{"kind":"pocket"}}}`: contract.CodeSessionConfigInvalid,
	} {
		_, err := DecodeConfig([]byte(raw))
		ce, ok := err.(*contract.Error)
		if !ok || ce.Code != code {
			t.Errorf("%s: got %v, want %s", raw, err, code)
		}
	}
	if _, err := DecodeConfig([]byte(`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"android","os":{"kind":"exact","version":"16"}}}`)); err != nil {
		t.Errorf("a valid config refused: %v", err)
	}
}

func TestReceiptStateMachine(t *testing.T) {
	now := time.UnixMilli(1000)
	r := contract.SessionReceipt{Status: contract.SessionPending,
		Timing: &contract.SessionTiming{Acquisition: &contract.SessionAcquisition{Outcome: contract.SessionPending}}}
	if err := Move(&r, contract.SessionReleased, now); err == nil {
		t.Fatal("a pending receipt was released without being ready")
	}
	if !Fail(&r, contract.SessionFailure{Code: contract.CodeSessionOwnerExited}, now) {
		t.Fatal("a pending receipt could not fail")
	}
	if r.Timing.Acquisition.Outcome != contract.SessionFailed || r.Timing.Acquisition.CompletedAtMs == nil {
		t.Errorf("the failed acquisition was not completed: %+v", r.Timing.Acquisition)
	}
	if Fail(&r, contract.SessionFailure{Code: contract.CodeSessionAbandoned}, now) || r.Failure.Code != contract.CodeSessionOwnerExited {
		t.Fatalf("a terminal receipt was rewritten: %+v", r.Failure)
	}
	for _, to := range []string{contract.SessionReady, contract.SessionPending, contract.SessionReleased} {
		if CanMove(contract.SessionFailed, to) {
			t.Errorf("failed may become %s", to)
		}
	}
}

func ms(v int64) *int64 { return &v }

// The fixture's figures are computed by hand in the comments.
func TestStatsMatchAHandComputation(t *testing.T) {
	ios := &contract.SessionProfile{Platform: "ios", Model: "iPhone 17 Pro", OSVersion: "26.5"}
	and := &contract.SessionProfile{Platform: "android", Model: "pixel_9", OSVersion: "16"}
	acq := func(adm, outcome string, total int64, create *int64, done bool) *contract.SessionAcquisition {
		a := &contract.SessionAcquisition{Admission: adm, Outcome: outcome, TotalMs: ms(total), CreateMs: create}
		if done {
			a.CompletedAtMs = ms(1)
		}
		return a
	}
	rst := func(outcome string, total int64, done bool) *contract.SessionReset {
		r := &contract.SessionReset{Mode: contract.ResetErase, Outcome: outcome, TotalMs: ms(total), Phases: map[string]int64{"erase": total / 2}}
		if done {
			r.CompletedAtMs = ms(1)
		}
		return r
	}
	rec := func(p *contract.SessionProfile, a *contract.SessionAcquisition, r *contract.SessionReset) contract.SessionReceipt {
		return contract.SessionReceipt{Profile: p, Timing: &contract.SessionTiming{Acquisition: a, Reset: r}}
	}
	in := []contract.SessionReceipt{
		// iOS ready acquisitions totalMs 10, 20, 30, 40 (two reuses), one
		// failed (ignored), one still pending (ignored).
		rec(ios, acq(contract.AdmissionCreate, "ready", 10, ms(5), true), rst(contract.ResetOutcomeClean, 100, true)),
		rec(ios, acq(contract.AdmissionReuse, "ready", 20, ms(0), true), rst("fallback:destroy", 200, true)),
		rec(ios, acq(contract.AdmissionReuse, "ready", 30, ms(0), true), rst(contract.ResetOutcomeDestroyed, 300, true)),
		rec(ios, acq(contract.AdmissionCreate, "ready", 40, nil, true), rst(contract.ResetOutcomePending, 999, false)),
		rec(ios, acq(contract.AdmissionWait, "failed", 5000, nil, true), nil),
		rec(ios, acq(contract.AdmissionCreate, "pending", 7000, nil, false), nil),
		// Android: one ready acquisition, no resets.
		rec(and, acq(contract.AdmissionCreate, "ready", 7, ms(3), true), nil),
	}
	out := Compute(in, time.UnixMilli(0), time.UnixMilli(10), 5000, false)
	if len(out.Groups) != 2 {
		t.Fatalf("groups %+v", out.Groups)
	}
	a, i := out.Groups[0], out.Groups[1]
	if a.Platform != "android" || i.Platform != "ios" || i.Profile != "iPhone 17 Pro@26.5" {
		t.Fatalf("group order %+v", out.Groups)
	}
	// iOS: 4 ready acquisitions, 2 reuses: 0.5. Resets: 3 completed (the
	// pending one excluded), one fallback 1/3, one destroyed.
	if i.Acquisitions != 4 || i.ReuseHitRate != 0.5 || i.Resets != 3 || i.Retirements != 1 {
		t.Errorf("ios counts %+v", i)
	}
	if d := i.FallbackRate - 1.0/3; d > 1e-12 || d < -1e-12 {
		t.Errorf("fallbackRate %v, want 1/3", i.FallbackRate)
	}
	// totalMs 10,20,30,40: p50 rank 1.5 → 25; p90 rank 2.7 → 30+0.7*10 = 37.
	if got := i.Phases["totalMs"]; got.Count != 4 || got.P50 != 25 || got.P90 != 37 {
		t.Errorf("ios totalMs %+v, want count 4 p50 25 p90 37", got)
	}
	// createMs 5,0,0 (one unmeasured): sorted 0,0,5; p50 0; p90 rank 1.8 → 0+0.8*5 = 4.
	if got := i.Phases["createMs"]; got.Count != 3 || got.P50 != 0 || got.P90 != 4 {
		t.Errorf("ios createMs %+v, want count 3 p50 0 p90 4", got)
	}
	// reset totals 100,200,300: p50 200; p90 rank 1.8 → 200+0.8*100 = 280.
	if got := i.Phases["reset.totalMs"]; got.Count != 3 || got.P50 != 200 || got.P90 != 280 {
		t.Errorf("ios reset.totalMs %+v", got)
	}
	if _, ok := i.Phases["bootMs"]; ok {
		t.Error("an unmeasured phase has statistics")
	}
	// Android: one value is its own percentiles; no resets: rates 0.
	if got := a.Phases["totalMs"]; got.Count != 1 || got.P50 != 7 || got.P90 != 7 || a.FallbackRate != 0 || a.ReuseHitRate != 0 {
		t.Errorf("android %+v", a)
	}
}

func TestStatsBounds(t *testing.T) {
	w, n, err := StatsBounds(contract.SessionStatsIn{})
	if err != nil || w != 24*time.Hour || n != 5000 {
		t.Fatalf("defaults %v %d %v", w, n, err)
	}
	for _, in := range []contract.SessionStatsIn{{WindowMs: 31 * 24 * 3600 * 1000}, {Limit: 10001}, {WindowMs: -1}} {
		if _, _, err := StatsBounds(in); err == nil {
			t.Errorf("%+v accepted", in)
		}
	}
}

func TestPruneKeepsLiveAndPinnedReceipts(t *testing.T) {
	day := 24 * time.Hour
	now := time.UnixMilli(0).Add(400 * day)
	old := now.Add(-31 * day).UnixMilli()
	rec := func(status string, pending bool) Record {
		return Record{Receipt: contract.SessionReceipt{Status: status, UpdatedAtMs: old, CleanupPending: pending}}
	}
	ret, max := 30*day, 180*day
	if !Prunable(rec(contract.SessionReleased, false), nil, now, ret, max) {
		t.Error("an old released receipt is kept")
	}
	if Prunable(rec(contract.SessionReady, false), nil, now, ret, max) {
		t.Error("a live receipt was pruned")
	}
	if Prunable(rec(contract.SessionFailed, true), nil, now, ret, max) {
		t.Error("a receipt with cleanup pending was pruned")
	}
	pinned := &Export{CreatedAt: now.Add(-100 * day)}
	if Prunable(rec(contract.SessionReleased, false), pinned, now, ret, max) {
		t.Error("an unacknowledged export did not pin its receipt")
	}
	if !Prunable(rec(contract.SessionReleased, false), &Export{CreatedAt: now.Add(-181 * day)}, now, ret, max) {
		t.Error("an export past exportMaxAge still pins")
	}
	if !Prunable(rec(contract.SessionReleased, false), &Export{CreatedAt: now.Add(-100 * day), AcknowledgedAt: now}, now, ret, max) {
		t.Error("an acknowledged export still pins")
	}
}

func TestDecideCountsUnconfirmedDestruction(t *testing.T) {
	l := Limits{SessionCap: 2, TotalDeviceCap: 2}
	for _, c := range []struct {
		u    Usage
		want Refusal
	}{
		{Usage{}, Admit},
		{Usage{Live: 1}, Admit},
		{Usage{Live: 1, CleanupPending: 1}, EvictionPending},
		{Usage{Live: 2}, SessionCapReached},
		{Usage{Live: 0, CleanupPending: 2}, EvictionPending},
	} {
		if got := Decide(l, c.u); got != c.want {
			t.Errorf("%+v: %v, want %v", c.u, got, c.want)
		}
	}
	if Decide(Limits{TotalDeviceCap: 1}, Usage{Live: 1}) != DeviceCapReached {
		t.Error("a device cap full of live sessions is not DeviceCapReached")
	}
}

// totalDeviceCap is charged every session device in any state (ADR
// 0063): an idle one counts, a fitting idle one is reused rather than
// counted twice, and one that does not fit is evicted before a create.
func TestDecideCountsEverySessionDevice(t *testing.T) {
	one, two := Limits{TotalDeviceCap: 1}, Limits{TotalDeviceCap: 2}
	for _, c := range []struct {
		name string
		l    Limits
		u    Usage
		want Refusal
	}{
		{"nothing held", one, Usage{}, Admit},
		{"an idle phone, a tablet asked", one, Usage{Devices: 1, Idle: 1}, EvictIdle},
		{"an idle phone, a phone asked", one, Usage{Devices: 1, Idle: 1, Fitting: 1}, Admit},
		{"the fitting phone may go to an earlier preparation", two, Usage{Live: 1, Devices: 2, Idle: 1, Fitting: 1, Preparing: 1}, EvictIdle},
		{"a device resetting", one, Usage{Devices: 1}, EvictionPending},
		{"a preparation about to create", one, Usage{Live: 1, Preparing: 1}, DeviceCapReached},
		{"a live session on its device", one, Usage{Live: 1, Devices: 1}, DeviceCapReached},
	} {
		if got := Decide(c.l, c.u); got != c.want {
			t.Errorf("%s: %+v: %v, want %v", c.name, c.u, got, c.want)
		}
	}
	if n := (Usage{Live: 2, Devices: 1}).DeviceCount(); n != 2 {
		t.Errorf("two live sessions on one registered device count %d", n)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Identity: strings.Repeat("a", 64), OwnerDigest: strings.Repeat("b", 64),
		Receipt: contract.SessionReceipt{ContractVersion: 1, RequestID: "r", Status: contract.SessionReady, SessionID: "s"}}
	b, _ := r.Encode()
	got, err := DecodeRecord(b)
	if err != nil || got.Receipt.SessionID != "s" {
		t.Fatalf("%+v %v", got, err)
	}
	bad, _ := json.Marshal(Record{Identity: r.Identity, OwnerDigest: r.OwnerDigest, Receipt: contract.SessionReceipt{Status: contract.SessionFailed}})
	if _, err := DecodeRecord(bad); err == nil {
		t.Error("a failed receipt without its failure decoded")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	r := Record{Identity: strings.Repeat("a", 64), OwnerDigest: strings.Repeat("b", 64), Receipt: contract.SessionReceipt{Status: "ready"}}
	b, _ := r.Encode()
	f.Add(b)
	f.Add([]byte(`{"receipt":{"status":"failed"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		again, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeRecord(again); err != nil {
			t.Fatalf("a decoded record does not decode again: %v", err)
		}
	})
}

func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"ios"}}`))
	f.Add([]byte(`{"contractVersion":1,"requestId":"r","device":{"schemaVersion":1,"platform":"android","hardware":{"kind":"model","model":{"namespace":"n","value":"v"}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeConfig(b)
		if err != nil {
			return
		}
		// An accepted config has one identity, stable across a re-encode.
		id1, err := Identity("o", c)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(c)
		c2, err := DecodeConfig(raw)
		if err != nil {
			t.Fatalf("re-encoded config refused: %v", err)
		}
		if id2, _ := Identity("o", c2); id1 != id2 {
			t.Fatal("identity changed across a re-encode")
		}
	})
}
