package daemon

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/resources"
	"github.com/simlock/simlock/internal/store"
)

// registerCommon installs the handlers every mode serves the same way:
// tokens, the effective config and stopping.
func (d *Daemon) registerCommon(disp *dispatch.Dispatcher) {
	dispatch.Handle(disp, contract.ConfigGet, func(context.Context, *dispatch.Call, contract.ConfigGetIn) (contract.ConfigGetOut, error) {
		cfg := d.cfg
		if cfg.Gateway.Token != "" {
			cfg.Gateway.Token = "(set, not shown)" // a bearer credential never leaves the daemon
		}
		b, err := json.Marshal(cfg)
		return contract.ConfigGetOut{Path: d.paths.Config, Config: b}, err
	})
	dispatch.Handle(disp, contract.TokenCreate, d.tokenCreate)
	dispatch.Handle(disp, contract.TokenList, func(ctx context.Context, _ *dispatch.Call, _ contract.TokenListIn) (contract.TokenListOut, error) {
		toks, err := d.db.ListTokens(ctx)
		if err != nil {
			return contract.TokenListOut{}, err
		}
		out := contract.TokenListOut{Tokens: []contract.TokenInfo{}}
		for _, t := range toks {
			out.Tokens = append(out.Tokens, contract.TokenInfo{ID: t.ID, Role: t.Role, Name: t.Name, CreatedAt: t.CreatedAt.UTC()})
		}
		return out, nil
	})
	dispatch.Handle(disp, contract.TokenRevoke, func(ctx context.Context, _ *dispatch.Call, in contract.TokenRevokeIn) (contract.TokenRevokeOut, error) {
		ok, err := d.db.RevokeToken(ctx, in.ID)
		if err != nil {
			return contract.TokenRevokeOut{}, err
		}
		if !ok {
			return contract.TokenRevokeOut{}, contract.Errorf(contract.CodeUnknownToken, "no token %q", in.ID)
		}
		return contract.TokenRevokeOut{Revoked: true}, nil
	})
	dispatch.Handle(disp, contract.DaemonStop, func(ctx context.Context, call *dispatch.Call, in contract.DaemonStopIn) (contract.DaemonStopOut, error) {
		out := contract.DaemonStopOut{Stopping: true}
		if in.Clean {
			out.Clean = d.claims.CleanBeforeStop(ctx)
		}
		call.After(func() { go d.requestStop() })
		return out, nil
	})
}

