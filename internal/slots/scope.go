package slots

import (
	"context"
	"sort"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/hostreg"
)

func (m *Manager) ResetScope(ctx context.Context, _ *dispatch.Call, in contract.SlotResetScopeIn) (contract.SlotResetScopeOut, error) {
	if in.RunnerNamespace == "" || in.RunnerIncarnation == "" {
		return contract.SlotResetScopeOut{}, contract.Errorf(contract.CodeBadRequest, "runnerNamespace and runnerIncarnation are required")
	}
	wait := int64(defaultResetMs)
	if in.WaitMs != nil {
		wait = *in.WaitMs
	}
	if wait < 0 || wait > maxResetMs {
		return contract.SlotResetScopeOut{}, contract.Errorf(contract.CodeBadRequest, "waitMs %d is outside 0..%d", wait, maxResetMs)
	}
	deadline := m.clock.Now().Add(time.Duration(wait) * time.Millisecond)
	for {
		reps, err := m.reg.ResetScope(ctx, in.RunnerNamespace, in.RunnerIncarnation, in.ManagedHostScope, in.Force, m.clock.Now())
		if err != nil {
			return contract.SlotResetScopeOut{}, err
		}
		out := contract.SlotResetScopeOut{Outcome: "invalidated", Scopes: []contract.SlotScopeReset{}}
		if len(reps) == 0 {
			out.Outcome = "no_match"
			return out, nil
		}
		freed := false
		for _, r := range reps {
			s := contract.SlotScopeReset{ScopeKey: r.Scope.Key, ManagedHostScope: r.Scope.HostScope, State: r.State, LiveOwners: r.LiveOwners,
				Settling: r.Settling, CleanupPending: r.CleanupPending, OpenJournal: r.OpenJournal, DevicesToFreePool: r.FreedDevices}
			for _, f := range r.ForceRefusals {
				fr := contract.SlotForceRefusal{SlotIndex: f.SlotIndex, Reason: f.Reason, Message: f.Message}
				if f.Reason == "within_settlement_cap" {
					rem := f.RemainingMs
					fr.RemainingMs = &rem
				}
				s.ForceRefusals = append(s.ForceRefusals, fr)
			}
			if r.State != hostreg.ScopeInvalidated {
				out.Outcome = "waiting"
			}
			freed = freed || len(r.FreedDevices) > 0
			out.Scopes = append(out.Scopes, s)
		}
		if freed {
			m.Refresh(ctx)
		}
		if out.Outcome == "invalidated" || !m.clock.Now().Before(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, nil
		case <-m.clock.After(250 * time.Millisecond):
		}
	}
}

func (m *Manager) List(ctx context.Context, _ *dispatch.Call, _ contract.SlotListIn) (contract.SlotListOut, error) {
	scopes, err := m.reg.Scopes(ctx)
	if err != nil {
		return contract.SlotListOut{}, err
	}
	byKey := map[string]hostreg.SlotScope{}
	for _, s := range scopes {
		byKey[s.Key] = s
	}
	recs, err := m.reg.Slots(ctx)
	if err != nil {
		return contract.SlotListOut{}, err
	}
	out := contract.SlotListOut{Assignments: []contract.SlotAssignment{}, FreePool: []contract.SlotDevice{}}
	for _, r := range recs {
		s := byKey[r.ScopeKey]
		a := contract.SlotAssignment{ScopeKey: r.ScopeKey, ManagedHostScope: s.HostScope, RunnerNamespace: s.Namespace, RunnerIncarnation: s.Incarnation,
			ScopeState: s.State, SlotIndex: r.SlotIndex, State: r.State, AssignmentGeneration: r.Generation, Platform: r.Device.Platform}
		if r.Device.StableID != "" {
			a.Device = &contract.SlotDevice{StableID: r.Device.StableID, Name: r.Device.Name}
			if dev, ok := m.named.FindDevice(r.Device.Platform, r.Device.StableID); ok {
				a.Device.DeviceID, a.Device.TransportID = dev.ID, transportID(dev)
			}
			req, res := decodeSlotSpec(r.Requested), decodeSlotSpec(r.Device.Resolved)
			a.RequestedSpec, a.ResolvedSpec = &req, &res
			a.SpecFingerprint = &contract.SpecFingerprint{Version: r.FPVersion, Hash: r.Device.FPHash}
		}
		if r.Owner != nil {
			a.LeaseID = r.Owner.LeaseID
		}
		out.Assignments = append(out.Assignments, a)
	}
	free, err := m.reg.FreePool(ctx)
	if err != nil {
		return contract.SlotListOut{}, err
	}
	for _, f := range free {
		out.FreePool = append(out.FreePool, contract.SlotDevice{StableID: f.StableID, Name: f.Name})
	}
	sort.SliceStable(out.Assignments, func(i, j int) bool { return out.Assignments[i].ScopeKey < out.Assignments[j].ScopeKey })
	return out, nil
}
