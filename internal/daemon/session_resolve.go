package daemon

import (
	"context"

	"github.com/simlock/simlock/contract"
)

// resolveSession turns a session's device requirement into the profile its
// lease asks the core for, through the operator's `sessions` defaults and
// the host's catalog.
//
// This first version serves only the exact form the session tests use
// while the resolver is built (ADR to come): hardware {kind: model,
// model: {namespace: "simlock-model", value: <catalog model name>}} with an
// exact OS or none. Everything else is UNSUPPORTED_HARDWARE.
func (d *Daemon) resolveSession(_ context.Context, req contract.DeviceRequirement) (contract.SessionProfile, error) {
	h := req.Hardware
	if h == nil || h.Kind != contract.HardwareModel || h.Model == nil || h.Model.Namespace != "simlock-model" {
		return contract.SessionProfile{}, contract.Errorf(contract.CodeUnsupportedHardware, "this daemon does not resolve that hardware requirement yet")
	}
	p := contract.SessionProfile{Platform: req.Platform, Model: h.Model.Value, ModelIdentifier: h.Model}
	if req.OS != nil && req.OS.Kind == contract.OSExact {
		p.OSVersion = req.OS.Version
	}
	return p, nil
}

// sessionLeaseRequest is the lease request a resolved profile makes: the
// spec fields only; the broker adds the identity, TTL and release policy.
func sessionLeaseRequest(p contract.SessionProfile) contract.LeaseRequestIn {
	return contract.LeaseRequestIn{Platform: p.Platform, Model: p.Model, OSVersion: p.OSVersion}
}
