package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// A homeActor is one agent working in one home: its own connection, its
// own random stream. It holds one thing at a time (a lease, a group, a
// session or a slot execution) for a moment and gives it back. It never
// starts a daemon: the drill decides when a home's daemon runs.
type homeActor struct {
	h    *home
	d    *homesDrill
	name string
	rng  *rand.Rand
	c    *client.Client
	n    int // attempts, for unique request ids
}

func (a *homeActor) run(ctx context.Context) {
	defer func() {
		if a.c != nil {
			a.c.Close()
		}
	}()
	for ctx.Err() == nil {
		if !a.h.isAlive() {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		a.n++
		switch r := a.rng.IntN(100); {
		case r < 30:
			a.lease(ctx, "plain", a.plainSpec(false))
		case r < 45:
			a.lease(ctx, "nowait", a.plainSpec(true))
		case r < 55:
			if in, ok := a.namedSpec(); ok {
				a.lease(ctx, "device", in)
			} else {
				a.lease(ctx, "nowait", a.plainSpec(true))
			}
		case r < 65:
			a.lease(ctx, "group", contract.LeaseRequestIn{TTLMs: 60000, TimeoutMs: int64(1000 + a.rng.IntN(3000)),
				Devices: []contract.DeviceSpec{{Platform: "ios"}, {Platform: "android"}}})
		case r < 82 && !a.h.leaseOnly:
			a.session(ctx)
		case !a.h.leaseOnly:
			a.slot(ctx)
		default:
			a.lease(ctx, "plain", a.plainSpec(false))
		}
		sleepCtx(ctx, time.Duration(a.rng.IntN(200))*time.Millisecond)
	}
}

func (a *homeActor) plainSpec(noWait bool) contract.LeaseRequestIn {
	p := []string{"ios", "android"}[a.rng.IntN(2)]
	in := contract.LeaseRequestIn{Platform: p, TTLMs: 60000, NoWait: noWait}
	if !noWait {
		in.TimeoutMs = int64(1000 + a.rng.IntN(5000))
	}
	return in
}

// namedSpec asks for one device by UDID: in a home that shares its device
// root, a device its sibling has (the device one home's recovery hands to
// the other), else one of its own.
func (a *homeActor) namedSpec() (contract.LeaseRequestIn, bool) {
	from := a.h
	if a.h.shared && a.rng.IntN(2) == 0 {
		for _, h := range a.d.homes() {
			if h != a.h && h.shared {
				from = h
			}
		}
	}
	var cands []string
	for _, dv := range a.d.chk.lastDevices(from) {
		if dv.Platform == "ios" && dv.UDID != "" && dv.OwnerSystem == "" {
			cands = append(cands, dv.UDID)
		}
	}
	if len(cands) == 0 {
		return contract.LeaseRequestIn{}, false
	}
	return contract.LeaseRequestIn{Platform: "ios", Device: cands[a.rng.IntN(len(cands))], TTLMs: 60000,
		TimeoutMs: int64(500 + a.rng.IntN(2500))}, true
}

func (a *homeActor) connect(ctx context.Context) bool {
	if a.c != nil {
		return true
	}
	dctx, cancel := context.WithTimeout(ctx, testhost.Scale(5*time.Second))
	defer cancel()
	c, err := client.Dial(dctx, client.Options{Socket: a.h.sock, Principal: a.name, Name: "chaos-homes"})
	if err != nil {
		return false
	}
	a.c = c
	return true
}

// drop forgets a connection that failed: the daemon died or is stopping.
func (a *homeActor) drop(err error) bool {
	if err == nil {
		return false
	}
	if client.IsCode(err, contract.CodeConnectionLost) || client.IsCode(err, contract.CodeDaemonNotRunning) ||
		client.IsCode(err, contract.CodeDaemonStopping) || errors.Is(err, context.DeadlineExceeded) || outcome(err) == "error" {
		if a.c != nil {
			a.c.Close()
			a.c = nil
		}
		return true
	}
	return false
}

func (a *homeActor) lease(ctx context.Context, kind string, in contract.LeaseRequestIn) {
	if !a.connect(ctx) {
		a.d.count(kind, "no-daemon")
		sleepCtx(ctx, 100*time.Millisecond)
		return
	}
	in.IdempotencyKey = fmt.Sprintf("%s-%d", a.name, a.n)
	rctx, cancel := context.WithTimeout(ctx, testhost.Scale(60*time.Second))
	if kind == "plain" {
		a.d.ask(a.name, in.Platform)
	}
	l, err := a.c.LeaseRequest(rctx, in, nil)
	a.d.ask(a.name, "")
	cancel()
	if ctx.Err() != nil {
		return
	}
	a.d.count(kind, outcome(err))
	if client.IsCode(err, contract.CodeInternal) {
		// An internal error is a defect whatever the chaos (the code's own
		// next step says "this is a bug").
		a.d.violate("%s: %s %+v answered INTERNAL: %v", a.name, kind, in, err)
	}
	if client.IsCode(err, contract.CodeRequesterLeased) {
		// A lease this agent lost track of (its answer or its release
		// went down with a daemon; a restart keeps leases) is still
		// live: give it back, as an agent that lost its session would.
		a.releaseLeftovers(ctx)
		return
	}
	if a.drop(err) || err != nil {
		return
	}
	a.d.chk.granted(a.h, kind, l)
	sleepCtx(ctx, time.Duration(100+a.rng.IntN(1500))*time.Millisecond)
	if a.c == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(30*time.Second))
	_, err = client.Do(cctx, a.c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
	cancel()
	a.d.count("release", outcome(err))
	a.drop(err)
}

func (a *homeActor) releaseLeftovers(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, testhost.Scale(10*time.Second))
	defer cancel()
	out, err := client.Do(lctx, a.c, contract.LeaseList, contract.LeaseListIn{})
	if a.drop(err) || err != nil {
		return
	}
	for _, l := range out.Leases {
		_, err := client.Do(lctx, a.c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
		a.d.count("release-leftover", outcome(err))
		if a.drop(err) {
			return
		}
	}
}

// cli runs the real binary in the actor's home, killed with ctx.
func (a *homeActor) cli(ctx context.Context, args ...string) result {
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = append(append([]string(nil), a.h.w.env...), "SIMLOCK_PRINCIPAL="+a.name)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return result{o.String(), e.String(), code}
}

// session prepares a session through the CLI (its token in a 0600 file),
// holds it for a moment, then releases it or, one time in four, abandons
// it mid-preparation.
func (a *homeActor) session(ctx context.Context) {
	tok := filepath.Join(filepath.Dir(a.h.w.home), "tok-"+a.name)
	if err := os.WriteFile(tok, []byte("owner-"+a.name+"\n"), 0o600); err != nil {
		a.d.violate("write a token file: %v", err)
		return
	}
	req := fmt.Sprintf("%s-s%d", a.name, a.n)
	platform := []string{"ios", "android"}[a.rng.IntN(2)]
	cfg := iosSession(req, "iPhone 15")
	if platform == "android" {
		cfg = `{"contractVersion":1,"requestId":"` + req + `","device":{"schemaVersion":1,"platform":"android"}}`
	}
	abandon := a.rng.IntN(4) == 0
	args := []string{"session", "prepare", "--config", cfg, "--owner-token-file", tok, "--json"}
	if abandon {
		args = append(args, "--wait-ms", "100")
	}
	r := a.cli(ctx, args...)
	if ctx.Err() != nil {
		return
	}
	var rc struct {
		SessionID string           `json:"sessionId"`
		Status    string           `json:"status"`
		LeaseID   string           `json:"leaseId"`
		Device    *contract.Device `json:"device"`
		Failure   *struct {
			Code string `json:"code"`
		} `json:"failure"`
	}
	_ = json.Unmarshal([]byte(r.stdout), &rc)
	out := rc.Status
	if rc.Failure != nil {
		out += "/" + rc.Failure.Code
	}
	if out == "" {
		out = fmt.Sprintf("exit-%d", r.code)
	}
	a.d.count("session", out)
	if rc.Failure != nil && rc.Failure.Code == "BAD_REQUEST" || out == "exit-1" {
		a.d.note("%s: session prepare: %s %s", a.name, lastLine(r.stdout), lastLine(r.stderr))
	}
	if rc.Device != nil {
		a.d.chk.sessionDevice(*rc.Device)
	}
	switch {
	case abandon:
		ar := a.cli(ctx, "session", "abandon", req, "--owner-token-file", tok, "--json")
		a.d.count("session-abandon", fmt.Sprintf("exit-%d", ar.code))
	case rc.Status == "ready" && rc.SessionID != "":
		sleepCtx(ctx, time.Duration(100+a.rng.IntN(1500))*time.Millisecond)
		rr := a.cli(context.Background(), "session", "release", rc.SessionID, "--owner-token-file", tok, "--json")
		a.d.count("session-release", fmt.Sprintf("exit-%d", rr.code))
	}
}

// slot runs one managed execution through the slot proxy (`simlock mcp
// --slot-config`) under one of two runner namespaces, holds it for a
// moment and ends it with EOF, as a runner's launch would.
func (a *homeActor) slot(ctx context.Context) {
	ns := fmt.Sprintf("%s-ns%d", a.name, a.rng.IntN(2))
	cmd := exec.CommandContext(ctx, bin, "mcp", "--device-tools", "--slot-config", slotLaunchJSON(ns, "boot-1", 0, "iPhone 15"))
	cmd.Env = append(append([]string(nil), a.h.w.env...), "SIMLOCK_PRINCIPAL="+a.name)
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "chaos-runner", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, testhost.Scale(90*time.Second))
	cs, err := cl.Connect(cctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			a.d.count("slot", "no-proxy")
		}
		return
	}
	defer cs.Close()
	raw, _ := json.Marshal(cs.InitializeResult().Capabilities.Experimental["simlock/managedSlots"])
	var res slotResult
	_ = json.Unmarshal(raw, &res)
	out := res.Outcome
	if code := res.failureCode(); code != "" {
		out += "/" + code
	}
	a.d.count("slot", out)
	if res.Outcome == "ready" && len(res.Slots) > 0 && res.Slots[0].LeaseID != "" {
		a.d.chk.slotGrant(a.h, res.Slots[0].LeaseID)
		sleepCtx(ctx, time.Duration(100+a.rng.IntN(1500))*time.Millisecond)
	}
}

// keyOf is a device's host-wide key as the host registry writes it, up to
// an Android AVD's root (names are unique on the host).
func keyOf(dv contract.Device) string {
	switch {
	case dv.Platform == "ios" && dv.UDID != "":
		return "ios:udid:" + strings.ToUpper(dv.UDID)
	case dv.Platform == "android" && dv.Name != "":
		return "android:avd:" + dv.Name
	}
	return ""
}

// normKey cuts an Android claim key's root off, to compare with keyOf.
func normKey(k string) string {
	if rest, ok := strings.CutPrefix(k, "android:avd:"); ok {
		name, _, _ := strings.Cut(rest, ":")
		return "android:avd:" + name
	}
	if udid, ok := strings.CutPrefix(k, "ios:udid:"); ok {
		return "ios:udid:" + strings.ToUpper(udid)
	}
	return k
}
