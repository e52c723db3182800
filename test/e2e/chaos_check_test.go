package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// incarnation is one daemon process's life as the drill saw it. Events are
// numbered per incarnation, so they are kept per incarnation by seq.
type incarnation struct {
	pid       int
	startedAt time.Time
	events    map[uint64]contract.Event
	killed    bool
	// base is the seq this run continued from (the journal's newest at its
	// start): its own facts are base+1 on. Learned from the first read.
	base      uint64
	baseKnown bool
}

// leaseRec is everything the drill learned about one lease, from any
// source: the holder's answers, status snapshots and the event log.
type leaseRec struct {
	id, owner, device, platform string
	devices                     []string  // every member of a multi-device lease (device is the first)
	granted                     time.Time // the daemon's grantedAt
	lastAlive                   time.Time // latest instant the lease provably existed
	expires                     time.Time // latest expiresAt the daemon told its holder
	lastConfirmed               time.Time // our clock: the last answer that showed it alive
	releaseAsked                bool
	goneSeen                    bool // the holder found it gone without releasing it
	endReason                   string
	endedAt                     time.Time
}

func (ch *chaos) lease(id string) *leaseRec {
	r := ch.leases[id]
	if r == nil {
		r = &leaseRec{id: id}
		ch.leases[id] = r
	}
	return r
}

func (r *leaseRec) alive(t time.Time) {
	if t.After(r.lastAlive) {
		r.lastAlive = t
	}
}

func (ch *chaos) noteLease(owner string, l contract.Lease, now time.Time) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	r := ch.lease(l.LeaseID)
	r.owner, r.device, r.platform, r.granted = owner, l.DeviceID, l.Platform, l.GrantedAt
	r.noteMembers(leaseDevices(l))
	r.alive(l.LastRenewedAt)
	r.alive(l.GrantedAt)
	if l.ExpiresAt.After(r.expires) {
		r.expires = l.ExpiresAt
	}
	r.lastConfirmed = now
}

func (ch *chaos) releaseAsked(id string) {
	ch.mu.Lock()
	ch.lease(id).releaseAsked = true
	ch.mu.Unlock()
}

func (ch *chaos) leaseGone(owner, id string) {
	ch.mu.Lock()
	ch.lease(id).goneSeen = true
	ch.mu.Unlock()
}

type refusal struct {
	requester string
	at        *attempt
	answered  time.Time
}

func (ch *chaos) noteRefusal(requester string, at *attempt) {
	ch.mu.Lock()
	ch.refusals = append(ch.refusals, refusal{requester, at, time.Now()})
	ch.mu.Unlock()
}

// follow records every event of every daemon incarnation. It follows the
// live stream and, since a follower that falls behind may miss facts,
// re-reads the daemon's buffer to fill any hole in the sequence.
func (ch *chaos) follow(ctx context.Context) {
	defer ch.bg.Done()
	for ctx.Err() == nil {
		c, err := ch.dial(ctx, "chaos-follower", true)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		ch.followOne(ctx, c)
		c.Close()
	}
}

