package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

func noticeTypes(ns []contract.LeaseNotice) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Type+"/"+n.Reason)
	}
	return strings.Join(out, ",")
}

func TestRenewCarriesLeaseNotices(t *testing.T) {
	f := newFixture(t, 2)
	l := f.lease(f.agent)
	other := f.lease(f.agent2)

	// The device crashes; the health monitor confirms it over its
	// debounce (device.crash-detected) and reboots it (device.recovered).
	f.st.Driver.Crash(f.st.Handle(l.DeviceID))
	f.st.HealthTicks(f.st.Config.Health.StableObservations)
	eventually(t, func() bool { n, _ := f.buffered(l.LeaseID); return n == 2 })

	var rr httpapi.RenewReply
	if r := f.call("POST", "/v1/leases/"+l.LeaseID+"/renew", f.agent, `{"ttlMs":90000}`, &rr); r.StatusCode != 200 {
		t.Fatalf("renew: %d", r.StatusCode)
	}
	if rr.LeaseID != l.LeaseID || rr.TTLMs != 90000 || noticeTypes(rr.Notices) != "device-unhealthy/,device-recovered/" {
		t.Fatalf("renew reply %+v", rr)
	}
	// Read once: the next renew has an empty (not null) array.
	resp := f.req("POST", "/v1/leases/"+l.LeaseID+"/renew", f.agent, "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"notices":[]`) {
		t.Fatalf("second renew: %s", b)
	}
	// The other lease saw none of it.
	f.call("POST", "/v1/leases/"+other.LeaseID+"/renew", f.agent2, "", &rr)
	if len(rr.Notices) != 0 {
		t.Fatalf("notices leaked to another lease: %+v", rr.Notices)
	}

	// The device is lost: the owner's next renew is UNKNOWN_LEASE with the
	// reason beside the error; nobody else learns it.
	f.st.Driver.Vanish(f.st.Handle(l.DeviceID))
	f.st.HealthTicks(f.st.Config.Health.StableObservations)
	eventually(t, func() bool { _, ended := f.buffered(l.LeaseID); return ended })
	e, _ := f.refusal("POST", "/v1/leases/"+l.LeaseID+"/renew", f.agent2, "")
	if e.Code != contract.CodeUnknownLease {
		t.Fatalf("stranger renew: %s", e.Code)
	}
	var eb httpapi.ErrorBody
	if r := f.call("POST", "/v1/leases/"+l.LeaseID+"/renew", f.agent2, "", &eb); r.StatusCode != 404 || len(eb.Notices) != 0 {
		t.Fatalf("stranger sees %+v", eb.Notices)
	}
	if r := f.call("POST", "/v1/leases/"+l.LeaseID+"/renew", f.agent, "", &eb); r.StatusCode != 404 || noticeTypes(eb.Notices) != "lease-lost/device-lost" {
		t.Fatalf("owner after device loss: %d %+v", r.StatusCode, eb)
	}

	// The other lease runs out its TTL on the engine's clock.
	f.clk.Advance(time.Duration(f.st.Config.Lease.DefaultTTLMs)*time.Millisecond + time.Minute)
	eventually(t, func() bool { _, ended := f.buffered(other.LeaseID); return ended })
	eb = httpapi.ErrorBody{}
	f.call("POST", "/v1/leases/"+other.LeaseID+"/renew", f.agent2, "", &eb)
	if eb.Error == nil || eb.Error.Code != contract.CodeUnknownLease || noticeTypes(eb.Notices) != "lease-lost/expired" {
		t.Fatalf("owner after expiry: %+v", eb)
	}
}

func TestEventsStreamAsServerSentEvents(t *testing.T) {
	f := newFixture(t, 1)
	l := f.lease(f.agent)

	resp := f.req("GET", "/v1/events?since=0", f.operator, "")
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != httpapi.MediaSSE {
		t.Fatalf("events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(resp.Body)
	var granted contract.Event
	for granted.Type != "lease.granted" {
		m := readSSE(t, r)
		if err := json.Unmarshal([]byte(m.data), &granted); err != nil {
			t.Fatal(err)
		}
		if m.id != strconv.FormatUint(granted.Seq, 10) {
			t.Fatalf("id %q for seq %d", m.id, granted.Seq)
		}
	}
	if granted.LeaseID != l.LeaseID {
		t.Fatalf("granted %+v", granted)
	}
	// A fact committed while the stream is open arrives live, next in
	// sequence after everything before it.
	last := granted.Seq
	f.call("POST", "/v1/leases/"+l.LeaseID+"/renew", f.agent, "", nil)
	var e contract.Event
	for e.Type != "lease.renewed" {
		m := readSSE(t, r)
		e = contract.Event{}
		json.Unmarshal([]byte(m.data), &e)
		if e.Seq != last+1 || m.id != strconv.FormatUint(e.Seq, 10) {
			t.Fatalf("live event %+v (id %q) after seq %d", e, m.id, last)
		}
		last = e.Seq
	}
	if e.LeaseID != l.LeaseID {
		t.Fatalf("live event %+v, want lease.renewed of %s", e, l.LeaseID)
	}

	// A reconnecting EventSource resumes after Last-Event-ID.
	resp2 := f.req("GET", "/v1/events", f.operator, "", "Last-Event-ID", strconv.FormatUint(granted.Seq, 10))
	defer resp2.Body.Close()
	var next contract.Event
	json.Unmarshal([]byte(readSSE(t, bufio.NewReader(resp2.Body)).data), &next)
	if next.Seq != granted.Seq+1 {
		t.Fatalf("resumed at %d, want %d", next.Seq, granted.Seq+1)
	}
}
