package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// family gathers m and returns the family called name (nil: absent).
func family(t *testing.T, m *Metrics, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// sample finds the series of family name whose labels include want.
func sample(t *testing.T, m *Metrics, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f := family(t, m, name)
	if f == nil {
		return nil
	}
next:
	for _, s := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range s.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return s
	}
	return nil
}

func counterValue(t *testing.T, m *Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	s := sample(t, m, name, labels)
	if s == nil {
		return 0
	}
	return s.GetCounter().GetValue()
}

func TestEventsMapOntoTheirMetrics(t *testing.T) {
	m := New(Options{Version: "1.2.3", GoVersion: "go1.27.3", Mode: "worker"})
	// As the engine publishes them (int64) and as they arrive through a
	// gateway or the journal (float64, json.Number).
	feed := []events.Event{
		{Type: "lease.granted", Platform: "ios", Data: map[string]any{"timing": map[string]any{"path": "warm", "totalMs": int64(40), "queueWaitMs": int64(0)}}},
		{Type: "lease.granted", Platform: "ios", Data: map[string]any{"timing": map[string]any{"path": "provision", "totalMs": float64(31_000), "queueWaitMs": float64(2_000)}}},
		{Type: "lease.granted", Platform: "android", Data: map[string]any{"timing": map[string]any{"path": "boot", "totalMs": json.Number("12000"), "queueWaitMs": json.Number("0")}}},
		{Type: "request.refused", Platform: "ios", Data: map[string]any{"code": "NO_CAPACITY"}},
		{Type: "request.timed-out", Platform: "ios"}, // no data.code: the type names it
		{Type: "request.failed", Platform: "android", Data: map[string]any{"code": "DEVICE_FAILED"}},
		{Type: "request.rejected", Platform: "android", Data: map[string]any{"code": "RUNTIME_NOT_INSTALLED"}},
		{Type: "device.reclaimed", Platform: "ios", Data: map[string]any{"disposition": "ready", "durationMs": int64(800)}},
		{Type: "device.reclaimed", Platform: "ios", Data: map[string]any{"disposition": "shutdown", "durationMs": int64(1500)}},
		{Type: "device.purge-failed", Platform: "android", Reason: "boom", Data: map[string]any{"durationMs": int64(3000)}},
		{Type: "device.quarantined", Platform: "android", Reason: "purge-failed"},
		{Type: "device.crash-detected", Platform: "ios"},
		{Type: "device.recovered", Platform: "ios"},
		{Type: "device.recovery-failed", Platform: "ios", Reason: "max-recovery-attempts"},
		{Type: "device.exec-finished", Platform: "android", Data: map[string]any{"outcome": "exited", "exitCode": 0, "durationMs": int64(250)}},
		{Type: "device.exec-finished", Platform: "android", Data: map[string]any{"outcome": "timeout", "durationMs": int64(600_000)}},
		{Type: "device.state-changed", Platform: "ios"},
	}
	for _, e := range feed {
		m.Observe(e)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"simlock_lease_grants_total", map[string]string{"platform": "ios", "path": "warm"}, 1},
		{"simlock_lease_grants_total", map[string]string{"platform": "ios", "path": "provision"}, 1},
		{"simlock_lease_grants_total", map[string]string{"platform": "android", "path": "boot"}, 1},
		{"simlock_lease_refusals_total", map[string]string{"platform": "ios", "code": "NO_CAPACITY"}, 1},
		{"simlock_lease_refusals_total", map[string]string{"platform": "ios", "code": "QUEUE_TIMEOUT"}, 1},
		{"simlock_lease_refusals_total", map[string]string{"platform": "android", "code": "RUNTIME_NOT_INSTALLED"}, 1},
		{"simlock_lease_refusals_total", map[string]string{"platform": "android", "code": "DEVICE_FAILED"}, 1},
		{"simlock_quarantines_total", map[string]string{"platform": "android", "reason": "purge-failed"}, 1},
		{"simlock_device_crashes_total", map[string]string{"platform": "ios"}, 1},
		{"simlock_crash_recoveries_total", map[string]string{"platform": "ios", "outcome": "recovered"}, 1},
		{"simlock_crash_recoveries_total", map[string]string{"platform": "ios", "outcome": "failed"}, 1},
		{"simlock_exec_runs_total", map[string]string{"platform": "android", "outcome": "exited"}, 1},
		{"simlock_exec_runs_total", map[string]string{"platform": "android", "outcome": "timeout"}, 1},
		{"simlock_events_total", map[string]string{"type": "lease.granted"}, 3},
		{"simlock_events_total", map[string]string{"type": "device.state-changed"}, 1},
	} {
		if got := counterValue(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		count  uint64
		sum    float64
	}{
		{"simlock_time_to_ready_seconds", map[string]string{"platform": "ios", "path": "warm"}, 1, 0.04},
		{"simlock_time_to_ready_seconds", map[string]string{"platform": "ios", "path": "provision"}, 1, 31},
		{"simlock_time_to_ready_seconds", map[string]string{"platform": "android", "path": "boot"}, 1, 12},
		{"simlock_queue_wait_seconds", map[string]string{"platform": "ios"}, 2, 2},
		{"simlock_reclaim_duration_seconds", map[string]string{"platform": "ios", "outcome": "ready"}, 1, 0.8},
		{"simlock_reclaim_duration_seconds", map[string]string{"platform": "ios", "outcome": "shutdown"}, 1, 1.5},
		{"simlock_reclaim_duration_seconds", map[string]string{"platform": "android", "outcome": "failed"}, 1, 3},
		{"simlock_exec_duration_seconds", map[string]string{"platform": "android"}, 2, 600.25},
	} {
		s := sample(t, m, c.name, c.labels)
		if s == nil {
			t.Errorf("%s%v: no series", c.name, c.labels)
			continue
		}
		if h := s.GetHistogram(); h.GetSampleCount() != c.count || h.GetSampleSum() != c.sum {
			t.Errorf("%s%v: count %d sum %v; want %d and %v", c.name, c.labels, h.GetSampleCount(), h.GetSampleSum(), c.count, c.sum)
		}
	}
	if s := sample(t, m, "simlock_build_info", map[string]string{"version": "1.2.3", "goversion": "go1.27.3", "mode": "worker"}); s == nil || s.GetGauge().GetValue() != 1 {
		t.Errorf("build_info = %v", s)
	}
}

