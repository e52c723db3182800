package daemon

import (
	"context"

	"github.com/simlock/simlock/contract"
)

// ResolveSession and SessionLeaseRequest let the daemon_test package reach
// the session resolver through a running daemon.
func (d *Daemon) ResolveSession(ctx context.Context, req contract.DeviceRequirement) (contract.SessionProfile, error) {
	return d.resolveSession(ctx, req)
}

func SessionLeaseRequest(p contract.SessionProfile) contract.LeaseRequestIn {
	return sessionLeaseRequest(p)
}