func (ch *chaos) followOne(ctx context.Context, c *client.Client) {
	cctx, cancel := context.WithTimeout(ctx, testhost.Scale(30*time.Second))
	st, err := client.Do(cctx, c, contract.StatusGet, contract.StatusGetIn{})
	cancel()
	if err != nil || st.Daemon.PID == 0 {
		return
	}
	inc := ch.incarnation(st.Daemon.PID, st.Daemon.StartedAt)
	add := func(evs ...contract.Event) {
		ch.mu.Lock()
		for _, e := range evs {
			inc.events[e.Seq] = e
		}
		ch.mu.Unlock()
	}
	sub, cancelSub := context.WithCancel(ctx)
	defer cancelSub()
	// The default read is this run's facts from its first one on, and the
	// follower continues right after it (pushes come in seq order, maybe
	// before the reply), so the first fact of the first session, or its
	// first gap, tells where this run's numbering began.
	var backlogDone bool
	var early []contract.Event
	out, err := c.Events(sub, contract.EventsSubscribeIn{Follow: true}, func(e contract.Event) {
		ch.mu.Lock()
		if !backlogDone {
			early = append(early, e)
			ch.mu.Unlock()
			return
		}
		if !inc.baseKnown {
			inc.base, inc.baseKnown = e.Seq-1, true
		}
		ch.mu.Unlock()
		add(e)
	})
	if err != nil {
		return
	}
	ch.mu.Lock()
	if !inc.baseKnown {
		switch {
		case out.Gap != nil:
			inc.base, inc.baseKnown = out.Gap.FromSeq-1, true
		case len(out.Events) > 0:
			inc.base, inc.baseKnown = out.Events[0].Seq-1, true
		case len(early) > 0:
			inc.base, inc.baseKnown = early[0].Seq-1, true
		}
	}
	backlogDone = true
	held := early
	ch.mu.Unlock()
	add(out.Events...)
	add(held...)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.Done():
			return
		case <-tick.C:
			ch.fillGaps(ctx, c, inc)
		case reply := <-ch.fillNow:
			ch.fillGaps(ctx, c, inc)
			close(reply)
		}
	}
}

// fillGaps re-reads the buffer after the longest gap-free prefix.
func (ch *chaos) fillGaps(ctx context.Context, c *client.Client, inc *incarnation) {
	ch.mu.Lock()
	contiguous, max := inc.prefix()
	ch.mu.Unlock()
	if contiguous == max {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, testhost.Scale(30*time.Second))
	defer cancel()
	out, err := c.Events(cctx, contract.EventsSubscribeIn{Since: contiguous}, nil)
	if err != nil {
		return
	}
	ch.mu.Lock()
	for _, e := range out.Events {
		if _, had := inc.events[e.Seq]; !had {
			ch.gapsFilled++
			inc.events[e.Seq] = e
		}
	}
	ch.mu.Unlock()
}

func (inc *incarnation) prefix() (contiguous, max uint64) {
	for s := range inc.events {
		if s > max {
			max = s
		}
	}
	contiguous = inc.base
	for inc.events[contiguous+1].Type != "" {
		contiguous++
	}
	return contiguous, max
}

func (ch *chaos) incarnation(pid int, started time.Time) *incarnation {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	inc := ch.incs[pid]
	if inc == nil {
		inc = &incarnation{pid: pid, startedAt: started, events: map[uint64]contract.Event{}}
		ch.incs[pid] = inc
	}
	return inc
}

func (ch *chaos) followerSees(pid int) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	inc := ch.incs[pid]
	return inc != nil && len(inc.events) > 0
}

