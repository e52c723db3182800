package e2e

import (
	"bufio"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

type leaseWho struct {
	LeaseID     string `json:"leaseId"`
	RequesterID string `json:"requesterId"`
	OwnerID     string `json:"ownerId"`
}

// A person at a terminal is one principal (ADR 0097): two `simlock lease`
// processes may each hold a lease (each asks under its own requester id),
// and `release --all` from a third releases both, but not a lease taken
// under a requester named explicitly. SIMLOCK_REQUESTER names that
// requester as --requester does.
func TestReleaseAllReleasesWhatThisPersonHoldsFromAnyShell(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":3,"maxManaged":3}}}`)
	var a, b, job leaseWho
	w.json(&a, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach")
	w.json(&b, "lease", "--platform", "android", "--model", "pixel_6", "--detach")
	if a.OwnerID == "" || a.OwnerID != b.OwnerID || strings.Contains(a.OwnerID, "/") {
		t.Fatalf("two shells of one person have owners %q and %q, want one principal", a.OwnerID, b.OwnerID)
	}
	if a.RequesterID == b.RequesterID || !strings.HasPrefix(a.RequesterID, a.OwnerID+"/") || !strings.HasPrefix(b.RequesterID, a.OwnerID+"/") {
		t.Fatalf("requesters %q and %q, want two ids scoped under %q", a.RequesterID, b.RequesterID, a.OwnerID)
	}
	w.env = append(w.env, "SIMLOCK_REQUESTER=ci-job")
	w.json(&job, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach")
	w.env = w.env[:len(w.env)-1]
	if job.RequesterID != "ci-job" {
		t.Fatalf("with SIMLOCK_REQUESTER=ci-job the requester is %q", job.RequesterID)
	}

	var out struct{ Released []string }
	w.json(&out, "release", "--all")
	slices.Sort(out.Released)
	want := []string{a.LeaseID, b.LeaseID}
	slices.Sort(want)
	if !slices.Equal(out.Released, want) {
		t.Fatalf("release --all from a new shell released %v, want this person's %v", out.Released, want)
	}
	w.env = append(w.env, "SIMLOCK_REQUESTER=ci-job")
	w.json(&out, "release", "--all")
	w.env = w.env[:len(w.env)-1]
	if !slices.Equal(out.Released, []string{job.LeaseID}) {
		t.Fatalf("release --all as ci-job released %v, want %s", out.Released, job.LeaseID)
	}
}

// A request a person's `simlock lease` left waiting is withdrawn by a plain
// `simlock lease cancel` from another shell, though it waits under that
// process's own requester id.
func TestLeaseCancelWithdrawsThisPersonsWaitingRequest(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":1}}}`)
	w.mustRun("lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--requester", "holder")
	waiter := w.cmd("lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--json")
	stderr, err := waiter.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Process.Kill() })
	var rest strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"queued"`) {
			break
		}
	}
	done := make(chan struct{})
	go func() {
		for sc.Scan() {
			rest.WriteString(sc.Text() + "\n")
		}
		close(done)
	}()
	var out struct{ Cancelled bool }
	w.json(&out, "lease", "cancel", "--json")
	if !out.Cancelled {
		t.Fatal("lease cancel did not withdraw the waiting request")
	}
	err = waiter.Wait()
	<-done
	if err == nil || !strings.Contains(rest.String(), "REQUEST_CANCELLED") {
		t.Fatalf("the waiting lease ended with %v:\n%s", err, rest.String())
	}
	if r := w.run("lease", "cancel", "--json"); r.code == 0 || !strings.Contains(r.stderr, "NO_PENDING_REQUEST") {
		t.Fatalf("a second cancel: exit %d %s", r.code, r.stderr)
	}
	var st struct{ QueueDepth int }
	if err := json.Unmarshal([]byte(w.mustRun("status", "--json")), &st); err != nil || st.QueueDepth != 0 {
		t.Fatalf("queue depth %d after the cancel (%v)", st.QueueDepth, err)
	}
}