// register installs every handler a worker daemon serves.
func (d *Daemon) register(disp *dispatch.Dispatcher) {
	d.registerCommon(disp)
	dispatch.Handle(disp, contract.StatusGet, d.statusGet)
	dispatch.Handle(disp, contract.QueueList, func(_ context.Context, _ *dispatch.Call, in contract.QueueListIn) (contract.QueueListOut, error) {
		cursor, err := contract.ParseQueueCursor(in.Cursor) // a refusal's out is dropped
		p := d.engine.Requests().QueuePage(cursor, in.Limit)
		return contract.QueueListOut{Entries: core.WireQueue(p.Entries), Depth: p.Depth, NextCursor: contract.QueueCursor(p.Next)}, err
	})
	dispatch.Handle(disp, contract.LeaseRequest, d.leaseRequest)
	dispatch.Handle(disp, contract.LeaseRenew, func(_ context.Context, _ *dispatch.Call, in contract.LeaseRenewIn) (contract.Lease, error) {
		l, err := d.engine.Renew(in.LeaseID, time.Duration(in.TTLMs)*time.Millisecond)
		if err != nil {
			return contract.Lease{}, err
		}
		return d.leaseOut(l), nil
	})
	dispatch.Handle(disp, contract.LeaseRelease, func(_ context.Context, _ *dispatch.Call, in contract.LeaseReleaseIn) (contract.LeaseReleaseOut, error) {
		if err := d.slots.GuardRelease(in.LeaseID); err != nil {
			return contract.LeaseReleaseOut{}, err
		}
		if err := d.engine.Release(in.LeaseID); err != nil {
			return contract.LeaseReleaseOut{}, err
		}
		return contract.LeaseReleaseOut{LeaseID: in.LeaseID, Released: true}, nil
	})
	dispatch.Handle(disp, contract.LeaseReleaseAll, d.leaseReleaseAll)
	dispatch.Handle(disp, contract.LeaseCancel, func(_ context.Context, call *dispatch.Call, in contract.LeaseCancelIn) (contract.LeaseCancelOut, error) {
		req := in.RequesterID
		if req == "" {
			req = call.Session.Principal
		}
		for _, q := range d.engine.Queue() {
			if q.RequesterID == req && call.Session.Role != contract.RoleAdmin && q.OwnerID != call.Session.Principal {
				return contract.LeaseCancelOut{}, contract.Errorf(contract.CodeForbidden, "the pending request of %s belongs to another principal", req)
			}
		}
		if err := d.engine.Cancel(req); err != nil {
			return contract.LeaseCancelOut{}, err
		}
		return contract.LeaseCancelOut{Cancelled: true}, nil
	})
	dispatch.Handle(disp, contract.LeaseGet, func(_ context.Context, _ *dispatch.Call, in contract.LeaseGetIn) (contract.Lease, error) {
		l, ok := d.engine.Lease(in.LeaseID)
		if !ok {
			return contract.Lease{}, core.ErrUnknownLease
		}
		return d.leaseOut(l), nil
	})
	dispatch.Handle(disp, contract.LeaseRequestStatus, d.leaseRequestStatus)
	dispatch.Handle(disp, contract.LeaseList, func(_ context.Context, call *dispatch.Call, _ contract.LeaseListIn) (contract.LeaseListOut, error) {
		out := contract.LeaseListOut{Leases: []contract.Lease{}}
		for _, l := range d.engine.Leases() {
			if owns(call.Session, l) {
				out.Leases = append(out.Leases, d.leaseOut(l))
			}
		}
		return out, nil
	})
	dispatch.Handle(disp, contract.EventsSubscribe, d.eventsSubscribe)
	dispatch.Handle(disp, contract.Passthrough, d.passthrough)
	dispatch.Handle(disp, contract.DeviceExec, d.deviceExec)
	d.registerResources(disp)
	dispatch.Handle(disp, contract.DeviceRelease, d.claims.DeviceRelease)
	d.registerSessions(disp)
	d.registerSlots(disp)
	dispatch.Handle(disp, contract.CleanupRun, func(ctx context.Context, _ *dispatch.Call, in contract.CleanupRunIn) (contract.CleanupRunOut, error) {
		res, err := d.engine.Cleanup().RunCleanup(ctx, in.DryRun, in.Rule)
		if err != nil {
			return contract.CleanupRunOut{}, err
		}
		out := contract.CleanupRunOut{DryRun: in.DryRun, Actions: []contract.CleanupAction{}}
		for _, r := range res {
			out.Actions = append(out.Actions, contract.CleanupAction{Rule: r.Rule, DeviceID: r.DeviceID, Action: r.Action,
				Reason: r.Reason, Executed: r.Executed, Skipped: r.Skipped, Error: r.Err})
		}
		return out, nil
	})
	dispatch.Handle(disp, contract.DoctorRun, func(ctx context.Context, _ *dispatch.Call, in contract.DoctorRunIn) (contract.DoctorRunOut, error) {
		fs, err := d.engine.Maintenance().Doctor(ctx, core.DoctorOptions{Fix: in.Fix, PurgeOrphans: in.PurgeOrphans})
		if err != nil {
			return contract.DoctorRunOut{}, err
		}
		out := contract.DoctorRunOut{Findings: []contract.DoctorFinding{}, Healthy: len(fs) == 0}
		for _, f := range fs {
			out.Findings = append(out.Findings, contract.DoctorFinding{Kind: f.Kind, Platform: f.Platform, DeviceID: f.DeviceID,
				Handle: f.Handle, Detail: f.Detail, Action: f.Action, Fixed: f.Fixed, Error: f.Err})
		}
		// One read, so the goldens and the refusals agree.
		gs := d.engine.Goldens().GoldenStatus()
		for _, g := range gs.Devices {
			out.Goldens = append(out.Goldens, contract.DoctorGolden{Platform: g.Platform, Handle: g.Handle, ModelID: g.ModelID,
				RuntimeID: g.RuntimeID, Building: g.State == core.GoldenStateBuilding, Reclaiming: g.State == core.GoldenStateReclaiming,
				Stuck: g.State == core.GoldenStateStuck})
		}
		for _, r := range gs.Refused {
			if out.GoldensNotBuilt == nil {
				out.GoldensNotBuilt = map[string]string{}
			}
			out.GoldensNotBuilt[r.Key] = r.Reason
		}
		return out, nil
	})
	dispatch.Handle(disp, contract.NukeRun, func(ctx context.Context, _ *dispatch.Call, _ contract.NukeRunIn) (contract.NukeRunOut, error) {
		rep, err := d.engine.Maintenance().Nuke(ctx)
		if err != nil {
			return contract.NukeRunOut{}, err
		}
		nz := func(s []string) []string {
			if s == nil {
				return []string{}
			}
			return s
		}
		return contract.NukeRunOut{ReleasedLeases: nz(rep.ReleasedLeases), CancelledRequests: nz(rep.CancelledRequests),
			DestroyedDevices: nz(rep.DestroyedDevices), Failed: rep.Failed}, nil
	})
}

