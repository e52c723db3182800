package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/internal/contract"
)

// The chaos drill: concurrent clients lease, renew and release against the
// real daemon over the simulated SDK with boot and erase faults injected,
// while device processes and the daemon itself are killed with SIGKILL. The
// invariants are checked after every step. It is seeded (SIMLOCK_CHAOS_SEED)
// so a failing sequence of decisions can be replayed; process timing still
// varies from run to run.

const chaosConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3}},
 "lease":{"defaultTtlMs":600000,"maxTtlMs":3600000},
 "health":{"intervalMs":200,"stableObservations":2,"maxRecoveryAttempts":1},
 "warmPool":{"quarantine":{"retries":2,"backoffMs":200,"multiplier":1,"capMs":200}}}`

var legalStates = map[string]bool{"provisioning": true, "ready": true, "leased": true, "reclaiming": true, "shutdown": true, "quarantined": true}

type chaos struct {
	t    *testing.T
	w    *world
	rng  *rand.Rand
	sock string

	mu        sync.Mutex
	events    []contract.Event
	killedAt  []time.Time // daemon kills
	followers sync.WaitGroup
}

type actor struct {
	name  string
	c     *client.Client
	lease *contract.Lease
	// confirmedAt is when the daemon last confirmed the lease existed.
	confirmedAt time.Time
	released    map[string]bool
}

func (ch *chaos) dial(principal string) *client.Client {
	c, err := client.DialRetry(context.Background(), client.Options{Socket: ch.sock, Principal: principal, Credential: ch.adminToken()}, 30*time.Second)
	if err != nil {
		ch.t.Fatalf("dial: %v", err)
	}
	return c
}

func (ch *chaos) adminToken() string {
	b, _ := os.ReadFile(filepath.Join(ch.w.home, "admin.token"))
	return strings.TrimSpace(string(b))
}

// follow records every event of every daemon incarnation.
func (ch *chaos) follow(ctx context.Context) {
	ch.followers.Add(1)
	go func() {
		defer ch.followers.Done()
		for ctx.Err() == nil {
			c, err := client.DialRetry(ctx, client.Options{Socket: ch.sock, Principal: "chaos-follower", Credential: ch.adminToken()}, 30*time.Second)
			if err != nil {
				continue
			}
			out, err := c.Events(ctx, contract.EventsSubscribeIn{Follow: true}, func(e contract.Event) {
				ch.mu.Lock()
				ch.events = append(ch.events, e)
				ch.mu.Unlock()
			})
			if err == nil {
				ch.mu.Lock()
				ch.events = append(ch.events, out.Events...)
				ch.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-c.Done():
				}
			}
			c.Close()
		}
	}()
}

func (ch *chaos) releasedAs(leaseID string) string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, e := range ch.events {
		if e.Type == "lease.released" && e.LeaseID == leaseID {
			return e.Reason
		}
	}
	return ""
}

func (ch *chaos) daemonKilledSince(t time.Time) bool {
	for _, k := range ch.killedAt {
		if k.After(t) {
			return true
		}
	}
	return false
}

// step runs one actor's next move.
func (ch *chaos) step(a *actor) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if a.c == nil {
		a.c = ch.dial(a.name)
	}
	if a.lease == nil {
		l, err := a.c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", TTLMs: 600000, TimeoutMs: 3000}, nil)
		var ce *contract.Error
		switch {
		case err == nil:
			a.lease, a.confirmedAt = &l, time.Now()
		case client.IsCode(err, contract.CodeRequesterLeased):
			// The daemon died after granting but before we heard: adopt.
			ce = contract.AsError(err)
			id, _ := ce.Details["leaseId"].(string)
			if l, gerr := client.Do(ctx, a.c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: id}); gerr == nil {
				a.lease, a.confirmedAt = &l, time.Now()
			}
		case client.IsCode(err, contract.CodeConnectionLost), client.IsCode(err, contract.CodeDaemonNotRunning):
			a.c = nil
		case client.IsCode(err, contract.CodeQueueTimeout), client.IsCode(err, contract.CodeNoCapacity),
			client.IsCode(err, contract.CodeDeviceFailed), client.IsCode(err, contract.CodeDaemonStopping):
			// Legitimate refusals under chaos.
		default:
			ch.t.Errorf("%s: unexpected lease error %v", a.name, err)
		}
		return
	}
	if ch.rng.IntN(3) == 0 {
		_, err := client.Do(ctx, a.c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: a.lease.LeaseID})
		switch {
		case err == nil:
			a.released[a.lease.LeaseID] = true
			a.lease = nil
		case client.IsCode(err, contract.CodeConnectionLost):
			a.c = nil
		case client.IsCode(err, contract.CodeUnknownLease):
			ch.leaseGone(a)
		default:
			ch.t.Errorf("%s: release: %v", a.name, err)
		}
		return
	}
	_, err := client.Do(ctx, a.c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: a.lease.LeaseID})
	switch {
	case err == nil:
		a.confirmedAt = time.Now()
	case client.IsCode(err, contract.CodeConnectionLost):
		a.c = nil
	case client.IsCode(err, contract.CodeUnknownLease):
		ch.leaseGone(a)
	default:
		ch.t.Errorf("%s: renew: %v", a.name, err)
	}
}

// leaseGone checks that a lease we did not release ended for a legitimate
// reason: its device was lost. (A daemon SIGKILL between the commit and the
// event's publication can lose the fact itself; only then is a missing
// event tolerated.)
func (ch *chaos) leaseGone(a *actor) {
	id := a.lease.LeaseID
	deadline := time.Now().Add(2 * time.Second)
	reason := ""
	for reason == "" && time.Now().Before(deadline) {
		reason = ch.releasedAs(id)
		if reason == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	switch {
	case reason == "device-lost":
	case reason == "" && ch.daemonKilledSince(a.confirmedAt):
	default:
		ch.t.Errorf("lease %s of %s ended before its deadline (reason %q) without being released", id, a.name, reason)
	}
	a.lease = nil
}

// check asserts the invariants against the daemon's own view.
func (ch *chaos) check(admin **client.Client, maxRunning int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st contract.StatusGetOut
	var err error
	for try := 0; try < 3; try++ {
		if *admin == nil {
			*admin = ch.dial("chaos-admin")
		}
		st, err = client.Do(ctx, *admin, contract.StatusGet, contract.StatusGetIn{})
		if err == nil && st.Daemon.Health == "running" {
			break
		}
		(*admin).Close()
		*admin = nil
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		ch.t.Fatalf("status: %v", err)
	}
	leased := map[string]string{}
	for _, l := range st.Leases {
		if other, dup := leased[l.DeviceID]; dup {
			ch.t.Errorf("device %s has two leases: %s and %s", l.DeviceID, other, l.LeaseID)
		}
		leased[l.DeviceID] = l.LeaseID
	}
	for _, d := range st.Devices {
		if !legalStates[d.State] {
			ch.t.Errorf("device %s in illegal state %q", d.ID, d.State)
		}
		if (d.State == "leased") != (leased[d.ID] != "") {
			ch.t.Errorf("device %s is %s but its lease is %q", d.ID, d.State, leased[d.ID])
		}
	}
	if st.Capacity.Running+st.Capacity.Reserved > maxRunning {
		ch.t.Errorf("capacity overrun: %d running + %d reserved > %d", st.Capacity.Running, st.Capacity.Reserved, maxRunning)
	}
}

func TestChaosDrill(t *testing.T) {
	seed := uint64(20261129)
	if s := os.Getenv("SIMLOCK_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	steps := 60
	if testing.Short() {
		steps = 20
	}
	t.Logf("chaos seed %d (replay with SIMLOCK_CHAOS_SEED=%d), %d steps", seed, seed, steps)
	w := newWorld(t, chaosConfig)
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=boot-fail@2,erase-fail@2")
	w.mustRun("daemon", "start")
	ch := &chaos{t: t, w: w, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), sock: filepath.Join(w.home, "simlock.sock")}
	ctx, stop := context.WithCancel(context.Background())
	ch.follow(ctx)
	defer func() { stop(); ch.followers.Wait() }()

	actors := []*actor{{name: "agent-1"}, {name: "agent-2"}, {name: "agent-3"}}
	for _, a := range actors {
		a.released = map[string]bool{}
	}
	var admin *client.Client
	for i := 0; i < steps && !t.Failed(); i++ {
		switch r := ch.rng.IntN(100); {
		case r < 12:
			// Kill a random simulated device process.
			var procs []struct {
				ID  string `json:"id"`
				PID int    `json:"pid"`
			}
			w.json(&procs, "simsdk", "ps", "--json")
			if len(procs) > 0 {
				p := procs[ch.rng.IntN(len(procs))]
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
		case r < 18:
			// Kill the daemon, then bring a new one up on the same home.
			var pid int
			fmt.Sscan(strings.TrimSpace(readFile(filepath.Join(w.home, "daemon.pid"))), &pid)
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
				ch.killedAt = append(ch.killedAt, time.Now())
				eventually(t, "the killed daemon to exit", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
				w.mustRun("daemon", "start")
				if admin != nil {
					admin.Close()
					admin = nil
				}
			}
		default:
			ch.step(actors[ch.rng.IntN(len(actors))])
		}
		ch.check(&admin, 2)
	}
	// Settle, then reset: the roots must hold nothing the registry does not know.
	if admin == nil {
		admin = ch.dial("chaos-admin")
	}
	rep, err := client.Do(context.Background(), admin, contract.NukeRun, contract.NukeRunIn{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) > 0 {
		t.Errorf("nuke failures: %v", rep.Failed)
	}
	out, _ := exec.Command(filepath.Join(w.sdk, "xcrun"), "simctl", "--set", filepath.Join(w.home, "devices", "ios"), "list", "devices", "-j").Output()
	if strings.Contains(string(out), `"udid"`) {
		t.Errorf("devices left in the root after nuke:\n%s", out)
	}
	doc, err := client.Do(context.Background(), admin, contract.DoctorRun, contract.DoctorRunIn{})
	if err != nil || !doc.Healthy {
		t.Errorf("doctor after nuke: %+v %v", doc, err)
	}
	admin.Close()
	for _, a := range actors {
		if a.c != nil {
			a.c.Close()
		}
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
