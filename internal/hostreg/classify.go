package hostreg

import (
	"context"
	"fmt"
	"time"
)

// Prober answers the two liveness questions classification asks. It is a
// port so that classification is a pure function in tests; SystemProber is
// the real one.
type Prober interface {
	// ProcessStart reports whether pid exists and, if so, its start
	// identity (comparable with Owner.Start). alive=false with a nil error
	// is a proof that no such process runs; any doubt (permission, I/O)
	// must be an error instead.
	ProcessStart(ctx context.Context, pid int) (start string, alive bool, err error)
	// HomeExists reports whether home exists. false with a nil error is a
	// proof that it is gone (ENOENT or ENOTDIR only); anything else that
	// stops the check must be an error.
	HomeExists(ctx context.Context, home string) (bool, error)
}

// Class is a claim's ownership classification.
type Class string

const (
	ClassFree          Class = "free"           // no claim
	ClassClaimed       Class = "claimed"        // owner not proven gone
	ClassReleasing     Class = "releasing"      // owner not proven gone, teardown under way
	ClassReleaseFailed Class = "release-failed" // owner not proven gone, teardown stopped
	ClassOrphaned      Class = "orphaned"       // owner proven gone
	ClassInconsistent  Class = "inconsistent"   // record unreadable or contradictory
)

// Public is the class as every surface names it (DEVICE_IN_USE details,
// `device status`, `device release`): one vocabulary, in which a claim
// whose owner is not proven gone is a live-owner. The stored claim state
// keeps its own spelling (claimed).
func (c Class) Public() string {
	if c == ClassClaimed {
		return "live-owner"
	}
	return string(c)
}

// Liveness is what the probe proved about a claim's owner.
type Liveness string

const (
	LivenessAlive    Liveness = "alive"     // pid runs with the recorded start time
	LivenessDead     Liveness = "dead"      // no such pid
	LivenessReused   Liveness = "reused"    // the pid runs, but it is another process
	LivenessHomeGone Liveness = "home-gone" // the owner's home no longer exists
	LivenessUnknown  Liveness = "unknown"   // the probe failed: treated as alive
)

// Status is one claim as inspected.
type Status struct {
	Key   Key
	Class Class
	// Claim is the record. For an inconsistent one it holds the stored
	// fields verbatim and unverified, for display only.
	Claim    Claim
	Liveness Liveness // empty when inconsistent
	Detail   string   // why this classification, for people
}

// Reclaimable reports positive proof that nobody owns the device. Only an
// orphaned claim is; an inconsistent one never is (fail closed), and
// neither is a live owner's, however long it has been idle.
func (s Status) Reclaimable() bool { return s.Class == ClassOrphaned }

// classify judges one stored row. It never writes. Time does not enter
// into it: inactivity never makes a live owner's claim reclaimable.
func classify(ctx context.Context, p Prober, r row) Status {
	c, err := decode(r)
	if err != nil {
		return Status{Key: Key(r.Key), Class: ClassInconsistent, Claim: verbatim(r), Detail: err.Error()}
	}
	st := Status{Key: c.Key, Claim: c}
	st.Liveness, st.Detail = ownerLiveness(ctx, p, c.Owner)
	switch st.Liveness {
	case LivenessDead, LivenessReused, LivenessHomeGone:
		st.Class = ClassOrphaned
	default:
		st.Class = Class(c.State) // the three states are spelt like their classes
	}
	return st
}

// ownerLiveness is the one proof of an owner's life, for claims and port
// leases alike: its pid must run with the recorded start identity, and its
// home must exist. A probe that errs proves nothing, so the owner stays
// alive (fail closed); time never enters into it.
func ownerLiveness(ctx context.Context, p Prober, o Owner) (Liveness, string) {
	var liv Liveness
	var detail string
	start, alive, perr := p.ProcessStart(ctx, o.PID)
	switch {
	case perr != nil:
		liv, detail = LivenessUnknown, fmt.Sprintf("owner pid %d could not be checked (%v); treated as alive", o.PID, perr)
	case !alive:
		liv, detail = LivenessDead, fmt.Sprintf("owner pid %d is not running", o.PID)
	case start == "":
		// A live process without a start identity proves nothing.
		liv, detail = LivenessUnknown, fmt.Sprintf("owner pid %d has no start time; treated as alive", o.PID)
	case start != o.Start:
		liv, detail = LivenessReused, fmt.Sprintf("pid %d now belongs to another process (start %s, recorded %s)", o.PID, start, o.Start)
	default:
		liv, detail = LivenessAlive, fmt.Sprintf("owner pid %d is running", o.PID)
	}
	if liv == LivenessAlive || liv == LivenessUnknown {
		exists, herr := p.HomeExists(ctx, o.Home)
		switch {
		case herr != nil:
			detail += fmt.Sprintf("; owner home could not be checked (%v)", herr)
		case !exists:
			liv, detail = LivenessHomeGone, fmt.Sprintf("owner home %s no longer exists", o.Home)
		}
	}
	return liv, detail
}

// Classify judges c as if it were stored: the same rules Inspect and the
// conflict errors use.
func Classify(ctx context.Context, p Prober, c Claim) Status {
	r, err := encode(c)
	if err != nil {
		return Status{Key: c.Key, Class: ClassInconsistent, Claim: c, Detail: err.Error()}
	}
	return classify(ctx, p, r)
}

func verbatim(r row) Claim {
	c := Claim{
		Key: Key(r.Key), Kind: Kind(r.Kind), Command: r.Command, LeaseID: r.LeaseID,
		Owner:     Owner{Home: r.Home, PID: int(r.PID), Start: r.Start},
		ClaimedAt: time.UnixMilli(r.ClaimedAtMs).UTC(), State: State(r.State),
	}
	if r.FailedSteps.Valid {
		c.FailedSteps = []string{r.FailedSteps.String}
	}
	return c
}
