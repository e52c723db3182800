package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// Session devices stay the broker's (issue 22, items 7-9; ADR 0063).

// tokenFile writes an owner token to a file only its owner can read and
// returns its path: the token never goes on a command line.
func (w *world) tokenFile(token string) string {
	w.t.Helper()
	h := sha256.Sum256([]byte(token))
	dir := filepath.Join(filepath.Dir(w.home), "tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.t.Fatal(err)
	}
	p := filepath.Join(dir, hex.EncodeToString(h[:8]))
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// ownedDevice is a device as status and list show it, with its mark.
type ownedDevice struct {
	ID          string `json:"id"`
	UDID        string `json:"udid"`
	DeviceSet   string `json:"deviceSet"`
	State       string `json:"state"`
	LeaseID     string `json:"leaseId"`
	OwnerSystem string `json:"ownerSystem"`
}

func (w *world) ownedDevices(args ...string) []ownedDevice {
	w.t.Helper()
	var out struct{ Devices []ownedDevice }
	w.json(&out, append(args, "--json")...)
	return out.Devices
}

func iosSession(req, model string) string {
	return `{"contractVersion":1,"requestId":"` + req + `","device":{"schemaVersion":1,"platform":"ios",` +
		`"hardware":{"kind":"model","model":{"namespace":"simlock-model","value":"` + model + `"}},"os":{"kind":"exact","version":"18.0"}}}`
}

// slowSessions is one running device at a time (so a plain lease can only
// ever be served the session's device or a new one after it is gone), and
// boots of about three seconds, so a preparation can be caught mid-boot.
var slowSessions = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},"sessions":{"heartbeatTtlMs":60000,` + sessionDefaults + `}}`

// watchPlainLeases samples status and list and tries a plain no-wait
// lease on every round, until done reports true; it fails the test if any
// plain lease is ever served one of the session's devices (by UDID), or
// if a device being prepared for a session shows without its mark.
func (w *world) watchPlainLeases(t *testing.T, session map[string]bool, within time.Duration, done func([]ownedDevice) bool) {
	t.Helper()
	deadline := time.Now().Add(testhost.Scale(within))
	for {
		st := w.ownedDevices("status")
		for _, d := range w.ownedDevices("list") {
			if session[d.UDID] && d.OwnerSystem != "session" {
				t.Fatalf("list shows the session's device %s without its mark: %+v", d.UDID, d)
			}
		}
		r := w.run("lease", "--platform", "ios", "--no-wait", "--detach", "--ttl", "1m", "--json")
		if r.code == 0 {
			var l lease
			if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
				t.Fatalf("lease printed %q: %v", r.stdout, err)
			}
			if session[l.Device.UDID] {
				t.Fatalf("a plain lease was served the session's device %s: %s", l.Device.UDID, r.stdout)
			}
			w.mustRun("release", l.LeaseID)
		}
		if done(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: status %+v", within, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// prepareMidBoot starts a session preparation and returns once its device
// is being built, with the device's UDID; the device must carry the
// session mark from the first sample on.
func (w *world) prepareMidBoot(t *testing.T, req, tokenPath string) (udid, set string, pending sessionReceipt) {
	t.Helper()
	w.json(&pending, "session", "prepare", "--config", iosSession(req, "iPhone 15"), "--owner-token-file", tokenPath, "--wait-ms", "200", "--json")
	if pending.Status != "pending" {
		t.Fatalf("a slow prepare answered %+v, want pending", pending)
	}
	eventually(t, "the session's device to be recorded", 30*time.Second, func() bool {
		for _, d := range w.ownedDevices("status") {
			if d.UDID != "" {
				udid, set = d.UDID, d.DeviceSet
				if d.OwnerSystem != "session" || d.State == "ready" && d.LeaseID == "" {
					t.Fatalf("the device being prepared for a session: %+v", d)
				}
				return true
			}
		}
		return false
	})
	return udid, set, pending
}

// goneFromSDK reports whether the simulated SDK no longer lists the
// device in its set.
func (w *world) goneFromSDK(set, udid string) bool {
	w.t.Helper()
	if set == "" {
		w.t.Fatal("no device set to look in")
	}
	return w.simState(set, udid) == ""
}

func withoutDevice(udid string) func([]ownedDevice) bool {
	return func(st []ownedDevice) bool {
		for _, d := range st {
			if d.UDID == udid {
				return false
			}
		}
		return true
	}
}

// Must show (a): abandon, kill -9 and a graceful stop during a session
// preparation each end with the device destroyed, and no plain lease,
// tried on every sample throughout, is ever served it. Abandon answers
// cleanupPending while the teardown is under way.
func TestSessionPreparationsDeviceNeverReachesAPlainLease(t *testing.T) {
	for _, how := range []string{"abandon", "kill -9", "graceful stop"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t, slowSessions)
			w.setEnv("SIMLOCK_SIMSDK_SPEED", "0.1")
			w.mustRun("daemon", "start")
			tok := w.tokenFile("owner-" + strings.ReplaceAll(how, " ", ""))
			udid, set, _ := w.prepareMidBoot(t, "prep", tok)
			if w.goneFromSDK(set, udid) {
				t.Fatalf("the simulated SDK does not list the device being prepared (%s in %s)", udid, set)
			}
			session := map[string]bool{udid: true}
			switch how {
			case "abandon":
				var ab sessionReceipt
				w.json(&ab, "session", "abandon", "prep", "--owner-token-file", tok, "--json")
				if ab.Status != "failed" || ab.Failure == nil || ab.Failure.Code != "SESSION_ABANDONED" || !ab.CleanupPending {
					t.Fatalf("abandon mid-preparation answered %+v (failure %+v), want SESSION_ABANDONED with cleanupPending", ab, ab.Failure)
				}
			case "kill -9":
				pid := w.status().Daemon.PID
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the killed daemon to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
				w.mustRun("daemon", "start")
			case "graceful stop":
				w.mustRun("daemon", "stop")
				w.mustRun("daemon", "start")
			}
			w.watchPlainLeases(t, session, 90*time.Second, withoutDevice(udid))
			eventually(t, "the session's device to leave the simulated SDK", 30*time.Second, func() bool { return w.goneFromSDK(set, udid) })
			// A few more rounds: nothing brings it back.
			rounds := 0
			w.watchPlainLeases(t, session, 60*time.Second, func([]ownedDevice) bool { rounds++; return rounds >= 5 })
			var st sessionReceipt
			w.json(&st, "session", "status", "prep", "--owner-token-file", tok, "--json")
			if st.Status != "failed" || st.CleanupPending {
				t.Fatalf("the preparation's receipt %+v", st)
			}
		})
	}
}

// Must show (b): with totalDeviceCap 1, a phone prepared and released
// (erase reset: it idles as the broker's) and then a tablet never make two
// session devices at once, sampled by status throughout; the idle phone
// is destroyed before the tablet is created.
func TestSessionTotalDeviceCapOneNeverHoldsTwoDevices(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":3,"maxManaged":3}},`+
		`"sessions":{"heartbeatTtlMs":60000,"reset":{"ios":"erase"},"limits":{"sessionCap":1,"totalDeviceCap":1,"idlePoolCap":1},`+sessionDefaults+`}}`)
	w.mustRun("daemon", "start")
	tok := w.tokenFile("cap-owner")
	stop := make(chan struct{})
	most := make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				most <- n
				return
			default:
			}
			c := w.cmd("status", "--json")
			out, err := c.Output()
			if err != nil {
				continue
			}
			var st struct{ Devices []ownedDevice }
			if json.Unmarshal(out, &st) != nil {
				continue
			}
			// A fresh home with no plain lease: every device is a session's.
			n = max(n, len(st.Devices))
		}
	}()
	var phone sessionReceipt
	w.json(&phone, "session", "prepare", "--config", iosSession("phone", "iPhone 15"), "--owner-token-file", tok, "--json")
	if phone.Status != "ready" {
		t.Fatalf("the phone %+v", phone)
	}
	var rel struct {
		Outcome string         `json:"outcome"`
		Receipt sessionReceipt `json:"receipt"`
	}
	w.json(&rel, "session", "release", phone.SessionID, "--owner-token-file", tok, "--json")
	if rel.Outcome != "released" || rel.Receipt.Timing.Reset == nil || rel.Receipt.Timing.Reset.Mode != "erase" {
		t.Fatalf("the phone's release %+v", rel)
	}
	idle := w.ownedDevices("status")
	if len(idle) != 1 || idle[0].OwnerSystem != "session" || idle[0].LeaseID != "" {
		t.Fatalf("after the phone's erase reset: %+v, want one idle session device", idle)
	}
	var tablet sessionReceipt
	w.json(&tablet, "session", "prepare", "--config", iosSession("tablet", "iPad Air 13-inch (M2)"), "--owner-token-file", tok, "--json")
	time.Sleep(500 * time.Millisecond) // a few more samples of the settled state
	close(stop)
	n := <-most
	if tablet.Status != "ready" || tablet.Timing.Acquisition.Admission != "evict-then-create" {
		t.Fatalf("the tablet %+v (acquisition %+v)", tablet, tablet.Timing.Acquisition)
	}
	if n != 1 {
		t.Fatalf("status showed %d session devices at once under totalDeviceCap 1", n)
	}
	if !w.goneFromSDK(phone.Device.DeviceSet, phone.Device.UDID) {
		t.Fatal("the idle phone is still in the simulated SDK")
	}
}