// owns reports whether the session may see or act on lease l.
func owns(s contract.Session, l core.LeaseRecord) bool {
	return s.Role == contract.RoleAdmin || l.OwnerID == s.Principal
}

// leaseReleaseAll releases the leases of one requester namespace: the
// requester itself and the ids scoped under it ("<requester>/..."), so an
// agent's plain release-all covers every requester id it used. Every lease
// of everyone takes an explicit everyone flag and the admin role: a local
// CLI is admin, and "release all" must not mean "release other people's".
func (d *Daemon) leaseReleaseAll(_ context.Context, call *dispatch.Call, in contract.LeaseReleaseAllIn) (contract.LeaseReleaseAllOut, error) {
	var match func(core.LeaseRecord) bool
	if in.Everyone {
		if call.Session.Role != contract.RoleAdmin {
			return contract.LeaseReleaseAllOut{}, contract.Errorf(contract.CodeForbidden, "releasing every requester's leases needs the admin role").
				WithNext("drop --everyone to release your own leases, or connect with an operator credential")
		}
		if in.RequesterID != "" {
			return contract.LeaseReleaseAllOut{}, contract.Errorf(contract.CodeBadRequest, "everyone and requesterId exclude each other")
		}
		match = func(core.LeaseRecord) bool { return true }
	} else {
		req := in.RequesterID
		if req == "" {
			req = call.Session.Principal
		}
		match = func(l core.LeaseRecord) bool {
			return owns(call.Session, l) && (l.RequesterID == req || strings.HasPrefix(l.RequesterID, req+"/"))
		}
	}
	// A slot execution's lease ends only through slot.release.
	ids := d.engine.ReleaseWhere(func(l core.LeaseRecord) bool { return match(l) && d.slots.GuardRelease(l.ID) == nil })
	if ids == nil {
		ids = []string{}
	}
	return contract.LeaseReleaseAllOut{Released: ids}, nil
}

