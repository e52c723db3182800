package core

import (
	"sync"
	"time"
)

// Admission paths: how a lease was served.
const (
	PathWarm               = "warm"                 // a ready device was granted at once
	PathBoot               = "boot"                 // a shut-down device of the spec was booted
	PathProvision          = "provision"            // a new device was created and booted
	PathEvictThenProvision = "evict-then-provision" // another spec's device was evicted first
	PathDownload           = "download"             // the OS runtime was installed first
)

// Timing phases the engine measures. The driver's MakeReady boots and waits
// for readiness in one call, so "boot" covers both until a driver reports
// the split; an unmeasured phase is absent, never zero.
const (
	PhaseDownload  = "download"
	PhaseEvict     = "evict"
	PhaseProvision = "provision"
	PhaseBoot      = "boot"
	PhaseReadiness = "readiness"
)

// Timing is the record of how one lease was served: the admission path, the
// wait in the queue (admission to the first action on the request's behalf,
// or to the grant), each measured phase, and the whole request (arrival to
// grant).
type Timing struct {
	Path      string
	QueueWait time.Duration
	Total     time.Duration
	Phases    map[string]time.Duration // measured phases only
}

// timing collects a request's measurements. It has its own lock because the
// capture points run both inside and outside the decision section.
type timing struct {
	mu         sync.Mutex
	arrived    time.Time
	admitted   time.Time
	firstWork  time.Time
	started    map[string]time.Time
	phases     map[string]time.Duration
	downloaded bool
}

func newTiming(arrived time.Time) *timing {
	return &timing{arrived: arrived, started: map[string]time.Time{}, phases: map[string]time.Duration{}}
}

func (t *timing) admit(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.admitted = at
}

// wasAdmitted reports whether the request joined the queue.
func (t *timing) wasAdmitted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.admitted.IsZero()
}

func (t *timing) begin(phase string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.firstWork.IsZero() {
		t.firstWork = at
	}
	t.started[phase] = at
}

func (t *timing) end(phase string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.started[phase]; ok {
		t.phases[phase] += at.Sub(s)
		delete(t.started, phase)
	}
}

// record closes the measurements at the grant.
func (t *timing) record(at time.Time) *Timing {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := &Timing{Total: at.Sub(t.arrived), Phases: map[string]time.Duration{}}
	for k, v := range t.phases {
		out.Phases[k] = v
	}
	first := t.firstWork
	if first.IsZero() {
		first = at
	}
	if !t.admitted.IsZero() {
		out.QueueWait = first.Sub(t.admitted)
	}
	_, evicted := t.phases[PhaseEvict]
	_, provisioned := t.phases[PhaseProvision]
	_, booted := t.phases[PhaseBoot]
	switch {
	case t.downloaded:
		out.Path = PathDownload
	case provisioned && evicted:
		out.Path = PathEvictThenProvision
	case provisioned:
		out.Path = PathProvision
	case booted:
		out.Path = PathBoot
	default:
		out.Path = PathWarm
	}
	return out
}

// begin and end are the capture points on a waiter; the warm pool's work
// (nil waiter) is measured by nobody.
func (w *waiter) begin(phase string, at time.Time) {
	if w != nil && w.rq != nil {
		w.rq.timing.begin(phase, at)
	}
}

func (w *waiter) end(phase string, at time.Time) {
	if w != nil && w.rq != nil {
		w.rq.timing.end(phase, at)
	}
}

// stampLease adds the request's identity and timing to a lease at its grant.
func (w *waiter) stampLease(l *LeaseRecord, at time.Time) {
	if w != nil {
		l.Release = w.release // what this lease's release will do (resetbook.go)
	}
	if w != nil && w.rq != nil {
		l.RequestID = w.rq.id
		l.Timing = w.rq.timing.record(at)
	}
}

// Data is the timing record as event data: milliseconds, measured phases
// only (nil for none).
func (t *Timing) Data() map[string]any {
	if t == nil {
		return nil
	}
	out := map[string]any{"path": t.Path, "queueWaitMs": t.QueueWait.Milliseconds(), "totalMs": t.Total.Milliseconds()}
	for k, v := range t.Phases {
		out[k+"Ms"] = v.Milliseconds()
	}
	return out
}
