// Package metrics turns simlock's business facts into Prometheus metrics.
// It measures nothing itself: counters and histograms are fed from the
// event bus (a lease's timing record rides on lease.granted, a purge's
// duration on device.reclaimed), and gauges are read from a status snapshot
// when Prometheus scrapes. Each daemon owns its Registry; nothing here is
// global.
package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// Snapshot reads the daemon's current state (status.get as an admin sees
// it) for the gauges.
type Snapshot func(ctx context.Context) (contract.StatusGetOut, error)

// Options configure a Metrics.
type Options struct {
	Version   string
	GoVersion string
	Mode      string // worker or gateway
	// Snapshot feeds the gauges at scrape time (nil: no gauges).
	Snapshot Snapshot
	// Platforms are the platforms the refusal counters start at zero for
	// (default: ios and android).
	Platforms []string
	// ScrapeTimeout bounds one snapshot read (default 5 s).
	ScrapeTimeout time.Duration
}

// Metrics is one daemon's metrics. Observe feeds it; Handler serves it.
type Metrics struct {
	reg *prometheus.Registry

	events      *prometheus.CounterVec
	grants      *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	queueWait   *prometheus.HistogramVec
	timeToReady *prometheus.HistogramVec
	reclaim     *prometheus.HistogramVec
	quarantines *prometheus.CounterVec
	crashes     *prometheus.CounterVec
	recoveries  *prometheus.CounterVec
	execs       *prometheus.CounterVec
	execTime    *prometheus.HistogramVec
}

// Buckets in seconds. Time to ready spans a warm grant (milliseconds) to a
// runtime download (many minutes); a queue wait may be as long; a purge
// is seconds (a snapshot restore) to a minute or two (a cold erase).
var (
	readyBuckets   = []float64{0.05, 0.25, 1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 300, 600, 1800}
	waitBuckets    = []float64{0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800}
	reclaimBuckets = []float64{0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}
)

// New builds a registry holding simlock's metrics plus the Go runtime and
// process collectors.
func New(o Options) *Metrics {
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = 5 * time.Second
	}
	m := &Metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "simlock", Name: name, Help: help}, labels)
		m.reg.MustRegister(v)
		return v
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "simlock", Name: name, Help: help, Buckets: buckets}, labels)
		m.reg.MustRegister(v)
		return v
	}
	m.events = counter("events_total", "Business events published, by type.", "type")
	m.grants = counter("lease_grants_total", "Leases granted, by platform and admission path.", "platform", "path")
	m.refusals = counter("lease_refusals_total", "Lease requests that ended without a lease, by error code.", "platform", "code")
	// A counter appears only at its first increment, so a dashboard's
	// rate() of a refusal that has not happened yet reads no data rather
	// than 0; the codes a lease request is known to end with start at 0.
	platforms := o.Platforms
	if len(platforms) == 0 {
		platforms = []string{"ios", "android"}
	}
	for _, p := range platforms {
		for _, c := range RefusalCodes {
			m.refusals.WithLabelValues(p, string(c))
		}
	}
	m.queueWait = histogram("queue_wait_seconds", "Time a granted request waited in the queue before anything was done for it.", waitBuckets, "platform")
	m.timeToReady = histogram("time_to_ready_seconds", "Time from a lease request's arrival to its grant, by admission path (warm, boot, provision, evict-then-provision, download).", readyBuckets, "platform", "path")
	m.reclaim = histogram("reclaim_duration_seconds", "Duration of the purge after a release, by platform and outcome (ready, shutdown, failed).", reclaimBuckets, "platform", "outcome")
	m.quarantines = counter("quarantines_total", "Devices taken out of service, by platform and reason.", "platform", "reason")
	m.crashes = counter("device_crashes_total", "Crashes of leased devices the health monitor detected.", "platform")
	m.recoveries = counter("crash_recoveries_total", "Ends of crash recoveries of leased devices, by outcome (recovered, failed).", "platform", "outcome")
	m.execs = counter("exec_runs_total", "device.exec commands run, by platform and outcome (exited, timeout, lease-ended, cancelled, error).", "platform", "outcome")
	m.execTime = histogram("exec_duration_seconds", "Duration of device.exec commands.", reclaimBuckets, "platform")

	info := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "simlock", Name: "build_info", Help: "Always 1; the labels name the build.",
		ConstLabels: prometheus.Labels{"version": o.Version, "goversion": o.GoVersion, "mode": o.Mode}})
	info.Set(1)
	m.reg.MustRegister(info)
	if o.Snapshot != nil {
		m.reg.MustRegister(&stateCollector{snapshot: o.Snapshot, timeout: o.ScrapeTimeout})
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the daemon's registry (for tests and extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Run feeds Observe from c (a bus observer's channel) until it closes or
// ctx ends.
func (m *Metrics) Run(ctx context.Context, c <-chan events.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-c:
			if !ok {
				return
			}
			m.Observe(e)
		}
	}
}