func (d *Daemon) leaseRequest(ctx context.Context, call *dispatch.Call, in contract.LeaseRequestIn) (contract.Lease, error) {
	if len(in.Devices) > 0 {
		if err := checkGroupIn(in); err != nil {
			return contract.Lease{}, err
		}
	} else if in.Platform == "" && in.Device == "" {
		return contract.Lease{}, contract.Errorf(contract.CodeBadRequest, "platform is required").
			WithNext("name a platform: ios or android")
	}
	if in.TTLMs < 0 || in.TimeoutMs < 0 {
		return contract.Lease{}, contract.Errorf(contract.CodeBadRequest, "ttlMs and timeoutMs must not be negative")
	}
	req := in.RequesterID
	if req == "" {
		req = call.Session.Principal
	}
	owner := call.Session.Principal
	if in.OwnerID != "" {
		if call.Session.Role != contract.RoleAdmin {
			return contract.Lease{}, contract.Errorf(contract.CodeForbidden, "only an admin session may set a lease's owner")
		}
		owner = in.OwnerID
	}
	if err := checkIdempotencyKey(in.IdempotencyKey); err != nil {
		return contract.Lease{}, err
	}
	done, err := d.admitPending(owner)
	if err != nil {
		return contract.Lease{}, err
	}
	defer done()
	allow := false
	switch d.cfg.Downloads.Policy {
	case "always":
		allow = true
	case "on-request":
		allow = in.AllowDownload
	}
	if in.Device != "" {
		// Resolved before the request is stored or queued: a device another
		// owner holds is refused here, before any platform command.
		id, plat, err := d.resolveTarget(ctx, in.Platform, in.Device)
		if err != nil {
			return contract.Lease{}, err
		}
		in.Device, in.Platform = id, plat
	}
	if err := resources.CheckLeaseTuning(in.Platform, in); err != nil {
		return contract.Lease{}, err
	}
	r := core.Request{
		DeviceID: in.Device,
		Spec: core.SpecRequest{Platform: in.Platform, Model: in.Model, OSVersion: in.OSVersion, AllowDownload: allow,
			Resources: in.Resources},
		TTL:     time.Duration(in.TTLMs) * time.Millisecond,
		Timeout: time.Duration(in.TimeoutMs) * time.Millisecond,
		NoWait:  in.NoWait, RequesterID: req, OwnerID: owner, IdempotencyKey: in.IdempotencyKey,
		Group: groupIn(in.Devices, allow),
	}
	if in.Hardware != nil {
		r.Spec.Hardware = in.Hardware // never a nil pointer in the interface
	}
	// A component install the driver reports for this requester marks the
	// lease's admission path as download.
	var downloaded atomic.Bool
	r.Downloaded = downloaded.Load
	d.progressFor.Store(req, func(p contract.Progress) {
		if p.Phase == "downloading" || p.Phase == "installed" {
			downloaded.Store(true)
		}
		call.Push(contract.NotifyProgress, p)
	})
	defer d.progressFor.Delete(req)
	g, err := d.engine.Request(ctx, r, func(p core.Progress) {
		call.Push(contract.NotifyProgress, contract.Progress{Phase: p.Phase, QueuePosition: p.QueuePosition,
			DeviceID: p.DeviceID, EtaMs: p.ETA.Milliseconds(), LeaseRequestID: p.RequestID})
	})
	if err != nil {
		if in.AllowDownload && !allow && d.cfg.Downloads.Policy == "never" {
			if ce := toContractError(err); ce.Code == contract.CodeRuntimeMissing {
				return contract.Lease{}, contract.Errorf(contract.CodeDownloadForbidden,
					"%s, and downloads.policy is never, so --allow-download cannot install it", ce.Message).WithDetails("policy", "never")
			}
		}
		var rl *core.RequesterLeasedError
		if errors.As(err, &rl) {
			// The lease id is the holder's to know: a caller that is not
			// its owner learns only that the requester is taken.
			l, ok := d.engine.Lease(rl.LeaseID)
			return contract.Lease{}, requesterLeased(rl, ok && owns(call.Session, l))
		}
		return contract.Lease{}, err
	}
	out := d.leaseOut(g.Lease)
	dev := d.deviceOut(g.Device, g.Lease.ID)
	out.Device = &dev
	if len(out.Devices) > 0 {
		out.Devices[0] = dev
	}
	return out, nil
}