// watch takes status snapshots while the drill runs and checks the
// invariants that hold at every instant.
func (ch *chaos) watch(ctx context.Context) {
	defer ch.bg.Done()
	var admin *client.Client
	defer func() {
		if admin != nil {
			admin.Close()
		}
	}()
	for ctx.Err() == nil {
		if admin == nil {
			c, err := ch.dial(ctx, "chaos-watch", true)
			if err != nil {
				continue
			}
			admin = c
		}
		cctx, cancel := context.WithTimeout(ctx, testhost.Scale(45*time.Second))
		sent := time.Now()
		st, err := client.Do(cctx, admin, contract.StatusGet, contract.StatusGetIn{})
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			admin.Close()
			admin = nil
			continue
		}
		ch.fastOp(time.Since(sent))
		if st.Daemon.Health == "running" {
			ch.checkSnapshot(st, sent)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

var legalStates = map[string]bool{"provisioning": true, "ready": true, "leased": true, "reclaiming": true, "shutdown": true, "quarantined": true}

// checkSnapshot checks one status answer: one lease per device, legal
// states that agree with the leases, and running plus reserved devices
// within every limit, overall and per platform.
func (ch *chaos) checkSnapshot(st contract.StatusGetOut, sent time.Time) {
	ch.mu.Lock()
	ch.snapshots++
	if st.QueueDepth > ch.maxQueue {
		ch.maxQueue = st.QueueDepth
	}
	for _, l := range st.Leases {
		r := ch.lease(l.LeaseID)
		if r.device == "" {
			r.device, r.platform, r.granted, r.owner = l.DeviceID, l.Platform, l.GrantedAt, l.RequesterID
		}
		r.noteMembers(leaseDevices(l))
		r.alive(l.GrantedAt)
		// The lease existed at some moment after the request was sent.
		r.alive(sent)
	}
	ch.mu.Unlock()

	leased := map[string]string{}
	for _, l := range st.Leases {
		for _, id := range leaseDevices(l) {
			if other, dup := leased[id]; dup {
				ch.violate("device %s has two leases at once: %s and %s", id, other, l.LeaseID)
			}
			leased[id] = l.LeaseID
		}
	}
	up := map[string]int{}
	for _, d := range st.Devices {
		if !legalStates[d.Runtime.Lifecycle] {
			ch.violate("device %s in illegal state %q", d.ID, d.Runtime.Lifecycle)
		}
		if (d.Runtime.Lifecycle == "leased") != (leased[d.ID] != "") {
			ch.violate("device %s is %s but its lease is %q (snapshot at %s)", d.ID, d.Runtime.Lifecycle, leased[d.ID], sent.Format(time.StampMilli))
		}
		if d.Runtime.Lifecycle == "ready" || d.Runtime.Lifecycle == "leased" {
			up[d.Platform]++
			up[""]++
		}
	}
	c := st.Capacity
	if c.Running+c.Reserved > c.MaxRunning || c.MaxRunning != chaosMaxRunning[""] {
		ch.violate("capacity: %d running + %d reserved against a limit of %d (configured %d)", c.Running, c.Reserved, c.MaxRunning, chaosMaxRunning[""])
	}
	for p, pc := range c.Platforms {
		if pc.MaxRunning > 0 && pc.Running+pc.Reserved > pc.MaxRunning {
			ch.violate("capacity %s: %d running + %d reserved > %d", p, pc.Running, pc.Reserved, pc.MaxRunning)
		}
	}
	for p, limit := range chaosMaxRunning {
		if up[p] > limit {
			ch.violate("%d ready or leased devices on %q against a running limit of %d", up[p], p, limit)
		}
	}
}

// analyse reads the whole event log, every incarnation in order, with
// what the clients saw, and checks the invariants that span time.
func (ch *chaos) analyse(nukeAt time.Time) (grants int, lost uint64) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	incs := make([]*incarnation, 0, len(ch.incs))
	for _, inc := range ch.incs {
		incs = append(incs, inc)
	}
	sort.Slice(incs, func(i, j int) bool { return incs[i].startedAt.Before(incs[j].startedAt) })
	for i, inc := range incs {
		contiguous, max := inc.prefix()
		missing := uint64(0)
		for s := inc.base + 1; s <= max; s++ {
			if inc.events[s].Type == "" {
				missing++
			}
		}
		lost += missing
		if missing > 0 && i == len(incs)-1 && !inc.killed {
			ch.violateLocked("the live daemon's event log has %d holes after seq %d (up to %d): facts were lost", missing, contiguous, max)
		}
		seqs := make([]uint64, 0, len(inc.events))
		for s := range inc.events {
			seqs = append(seqs, s)
		}
		sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
		for _, s := range seqs {
			e := inc.events[s]
			if e.LeaseID == "" {
				if e.Type == "device.evicted" || e.Type == "device.destroyed" && e.Reason == "evicted" {
					ch.evictions = append(ch.evictions, e)
				}
				continue
			}
			r := ch.lease(e.LeaseID)
			if r.device == "" {
				r.device, r.platform, r.owner = e.DeviceID, e.Platform, e.RequesterID
			}
			r.alive(e.At)
			switch e.Type {
			case "lease.granted":
				grants++
				if ds, ok := e.Data["devices"].([]any); ok {
					var ids []string
					for _, d := range ds {
						if s, ok := d.(string); ok {
							ids = append(ids, s)
						}
					}
					r.noteMembers(ids)
				}
				if r.granted.IsZero() {
					r.granted = e.At
				}
			case "lease.released":
				if r.endReason != "" {
					ch.violateLocked("lease %s released twice (%s, then %s)", e.LeaseID, r.endReason, e.Reason)
				}
				r.endReason, r.endedAt = e.Reason, e.At
			}
		}
	}
	ch.checkIntervalsLocked()
	ch.checkEndingsLocked(nukeAt)
	ch.checkRefusalsLocked()
	return grants, lost
}

// checkIntervalsLocked: per device, the spans [granted, lastAlive] of its
// leases never overlap, across every daemon restart. lastAlive only ever
// rests on evidence (an answer, a snapshot, an event), so a fact lost in
// a kill window can shorten a span but never invent an overlap.
func (ch *chaos) checkIntervalsLocked() {
	byDevice := map[string][]*leaseRec{}
	for _, r := range ch.leases {
		if r.device == "" || r.granted.IsZero() {
			continue
		}
		for _, d := range r.members() {
			byDevice[d] = append(byDevice[d], r)
		}
	}
	for dev, rs := range byDevice {
		sort.Slice(rs, func(i, j int) bool { return rs[i].granted.Before(rs[j].granted) })
		var open *leaseRec
		for _, r := range rs {
			if open != nil && r.granted.Before(open.lastAlive) {
				ch.violateLocked("device %s was leased twice at once: %s (granted %s, alive at %s) and %s (granted %s)",
					dev, open.id, open.granted.Format(time.StampMilli), open.lastAlive.Format(time.StampMilli), r.id, r.granted.Format(time.StampMilli))
			}
			if open == nil || r.lastAlive.After(open.lastAlive) {
				open = r
			}
		}
	}
}

// checkEndingsLocked: a lease its holder did not release ended only for
// a legitimate reason, and an expiry never came before the deadline the
// daemon last gave the holder.
func (ch *chaos) checkEndingsLocked(nukeAt time.Time) {
	for _, r := range ch.leases {
		switch r.endReason {
		case "":
			// Its end was never published: only a daemon kill after the
			// last sign of life can have swallowed the fact.
			if r.goneSeen && !r.releaseAsked && !ch.killedSinceLocked(r.lastConfirmed) {
				ch.violateLocked("lease %s of %s vanished without a lease.released event and without a daemon kill", r.id, r.owner)
			}
		case "released":
			if !r.releaseAsked {
				ch.violateLocked("lease %s of %s was released (reason released at %s) but no client asked for that", r.id, r.owner, r.endedAt.Format(time.StampMilli))
			}
		case "expired":
			if !r.expires.IsZero() && r.endedAt.Before(r.expires.Add(-5*time.Millisecond)) {
				ch.violateLocked("lease %s expired at %s, before its deadline %s", r.id, r.endedAt.Format(time.StampMilli), r.expires.Format(time.StampMilli))
			}
		case "device-lost":
		case "reset":
			if r.endedAt.Before(nukeAt.Add(-5 * time.Millisecond)) {
				ch.violateLocked("lease %s ended as reset at %s, before the final nuke", r.id, r.endedAt.Format(time.StampMilli))
			}
		default:
			ch.violateLocked("lease %s ended with unknown reason %q", r.id, r.endReason)
		}
	}
}

// checkRefusalsLocked: a noWait refusal changed nothing. The daemon tells
// a request which device it evicts for it (the evicting progress push);
// a refused request must have had none, and if the log attributes an
// eviction to a requester (requesterId on device.evicted), none may fall
// inside one of its refused noWait requests.
func (ch *chaos) checkRefusalsLocked() {
	for _, rf := range ch.refusals {
		for _, dev := range rf.at.evictions() {
			// The first eviction of that device after the request was
			// sent is the one started for it; later ones serve others.
			var first *contract.Event
			for i, e := range ch.evictions {
				if e.DeviceID == dev && !e.At.Before(rf.at.sentAt) && (first == nil || e.At.Before(first.At)) {
					first = &ch.evictions[i]
				}
			}
			if first != nil {
				ch.violateLocked("%s's refused noWait request (sent %s) evicted device %s (%s at %s)", rf.requester, rf.at.sentAt.Format(time.StampMilli), dev, first.Type, first.At.Format(time.StampMilli))
			}
		}
		for _, e := range ch.evictions {
			if e.RequesterID == rf.requester && !e.At.Before(rf.at.sentAt) && !e.At.After(rf.answered) {
				ch.violateLocked("%s's refused noWait request (sent %s) was followed by %s of %s attributed to it", rf.requester, rf.at.sentAt.Format(time.StampMilli), e.Type, e.DeviceID)
			}
		}
	}
}

func (ch *chaos) killedSinceLocked(t time.Time) bool {
	for _, k := range ch.kills {
		if k.After(t) {
			return true
		}
	}
	return false
}

// summary is the run's figures, logged at the end of every run.
func (ch *chaos) summary(wall time.Duration, grants int, lost uint64, faults map[string]int) string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var b strings.Builder
	total := 0
	kinds := make([]string, 0, len(ch.ops))
	for k := range ch.ops {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		outs := make([]string, 0, len(ch.ops[k]))
		n := 0
		for o, c := range ch.ops[k] {
			outs = append(outs, fmt.Sprintf("%s=%d", o, c))
			n += c
		}
		sort.Strings(outs)
		total += n
		fmt.Fprintf(&b, "  %-15s %6d  %s\n", k, n, strings.Join(outs, " "))
	}
	nf := 0
	fs := make([]string, 0, len(faults))
	for name, c := range faults {
		nf += c
		fs = append(fs, fmt.Sprintf("%s=%d", name, c))
	}
	sort.Strings(fs)
	fmt.Fprintf(&b, "operations %d from %d concurrent clients (+%d slow readers), wall time %s\n", total, ch.actors, ch.slowStarted, wall.Round(time.Millisecond))
	fmt.Fprintf(&b, "faults injected %d (%s); daemon kill -9s %d; device process kills %d\n", nf, strings.Join(fs, " "), len(ch.kills), ch.deviceKills)
	fmt.Fprintf(&b, "grants %d (lease.granted events), leases seen %d, evictions %d, noWait refusals %d, max queue length %d, status snapshots %d\n",
		grants, len(ch.leases), len(ch.evictions), len(ch.refusals), ch.maxQueue, ch.snapshots)
	fmt.Fprintf(&b, "events %d over %d daemon runs, %d lost in kill windows, %d re-read to fill follower gaps; slowest renew/release/status %s\n",
		ch.eventCountLocked(), len(ch.incs), lost, ch.gapsFilled, ch.slowest.Round(time.Millisecond))
	fmt.Fprintf(&b, "invariant violations %d", ch.violations)
	return "chaos summary (seed " + fmt.Sprint(ch.seed) + ", " + ch.mode + " mode); operations by kind and outcome:\n" + b.String()
}

func (ch *chaos) eventCountLocked() int {
	n := 0
	for _, inc := range ch.incs {
		n += len(inc.events)
	}
	return n
}

// leaseDevices lists every device a lease holds: the members of a
// multi-device lease, or its one device.
func leaseDevices(l contract.Lease) []string {
	if len(l.Devices) == 0 {
		return []string{l.DeviceID}
	}
	ids := make([]string, len(l.Devices))
	for i, d := range l.Devices {
		ids[i] = d.ID
	}
	return ids
}

// noteMembers records a group's members, first learned wins; a different
// set later would be a lease changing its devices, which never happens.
func (r *leaseRec) noteMembers(ids []string) {
	if len(ids) > 1 && len(r.devices) == 0 {
		r.devices = ids
	}
}

func (r *leaseRec) members() []string {
	if len(r.devices) > 0 {
		return r.devices
	}
	return []string{r.device}
}
