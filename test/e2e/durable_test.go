package e2e

import (
	"bufio"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

type receipt struct {
	RequestID   string `json:"requestId"`
	State       string `json:"state"`
	LeaseID     string `json:"leaseId"`
	Interrupted bool   `json:"interrupted"`
	Error       *struct {
		Code      string `json:"code"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
}

type keyedLease struct {
	lease
	RequestID string `json:"requestId"`
	Timing    *struct {
		Path string `json:"path"`
	} `json:"timing"`
}

func (w *world) kill9() {
	w.t.Helper()
	pid := w.status().Daemon.PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		w.t.Fatal(err)
	}
	eventually(w.t, "the killed daemon to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
}

// The same lease request with the same idempotency key, twice and again
// after a kill -9 and a restart, is one lease on one device; a request that
// was queued when the daemon died reads as DAEMON_RESTARTED afterwards, and
// repeating it with its key queues it again under the same request id.
func TestIdempotentLeaseSurvivesKill9(t *testing.T) {
	w := newWorld(t, oneRunning)
	args := []string{"lease", "--platform", "ios", "--detach", "--ttl", "10m", "--requester", "ci-job", "--idempotency-key", "job-42"}
	var first, second, third keyedLease
	w.json(&first, args...)
	w.json(&second, args...)
	if first.LeaseID == "" || second.LeaseID != first.LeaseID || second.RequestID != first.RequestID || first.RequestID == "" {
		t.Fatalf("repeat: %+v then %+v", first, second)
	}
	if first.Timing == nil || first.Timing.Path != "provision" {
		t.Fatalf("timing of the first grant: %+v", first.Timing)
	}
	// A different body under the same key is refused.
	r := w.run("lease", "--platform", "ios", "--detach", "--ttl", "5m", "--requester", "ci-job", "--idempotency-key", "job-42", "--json")
	if r.code == 0 || !strings.Contains(r.stderr, "IDEMPOTENCY_KEY_MISMATCH") {
		t.Fatalf("different body: exit %d %s", r.code, r.stderr)
	}

	// Another requester queues behind the only running slot, then the daemon dies.
	waiting := w.cmd("lease", "--platform", "ios", "--requester", "other", "--idempotency-key", "job-43", "--detach", "--json")
	stderr, err := waiting.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	queuedID := ""
	sc := bufio.NewScanner(stderr)
	for queuedID == "" && sc.Scan() {
		var line struct {
			Progress struct {
				Phase          string `json:"phase"`
				LeaseRequestID string `json:"leaseRequestId"`
			} `json:"progress"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Progress.Phase == "queued" {
			queuedID = line.Progress.LeaseRequestID
		}
	}
	if queuedID == "" {
		t.Fatal("the second request never reported being queued")
	}
	w.kill9()
	_ = waiting.Wait()

	w.json(&third, args...) // auto-starts a fresh daemon over the same home
	if third.LeaseID != first.LeaseID || third.RequestID != first.RequestID {
		t.Fatalf("after kill -9: %+v, want lease %s", third, first.LeaseID)
	}
	var granted, failed receipt
	w.json(&granted, "lease", "get", first.RequestID, "--json")
	if granted.State != "granted" || granted.LeaseID != first.LeaseID {
		t.Fatalf("granted receipt after restart: %+v", granted)
	}
	w.json(&failed, "lease", "get", queuedID, "--json")
	if failed.State != "failed" || failed.Error == nil || failed.Error.Code != "DAEMON_RESTARTED" || !failed.Error.Retryable || !failed.Interrupted {
		t.Fatalf("queued receipt after restart: %+v", failed)
	}
	if out := w.mustRun("status"); !strings.Contains(out, "provision, wait ") {
		t.Fatalf("status does not show how the lease was served:\n%s", out)
	}
	st := w.status()
	if len(st.Leases) != 1 || len(st.Devices) != 1 {
		t.Fatalf("after the repeats: %d leases, %d devices", len(st.Leases), len(st.Devices))
	}

	// Repeating the interrupted request queues it again; once the first
	// lease is released it is served under its original request id.
	w.mustRun("release", first.LeaseID)
	var other keyedLease
	w.json(&other, "lease", "--platform", "ios", "--requester", "other", "--idempotency-key", "job-43", "--detach", "--json")
	if other.RequestID != queuedID {
		t.Fatalf("re-admitted under %s, want %s", other.RequestID, queuedID)
	}
	if st := w.status(); len(st.Devices) != 1 {
		t.Fatalf("%d devices, want the one", len(st.Devices))
	}
}
