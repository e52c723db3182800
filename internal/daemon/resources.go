package daemon

// Device descriptions, the inventory (list.get, catalog.get) and the
// resources.* operations are internal/resources'; device.upload's
// per-lease scratch directories are internal/uploads'. The daemon builds
// them over its engine and routes their handlers.

import (
	"context"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/resources"
	"github.com/simlock/simlock/internal/uploads"
)

// startInventory builds the inventory and the uploads over the daemon's
// life (sctx), with the inventory's shared reads invalidated by the facts
// that change them.
func (d *Daemon) startInventory(sctx context.Context, o Options, stats ports.SystemStats) {
	d.inv = resources.NewInventory(sctx, d.cfg.Inventory, d.clock, d.engine)
	observeBus(sctx, d.bus, d.inv.Invalidate)
	d.uploads = uploads.New(sctx, uploads.Config{Home: o.Home, MaxBytes: o.Config.Upload.MaxBytes,
		Reserve: o.Config.DiskPressure.FreeBytesThreshold, Free: func() (uint64, error) { return stats.FreeDiskBytes(o.Home) },
		Leases: d.engine, Ends: d.engine.Watch(), TouchLease: d.sessions.TouchLease, Log: ports.Module(o.Logger, "uploads")})
}

// registerResources installs list.get, catalog.get, device.upload and
// resources.get/set/reconcile.
func (d *Daemon) registerResources(disp *dispatch.Dispatcher) {
	dispatch.Handle(disp, contract.ListGet, d.inv.List)
	dispatch.Handle(disp, contract.CatalogGet, d.inv.CatalogGet)
	dispatch.Handle(disp, contract.DeviceUpload, d.uploads.Upload)
	t := resources.NewTuning(d.engine, d.engine.Resources(), d.cfg.Resources.Enabled, d.sessions.TouchLease)
	dispatch.Handle(disp, contract.ResourcesGet, t.Get)
	dispatch.Handle(disp, contract.ResourcesSet, t.Set)
	dispatch.Handle(disp, contract.ResourcesReconcile, t.Reconcile)
}

// deviceOut describes a registry record (resources.Describe), with the
// live observation when a fresh one is at hand: status and lease grants
// never start a listing of their own.
func (d *Daemon) deviceOut(r core.DeviceRecord, leaseID string) contract.Device {
	return d.inv.DeviceOut(r, leaseID)
}