// Must show (c): principal B holding A's owner token is answered exactly
// as a wrong token on every session call, and A's session goes on; a
// running `session hold` shows no token in its argument list, and the
// old --owner-token flag is refused.
func TestSessionOwnerTokenFromAnotherPrincipalIsAWrongToken(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":2}},"sessions":{"heartbeatTtlMs":3000,`+sessionDefaults+`}}`)
	w.mustRun("daemon", "start")
	ctx := context.Background()
	a, b := w.dial(t, "agent-a"), w.dial(t, "agent-b")
	const tokA = "a-secret-owner-token-4711"
	var cfg contract.SessionConfig
	if err := json.Unmarshal([]byte(iosSession("a-run", "iPhone 15")), &cfg); err != nil {
		t.Fatal(err)
	}
	r, err := client.Do(ctx, a, contract.SessionPrepare, contract.SessionPrepareIn{Config: cfg, OwnerToken: tokA})
	if err != nil || r.Status != contract.SessionReady {
		t.Fatalf("A's prepare %+v %v", r, err)
	}
	alike := func(what string, stolen, wrong any, errS, errW error) {
		t.Helper()
		js, _ := json.Marshal(stolen)
		jw, _ := json.Marshal(wrong)
		es, ew := "", ""
		if errS != nil {
			es = errS.Error()
		}
		if errW != nil {
			ew = errW.Error()
		}
		if es != ew || (errS == nil && !bytes.Equal(js, jw)) {
			t.Fatalf("%s: B with A's token got %s %s; a wrong token gets %s %s", what, js, es, jw, ew)
		}
	}
	hbS, e1 := client.Do(ctx, b, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: tokA})
	hbW, e2 := client.Do(ctx, b, contract.SessionHeartbeat, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: "wrong"})
	if e1 == nil {
		t.Fatalf("B's heartbeat with A's token was accepted: %+v", hbS)
	}
	alike("heartbeat", hbS, hbW, e1, e2)
	stS, e1 := client.Do(ctx, b, contract.SessionStatus, contract.SessionStatusIn{RequestID: "a-run", OwnerToken: tokA})
	stW, e2 := client.Do(ctx, b, contract.SessionStatus, contract.SessionStatusIn{RequestID: "a-run", OwnerToken: "wrong"})
	if e1 == nil {
		t.Fatalf("B read A's receipt: %+v", stS)
	}
	alike("status", stS, stW, e1, e2)
	relS, e1 := client.Do(ctx, b, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: tokA})
	relW, e2 := client.Do(ctx, b, contract.SessionRelease, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: "wrong"})
	if e1 != nil || relS.Outcome != contract.ReleaseUnknownSession {
		t.Fatalf("B's release with A's token: %+v %v", relS, e1)
	}
	alike("release", relS, relW, e1, e2)
	abS, e1 := client.Do(ctx, b, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "a-run", OwnerToken: tokA})
	abW, e2 := client.Do(ctx, b, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: "a-run", OwnerToken: "wrong"})
	if e1 != nil || e2 != nil || abS.SessionID != "" || abS.Failure == nil || abW.Failure == nil || abS.Failure.Code != abW.Failure.Code {
		t.Fatalf("B's abandon with A's token %+v %v; a wrong token's %+v %v", abS, e1, abW, e2)
	}
	rpS, e1 := client.Do(ctx, b, contract.SessionPrepare, contract.SessionPrepareIn{Config: cfg, OwnerToken: tokA})
	rpW, e2 := client.Do(ctx, b, contract.SessionPrepare, contract.SessionPrepareIn{Config: cfg, OwnerToken: "wrong"})
	if e1 != nil || e2 != nil || rpS.SessionID == r.SessionID || rpS.Device != nil || rpS.Failure == nil || rpW.Failure == nil ||
		rpS.Failure.Code != rpW.Failure.Code {
		t.Fatalf("B's replay of A's prepare %+v %v; a wrong token's %+v %v", rpS, e1, rpW, e2)
	}
	// A's session is untouched: still ready, still its device.
	mine, err := client.Do(ctx, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "a-run", OwnerToken: tokA})
	if err != nil || mine.Status != contract.SessionReady || mine.SessionID != r.SessionID || mine.Device == nil || mine.Device.ID != r.Device.ID {
		t.Fatalf("A's session after B's calls %+v %v", mine, err)
	}

	// The old flag is refused before anything is sent.
	if res := w.run("session", "hold", r.SessionID, "--owner-token", tokA); res.code == 0 ||
		!strings.Contains(res.stderr, "--owner-token is no longer accepted") || !strings.Contains(res.stderr, "SIMLOCK_SESSION_OWNER_TOKEN") {
		t.Fatalf("hold --owner-token: exit %d\n%s", res.code, res.stderr)
	}
	// A keeper reading the token from stdin holds A's session past its
	// 3 s heartbeat TTL; its argument list never shows the token.
	hold := w.cmd("session", "hold", r.SessionID, "--owner-token-file", "-")
	hold.Env = append(append([]string{}, w.env...), "SIMLOCK_PRINCIPAL=agent-a")
	stdin, err := hold.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	hold.Stderr = &stderr
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer hold.Process.Kill()
	if _, err := stdin.Write([]byte(tokA + "\n")); err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(hold.Process.Pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(cmdline, []byte(tokA)) || !bytes.Contains(cmdline, []byte("hold")) {
		t.Fatalf("the keeper's argument list: %q", bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
	if ps, err := psArgs(hold.Process.Pid); err == nil && strings.Contains(ps, tokA) {
		t.Fatalf("ps shows the token: %s", ps)
	}
	time.Sleep(4500 * time.Millisecond) // past the heartbeat TTL
	if st, err := client.Do(ctx, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "a-run", OwnerToken: tokA}); err != nil || st.Status != contract.SessionReady {
		t.Fatalf("A's held session past its TTL %+v %v\nkeeper: %s", st, err, stderr.String())
	}
	stdin.Close() // the owner is gone: the keeper releases
	done := make(chan error, 1)
	go func() { done <- hold.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the keeper exited %v\n%s", err, stderr.String())
		}
	case <-time.After(testhost.Scale(60 * time.Second)):
		t.Fatalf("the keeper did not end with its stdin\n%s", stderr.String())
	}
	if st, err := client.Do(ctx, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: "a-run", OwnerToken: tokA}); err != nil || st.Status != contract.SessionReleased {
		t.Fatalf("A's session after its keeper let go %+v %v\n%s", st, err, stderr.String())
	}
}

// psArgs is the argument list ps prints for pid (the view every local
// user has); an error when there is no ps.
func psArgs(pid int) (string, error) {
	out, err := exec.Command("ps", "-o", "args=", "-p", strconv.Itoa(pid)).Output()
	return string(out), err
}
