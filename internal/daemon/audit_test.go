package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/simlock/simlock/internal/core/events"
)

// Lease-changing facts become one Info line each with the four names; a
// plain renewal and unrelated facts write nothing.
func TestAuditLinesNameLeaseRequesterOwnerAndDevice(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	lease := func(typ, reason string, data map[string]any) events.Event {
		d := map[string]any{"ownerId": "token:tok_1"}
		for k, v := range data {
			d[k] = v
		}
		return events.Event{Seq: 9, Type: typ, LeaseID: "lse_1", RequesterID: "agent-7", DeviceID: "dev_1", Platform: "ios", Reason: reason, Data: d}
	}
	for _, e := range []events.Event{
		lease("lease.granted", "", map[string]any{"ttlMs": int64(60000), "timing": map[string]any{"path": "warm", "totalMs": int64(12)}}),
		lease("lease.renewed", "", map[string]any{"ttlMs": int64(60000)}), // plain keep-alive: no line
		lease("lease.renewed", "", map[string]any{"ttlMs": int64(120000), "previousTtlMs": int64(60000)}),
		lease("lease.expired", "", nil),
		lease("lease.released", "expired", nil),
		{Type: "device.evicted", DeviceID: "dev_2", Platform: "android"},
		{Type: "device.destroyed", DeviceID: "dev_3", Platform: "android", Reason: "evicted"},
		{Type: "device.destroyed", DeviceID: "dev_4", Platform: "android", Reason: "idle-destroy"}, // not an eviction: no line
		{Type: "device.quarantined", DeviceID: "dev_5", Platform: "ios", Reason: "purge-failed", Data: map[string]any{"op": "reclaim"}},
		{Type: "device.state-changed", DeviceID: "dev_5"},
	} {
		auditLine(log, e)
	}
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		lines = append(lines, m)
	}
	want := []string{"lease.granted", "lease.renewed", "lease.expired", "lease.released", "device.evicted", "device.destroyed", "device.quarantined"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines; want %d: %s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		if l["event"] != want[i] || l["msg"] != "audit" || l["level"] != "INFO" {
			t.Errorf("line %d = %v; want an audit line for %s", i, l, want[i])
		}
		for _, k := range []string{"lease", "requester", "owner", "device"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %d (%s) has no %q", i, want[i], k)
			}
		}
	}
	if g := lines[0]; g["lease"] != "lse_1" || g["requester"] != "agent-7" || g["owner"] != "token:tok_1" || g["device"] != "dev_1" || g["path"] != "warm" {
		t.Errorf("grant line %v", g)
	}
	if r := lines[1]; r["ttlMs"] != float64(120000) || r["previousTtlMs"] != float64(60000) {
		t.Errorf("width change line %v", r)
	}
	if r := lines[3]; r["reason"] != "expired" {
		t.Errorf("release line %v", r)
	}
	if q := lines[6]; q["reason"] != "purge-failed" || q["op"] != "reclaim" || q["device"] != "dev_5" {
		t.Errorf("quarantine line %v", q)
	}
}