// admitPending counts a lease request against its owner's cap on requests
// in flight (queue.maxPerPrincipal) and returns the function that uncounts
// it. The count is taken before the engine sees the request, so concurrent
// calls cannot overshoot it.
func (d *Daemon) admitPending(owner string) (func(), error) {
	limit := d.cfg.Queue.MaxPerPrincipal
	d.pendingMu.Lock()
	defer d.pendingMu.Unlock()
	if n := d.pending[owner]; limit > 0 && n >= limit {
		return nil, contract.Errorf(contract.CodeQueueLimit, "%s already has %d lease requests waiting; at most %d may wait at once", owner, n, limit).
			WithDetails("limit", limit).WithRetryAfter(5000)
	}
	d.pending[owner]++
	return func() {
		d.pendingMu.Lock()
		defer d.pendingMu.Unlock()
		if d.pending[owner]--; d.pending[owner] <= 0 {
			delete(d.pending, owner)
		}
	}, nil
}

func (d *Daemon) leaseOut(l core.LeaseRecord) contract.Lease {
	out := contract.Lease{LeaseID: l.ID, RequesterID: l.RequesterID, OwnerID: l.OwnerID, DeviceID: l.DeviceID,
		Platform: l.Platform, GrantedAt: l.GrantedAt.UTC(), ExpiresAt: l.ExpiresAt.UTC(), LastRenewedAt: l.LastRenewedAt.UTC(),
		TTLMs: l.TTL.Milliseconds(), RequestID: l.RequestID, Timing: timingOut(l.Timing), Resources: l.Resources}
	if dev, ok := d.engine.Device(l.DeviceID); ok {
		cd := d.deviceOut(dev, l.ID)
		out.Device = &cd
	}
	if len(l.Members) > 0 {
		for _, id := range l.DeviceIDs() {
			if dev, ok := d.engine.Device(id); ok {
				out.Devices = append(out.Devices, d.deviceOut(dev, l.ID))
			}
		}
	}
	return out
}

func (d *Daemon) statusGet(_ context.Context, call *dispatch.Call, _ contract.StatusGetIn) (contract.StatusGetOut, error) {
	out := contract.StatusGetOut{Daemon: d.daemonInfo(), Devices: []contract.Device{}, Leases: []contract.Lease{}, Queue: []contract.QueueEntry{}, QueueByPlatform: map[string]int{}}
	if !d.isReady() {
		return out, nil // nothing is loaded before convergence finishes
	}
	// One engine read: devices, leases, queue and capacity at one instant.
	snap := d.engine.Status()
	out.WarmPool = warmPoolOut(d.engine.Warm().WarmPool())
	leaseOf := map[string]string{}
	for _, l := range snap.Leases {
		for _, id := range l.DeviceIDs() {
			leaseOf[id] = l.ID
		}
	}
	for _, r := range snap.Devices {
		out.Devices = append(out.Devices, d.deviceOut(r, leaseOf[r.ID]))
	}
	// Devices are everyone's to see; leases only their owners' (all, for admin).
	for _, l := range snap.Leases {
		if owns(call.Session, l) {
			out.Leases = append(out.Leases, d.leaseOut(l))
		}
	}
	c := snap.Capacity
	out.Capacity = contract.Capacity{Strategy: c.Strategy, MaxRunning: c.Limits.MaxRunning, MaxManaged: c.Limits.MaxManaged,
		Running: c.Global.Running, Managed: c.Global.Managed, Reserved: c.Global.Reserved, Platforms: map[string]contract.PlatformCapacity{},
		RAMBudgetBytes: c.Limits.RAMBudget, RAMUsedBytes: c.Global.RAMBytes, CPUBudgetMilli: c.Limits.CPUBudget, CPUUsedMilli: c.Global.CPUMilli}
	if len(c.DeviceRAM) > 0 {
		out.Capacity.DeviceRAMBytes = c.DeviceRAM
	}
	out.Capacity.Host = d.claims.HostCapacityOut(c.Host)
	for p, u := range c.Platforms {
		pl := c.Limits.Platforms[p]
		out.Capacity.Platforms[p] = contract.PlatformCapacity{MaxRunning: pl.MaxRunning, MaxManaged: pl.MaxManaged,
			Running: u.Running, Managed: u.Managed, Reserved: u.Reserved, RAMUsedBytes: u.RAMBytes}
	}
	out.Queue, out.QueueDepth, out.QueueByPlatform, out.QueueNextCursor = core.WireQueue(snap.Queue), snap.QueueDepth, snap.QueueByPlatform, contract.QueueCursor(snap.QueueNext)
	out.Goldens = goldensOut(d.engine.Goldens().GoldenStatus())
	return out, nil
}

