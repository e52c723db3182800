package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/store"
	"github.com/simlock/simlock/internal/testhost"
)

// The host-wide checker of the multi-home drill. While the drill runs it
// samples, round after round: every live home's status (twice, before and
// after the rest), the simulated SDK's process list and the host
// registry's claims (`device status --json`, which reads the registry
// without a daemon). At the end it reads every home's event journal
// (a deleted home's from the copy taken before the deletion).

type simProc struct {
	Platform string `json:"platform"`
	ID       string `json:"id"`
	PID      int    `json:"pid"`
	Name     string `json:"name"`
}

// key is the process's device key, as keyOf writes it.
func (p simProc) key() string {
	if p.Platform == "ios" {
		return "ios:udid:" + strings.ToUpper(p.ID)
	}
	return "android:avd:" + p.Name
}

type claimRow struct {
	DeviceKey      string `json:"deviceKey"`
	OwnerHome      string `json:"ownerHome"`
	OwnerPid       int    `json:"ownerPid"`
	LeaseID        string `json:"leaseId"`
	Kind           string `json:"kind"`
	State          string `json:"state"`
	Classification string `json:"classification"`
	Liveness       string `json:"liveness"`
}

func (c claimRow) orphan() bool {
	return c.Liveness == "dead" || c.Liveness == "reused" || c.Liveness == "home-gone"
}

type grantRec struct {
	home *home
	kind string
	id   string
	keys []string
	at   time.Time
}

// leaseObs is the leases one status sample of a home listed.
type leaseObs struct {
	at  time.Time
	ids map[string]bool
}

type hostChecker struct {
	d *homesDrill

	mu        sync.Mutex
	conns     map[*home]*client.Client
	last      map[*home]contract.StatusGetOut
	lastProcs []simProc
	claims    []claimRow
	// Device ids to keys, per home, learned from every sample and grant.
	keys map[*home]map[string]string
	// First time a device was seen as a session device.
	sessionKeys map[string]time.Time
	grants      []grantRec
	// seen is every status sample's lease ids, per home, oldest first.
	seen map[*home][]leaseObs

	// Open episodes: first seen, by what they are about.
	unclaimed   map[string]int       // running without a claim: consecutive rounds
	overRounds  int                  // consecutive rounds over the host limit
	deadStopped map[string]time.Time // a dead owner's claim of a stopped device
	deadRunning map[string]time.Time // a dead owner's claim of a running device
	starving    map[string]time.Time // a waiter while capacity is free host-wide
	reported    map[string]bool

	rounds, overSamples, maxBooted int
	longestFree, longestOrphan     time.Duration
	waitersSeen                    map[string]bool
	journalLeases, unmapped        int
	recoveries                     map[string]time.Time
}

func newHostChecker(d *homesDrill) *hostChecker {
	return &hostChecker{d: d, conns: map[*home]*client.Client{}, last: map[*home]contract.StatusGetOut{},
		keys: map[*home]map[string]string{}, sessionKeys: map[string]time.Time{}, unclaimed: map[string]int{},
		deadStopped: map[string]time.Time{}, deadRunning: map[string]time.Time{}, starving: map[string]time.Time{},
		reported: map[string]bool{}, seen: map[*home][]leaseObs{}, waitersSeen: map[string]bool{}, recoveries: map[string]time.Time{}}
}

// once reports a violation the first time its id comes up.
// once reports a violation the first time its id is seen, and says so.
func (k *hostChecker) once(id, format string, args ...any) bool {
	k.mu.Lock()
	seen := k.reported[id]
	k.reported[id] = true
	k.mu.Unlock()
	if !seen {
		k.d.violate(format, args...)
	}
	return !seen
}

