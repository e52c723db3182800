package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// gap makes the worker tell its followers that they missed its facts up to
// and including seq to (they fell behind its ring).
func (w *fakeWorker) gap(to uint64) {
	w.emitMu.Lock()
	defer w.emitMu.Unlock()
	w.mu.Lock()
	g := contract.EventsGap{FromSeq: w.seq + 1, ToSeq: to}
	w.seq = to
	var subs []func(string, json.RawMessage)
	for _, c := range w.conns {
		c.mu.Lock()
		for _, s := range c.subs {
			subs = append(subs, s)
		}
		c.mu.Unlock()
	}
	w.mu.Unlock()
	raw := withRequestID(g)
	for _, s := range subs {
		s(contract.NotifyGap, raw)
	}
}

// A gap in a worker's stream reaches the gateway's own subscribers in its
// place, as worker.events-missed with the worker's range, between the
// facts around it, and the relay resumes after the range.
func TestWorkerGapIsRelayedInPlace(t *testing.T) {
	h := newHarness(t)
	w := newFakeWorker("w1", h.clock)
	h.attach(w)
	h.settle("w1")
	w.emit(contract.Event{Type: "device.ready", DeviceID: "before"})
	w.gap(5)
	w.emit(contract.Event{Seq: 0, Type: "device.ready", DeviceID: "after"})
	h.awaitEvent("device.ready", func(e contract.Event) bool { return e.DeviceID == "after" })

	evs, _ := h.g.bus.Since(0)
	var order []string
	for _, e := range evs {
		switch {
		case e.Type == "device.ready":
			order = append(order, e.DeviceID)
		case e.Type == "worker.events-missed":
			if e.Data["workerId"] != "w1" || e.Data["fromSeq"] != uint64(2) || e.Data["toSeq"] != uint64(5) {
				t.Fatalf("missed fact %+v", e)
			}
			order = append(order, "missed")
		}
	}
	if got := strings.Join(order, ","); got != "before,missed,after" {
		t.Fatalf("gateway bus order %s", got)
	}
	h.g.mu.Lock()
	last := h.g.workers["w1"].lastSeq
	h.g.mu.Unlock()
	if last != 6 {
		t.Fatalf("lastSeq %d, want 6", last)
	}
}