func TestGaugesAreReadFromTheSnapshotAtScrapeTime(t *testing.T) {
	st := contract.StatusGetOut{
		Devices: []contract.Device{{Platform: "ios", Runtime: contract.DeviceRuntime{Lifecycle: "ready"}}, {Platform: "ios", Runtime: contract.DeviceRuntime{Lifecycle: "leased"}}, {Platform: "ios", Runtime: contract.DeviceRuntime{Lifecycle: "leased"}},
			{Platform: "android", Runtime: contract.DeviceRuntime{Lifecycle: "quarantined"}}},
		Leases:     []contract.Lease{{Platform: "ios"}, {Platform: "ios"}},
		QueueDepth: 3,
		Capacity:   contract.Capacity{Running: 3, MaxRunning: 4, Managed: 4, MaxManaged: 6},
		Workers:    []contract.WorkerView{{ID: "w1", State: "connected"}, {ID: "w2", State: "disconnected", Drained: true}},
	}
	var fail error
	m := New(Options{Snapshot: func(context.Context) (contract.StatusGetOut, error) { return st, fail }})
	gauge := func(name string, labels map[string]string) float64 {
		t.Helper()
		s := sample(t, m, name, labels)
		if s == nil {
			t.Fatalf("%s%v: no series", name, labels)
		}
		return s.GetGauge().GetValue()
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"simlock_devices", map[string]string{"platform": "ios", "state": "leased"}, 2},
		{"simlock_devices", map[string]string{"platform": "ios", "state": "ready"}, 1},
		{"simlock_devices", map[string]string{"platform": "ios", "state": "quarantined"}, 0}, // zero rows exist too
		{"simlock_devices", map[string]string{"platform": "android", "state": "quarantined"}, 1},
		{"simlock_leases", map[string]string{"platform": "ios"}, 2},
		{"simlock_queue_depth", nil, 3},
		{"simlock_capacity_running", nil, 3},
		{"simlock_capacity_max_running", nil, 4},
		{"simlock_worker_uplink", map[string]string{"worker": "w1", "state": "connected"}, 1},
		{"simlock_worker_uplink", map[string]string{"worker": "w2", "state": "disconnected"}, 1},
		{"simlock_worker_drained", map[string]string{"worker": "w2"}, 1},
		{"simlock_worker_drained", map[string]string{"worker": "w1"}, 0},
		{"simlock_snapshot_ok", nil, 1},
	} {
		if got := gauge(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
	// The next scrape sees the next state, not a copy kept in step.
	st.QueueDepth = 0
	if got := gauge("simlock_queue_depth", nil); got != 0 {
		t.Errorf("queue depth after it drained = %v", got)
	}
	fail = errors.New("not ready")
	if got := gauge("simlock_snapshot_ok", nil); got != 0 {
		t.Errorf("snapshot_ok with a failing snapshot = %v", got)
	}
}

func TestHandlerServesTheTextFormat(t *testing.T) {
	m := New(Options{Version: "v"})
	m.Observe(events.Event{Type: "lease.granted", Platform: "ios", Data: map[string]any{"timing": map[string]any{"path": "warm", "totalMs": int64(5)}}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatalf("the text parser refused the output: %v\n%s", err, rec.Body.String())
	}
	if fams["simlock_time_to_ready_seconds"].GetMetric()[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("time_to_ready not served: %s", rec.Body.String())
	}
	if fams["go_goroutines"] == nil || fams["simlock_build_info"] == nil {
		t.Error("runtime or build info missing")
	}
}

// Goldens are a device state of their own, so the states add up to the
// managed count; a device the registry is deleting is no longer counted,
// as capacity no longer counts it.
func TestDeviceStatesCountGoldensAndAddUpToManaged(t *testing.T) {
	st := contract.StatusGetOut{
		Devices: []contract.Device{{Platform: "ios", Runtime: contract.DeviceRuntime{Lifecycle: "ready"}},
			{Platform: "ios", Runtime: contract.DeviceRuntime{Lifecycle: "deleted"}},
			{Platform: "android", Runtime: contract.DeviceRuntime{Lifecycle: "leased"}}},
		Goldens:  &contract.Goldens{Devices: []contract.GoldenDevice{{Platform: "ios", State: "ready"}, {Platform: "ios", State: "building"}}},
		Capacity: contract.Capacity{Managed: 4, Platforms: map[string]contract.PlatformCapacity{"ios": {}, "android": {}}},
	}
	m := New(Options{Snapshot: func(context.Context) (contract.StatusGetOut, error) { return st, nil }})
	var sum float64
	for _, s := range family(t, m, "simlock_devices").GetMetric() {
		sum += s.GetGauge().GetValue()
	}
	if sum != float64(st.Capacity.Managed) {
		t.Errorf("sum(simlock_devices) = %v; want managed %d", sum, st.Capacity.Managed)
	}
	for _, c := range []struct {
		platform string
		want     float64
	}{{"ios", 2}, {"android", 0}} {
		s := sample(t, m, "simlock_devices", map[string]string{"platform": c.platform, "state": "golden"})
		if s == nil || s.GetGauge().GetValue() != c.want {
			t.Errorf("simlock_devices{platform=%q,state=golden} = %v; want %v", c.platform, s, c.want)
		}
	}
	if s := sample(t, m, "simlock_devices", map[string]string{"state": "deleted"}); s != nil {
		t.Errorf("a deleted device is counted: %v", s)
	}
}

// The known refusal codes are series at 0 from the start, for every
// platform, and count up from there.
func TestRefusalCountersStartAtZero(t *testing.T) {
	m := New(Options{})
	for _, p := range []string{"ios", "android"} {
		for _, c := range RefusalCodes {
			s := sample(t, m, "simlock_lease_refusals_total", map[string]string{"platform": p, "code": string(c)})
			if s == nil || s.GetCounter().GetValue() != 0 {
				t.Errorf("refusals{platform=%q,code=%q} = %v; want a series at 0", p, c, s)
			}
		}
	}
	m.Observe(events.Event{Type: "request.timed-out", Platform: "ios"})
	if got := counterValue(t, m, "simlock_lease_refusals_total", map[string]string{"platform": "ios", "code": "QUEUE_TIMEOUT"}); got != 1 {
		t.Errorf("QUEUE_TIMEOUT after one timeout = %v", got)
	}
	only := New(Options{Platforms: []string{"ios"}})
	if s := sample(t, only, "simlock_lease_refusals_total", map[string]string{"platform": "android"}); s != nil {
		t.Errorf("a platform not named is zero-filled: %v", s)
	}
}

// The RAM and CPU gauges come from the snapshot's capacity (on a gateway,
// the fleet's sums).
func TestBudgetGauges(t *testing.T) {
	st := contract.StatusGetOut{Capacity: contract.Capacity{RAMBudgetBytes: 8 << 30, RAMUsedBytes: 3 << 30, CPUBudgetMilli: 8000, CPUUsedMilli: 2400,
		Platforms: map[string]contract.PlatformCapacity{"ios": {RAMUsedBytes: 2 << 30}, "android": {RAMUsedBytes: 1 << 30}}}}
	snap := func(context.Context) (contract.StatusGetOut, error) { return st, nil }
	m := New(Options{Snapshot: snap})
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"simlock_capacity_ram_budget_bytes", nil, 8 << 30},
		{"simlock_capacity_ram_used_bytes", map[string]string{"platform": "ios"}, 2 << 30},
		{"simlock_capacity_ram_used_bytes", map[string]string{"platform": "android"}, 1 << 30},
		{"simlock_capacity_cpu_budget_cores", nil, 8},
		{"simlock_capacity_cpu_used_cores", nil, 2.4},
	} {
		s := sample(t, m, c.name, c.labels)
		if s == nil || s.GetGauge().GetValue() != c.want {
			t.Errorf("%s%v = %v; want %v", c.name, c.labels, s, c.want)
		}
	}
}
