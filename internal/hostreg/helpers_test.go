package hostreg

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// fakeProber answers from tables; a pid or home not listed is dead/gone.
type fakeProber struct {
	procs    map[int]string // pid -> start identity
	procErrs map[int]error
	homes    map[string]bool
	homeErrs map[string]error
}

func (f *fakeProber) ProcessStart(_ context.Context, pid int) (string, bool, error) {
	if err := f.procErrs[pid]; err != nil {
		return "", false, err
	}
	s, ok := f.procs[pid]
	return s, ok, nil
}

func (f *fakeProber) HomeExists(_ context.Context, home string) (bool, error) {
	if err := f.homeErrs[home]; err != nil {
		return false, err
	}
	return f.homes[home], nil
}

const (
	homeA = "/homes/a"
	homeB = "/homes/b"
)

var (
	ownerA = Owner{Home: homeA, PID: 100, Start: "t100"}
	ownerB = Owner{Home: homeB, PID: 200, Start: "t200"}
)

// liveAB is a prober on which both owners are alive with their homes.
func liveAB() *fakeProber {
	return &fakeProber{
		procs: map[int]string{100: "t100", 200: "t200"},
		homes: map[string]bool{homeA: true, homeB: true},
	}
}

func mustKey(t testing.TB, udid string) Key {
	t.Helper()
	k, err := IOSSimulatorKey(udid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const udid1 = "11111111-2222-3333-4444-555555555555"

func leaseClaim(k Key, o Owner, lease string) Claim {
	return Claim{Key: k, Kind: KindLease, Owner: o, LeaseID: lease, ClaimedAt: time.UnixMilli(1_700_000_000_000).UTC(), State: StateClaimed}
}

func openTest(t *testing.T, dir string, p Prober) *DB {
	t.Helper()
	db, err := OpenWithProber(context.Background(), dir, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var errEPERM = &wrapErr{syscall.EPERM}

type wrapErr struct{ err error }

func (w *wrapErr) Error() string { return "probe: " + w.err.Error() }
func (w *wrapErr) Unwrap() error { return w.err }
