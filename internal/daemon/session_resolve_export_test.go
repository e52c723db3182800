package daemon

import (
	"context"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/sessions"
)

// ResolveSession and SessionLeaseRequest let the daemon_test package reach
// the session resolver through a running daemon.
func (d *Daemon) ResolveSession(ctx context.Context, req contract.DeviceRequirement) (contract.SessionProfile, error) {
	return d.sessions.Resolve(ctx, req)
}

func SessionLeaseRequest(p contract.SessionProfile) contract.LeaseRequestIn {
	return sessions.LeaseRequest(p)
}
