package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs url and parses it with Prometheus's own text parser.
func scrape(t *testing.T, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpDo(t, "GET", url, token, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the Prometheus text parser refused %s: %v", url, err)
	}
	return fams
}

// histogramFor returns the series of fam whose labels include want.
func histogramFor(fam *dto.MetricFamily, want map[string]string) *dto.Histogram {
next:
	for _, m := range fam.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m.GetHistogram()
	}
	return nil
}

func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A cold grant and a warm grant against the real daemon on the simulated
// SDK show up as time-to-ready observations on both paths, on the token
// route and on the token-less metrics.listen; the audit trail is in
// daemon.log; and the events journal answers `events --since 1h` across a
// restart with sequence numbers that carry on.
func TestMetricsAuditTrailAndEventsJournalAfterDemoTraffic(t *testing.T) {
	metricsAddr := freeLoopbackPort(t)
	w := newWorld(t, fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "http":{"enabled":true,"listen":"127.0.0.1:0"},"metrics":{"listen":%q}}`, metricsAddr))
	// Boots take a measurable time (30 s scaled down), so the cold path's
	// observation is visibly longer than the warm one's.
	w.env = append(w.env, "SIMLOCK_SIMSDK_SPEED=0.01")

	var cold lease
	w.json(&cold, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "first")
	w.mustRun("release", cold.LeaseID)
	eventually(t, "the released device to be ready again", 20e9, func() bool {
		st := w.status()
		return len(st.Devices) == 1 && st.Devices[0].State == "ready"
	})
	var warm lease
	w.json(&warm, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "second")
	if warm.Device.ID != cold.Device.ID {
		t.Fatalf("the second lease got %s, not the warm %s", warm.Device.ID, cold.Device.ID)
	}

	var st struct{ Daemon struct{ HTTP string } }
	w.json(&st, "status", "--json")
	base := "http://" + st.Daemon.HTTP
	var tok struct{ Token string }
	w.json(&tok, "token", "create", "--role", "agent", "--name", "scraper", "--json")
	if code, _ := httpDo(t, "GET", base+"/metrics", "", ""); code != 401 {
		t.Fatalf("/metrics without a token: %d; want 401", code)
	}
	for _, url := range []struct{ url, token string }{{base + "/metrics", tok.Token}, {"http://" + metricsAddr + "/metrics", ""}} {
		fams := scrape(t, url.url, url.token)
		ttr := fams["simlock_time_to_ready_seconds"]
		if ttr == nil {
			t.Fatalf("%s has no simlock_time_to_ready_seconds", url.url)
		}
		coldH := histogramFor(ttr, map[string]string{"platform": "ios", "path": "provision"})
		warmH := histogramFor(ttr, map[string]string{"platform": "ios", "path": "warm"})
		if coldH.GetSampleCount() != 1 || warmH.GetSampleCount() != 1 {
			t.Fatalf("%s: time to ready: cold %v, warm %v; want one observation each", url.url, coldH, warmH)
		}
		if coldH.GetSampleSum() <= 0 || coldH.GetSampleSum() <= warmH.GetSampleSum() {
			t.Errorf("%s: cold path took %vs, warm %vs; the cold one boots", url.url, coldH.GetSampleSum(), warmH.GetSampleSum())
		}
		if rc := histogramFor(fams["simlock_reclaim_duration_seconds"], map[string]string{"platform": "ios", "outcome": "ready"}); rc.GetSampleCount() != 1 {
			t.Errorf("%s: reclaim durations %v; want the one purge", url.url, rc)
		}
		var leased float64
		for _, m := range fams["simlock_devices"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == "leased" {
					leased += m.GetGauge().GetValue()
				}
			}
		}
		if leased != 1 || fams["simlock_build_info"] == nil {
			t.Errorf("%s: %v leased devices (want 1), build_info %v", url.url, leased, fams["simlock_build_info"])
		}
	}
	w.mustRun("release", warm.LeaseID)

	// The audit trail: one line per grant and per release, naming lease,
	// requester, owner and device.
	eventually(t, "the audit line of the last release", 10e9, func() bool {
		return len(auditLines(t, w, "lease.released")) == 2
	})
	grants := auditLines(t, w, "lease.granted")
	if len(grants) != 2 {
		t.Fatalf("%d audit lines for grants; want 2", len(grants))
	}
	for _, l := range append(grants, auditLines(t, w, "lease.released")...) {
		if l["lease"] == "" || l["requester"] == "" || l["owner"] == "" || l["device"] != cold.Device.ID {
			t.Errorf("audit line lacks lease, requester, owner or device: %v", l)
		}
	}
	if rel := auditLines(t, w, "lease.released"); rel[0]["reason"] != "released" || rel[0]["lease"] != cold.LeaseID {
		t.Errorf("first release audit line %v", rel[0])
	}

	// Across a restart: the journal keeps the first run's facts.
	before := eventLines(t, w.mustRun("events", "--json"))
	var firstGrant uint64
	for _, e := range before {
		if e.Type == "lease.granted" && e.LeaseID == cold.LeaseID {
			firstGrant = e.Seq
		}
	}
	lastBefore := before[len(before)-1].Seq
	w.mustRun("daemon", "stop")
	w.mustRun("daemon", "start")
	eventually(t, "the restarted daemon to be ready", 20e9, func() bool {
		out := w.mustRun("events", "--json")
		if strings.TrimSpace(out) == "" {
			return false // this run has published nothing yet
		}
		for _, e := range eventLines(t, out) {
			if e.Type == "daemon.started" {
				return true
			}
		}
		return false
	})
	// The default read is this run's buffer; the old grant is not in it,
	// and this run's numbers carry on after the last run's.
	for _, e := range eventLines(t, w.mustRun("events", "--json")) {
		if e.Seq <= lastBefore {
			t.Errorf("after the restart the buffer holds seq %d (%s), not above the last run's %d", e.Seq, e.Type, lastBefore)
		}
	}
	history := eventLines(t, w.mustRun("events", "--since", "1h", "--json"))
	found := false
	for i, e := range history {
		if i > 0 && e.Seq != history[i-1].Seq+1 {
			t.Errorf("--since 1h jumps from %d to %d (a gap or a duplicate)", history[i-1].Seq, e.Seq)
		}
		found = found || e.Seq == firstGrant && e.Type == "lease.granted" && e.LeaseID == cold.LeaseID
	}
	if !found || history[0].Seq != 1 {
		t.Fatalf("--since 1h after a restart: first seq %d, the first run's grant (seq %d) found: %v", history[0].Seq, firstGrant, found)
	}
	// A sequence number from the earlier run reads on from there.
	tail := eventLines(t, w.mustRun("events", "--since", fmt.Sprint(firstGrant), "--json"))
	if len(tail) == 0 || tail[0].Seq != firstGrant+1 {
		t.Fatalf("--since %d starts at %v", firstGrant, tail)
	}
}

type eventLine struct {
	Seq     uint64 `json:"seq"`
	Type    string `json:"type"`
	LeaseID string `json:"leaseId"`
	Gap     any    `json:"gap"`
}

func eventLines(t *testing.T, out string) []eventLine {
	t.Helper()
	var evs []eventLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var e eventLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("events printed %q: %v", sc.Text(), err)
		}
		if e.Gap != nil {
			t.Fatalf("events reported a gap: %s", sc.Text())
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		t.Fatal("events printed nothing")
	}
	return evs
}

// auditLines are daemon.log's audit records of one event type.
func auditLines(t *testing.T, w *world, event string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.home, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(b, []byte("\n")) {
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil && rec["msg"] == "audit" && rec["event"] == event {
			if rec["level"] != "INFO" || rec["module"] != "audit" {
				t.Errorf("audit line %s", line)
			}
			out = append(out, rec)
		}
	}
	return out
}

// A gateway's /metrics shows each worker's uplink and drain state and
// counts the fleet's grants, which it republishes from its workers.
func TestGatewayMetricsShowUplinksDrainAndFleetGrants(t *testing.T) {
	gw, workers, base := fleet(t, 2)
	var l lease
	gw.json(&l, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "fleet-agent")
	ids := gw.workers()
	gw.mustRun("worker", "drain", ids[0].ID)
	var tok struct{ Token string }
	gw.json(&tok, "token", "create", "--role", "agent", "--name", "scraper", "--json")
	value := func(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	next:
		for _, m := range fams[name].GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
		return 0, false
	}
	eventually(t, "the gateway's metrics to show the grant", 10e9, func() bool {
		v, _ := value(scrape(t, base+"/metrics", tok.Token), "simlock_lease_grants_total", map[string]string{"platform": "ios"})
		return v == 1
	})
	fams := scrape(t, base+"/metrics", tok.Token)
	for _, w := range ids {
		if v, ok := value(fams, "simlock_worker_uplink", map[string]string{"worker": w.ID, "state": "connected"}); !ok || v != 1 {
			t.Errorf("worker %s uplink: %v %v", w.ID, v, ok)
		}
	}
	if v, _ := value(fams, "simlock_worker_drained", map[string]string{"worker": ids[0].ID}); v != 1 {
		t.Errorf("drained worker %s shows %v", ids[0].ID, v)
	}
	if v, ok := value(fams, "simlock_worker_drained", map[string]string{"worker": ids[1].ID}); !ok || v != 0 {
		t.Errorf("undrained worker %s shows %v %v", ids[1].ID, v, ok)
	}
	if v, _ := value(fams, "simlock_build_info", map[string]string{"mode": "gateway"}); v != 1 {
		t.Error("build_info does not say gateway")
	}
	// A worker that goes away shows disconnected.
	workers[1].mustRun("daemon", "stop")
	eventually(t, "the stopped worker to show disconnected", 20e9, func() bool {
		v, _ := value(scrape(t, base+"/metrics", tok.Token), "simlock_worker_uplink", map[string]string{"worker": ids[1].ID, "state": "disconnected"})
		return v == 1
	})
}