func (k *hostChecker) run(ctx context.Context) {
	for ctx.Err() == nil {
		k.round(ctx)
		sleepCtx(ctx, 50*time.Millisecond)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
}

// settle keeps sampling until the host is quiet (no dead owner's claim,
// no waiter) or for the longest bound a rule states, whichever is first.
func (k *hostChecker) settle(ctx context.Context) {
	deadline := time.Now().Add(time.Duration(homesGraceMs)*time.Millisecond + 4*homesPoll + 2*homesSlack())
	for time.Now().Before(deadline) && ctx.Err() == nil {
		k.mu.Lock()
		quiet := len(k.deadStopped) == 0 && len(k.deadRunning) == 0
		k.mu.Unlock()
		if quiet {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *hostChecker) status(ctx context.Context, h *home) (contract.StatusGetOut, bool) {
	k.mu.Lock()
	c := k.conns[h]
	k.mu.Unlock()
	if c == nil {
		dctx, cancel := context.WithTimeout(ctx, testhost.Scale(2*time.Second))
		nc, err := client.Dial(dctx, client.Options{Socket: h.sock, Principal: "chaos-checker", Name: "chaos-homes-checker"})
		cancel()
		if err != nil {
			return contract.StatusGetOut{}, false
		}
		c = nc
		k.mu.Lock()
		k.conns[h] = c
		k.mu.Unlock()
	}
	sctx, cancel := context.WithTimeout(ctx, testhost.Scale(10*time.Second))
	defer cancel()
	st, err := client.Do(sctx, c, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		c.Close()
		k.mu.Lock()
		delete(k.conns, h)
		k.mu.Unlock()
		return contract.StatusGetOut{}, false
	}
	return st, true
}

func (k *hostChecker) readClaims(w *world) ([]claimRow, error) {
	c := exec.Command(bin, "device", "status", "--json")
	c.Env = w.env
	out, err := c.Output()
	if err != nil {
		return nil, err
	}
	var v struct {
		Claims []claimRow `json:"claims"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("device status printed %q: %w", out, err)
	}
	return v.Claims, nil
}

func (k *hostChecker) procs() []simProc {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]simProc(nil), k.lastProcs...)
}

func (k *hostChecker) claimsNow(from *home) []claimRow {
	cl, err := k.readClaims(from.w)
	if err != nil {
		return nil
	}
	return cl
}

func (k *hostChecker) lastDevices(h *home) []contract.Device {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, ok := k.last[h]
	if !ok {
		return nil
	}
	var out []contract.Device
	for _, dv := range st.Devices {
		if dv.Runtime.LeaseID() == "" && (dv.Runtime.Lifecycle == "ready" || dv.Runtime.Lifecycle == "shutdown") {
			out = append(out, dv)
		}
	}
	return out
}

func (k *hostChecker) learnLocked(h *home, dv contract.Device) {
	key := keyOf(dv)
	if key == "" || dv.ID == "" {
		return
	}
	if k.keys[h] == nil {
		k.keys[h] = map[string]string{}
	}
	k.keys[h][dv.ID] = key
}

func leaseKeys(l contract.Lease) []contract.Device {
	if len(l.Devices) > 0 {
		return l.Devices
	}
	if l.Device != nil {
		return []contract.Device{*l.Device}
	}
	return nil
}

func (k *hostChecker) granted(h *home, kind string, l contract.Lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := grantRec{home: h, kind: kind, id: l.LeaseID, at: time.Now()}
	for _, dv := range leaseKeys(l) {
		k.learnLocked(h, dv)
		g.keys = append(g.keys, keyOf(dv))
	}
	k.grants = append(k.grants, g)
}

func (k *hostChecker) slotGrant(h *home, leaseID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.grants = append(k.grants, grantRec{home: h, kind: "slot", id: leaseID, at: time.Now()})
}

func (k *hostChecker) sessionDevice(dv contract.Device) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key := keyOf(dv); key != "" {
		if _, ok := k.sessionKeys[key]; !ok {
			k.sessionKeys[key] = time.Now()
		}
	}
}

func (k *hostChecker) recovered(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.recoveries[normKey(key)] = time.Now()
}

// recentlyRecovered reports whether a recovery freed key within d.
func (k *hostChecker) recentlyRecovered(key string, d time.Duration) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	at, ok := k.recoveries[normKey(key)]
	return ok && time.Since(at) < d
}

// round takes one host-wide sample and judges the instantaneous rules.
func (k *hostChecker) round(ctx context.Context) {
	homes := k.d.homes()
	pass := func() map[*home]contract.StatusGetOut {
		out := map[*home]contract.StatusGetOut{}
		for _, h := range homes {
			if !h.isAlive() {
				continue
			}
			if st, ok := k.status(ctx, h); ok && h.isAlive() {
				out[h] = st
			}
		}
		return out
	}
	first := pass()
	procs, perr := simsdkPS(homes[0].w)
	claims, cerr := k.readClaims(homes[0].w)
	second := pass()
	if ctx.Err() != nil {
		return
	}
	if perr != nil || cerr != nil {
		k.d.note("sample: ps %v, claims %v", perr, cerr)
		return
	}
	now := time.Now()
	k.mu.Lock()
	k.rounds++
	k.lastProcs, k.claims = procs, claims
	for h, st := range second {
		k.last[h] = st
		ids := map[string]bool{}
		for _, l := range st.Leases {
			ids[l.LeaseID] = true
		}
		k.seen[h] = append(k.seen[h], leaseObs{at: now, ids: ids})
	}
	for _, s := range []map[*home]contract.StatusGetOut{first, second} {
		for h, st := range s {
			for _, dv := range st.Devices {
				k.learnLocked(h, dv)
				if dv.OwnerSystem == "session" {
					if _, ok := k.sessionKeys[keyOf(dv)]; !ok {
						k.sessionKeys[keyOf(dv)] = now
					}
				}
			}
			for _, l := range st.Leases {
				for _, dv := range leaseKeys(l) {
					k.learnLocked(h, dv)
				}
			}
		}
	}
	k.mu.Unlock()

	k.checkHolders(homes, first, second)
	k.checkClaims(now, homes, procs, claims)
	k.checkLimit(procs)
	k.checkFairness(now, first, procs)
}

// checkHolders: two live leases on one device key. A lease a home lists
// in both of its samples was live all the while between them, so any
// other home's lease on the same key in a sample taken in between is a
// second holder at that moment.
func (k *hostChecker) checkHolders(homes []*home, first, second map[*home]contract.StatusGetOut) {
	held := func(st contract.StatusGetOut) map[string]string {
		out := map[string]string{}
		for _, l := range st.Leases {
			for _, dv := range leaseKeys(l) {
				key := keyOf(dv)
				if key == "" {
					continue
				}
				if other, ok := out[key]; ok && other != l.LeaseID {
					k.once("same-home:"+key, "one home lists two live leases on %s: %s and %s", key, other, l.LeaseID)
				}
				out[key] = l.LeaseID
			}
		}
		return out
	}
	for xi, x := range homes {
		s1, ok1 := first[x]
		s2, ok2 := second[x]
		if !ok1 || !ok2 {
			continue
		}
		h1, h2 := held(s1), held(s2)
		for key, id := range h1 {
			if h2[key] != id {
				continue
			}
			for yi, y := range homes {
				if y == x {
					continue
				}
				between, ok := first[y]
				if yi < xi {
					between, ok = second[y]
				}
				if !ok {
					continue
				}
				if other, held := held(between)[key]; held {
					k.once("two:"+key+id+other, "two live leases on %s: home %s's %s and home %s's %s", key, x.name, id, y.name, other)
				}
			}
		}
	}
}

// checkClaims: a running device with no claim (in two rounds running); a
// dead owner's claim of a stopped device older than two watcher intervals;
// a dead owner's claim of a running device past its bound (its home gone:
// two intervals and a shutdown; its home there: the grace window too).
func (k *hostChecker) checkClaims(now time.Time, homes []*home, procs []simProc, claims []claimRow) {
	running := map[string]bool{}
	for _, p := range procs {
		running[p.key()] = true
	}
	claimed := map[string]bool{}
	for _, c := range claims {
		claimed[normKey(c.DeviceKey)] = true
	}
	anyLive := false
	for _, h := range homes {
		anyLive = anyLive || h.isAlive()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range running {
		if claimed[key] {
			delete(k.unclaimed, key)
			continue
		}
		k.unclaimed[key]++
		if k.unclaimed[key] == 2 {
			k.mu.Unlock()
			if k.once("unclaimed:"+key, "device %s runs with no claim in the host registry (two rounds running)", key) {
				k.d.explain(key)
			}
			k.mu.Lock()
		}
	}
	for key := range k.unclaimed {
		if !running[key] {
			delete(k.unclaimed, key)
		}
	}
	seenStopped, seenRunning := map[string]bool{}, map[string]bool{}
	for _, c := range claims {
		if !c.orphan() || c.Classification == "inconsistent" {
			continue
		}
		key := normKey(c.DeviceKey)
		id := fmt.Sprintf("%s|%s|%d", key, c.OwnerHome, c.OwnerPid)
		bound := 2*homesPoll + homesSlack()
		open, seen := k.deadStopped, seenStopped
		if running[key] {
			open, seen = k.deadRunning, seenRunning
			if c.Liveness != "home-gone" {
				bound += time.Duration(homesGraceMs) * time.Millisecond
			}
		}
		seen[id] = true
		first, ok := open[id]
		if !ok || !anyLive {
			open[id] = now // nobody can reclaim while no daemon runs
			continue
		}
		age := now.Sub(first)
		k.longestOrphan = max(k.longestOrphan, age)
		if age > bound {
			what := "stopped"
			if running[key] {
				what = "running"
			}
			k.mu.Unlock()
			k.once("orphan:"+id, "a dead owner's claim of %s device %s (owner %s pid %d, %s) is still there after %s (bound %s)",
				what, key, filepath.Base(filepath.Dir(c.OwnerHome)), c.OwnerPid, c.Liveness, age.Round(time.Millisecond), bound)
			k.mu.Lock()
		}
	}
	for id := range k.deadStopped {
		if !seenStopped[id] {
			delete(k.deadStopped, id)
		}
	}
	for id := range k.deadRunning {
		if !seenRunning[id] {
			delete(k.deadRunning, id)
		}
	}
}

// checkLimit: no more devices run on the host than its limit. Only
// devices booted outside simlock may take the host over it (the user
// guide), and the drill boots none, so two rounds over is a violation and
// every single round over is counted.
func (k *hostChecker) checkLimit(procs []simProc) {
	k.mu.Lock()
	k.maxBooted = max(k.maxBooted, len(procs))
	over := len(procs) > homesMaxRunning
	if over {
		k.overSamples++
		k.overRounds++
	} else {
		k.overRounds = 0
	}
	n := k.overRounds
	k.mu.Unlock()
	if n >= 2 {
		var ids []string
		for _, p := range procs {
			ids = append(ids, p.key())
		}
		k.d.violate("%d devices run at a host limit of %d, two rounds running: %v", len(procs), homesMaxRunning, ids)
	}
}

// checkFairness: a waiter held back by the host limit is served within two
// watcher intervals plus one shutdown while there is room for it on the
// host, counting every live home's idle (ready, unleased, not a session's)
// devices as room.
func (k *hostChecker) checkFairness(now time.Time, first map[*home]contract.StatusGetOut, procs []simProc) {
	free := homesMaxRunning - len(procs)
	live := map[string]bool{}
	var waiters []contract.HostWaiter
	seen := map[string]bool{}
	for h, st := range first {
		live[filepath.Clean(h.w.home)] = true
		for _, dv := range st.Devices {
			if dv.Runtime.Lifecycle == "ready" && dv.Runtime.LeaseID() == "" && dv.OwnerSystem != "session" {
				free++
			}
		}
		// The checker's own view of who waits, read from each home's queue
		// rather than from the waiter rows the daemons publish, so a home
		// that publishes none (or a build before them) is held to the same
		// bound: an actor's plain request still queued in a home.
		for _, q := range st.Queue {
			if q.Phase != "queued" || !k.d.asks(q.RequesterID) {
				continue
			}
			w := contract.HostWaiter{Home: "queue:" + h.w.home, Platform: q.Platform, Count: 1, Since: q.EnqueuedAt}
			id := fmt.Sprintf("%s|%s|%s", w.Home, w.Platform, w.Since.Format(time.RFC3339Nano))
			if !seen[id] {
				seen[id] = true
				waiters = append(waiters, w)
			}
		}
		if st.Capacity.Host != nil {
			for _, w := range st.Capacity.Host.Waiters {
				id := fmt.Sprintf("%s|%s|%s", w.Home, w.Platform, w.Since.Format(time.RFC3339Nano))
				if !seen[id] {
					seen[id] = true
					waiters = append(waiters, w)
				}
			}
		}
	}
	bound := 2*homesPoll + homesSlack()
	k.mu.Lock()
	defer k.mu.Unlock()
	open := map[string]bool{}
	for _, w := range waiters {
		if !live[filepath.Clean(strings.TrimPrefix(w.Home, "queue:"))] {
			continue
		}
		id := fmt.Sprintf("%s|%s|%s", w.Home, w.Platform, w.Since.Format(time.RFC3339Nano))
		k.waitersSeen[id] = true
		if free < w.Count {
			continue
		}
		open[id] = true
		since, ok := k.starving[id]
		if !ok {
			k.starving[id] = now
			continue
		}
		age := now.Sub(since)
		k.longestFree = max(k.longestFree, age)
		if age > bound && !k.reported["starve:"+id] {
			k.reported["starve:"+id] = true
			k.mu.Unlock()
			what, home := "waiter", w.Home
			if h, ok := strings.CutPrefix(w.Home, "queue:"); ok {
				what, home = "queued plain request", h
			}
			k.d.violate("home %s's %s %s (%d, since %s) is not served after %s with room for it on the host (bound %s)",
				filepath.Base(filepath.Dir(home)), w.Platform, what, w.Count, w.Since.Format(time.StampMilli), age.Round(time.Millisecond), bound)
			k.mu.Lock()
		}
	}
	for id := range k.starving {
		if !open[id] {
			delete(k.starving, id)
		}
	}
}

// liveSpan is one stretch of time a lease was live in its home.
type liveSpan struct {
	home       *home
	lease, key string
	from, to   time.Time
}

// analyseJournals reads every home's event journal and checks, host-wide,
// that no two leases were ever live on one device key at once. A lease is
// live from its grant to its end, but only while a daemon of its home ran
// with its gate open: from that run's daemon.started (published as the
// gate opens, after a restart's leases were judged) to the drill's kill or
// stop. A lease a restart ended before its gate is thus not live again.
// It also checks that no plain lease was granted a session's device.
func (k *hostChecker) analyseJournals() {
	ctx := context.Background()
	var spans []liveSpan
	story := map[string][]string{} // a lease's events, for the report
	for _, h := range k.d.homes() {
		h.mu.Lock()
		path, runs := h.journal, append([]daemonRun(nil), h.runs...)
		h.mu.Unlock()
		if path == "" {
			path = filepath.Join(h.w.home, "simlock.db")
		}
		db, err := store.Open(ctx, path)
		if err != nil {
			k.d.violate("home %s: open its journal %s: %v", h.name, path, err)
			continue
		}
		evs, err := db.EventsBetween(ctx, 1, 1<<62)
		db.Close()
		if err != nil {
			k.d.violate("home %s: read its journal: %v", h.name, err)
			continue
		}
		spans = append(spans, k.homeSpans(h, runs, evs)...)
		for _, e := range evs {
			if e.LeaseID != "" {
				story[e.LeaseID] = append(story[e.LeaseID], fmt.Sprintf("%s %s %s", e.At.Format("15:04:05.000"), e.Type, e.Reason))
			}
		}
	}
	byKey := map[string][]liveSpan{}
	for _, s := range spans {
		byKey[s.key] = append(byKey[s.key], s)
	}
	// The story of every device a recovery handed to another home: the
	// leases on it in every home, so a run shows what the dead home's
	// restart did with its old lease.
	k.mu.Lock()
	var recovered []string
	for key := range k.recoveries {
		recovered = append(recovered, key)
	}
	k.mu.Unlock()
	for _, key := range recovered {
		for _, sp := range byKey[key] {
			k.d.t.Logf("recovered %s: home %s's %s live %s to %s: %v", key, sp.home.name, sp.lease,
				sp.from.Format("15:04:05.000"), sp.to.Format("15:04:05.000"), story[sp.lease])
		}
	}
	for key, ss := range byKey {
		sort.Slice(ss, func(i, j int) bool { return ss[i].from.Before(ss[j].from) })
		for i := range ss {
			for j := i + 1; j < len(ss) && ss[j].from.Before(ss[i].to); j++ {
				if ss[i].lease == ss[j].lease {
					continue
				}
				k.once("journal:"+ss[i].lease+ss[j].lease, "the journals show two live leases on %s: home %s's %s (%s to %s) and home %s's %s (from %s)",
					key, ss[i].home.name, ss[i].lease, ss[i].from.Format(time.StampMilli), ss[i].to.Format(time.StampMilli),
					ss[j].home.name, ss[j].lease, ss[j].from.Format(time.StampMilli))
				k.d.t.Logf("%s: %v\n%s: %v", ss[i].lease, story[ss[i].lease], ss[j].lease, story[ss[j].lease])
			}
		}
	}

	k.mu.Lock()
	var bad []string
	for _, g := range k.grants {
		if g.kind == "slot" {
			continue
		}
		for _, key := range g.keys {
			if at, ok := k.sessionKeys[key]; ok && at.Before(g.at) {
				bad = append(bad, fmt.Sprintf("home %s's %s lease %s got session device %s", g.home.name, g.kind, g.id, key))
			}
		}
	}
	k.mu.Unlock()
	for _, b := range bad {
		k.d.violate("%s", b)
	}
}

// homeSpans turns one home's journal into the live spans of its leases,
// one per device and gate.
func (k *hostChecker) homeSpans(h *home, runs []daemonRun, evs []events.Event) []liveSpan {
	end := map[int]time.Time{}
	for _, r := range runs {
		if !r.end.IsZero() {
			end[r.pid] = r.end
		}
	}
	// Gate openings, in order, with the end of each run.
	type gate struct{ from, to time.Time }
	var gates []gate
	for _, e := range evs {
		if e.Type != "daemon.started" {
			continue
		}
		pid := jsonInt(e.Data["pid"])
		to, ok := end[pid]
		if !ok {
			to = time.Now()
		}
		if n := len(gates); n > 0 && gates[n-1].to.After(e.At) {
			gates[n-1].to = e.At
		}
		gates = append(gates, gate{from: e.At, to: to})
	}
	type open struct {
		devices []string
		from    time.Time
	}
	leases := map[string]*open{}
	ended := map[string]time.Time{}
	for _, e := range evs {
		switch e.Type {
		case "lease.granted":
			devs := []string{e.DeviceID}
			if raw, ok := e.Data["devices"].([]any); ok && len(raw) > 0 {
				devs = devs[:0]
				for _, v := range raw {
					if s, ok := v.(string); ok {
						devs = append(devs, s)
					}
				}
			}
			leases[e.LeaseID] = &open{devices: devs, from: e.At}
		case "lease.released", "lease.expired":
			if _, ok := ended[e.LeaseID]; !ok {
				ended[e.LeaseID] = e.At
			}
		}
	}
	var out []liveSpan
	k.mu.Lock()
	defer k.mu.Unlock()
	obs := k.seen[h]
	for id, l := range leases {
		k.journalLeases++
		to, ok := ended[id]
		if !ok {
			// The journal is written behind the bus, so a kill -9 can take
			// a lease's last events with it: then the lease ended by the
			// first sample of its home after its grant that did not list it.
			to = time.Now()
			for _, o := range obs {
				if o.at.After(l.from) && !o.ids[id] {
					to = o.at
					break
				}
			}
		}
		for _, g := range gates {
			from, until := maxTime(l.from, g.from), minTime(to, g.to)
			if !from.Before(until) {
				continue
			}
			endedHere := ok && !to.Before(g.from) && to.Before(g.to)
			if l.from.Before(g.from) && !seenIn(obs, id, g.from, g.to) && !endedHere {
				// Granted in an earlier run and neither listed in this
				// one nor ended in it: a restart did not bring it back.
				continue
			}
			for _, dev := range l.devices {
				key, known := k.keys[h][dev]
				if !known {
					k.unmapped++
					continue
				}
				out = append(out, liveSpan{home: h, lease: id, key: key, from: from, to: until})
			}
		}
	}
	return out
}

func (k *hostChecker) summaryLocked() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return fmt.Sprintf("checker: %d rounds, most devices running %d (limit %d), %d rounds over it; %d host waiters seen, longest with room %s; longest dead-owner claim %s; %d journal leases, %d device ids unmapped; %d session devices, %d grants",
		k.rounds, k.maxBooted, homesMaxRunning, k.overSamples, len(k.waitersSeen), k.longestFree.Round(time.Millisecond),
		k.longestOrphan.Round(time.Millisecond), k.journalLeases, k.unmapped, len(k.sessionKeys), len(k.grants))
}

// seenIn reports whether a sample taken between from and to listed id.
func seenIn(obs []leaseObs, id string, from, to time.Time) bool {
	for _, o := range obs {
		if !o.at.Before(from) && o.at.Before(to) && o.ids[id] {
			return true
		}
	}
	return false
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func jsonInt(v any) int {
	switch n := v.(type) {
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	case float64:
		return int(n)
	}
	return 0
}