// Observe maps one business fact onto the metrics. Facts it has no metric
// for still count in simlock_events_total.
func (m *Metrics) Observe(e events.Event) {
	m.events.WithLabelValues(e.Type).Inc()
	p := e.Platform
	switch e.Type {
	case "lease.granted":
		t, _ := e.Data["timing"].(map[string]any)
		path, _ := t["path"].(string)
		if path == "" {
			path = "unknown"
		}
		m.grants.WithLabelValues(p, path).Inc()
		if ms, ok := number(t["totalMs"]); ok {
			m.timeToReady.WithLabelValues(p, path).Observe(ms / 1000)
		}
		if ms, ok := number(t["queueWaitMs"]); ok {
			m.queueWait.WithLabelValues(p).Observe(ms / 1000)
		}
	case "request.refused", "request.timed-out", "request.failed", "request.cancelled", "request.rejected":
		code, _ := e.Data["code"].(string)
		if code == "" {
			code = refusalCodes[e.Type]
		}
		m.refusals.WithLabelValues(p, code).Inc()
	case "device.reclaimed":
		outcome, _ := e.Data["disposition"].(string)
		if ms, ok := number(e.Data["durationMs"]); ok {
			m.reclaim.WithLabelValues(p, outcome).Observe(ms / 1000)
		}
	case "device.purge-failed":
		if ms, ok := number(e.Data["durationMs"]); ok {
			m.reclaim.WithLabelValues(p, "failed").Observe(ms / 1000)
		}
	case "device.quarantined":
		m.quarantines.WithLabelValues(p, e.Reason).Inc()
	case "device.crash-detected":
		m.crashes.WithLabelValues(p).Inc()
	case "device.recovered":
		m.recoveries.WithLabelValues(p, "recovered").Inc()
	case "device.recovery-failed":
		m.recoveries.WithLabelValues(p, "failed").Inc()
	case "device.exec-finished":
		outcome, _ := e.Data["outcome"].(string)
		m.execs.WithLabelValues(p, outcome).Inc()
		if ms, ok := number(e.Data["durationMs"]); ok {
			m.execTime.WithLabelValues(p).Observe(ms / 1000)
		}
	}
}

// RefusalCodes are the error codes a lease request is known to end with,
// each a zero-filled series of simlock_lease_refusals_total: the queue's
// own outcomes first, then the refusals before the queue (request.rejected)
// that a well-formed request can meet. Other codes still count when they
// happen; they are just not there before.
var RefusalCodes = []contract.Code{
	contract.CodeNoCapacity, contract.CodeCapacityExhausted, contract.CodeQueueTimeout, contract.CodeDeviceFailed,
	contract.CodeRequestCancelled,
	contract.CodeUnsupportedPlatform, contract.CodeUnknownModel, contract.CodeOSOutOfRange, contract.CodeRuntimeMissing,
	contract.CodeDownloadForbidden, contract.CodeInsufficientDisk, contract.CodeLicenseNotAccepted,
	contract.CodeRequesterLeased, contract.CodeRequesterQueued, contract.CodeQueueLimit, contract.CodeDaemonStopping,
}

// refusalCodes name a refusal whose event carries no data.code (one
// republished from an older worker).
var refusalCodes = map[string]string{
	"request.refused":   string(contract.CodeNoCapacity),
	"request.timed-out": string(contract.CodeQueueTimeout),
	"request.failed":    string(contract.CodeDeviceFailed),
	"request.cancelled": string(contract.CodeRequestCancelled),
	"request.rejected":  "UNKNOWN",
}

// number reads a numeric event datum, whether it came straight from the
// engine (int64) or through JSON (float64, json.Number).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// deviceStates are reported for every platform, zero included, so a
// dashboard's series do not come and go. "golden" counts clone
// provisioning's golden devices: they serve no lease and are not in the
// device list, but each takes a managed slot, so without them the states
// would not add up to simlock_capacity_managed.
var deviceStates = []string{"provisioning", "ready", "leased", "reclaiming", "shutdown", "quarantined", stateGolden}

const stateGolden = "golden"

