package daemon

import (
	"context"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/metrics"
	"github.com/simlock/simlock/internal/ports/fake"
)

// scrape reads the daemon's metrics as Prometheus would, through the text
// format the handler serves.
func (f *fixture) scrape() map[string]*dto.MetricFamily {
	f.t.Helper()
	rec := httptest.NewRecorder()
	f.d.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		f.t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// gaugeSum adds up the gauge series of family name whose labels include want.
func gaugeSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, int) {
	var sum float64
	n := 0
next:
	for _, m := range fams[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		sum += m.GetGauge().GetValue()
		n++
	}
	return sum, n
}

// startGoldenDaemon runs a daemon whose iOS driver keeps two goldens, one
// of them being built, and leases one device from it.
func startGoldenDaemon(t *testing.T, mutate func(*config.Config), opts func(*Options)) (*fixture, *client.Client) {
	t.Helper()
	f := startDaemonWith(t, mutate, func(o *Options) {
		cl := fakedrv.NewCloning(fakedrv.New("ios"), nil)
		cl.SetGoldens([]core.Golden{
			{Handle: "G1", ModelID: "Phone", RuntimeID: "rt-1.0"},
			{Handle: "G2", ModelID: "Tablet", RuntimeID: "rt-1.0", Building: true, Busy: true},
		})
		o.Drivers = []core.Driver{cl}
		if opts != nil {
			opts(o)
		}
	})
	adm := f.dial("op", f.adminToken())
	if _, err := adm.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios", Model: "Phone"}, nil); err != nil {
		t.Fatal(err)
	}
	return f, adm
}

// The devices gauge counts what capacity counts: over every state its
// series add up to simlock_capacity_managed and to status.get's managed
// figure, goldens included (a state of their own), where it used to miss
// them. The refusal counters exist at 0 before any refusal.
func TestMetricsDevicesAddUpToManagedCapacityWithGoldens(t *testing.T) {
	f, adm := startGoldenDaemon(t, func(c *config.Config) { c.Capacity.Fixed = config.Fixed{MaxRunning: 3, MaxManaged: 4} }, nil)
	st, err := client.Do(context.Background(), adm, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Goldens == nil || len(st.Goldens.Devices) != 2 || len(st.Devices) != 1 || st.Capacity.Managed != 3 {
		t.Fatalf("the world is not one device and two goldens: %d devices, goldens %+v, managed %d", len(st.Devices), st.Goldens, st.Capacity.Managed)
	}
	fams := f.scrape()
	devices, _ := gaugeSum(fams, "simlock_devices", nil)
	managed, _ := gaugeSum(fams, "simlock_capacity_managed", nil)
	if devices != managed || int(managed) != st.Capacity.Managed {
		t.Fatalf("sum(simlock_devices) = %v, simlock_capacity_managed = %v, status managed = %d; want all equal", devices, managed, st.Capacity.Managed)
	}
	if g, n := gaugeSum(fams, "simlock_devices", map[string]string{"platform": "ios", "state": "golden"}); n != 1 || g != 2 {
		t.Fatalf("simlock_devices{state=golden} = %v over %d series, want 2 in one", g, n)
	}
	if l, _ := gaugeSum(fams, "simlock_devices", map[string]string{"platform": "ios", "state": "leased"}); l != 1 {
		t.Fatalf("simlock_devices{state=leased} = %v, want 1", l)
	}

	refusals := map[[2]string]float64{}
	for _, m := range fams["simlock_lease_refusals_total"].GetMetric() {
		var k [2]string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "platform":
				k[0] = l.GetValue()
			case "code":
				k[1] = l.GetValue()
			}
		}
		refusals[k] = m.GetCounter().GetValue()
	}
	for _, p := range []string{"ios", "android"} {
		for _, c := range metrics.RefusalCodes {
			v, ok := refusals[[2]string{p, string(c)}]
			if !ok || v != 0 {
				t.Errorf("simlock_lease_refusals_total{platform=%q,code=%q}: present %v, value %v; want present at 0", p, c, ok, v)
			}
		}
	}
	// Under fixed nothing plans RAM or CPU: the budgets read 0, not absent.
	for _, name := range []string{"simlock_capacity_ram_budget_bytes", "simlock_capacity_cpu_budget_cores", "simlock_capacity_cpu_used_cores"} {
		if v, n := gaugeSum(fams, name, nil); n != 1 || v != 0 {
			t.Errorf("%s = %v over %d series under fixed, want one at 0", name, v, n)
		}
	}
}

// Under the resource strategy the RAM and CPU gauges are the budgets the
// planner admits by and what is charged to them: the leased device and the
// golden being built (a reservation), each at the default two CPUs and
// footprint; the shut-down golden takes neither.
func TestMetricsRAMAndCPUBudgetsUnderTheResourceStrategy(t *testing.T) {
	stats := &fake.Stats{CPUs: 8, TotalRAM: 32 << 30, FreeRAM: 16 << 30, FreeDisk: 100 << 30}
	f, adm := startGoldenDaemon(t, func(c *config.Config) { c.Capacity.Strategy = "resource" }, func(o *Options) { o.Stats = stats })
	st, err := client.Do(context.Background(), adm, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		t.Fatal(err)
	}
	fams := f.scrape()
	for _, c := range []struct {
		name string
		want float64
	}{
		{"simlock_capacity_ram_budget_bytes", float64(st.Capacity.RAMBudgetBytes)},
		{"simlock_capacity_ram_used_bytes", float64(st.Capacity.RAMUsedBytes)},
		{"simlock_capacity_cpu_budget_cores", 8},
		{"simlock_capacity_cpu_used_cores", 4},
	} {
		if got, n := gaugeSum(fams, c.name, nil); n == 0 || got != c.want {
			t.Errorf("%s = %v (%d series), want %v", c.name, got, n, c.want)
		}
	}
	if st.Capacity.RAMBudgetBytes == 0 || st.Capacity.RAMUsedBytes != 2*(2<<30) {
		t.Errorf("status RAM %d of %d: want two default footprints charged against a budget", st.Capacity.RAMUsedBytes, st.Capacity.RAMBudgetBytes)
	}
	devices, _ := gaugeSum(fams, "simlock_devices", nil)
	if int(devices) != st.Capacity.Managed {
		t.Errorf("sum(simlock_devices) = %v, managed %d", devices, st.Capacity.Managed)
	}
}
