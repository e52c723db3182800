package httpapi

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

// buffered reports how many notices wait for lease id.
func (f *fixture) buffered(id string) (n int, ended bool) {
	b := f.s.notices
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.leases[id]; ok {
		return len(e.notes), e.ended
	}
	return 0, false
}

func noticeTypes(ns []contract.LeaseNotice) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Type+"/"+n.Reason)
	}
	return strings.Join(out, ",")
}

func TestRenewCarriesLeaseNotices(t *testing.T) {
	f := newFixture(t, 2, false)
	l := f.lease(agentTok)
	other := f.lease(agent2Tok)

	f.b.Crash(l.LeaseID)
	f.b.Recover(l.LeaseID)
	eventually(t, func() bool { n, _ := f.buffered(l.LeaseID); return n == 2 })

	var rr RenewReply
	if r := f.call("POST", "/v1/leases/"+l.LeaseID+"/renew", agentTok, `{"ttlMs":90000}`, &rr); r.StatusCode != 200 {
		t.Fatalf("renew: %d", r.StatusCode)
	}
	if rr.LeaseID != l.LeaseID || rr.TTLMs != 90000 || noticeTypes(rr.Notices) != "device-unhealthy/,device-recovered/" {
		t.Fatalf("renew reply %+v", rr)
	}
	// Read once: the next renew has an empty (not null) array.
	resp := f.req("POST", "/v1/leases/"+l.LeaseID+"/renew", agentTok, "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"notices":[]`) {
		t.Fatalf("second renew: %s", b)
	}
	// The other lease saw none of it.
	f.call("POST", "/v1/leases/"+other.LeaseID+"/renew", agent2Tok, "", &rr)
	if len(rr.Notices) != 0 {
		t.Fatalf("notices leaked to another lease: %+v", rr.Notices)
	}

	// The device is lost: the owner's next renew is UNKNOWN_LEASE with the
	// reason beside the error; nobody else learns it.
	f.b.LoseDevice(l.LeaseID)
	eventually(t, func() bool { _, ended := f.buffered(l.LeaseID); return ended })
	e, _ := f.refusal("POST", "/v1/leases/"+l.LeaseID+"/renew", agent2Tok, "")
	if e.Code != contract.CodeUnknownLease {
		t.Fatalf("stranger renew: %s", e.Code)
	}
	var eb ErrorBody
	if r := f.call("POST", "/v1/leases/"+l.LeaseID+"/renew", agent2Tok, "", &eb); r.StatusCode != 404 || len(eb.Notices) != 0 {
		t.Fatalf("stranger sees %+v", eb.Notices)
	}
	if r := f.call("POST", "/v1/leases/"+l.LeaseID+"/renew", agentTok, "", &eb); r.StatusCode != 404 || noticeTypes(eb.Notices) != "lease-lost/device-lost" {
		t.Fatalf("owner after device loss: %d %+v", r.StatusCode, eb)
	}

	f.b.Expire(other.LeaseID)
	eventually(t, func() bool { _, ended := f.buffered(other.LeaseID); return ended })
	eb = ErrorBody{}
	f.call("POST", "/v1/leases/"+other.LeaseID+"/renew", agent2Tok, "", &eb)
	if eb.Error == nil || eb.Error.Code != contract.CodeUnknownLease || noticeTypes(eb.Notices) != "lease-lost/expired" {
		t.Fatalf("owner after expiry: %+v", eb)
	}
}

