package daemon

import (
	"context"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/sessions"
)

// The session broker is internal/sessions; the daemon builds it, hands it
// what it asks for (sessionHost below, the engine, the store, the bus) and
// serves its operations.

func (d *Daemon) newBroker(o Options) *sessions.Broker {
	return sessions.NewBroker(sessions.Config{Sessions: o.Config.Sessions, Store: d.db, Meta: d.db, Engine: d.engine,
		Watch: d.engine.Watch(), Resets: d.engine.Resets(), Retirer: d.engine.OwnerSystems(), Bus: d.bus, Host: sessionHost{d}, Clock: d.clock, Log: ports.Module(o.Logger, "sessions"),
		Instance: d.instanceID, MapError: toContractError})
}

// sessionHost is the daemon as the broker sees it (sessions.Host).
type sessionHost struct{ d *Daemon }

var _ sessions.Host = sessionHost{}

func (h sessionHost) StopBegun() bool { return h.d.stopBegun() }

func (h sessionHost) DeviceOut(r core.DeviceRecord, leaseID string) contract.Device {
	return h.d.deviceOut(r, leaseID)
}

func (h sessionHost) CatalogWithin(ctx context.Context, platform string) (core.Catalog, bool, error) {
	o := h.d.inv.CatalogWithin(ctx, platform)
	return o.Val, o.Done, o.Err
}

// registerSessions installs the session operations and capabilities.get.
func (d *Daemon) registerSessions(disp *dispatch.Dispatcher) {
	b := d.sessions
	dispatch.Handle(disp, contract.CapabilitiesGet, func(context.Context, *dispatch.Call, contract.CapabilitiesGetIn) (contract.CapabilitiesGetOut, error) {
		return contract.CapabilitiesGetOut{Contracts: d.contracts()}, nil
	})
	dispatch.Handle(disp, contract.SessionPrepare, b.Prepare)
	dispatch.Handle(disp, contract.SessionStatus, b.Status)
	dispatch.Handle(disp, contract.SessionAbandon, b.Abandon)
	dispatch.Handle(disp, contract.SessionRelease, b.Release)
	dispatch.Handle(disp, contract.SessionHeartbeat, b.Heartbeat)
	dispatch.Handle(disp, contract.SessionInfo, b.Info)
	dispatch.Handle(disp, contract.SessionStats, b.Stats)
	dispatch.Handle(disp, contract.SessionGetExport, b.GetExport)
	dispatch.Handle(disp, contract.SessionAcknowledgeExport, b.AcknowledgeExport)
}

// contracts lists what capabilities.get answers. Other features append
// theirs to d.extraContracts when they are configured (managed-slots/v1).
func (d *Daemon) contracts() []string {
	out := []string{}
	if d.sessions.Configured() {
		out = append(out, contract.ContractSessionBroker, contract.ContractSessionBrokerExport)
	}
	return append(out, d.extraContracts...)
}