// goldensOut is the engine's golden report on the wire; nil when there is
// nothing to show.
func goldensOut(r core.GoldenReport) *contract.Goldens {
	if len(r.Devices) == 0 && len(r.Refused) == 0 {
		return nil
	}
	out := &contract.Goldens{}
	for _, g := range r.Devices {
		gd := contract.GoldenDevice{Platform: g.Platform, ModelID: g.ModelID, RuntimeID: g.RuntimeID, Handle: g.Handle, State: g.State}
		if g.State == core.GoldenStateStuck {
			at := g.RetryAt.UTC()
			gd.RetryAt, gd.Error = &at, g.StuckErr
		}
		out.Devices = append(out.Devices, gd)
	}
	for _, n := range r.Refused {
		out.NotBuilt = append(out.NotBuilt, contract.GoldenNotBuilt{Platform: n.Platform, ModelID: n.ModelID, RuntimeID: n.RuntimeID,
			Reason: n.Reason, Retrying: n.Retrying})
	}
	return out
}

func (d *Daemon) eventsSubscribe(ctx context.Context, call *dispatch.Call, in contract.EventsSubscribeIn) (contract.EventsSubscribeOut, error) {
	return dispatch.ServeEvents(ctx, call, d.bus, d.journal, d.clock.Now(), in, d.stopped, nil)
}

