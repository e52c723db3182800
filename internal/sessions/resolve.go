package sessions

import (
	"context"
	"fmt"
	"slices"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/requirements"
)

// catalogRetryAfterMs paces a retry after the catalog read did not finish:
// the shared read goes on in the background and usually lands within it.
const catalogRetryAfterMs = 1000

// Resolve turns a session's device requirement into the profile its
// lease asks the core for, through the operator's `sessions` defaults and
// this host's catalog (internal/requirements, ADR 0046).
//
// The operator's mapping is applied before the catalog is read, so an
// unmapped archetype is UNSUPPORTED_HARDWARE however the catalog read
// goes; nothing is reserved either way.
func (b *Broker) Resolve(ctx context.Context, req contract.DeviceRequirement) (contract.SessionProfile, error) {
	if b.cfg == nil {
		return contract.SessionProfile{}, contract.Errorf(contract.CodeSessionsNotConfigured, "this daemon's config has no sessions section")
	}
	plan, err := requirements.PlanFor(*b.cfg, req)
	if err != nil {
		return contract.SessionProfile{}, err
	}
	cat, err := b.catalog(ctx, req.Platform)
	if err != nil {
		return contract.SessionProfile{}, err
	}
	return plan.Bind(cat)
}

// catalog is the catalog view of one platform's driver catalog,
// read within inventory.catalogBudgetMs like catalog.get.
func (b *Broker) catalog(ctx context.Context, platform string) (requirements.Catalog, error) {
	if !slices.Contains(b.engine.Platforms(), platform) {
		return requirements.Catalog{}, contract.Errorf(contract.CodeUnsupportedPlatform,
			"no driver serves platform %s on this host (serving: %v)", platform, b.engine.Platforms())
	}
	val, done, err := b.host.CatalogWithin(ctx, platform)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return requirements.Catalog{}, ctx.Err()
		}
		return requirements.Catalog{}, contract.Errorf(contract.CodeDiscoveryIncomplete,
			"the %s catalog could not be read: %v", platform, err).WithRetryAfter(catalogRetryAfterMs)
	case !done:
		return requirements.Catalog{}, contract.Errorf(contract.CodeDiscoveryIncomplete,
			"the %s catalog did not finish within inventory.catalogBudgetMs", platform).WithRetryAfter(catalogRetryAfterMs)
	}
	var ios, android core.Catalog
	switch platform {
	case requirements.PlatformIOS:
		ios = val
	case requirements.PlatformAndroid:
		android = val
	default:
		return requirements.Catalog{}, fmt.Errorf("session catalog: unknown platform %q", platform)
	}
	return requirements.FromCore(ios, android), nil
}

// LeaseRequest is the lease request a resolved profile makes: the
// spec fields only; the broker adds the identity, TTL and release policy.
// An Android profile's memoryMb goes in as the emulator's RAM, which is part
// of the spec a warm device must match, so it constrains reuse as well as
// creation.
func LeaseRequest(p contract.SessionProfile) contract.LeaseRequestIn {
	in := contract.LeaseRequestIn{Platform: p.Platform, Model: p.Model, OSVersion: p.OSVersion}
	if p.Platform == requirements.PlatformAndroid && p.MemoryMB > 0 {
		in.Hardware = &contract.AndroidHardware{MemoryMB: p.MemoryMB}
	}
	return in
}