var (
	devicesDesc    = prometheus.NewDesc("simlock_devices", "Managed devices, by platform and state.", []string{"platform", "state"}, nil)
	leasesDesc     = prometheus.NewDesc("simlock_leases", "Active leases, by platform.", []string{"platform"}, nil)
	queueDesc      = prometheus.NewDesc("simlock_queue_depth", "Lease requests waiting in the queue.", nil, nil)
	runningDesc    = prometheus.NewDesc("simlock_capacity_running", "Devices running, against capacity.", nil, nil)
	maxRunDesc     = prometheus.NewDesc("simlock_capacity_max_running", "The running-device limit.", nil, nil)
	managedDesc    = prometheus.NewDesc("simlock_capacity_managed", "Devices managed (existing), against capacity.", nil, nil)
	maxManagedDesc = prometheus.NewDesc("simlock_capacity_max_managed", "The managed-device limit.", nil, nil)
	uplinkDesc     = prometheus.NewDesc("simlock_worker_uplink", "1 for each worker's current uplink state (connected, disconnected, incompatible); gateway only.", []string{"worker", "state"}, nil)
	drainedDesc    = prometheus.NewDesc("simlock_worker_drained", "1 when the worker is drained; gateway only.", []string{"worker"}, nil)
	upDesc         = prometheus.NewDesc("simlock_snapshot_ok", "1 when the last scrape could read the daemon's state.", nil, nil)
	ramBudgetDesc  = prometheus.NewDesc("simlock_capacity_ram_budget_bytes", "The RAM budget running devices share (0: the strategy plans no RAM).", nil, nil)
	ramUsedDesc    = prometheus.NewDesc("simlock_capacity_ram_used_bytes", "RAM charged to running devices and reservations, by platform; each by its footprint.", []string{"platform"}, nil)
	cpuBudgetDesc  = prometheus.NewDesc("simlock_capacity_cpu_budget_cores", "The CPU budget running devices share, in CPUs (0: the strategy plans no CPU).", nil, nil)
	cpuUsedDesc    = prometheus.NewDesc("simlock_capacity_cpu_used_cores", "CPU charged to running devices and reservations, in CPUs; each by its platform's share.", nil, nil)
	// ownedDesc counts the devices an owner system (the session broker)
	// holds beside the general pool, in every state.
	ownedDesc = prometheus.NewDesc("simlock_owner_system_devices", "Devices owned by a system beside the general pool (session), by platform, system and state.", []string{"platform", "system", "state"}, nil)
)

// stateCollector reads a snapshot at scrape time: gauges that are state,
// not facts, are read where the state is, never kept in step by events.
type stateCollector struct {
	snapshot Snapshot
	timeout  time.Duration
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{devicesDesc, leasesDesc, queueDesc, runningDesc, maxRunDesc, managedDesc, maxManagedDesc, uplinkDesc, drainedDesc, upDesc, ownedDesc,
		ramBudgetDesc, ramUsedDesc, cpuBudgetDesc, cpuUsedDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := c.snapshot(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 1)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	devices := map[string]map[string]int{}
	owned := map[[3]string]int{}
	platforms := map[string]bool{}
	for p := range st.Capacity.Platforms {
		platforms[p] = true
	}
	count := func(platform, state string) {
		platforms[platform] = true
		if devices[platform] == nil {
			devices[platform] = map[string]int{}
		}
		devices[platform][state]++
	}
	for _, d := range st.Devices {
		if d.Runtime.Lifecycle == "deleted" {
			continue // on its way out of the registry; capacity no longer counts it
		}
		count(d.Platform, d.Runtime.Lifecycle)
		if d.OwnerSystem != "" {
			owned[[3]string{d.Platform, d.OwnerSystem, d.Runtime.Lifecycle}]++
		}
	}
	if st.Goldens != nil {
		// A golden's own state (building, stuck, ...) is in status.get;
		// here it is one managed slot like any other device's.
		for _, g := range st.Goldens.Devices {
			count(g.Platform, stateGolden)
		}
	}
	for k, n := range owned {
		gauge(ownedDesc, float64(n), k[0], k[1], k[2])
	}
	leases := map[string]int{}
	for _, l := range st.Leases {
		platforms[l.Platform] = true
		leases[l.Platform]++
	}
	for _, p := range sortedKeys(platforms) {
		seen := map[string]bool{}
		for _, s := range deviceStates {
			seen[s] = true
			gauge(devicesDesc, float64(devices[p][s]), p, s)
		}
		for s, n := range devices[p] {
			if !seen[s] { // a state this list does not know yet
				gauge(devicesDesc, float64(n), p, s)
			}
		}
		gauge(leasesDesc, float64(leases[p]), p)
	}
	gauge(queueDesc, float64(st.QueueDepth))
	gauge(runningDesc, float64(st.Capacity.Running))
	gauge(maxRunDesc, float64(st.Capacity.MaxRunning))
	gauge(managedDesc, float64(st.Capacity.Managed))
	gauge(maxManagedDesc, float64(st.Capacity.MaxManaged))
	gauge(ramBudgetDesc, float64(st.Capacity.RAMBudgetBytes))
	for _, p := range sortedKeys(platforms) {
		gauge(ramUsedDesc, float64(st.Capacity.Platforms[p].RAMUsedBytes), p)
	}
	gauge(cpuBudgetDesc, float64(st.Capacity.CPUBudgetMilli)/1000)
	gauge(cpuUsedDesc, float64(st.Capacity.CPUUsedMilli)/1000)
	for _, w := range st.Workers {
		gauge(uplinkDesc, 1, w.ID, w.State)
		drained := 0.0
		if w.Drained {
			drained = 1
		}
		gauge(drainedDesc, drained, w.ID)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