// Token secrets are random and shown once; only their SHA-256 is stored.
func (d *Daemon) tokenCreate(ctx context.Context, _ *dispatch.Call, in contract.TokenCreateIn) (contract.TokenCreateOut, error) {
	switch in.Role {
	case contract.TokenRoleAgent, contract.TokenRoleOperator, contract.TokenRoleWorker:
	default:
		return contract.TokenCreateOut{}, contract.Errorf(contract.CodeBadRequest, "role must be agent, operator or worker, not %q", in.Role)
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	secret := "slk_" + base64.RawURLEncoding.EncodeToString(raw[:])
	var idb [6]byte
	_, _ = rand.Read(idb[:])
	rec := store.TokenRecord{ID: "tok_" + hex.EncodeToString(idb[:]), Name: in.Name, Role: in.Role,
		Hash: hashSecret(secret), CreatedAt: d.clock.Now().UTC()}
	if rec.Name == "" {
		rec.Name = rec.ID
	}
	if err := d.db.CreateToken(ctx, rec); err != nil {
		return contract.TokenCreateOut{}, err
	}
	return contract.TokenCreateOut{ID: rec.ID, Role: rec.Role, Name: rec.Name, Token: secret, CreatedAt: rec.CreatedAt}, nil
}

// passthrough asks the driver that wraps the tool for the root-scoped
// command; the refusal list is the driver's own.
func (d *Daemon) passthrough(_ context.Context, _ *dispatch.Call, in contract.PassthroughIn) (contract.PassthroughOut, error) {
	if err := d.slots.GuardArgs(in.Args); err != nil {
		return contract.PassthroughOut{}, err
	}
	var known []string
	for _, p := range d.engine.Platforms() {
		drv, _ := d.engine.Driver(p)
		pt, ok := drv.(core.Passthrougher)
		if !ok {
			continue
		}
		for _, tool := range pt.PassthroughTools() {
			known = append(known, tool)
			if tool != in.Tool {
				continue
			}
			// No lease names a device here: the local caller can reach the whole
			// root anyway, so only the refusal list applies.
			cmd, err := pt.ResolvePassthrough(in.Tool, in.Args, core.PassthroughScope{Terminal: in.Terminal})
			if err != nil {
				return contract.PassthroughOut{}, err
			}
			args := cmd.Args
			if args == nil {
				args = []string{}
			}
			return contract.PassthroughOut{Platform: p, Command: cmd.Name, Args: args, Env: cmd.Env}, nil
		}
	}
	return contract.PassthroughOut{}, core.NewSpecError(core.ErrUnknownTool,
		fmt.Sprintf("no driver wraps %q", in.Tool), "tools", known)
}

// daemonInfo is the daemon block of status.get, for either mode.
func (d *Daemon) daemonInfo() contract.DaemonInfo {
	return contract.DaemonInfo{Version: d.version, PID: d.pid, Health: d.health(), Mode: d.cfg.Mode,
		InstanceID: d.instanceID, StartedAt: d.startedAt.UTC().Truncate(time.Millisecond), Socket: d.paths.Socket,
		Home: d.paths.Home, HTTP: d.httpAddr}
}

// maxIdempotencyKey bounds a key: it is stored and echoed in receipts.
const maxIdempotencyKey = 256

func checkIdempotencyKey(k string) error {
	if len(k) > maxIdempotencyKey {
		return contract.Errorf(contract.CodeBadRequest, "idempotencyKey is %d bytes, at most %d", len(k), maxIdempotencyKey)
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f || unicode.Is(unicode.Bidi_Control, r) {
			return contract.Errorf(contract.CodeBadRequest, "idempotencyKey holds a control character (%U)", r)
		}
	}
	return nil
}

// leaseRequestStatus reads a request's receipt; an agent sees only its own.
func (d *Daemon) leaseRequestStatus(_ context.Context, call *dispatch.Call, in contract.LeaseRequestStatusIn) (contract.LeaseRequestReceipt, error) {
	st, err := d.engine.Requests().RequestStatus(in.RequestID)
	if err != nil {
		return contract.LeaseRequestReceipt{}, err
	}
	rec := st.Record
	if call.Session.Role != contract.RoleAdmin && rec.OwnerID != call.Session.Principal {
		return contract.LeaseRequestReceipt{}, contract.Errorf(contract.CodeForbidden, "lease request %s belongs to another principal", rec.ID)
	}
	out := contract.LeaseRequestReceipt{RequestID: rec.ID, RequesterID: rec.RequesterID, OwnerID: rec.OwnerID,
		IdempotencyKey: rec.IdempotencyKey, Platform: rec.Platform, State: string(rec.State), QueuePosition: st.QueuePosition,
		LeaseID: rec.LeaseID, Interrupted: rec.Interrupted, CreatedAt: rec.CreatedAt.UTC(), UpdatedAt: rec.UpdatedAt.UTC(),
		Timing: timingOut(rec.Timing)}
	if st.Lease != nil {
		l := d.leaseOut(*st.Lease)
		out.Lease = &l
	}
	if rec.Error != nil {
		out.Error = toContractError(&core.RequestError{Code: rec.Error.Code, Message: rec.Error.Message, Retryable: rec.Error.Retryable})
	}
	return out, nil
}

// classifyRefusal names a refusal for a request's receipt with the same
// mapping every answer uses.
func classifyRefusal(err error) core.RequestError {
	ce := toContractError(err)
	return core.RequestError{Code: string(ce.Code), Message: ce.Message, Retryable: ce.Retryable}
}

// timingOut maps a timing record onto the contract: milliseconds, and only
// the phases that were measured.
func timingOut(t *core.Timing) *contract.LeaseTiming {
	if t == nil {
		return nil
	}
	out := &contract.LeaseTiming{Path: t.Path, QueueWaitMs: t.QueueWait.Milliseconds(), TotalMs: t.Total.Milliseconds()}
	for phase, dst := range map[string]**int64{core.PhaseDownload: &out.DownloadMs, core.PhaseEvict: &out.EvictMs,
		core.PhaseProvision: &out.ProvisionMs, core.PhaseBoot: &out.BootMs, core.PhaseReadiness: &out.ReadinessMs} {
		if v, ok := t.Phases[phase]; ok {
			ms := v.Milliseconds()
			*dst = &ms
		}
	}
	return out
}
