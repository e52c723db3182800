package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/testhost"
)

// busBackend serves events.subscribe from a real bus through the real
// dispatcher, as the daemon does; observe adds the lossless EventSource.
type busBackend struct {
	bus  *events.Bus
	disp *dispatch.Dispatcher
	stop chan struct{}
}

type observingBackend struct {
	*busBackend
	observing chan struct{} // closed once the observer is registered
}

func (b observingBackend) ObserveEvents(ctx context.Context, since uint64, onGap func(contract.EventsGap), onEvent func(contract.Event)) {
	gap, obs := b.bus.Observe(since)
	defer obs.Close()
	close(b.observing)
	if g := dispatch.GapOut(gap); g != nil {
		onGap(*g)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-obs.C():
			onEvent(dispatch.EventOut(e))
		}
	}
}

func newBusBackend(t *testing.T, ring int) *busBackend {
	b := &busBackend{bus: events.New(ring, func() time.Time { return time.Unix(0, 0) }),
		disp: dispatch.New(dispatch.Options{}), stop: make(chan struct{})}
	t.Cleanup(func() { close(b.stop) })
	dispatch.Handle(b.disp, contract.EventsSubscribe, func(ctx context.Context, call *dispatch.Call, in contract.EventsSubscribeIn) (contract.EventsSubscribeOut, error) {
		return dispatch.ServeEvents(ctx, call, b.bus, nil, time.Time{}, in, b.stop, nil)
	})
	return b
}

func (b *busBackend) Authenticate(_ context.Context, bearer string) (string, string, bool, error) {
	return contract.TokenRoleOperator, "token:" + bearer, bearer == "op", nil
}

func (b *busBackend) Hello(context.Context, contract.HelloIn) (contract.HelloOut, contract.Session, *contract.Error) {
	return contract.HelloOut{}, contract.Session{}, nil
}

func (b *busBackend) Dispatch(ctx context.Context, sess contract.Session, method string, params json.RawMessage, notify func(string, any)) (any, func(), *contract.Error) {
	call := &dispatch.Call{Session: sess, Notify: notify}
	out, err := b.disp.Dispatch(ctx, call, method, params)
	return out, call.RunAfter, err
}

func sseOver(t *testing.T, b Backend) *httptest.Server {
	s := New(Options{Backend: b})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(s.Close)
	return ts
}

func getEvents(t *testing.T, ts *httptest.Server, lastID string) (*bufio.Reader, func()) {
	t.Helper()
	r, _ := http.NewRequest("GET", ts.URL+"/v1/events", nil)
	r.Header.Set("Authorization", "Bearer op")
	if lastID != "" {
		r.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := ts.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/events: %d", resp.StatusCode)
	}
	return bufio.NewReader(resp.Body), func() { resp.Body.Close() }
}

func wantEvent(t *testing.T, rd *bufio.Reader, seq uint64) {
	t.Helper()
	m := readSSE(t, rd)
	var e contract.Event
	if m.event != "" || m.id != strconv.FormatUint(seq, 10) || json.Unmarshal([]byte(m.data), &e) != nil || e.Seq != seq {
		t.Fatalf("message %+v, want event %d", m, seq)
	}
}

func TestSSEResumesFromLastEventIDOverTheRealBus(t *testing.T) {
	b := newBusBackend(t, 100)
	ts := sseOver(t, b)
	for i := 0; i < 5; i++ {
		b.bus.Publish(events.Event{Type: "x"})
	}
	rd, done := getEvents(t, ts, "3")
	defer done()
	wantEvent(t, rd, 4)
	wantEvent(t, rd, 5)
	b.bus.Publish(events.Event{Type: "live"})
	wantEvent(t, rd, 6)
}

