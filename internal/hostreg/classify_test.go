package hostreg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	k := mustKey(t, udid1)
	base := leaseClaim(k, ownerA, "lse_1")
	releasing := base
	releasing.State = StateReleasing
	failed := base
	failed.State, failed.FailedSteps = StateReleaseFailed, []string{"shutdown"}
	eio := errors.New("input/output error")

	cases := []struct {
		name  string
		claim Claim
		probe func(p *fakeProber)
		class Class
		live  Liveness
	}{
		{"live owner", base, nil, ClassClaimed, LivenessAlive},
		{"live owner releasing", releasing, nil, ClassReleasing, LivenessAlive},
		{"live owner release-failed", failed, nil, ClassReleaseFailed, LivenessAlive},
		{"dead pid", base, func(p *fakeProber) { delete(p.procs, 100) }, ClassOrphaned, LivenessDead},
		{"dead pid releasing", releasing, func(p *fakeProber) { delete(p.procs, 100) }, ClassOrphaned, LivenessDead},
		{"dead pid release-failed", failed, func(p *fakeProber) { delete(p.procs, 100) }, ClassOrphaned, LivenessDead},
		{"pid reused", base, func(p *fakeProber) { p.procs[100] = "t999" }, ClassOrphaned, LivenessReused},
		{"home gone", base, func(p *fakeProber) { delete(p.homes, homeA) }, ClassOrphaned, LivenessHomeGone},
		{"pid probe denied", base, func(p *fakeProber) { p.procErrs = map[int]error{100: errEPERM} }, ClassClaimed, LivenessUnknown},
		{"pid probe I/O error", releasing, func(p *fakeProber) { p.procErrs = map[int]error{100: eio} }, ClassReleasing, LivenessUnknown},
		{"pid probe denied but home gone", base, func(p *fakeProber) {
			p.procErrs = map[int]error{100: errEPERM}
			delete(p.homes, homeA)
		}, ClassOrphaned, LivenessHomeGone},
		{"home probe denied", base, func(p *fakeProber) { p.homeErrs = map[string]error{homeA: errEPERM} }, ClassClaimed, LivenessAlive},
		{"live pid without start time", base, func(p *fakeProber) { p.procs[100] = "" }, ClassClaimed, LivenessUnknown},
		{"both probes fail", base, func(p *fakeProber) {
			p.procErrs = map[int]error{100: eio}
			p.homeErrs = map[string]error{homeA: eio}
		}, ClassClaimed, LivenessUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := liveAB()
			if tc.probe != nil {
				tc.probe(p)
			}
			st := Classify(context.Background(), p, tc.claim)
			if st.Class != tc.class || st.Liveness != tc.live {
				t.Fatalf("got %s/%s (%s), want %s/%s", st.Class, st.Liveness, st.Detail, tc.class, tc.live)
			}
			if st.Reclaimable() != (tc.class == ClassOrphaned) {
				t.Fatalf("Reclaimable() = %v for %s", st.Reclaimable(), st.Class)
			}
			if st.Detail == "" {
				t.Fatal("no detail")
			}
		})
	}
}

// Inactivity never frees a live owner: a claim from years ago whose owner
// still runs is as claimed as a fresh one.
func TestClassifyIgnoresAge(t *testing.T) {
	c := leaseClaim(mustKey(t, udid1), ownerA, "lse_1")
	c.ClaimedAt = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if st := Classify(context.Background(), liveAB(), c); st.Class != ClassClaimed {
		t.Fatalf("old live claim classified %s", st.Class)
	}
}

func TestClassifyInconsistentRows(t *testing.T) {
	good, err := encode(leaseClaim(mustKey(t, udid1), ownerA, "lse_1"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(r *row){
		"unknown record version":       func(r *row) { r.RecordVersion = 2 },
		"unknown kind":                 func(r *row) { r.Kind = "borrow" },
		"lease without lease id":       func(r *row) { r.LeaseID = "" },
		"lease with command":           func(r *row) { r.Command = "exec" },
		"transient without command":    func(r *row) { r.Kind = "transient"; r.LeaseID = "" },
		"transient with lease":         func(r *row) { r.Kind = "transient"; r.Command = "erase" },
		"relative home":                func(r *row) { r.Home = "homes/a" },
		"no home":                      func(r *row) { r.Home = "" },
		"zero pid":                     func(r *row) { r.PID = 0 },
		"negative pid":                 func(r *row) { r.PID = -4 },
		"huge pid":                     func(r *row) { r.PID = 1 << 40 },
		"no start":                     func(r *row) { r.Start = "" },
		"no claimedAt":                 func(r *row) { r.ClaimedAtMs = 0 },
		"unknown state":                func(r *row) { r.State = "free" },
		"release-failed without steps": func(r *row) { r.State = "release-failed" },
		"claimed with steps":           func(r *row) { r.FailedSteps.String, r.FailedSteps.Valid = `["x"]`, true },
		"steps not JSON":               func(r *row) { r.State = "release-failed"; r.FailedSteps.String, r.FailedSteps.Valid = `[x`, true },
		"steps null":                   func(r *row) { r.State = "release-failed"; r.FailedSteps.String, r.FailedSteps.Valid = `null`, true },
		"transport serial key":         func(r *row) { r.Key = "android:usb:emulator-5554" },
		"lower-case udid key":          func(r *row) { r.Key = "ios:udid:" + "11111111-2222-3333-4444-55555555555a" },
		"garbage key":                  func(r *row) { r.Key = "???" },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			r := good
			mut(&r)
			// Everyone alive and present: only the record itself can
			// make this anything but claimed.
			st := classify(context.Background(), liveAB(), r)
			if st.Class != ClassInconsistent || st.Reclaimable() {
				t.Fatalf("got %s (%s), want inconsistent", st.Class, st.Detail)
			}
			// And even with the owner provably dead it stays inconsistent:
			// a record we cannot read proves nothing about its owner.
			if st := classify(context.Background(), &fakeProber{}, r); st.Class != ClassInconsistent {
				t.Fatalf("dead owner: got %s, want inconsistent", st.Class)
			}
		})
	}
	if st := classify(context.Background(), liveAB(), good); st.Class != ClassClaimed {
		t.Fatalf("the unmutated row is %s (%s)", st.Class, st.Detail)
	}
}

// Reference, "Error contract": a live owner's conflict is classified
// "live-owner". Every surface names a class through Class.Public, so
// DEVICE_IN_USE and `device status` cannot drift apart again.
func TestClassPublicIsTheErrorContractsVocabulary(t *testing.T) {
	want := map[Class]string{ClassFree: "free", ClassClaimed: "live-owner", ClassReleasing: "releasing",
		ClassReleaseFailed: "release-failed", ClassOrphaned: "orphaned", ClassInconsistent: "inconsistent"}
	for c, w := range want {
		if got := c.Public(); got != w {
			t.Errorf("%s.Public() = %q, want %q", c, got, w)
		}
	}
	e := conflictFrom(ReasonHeld, Status{Key: "ios:udid:X", Class: ClassClaimed, Claim: Claim{Owner: Owner{Home: "/h", PID: 1}}})
	if !strings.Contains(e.Error(), "live-owner") {
		t.Errorf("the conflict's message names another class: %s", e.Error())
	}
}