func TestNoticeRingKeepsTheNewest(t *testing.T) {
	b := newNoticeBuffer()
	owner := map[string]any{"ownerId": "token:a"}
	for i := 1; i <= noticesPerLease+5; i++ {
		b.apply(contract.Event{Type: "device.crash-detected", LeaseID: "l1", DeviceID: "d1", Reason: strconv.Itoa(i), Data: owner})
	}
	got := b.take("l1")
	if len(got) != noticesPerLease || got[0].Reason != "6" {
		t.Fatalf("kept %d, oldest %q", len(got), got[0].Reason)
	}
	b.apply(contract.Event{Type: "lease.released", LeaseID: "l1", DeviceID: "d1", Reason: "released", Data: owner})
	if n := b.takeLost("l1", contract.Session{Role: contract.RoleAdmin}); len(n) != 0 {
		t.Fatalf("an owner's own release is not a lost lease: %+v", n)
	}
	b.apply(contract.Event{Type: "lease.released", LeaseID: "l2", Reason: "reset", Data: owner})
	if n := b.takeLost("l2", contract.Session{Principal: "token:b", Role: contract.RoleAgent}); len(n) != 0 {
		t.Fatal("a stranger read a lease-lost notice")
	}
	if n := b.takeLost("l2", contract.Session{Principal: "token:a", Role: contract.RoleAgent}); noticeTypes(n) != "lease-lost/reset" {
		t.Fatalf("owner got %+v", n)
	}
}

// sseMessage is one parsed Server-Sent Events message.
type sseMessage struct{ event, id, data string }

func readSSE(t *testing.T, r *bufio.Reader) sseMessage {
	t.Helper()
	var m sseMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read SSE: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if m.data != "" {
				return m
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			m.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			m.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			m.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func TestEventsStreamAsServerSentEvents(t *testing.T) {
	f := newFixture(t, 1, false)
	l := f.lease(agentTok)

	resp := f.req("GET", "/v1/events?since=0", operatorTok, "")
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != mediaSSE {
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
	live := f.b.Emit(contract.Event{Type: "device.crash-detected", LeaseID: l.LeaseID, DeviceID: l.DeviceID})
	var e contract.Event
	json.Unmarshal([]byte(readSSE(t, r).data), &e)
	if e.Seq != live.Seq || e.Type != live.Type {
		t.Fatalf("live event %+v, want seq %d", e, live.Seq)
	}

	// A reconnecting EventSource resumes after Last-Event-ID.
	resp2 := f.req("GET", "/v1/events", operatorTok, "", "Last-Event-ID", strconv.FormatUint(granted.Seq, 10))
	defer resp2.Body.Close()
	var next contract.Event
	json.Unmarshal([]byte(readSSE(t, bufio.NewReader(resp2.Body)).data), &next)
	if next.Seq != granted.Seq+1 {
		t.Fatalf("resumed at %d, want %d", next.Seq, granted.Seq+1)
	}
}

func TestEventSinkDeliversOnceInOrder(t *testing.T) {
	var got []uint64
	var gaps []contract.EventsGap
	s := newEventSink(func(e contract.Event) { got = append(got, e.Seq) }, func(g contract.EventsGap) { gaps = append(gaps, g) })
	s.notify(contract.NotifyEvent, contract.Event{Seq: 4, Type: "x"})
	s.notify(contract.NotifyEvent, contract.Event{Seq: 3, Type: "x"})
	s.notify(contract.NotifyProgress, contract.Progress{Phase: "queued"})
	s.start(contract.EventsSubscribeOut{Gap: &contract.EventsGap{FromSeq: 1, ToSeq: 1}, Events: []contract.Event{{Seq: 2, Type: "x"}, {Seq: 3, Type: "x"}}})
	s.notify(contract.NotifyEvent, map[string]any{"seq": 4, "type": "x"})
	s.notify(contract.NotifyEvent, contract.Event{Seq: 5, Type: "x"})
	s.notify(contract.NotifyGap, map[string]any{"fromSeq": 6, "toSeq": 9})
	s.notify(contract.NotifyEvent, contract.Event{Seq: 8, Type: "x"}) // inside the gap: already given up
	s.notify(contract.NotifyEvent, contract.Event{Seq: 10, Type: "x"})
	if want := "[2 3 4 5 10]"; fmtSeqs(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
	if len(gaps) != 2 || gaps[0] != (contract.EventsGap{FromSeq: 1, ToSeq: 1}) || gaps[1] != (contract.EventsGap{FromSeq: 6, ToSeq: 9}) {
		t.Fatalf("gaps %+v", gaps)
	}
}

func fmtSeqs(s []uint64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatUint(v, 10)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