// Asked to resume from an id the ring no longer holds, the stream starts
// with a gap naming what is lost (its id is the gap's end, so the next
// reconnect resumes after it), then the oldest buffered event onwards.
func TestSSESendsAGapWhenTheRingNoLongerHoldsLastEventID(t *testing.T) {
	b := newBusBackend(t, 4)
	ts := sseOver(t, b)
	for i := 0; i < 10; i++ { // the ring keeps 7..10
		b.bus.Publish(events.Event{Type: "x"})
	}
	rd, done := getEvents(t, ts, "2")
	defer done()
	m := readSSE(t, rd)
	var g contract.EventsGap
	if m.event != "gap" || m.id != "6" || json.Unmarshal([]byte(m.data), &g) != nil || g != (contract.EventsGap{FromSeq: 3, ToSeq: 6}) {
		t.Fatalf("first message %+v, want gap 3..6", m)
	}
	for seq := uint64(7); seq <= 10; seq++ {
		wantEvent(t, rd, seq)
	}
}

// With an EventSource the notice buffer is fed by a lossless observer: a
// flood far larger than the ring still leaves every lease-lost notice.
func TestLeaseNoticesLoseNothingUnderAFlood(t *testing.T) {
	b := newBusBackend(t, 8)
	ob := observingBackend{b, make(chan struct{})}
	s := New(Options{Backend: ob})
	t.Cleanup(s.Close)
	<-ob.observing
	const leases = 2000
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < leases; i += 4 {
				b.bus.Publish(events.Event{Type: "device.state-changed"})
				b.bus.Publish(events.Event{Type: "lease.released", LeaseID: "l" + strconv.Itoa(i), Reason: "expired",
					Data: map[string]any{"ownerId": "token:a"}})
			}
		}()
	}
	wg.Wait()
	eventually(t, func() bool {
		s.notices.mu.Lock()
		defer s.notices.mu.Unlock()
		return len(s.notices.leases) == leases
	})
}

// FuzzEventSinkDecoding feeds the sink arbitrary pushes, one per line:
// "e <json>" an event, "g <json>" a gap, anything else another method;
// the first line may be held back as if it raced the backlog. Whatever
// arrives, the sink must not panic and must deliver in sequence order:
// event seqs increase, gaps do not overlap what came before, and nothing
// inside a delivered gap is delivered after it.
func FuzzEventSinkDecoding(f *testing.F) {
	f.Add("e {\"seq\":2,\"type\":\"x\"}\ng {\"fromSeq\":3,\"toSeq\":5}\ne {\"seq\":4,\"type\":\"x\"}\ne {\"seq\":6,\"type\":\"y\"}", true)
	f.Add("g {\"fromSeq\":9,\"toSeq\":1}\ng {\"fromSeq\":0,\"toSeq\":0}\ne [1,2]\ne {\"seq\":-1}", false)
	f.Add("e {\"seq\":18446744073709551615,\"type\":\"x\"}\ng {\"fromSeq\":1,\"toSeq\":18446744073709551615}\nx {}", true)
	f.Fuzz(func(t *testing.T, script string, holdFirst bool) {
		var last uint64
		check := func(lo, hi uint64, what string) {
			if lo <= last && last != 0 {
				t.Fatalf("%s %d..%d after %d", what, lo, hi, last)
			}
			last = hi
		}
		s := newEventSink(func(e contract.Event) {
			if e.Seq != 0 {
				check(e.Seq, e.Seq, "event")
			}
		}, func(g contract.EventsGap) {
			if g.FromSeq == 0 || g.ToSeq < g.FromSeq {
				t.Fatalf("malformed gap delivered %+v", g)
			}
			check(g.FromSeq, g.ToSeq, "gap")
		})
		lines := strings.Split(script, "\n")
		push := func(line string) {
			method := contract.NotifyProgress
			switch {
			case strings.HasPrefix(line, "e "):
				method = contract.NotifyEvent
			case strings.HasPrefix(line, "g "):
				method = contract.NotifyGap
			}
			if len(line) >= 2 {
				line = line[2:]
			}
			s.notify(method, json.RawMessage(line))
		}
		if holdFirst && len(lines) > 0 {
			push(lines[0])
			lines = lines[1:]
		}
		s.start(contract.EventsSubscribeOut{})
		for _, l := range lines {
			push(l)
		}
	})
}

// eventually spins (without sleeping) until cond holds, failing after 5s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(5 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		runtime.Gosched()
	}
}
