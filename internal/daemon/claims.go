package daemon

// Device claims and host capacity (ADRs 0022, 0023, 0059, 0061, 0064, 0065)
// are internal/claims': the daemon opens the host registry, builds the
// claims.System over it, hands the engine its hooks, starts its loops in
// startup's order and routes device.release to it. What stays here is
// the driver wiring a recovery of another home's device needs.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/simlock/simlock/internal/claims"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/store"
)

// openHost opens the host registry, names this daemon as a claim owner
// (its home, its pid and its process start identity) and builds the
// claims system over them, which records this home in the host directory.
func (d *Daemon) openHost(ctx context.Context, o Options) error {
	dir := o.HostDir
	if dir == "" {
		dir = config.HostDir(o.Getenv)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	prober := o.Prober
	if prober == nil {
		prober = hostreg.SystemProber{}
	}
	if d.host, err = hostreg.OpenWithProber(ctx, dir, prober); err != nil {
		var dmg *hostreg.DamagedError
		if errors.As(err, &dmg) {
			return toContractError(err) // HOST_REGISTRY_DAMAGED: no restart can succeed
		}
		return fmt.Errorf("open the host registry in %s (SIMLOCK_HOST_DIR): %w", dir, err)
	}
	home, err := filepath.Abs(o.Home)
	if err != nil {
		return err
	}
	if d.self, err = hostreg.Self(home); err != nil {
		return fmt.Errorf("host registry: %w", err)
	}
	roots, err := claims.DeviceRoots(o.Config, o.Home)
	if err != nil {
		return err
	}
	d.claims = claims.New(claims.Config{Registry: d.host, Self: d.self, Roots: roots, HostDir: dir,
		Host: o.Config.Capacity.Host, Clock: o.Clock, StartedAt: d.startedAt,
		Logger: d.log, HooksLogger: ports.Module(o.Logger, "claims"), Bus: d.bus,
		Follow:       func(ctx context.Context, f func(events.Event)) { observeBus(ctx, d.bus, f) },
		EventDevices: eventDevices,
		Owners:       recovery(o.Getenv),
		GuardDevice:  func(id string) error { return d.slots.GuardDevice(id) }})
	return nil
}

// recovery reaches other homes' devices with this daemon's driver wiring.
func recovery(getenv func(string) string) claims.Recovery {
	return claims.Recovery{Build: ownerDriver, Runner: ports.ExecRunner{}, Getenv: getenv}
}

// ReconcileDevice shuts down the device key names the way ownerHome's own
// daemon would, for `device release --stale` and `--force` when that daemon
// is gone or cannot cooperate (claims.Recovery.Reconcile).
func ReconcileDevice(ctx context.Context, ownerHome string, getenv func(string) string, key hostreg.Key) (notFound bool, err error) {
	return recovery(getenv).Reconcile(ctx, ownerHome, key)
}

// RepairHost rebuilds a damaged host registry (claims.RepairHost, `simlock
// host repair`), reading a stopped home's devices and leases from its home
// store.
func RepairHost(ctx context.Context, o claims.RepairOptions) (claims.RepairReport, error) {
	o.LoadStore = loadHomeStore
	return claims.RepairHost(ctx, o)
}

// loadHomeStore reads the home store at path. The caller holds the home
// lock, so no daemon has the store open.
func loadHomeStore(ctx context.Context, path string) (core.Snapshot, error) {
	db, err := store.Open(ctx, path)
	if err != nil {
		return core.Snapshot{}, err
	}
	defer db.Close()
	return db.Load(ctx)
}

// ownerDriver builds ownerHome's platform driver over the owner's
// configuration (a claims.DriverBuilder). done releases what the driver
// needed (the host registry, for Android).
func ownerDriver(ctx context.Context, ownerHome string, cfg config.Config, getenv func(string) string, platform string) (core.Driver, func(), error) {
	o := Options{Home: ownerHome, Config: cfg, Getenv: getenv, Clock: ports.SystemClock{}, Runner: ports.ExecRunner{},
		Stats: ports.HostStats{}, FS: ports.OSFilesystem{}, Logger: slog.New(slog.DiscardHandler)}
	done := func() {}
	// The owner's private adb server port is leased in the host registry:
	// reach the owner's server there, and allocate nothing on its behalf.
	var ap android.PortAllocator
	if platform == "android" {
		host, err := hostreg.Open(ctx, config.HostDir(getenv))
		if err != nil {
			return nil, nil, fmt.Errorf("open the host registry: %w", err)
		}
		done = func() { host.Close() }
		ap = ownerPorts{HostPorts: &android.HostPorts{DB: host}, home: ownerHome}
	}
	drivers, err := buildDrivers(o, func(string) func(core.Diagnostic) { return func(core.Diagnostic) {} }, ap)
	if err != nil {
		done()
		return nil, nil, err
	}
	for _, drv := range drivers {
		if drv.Platform() == platform {
			return drv, done, nil
		}
	}
	done()
	return nil, nil, fmt.Errorf("the %s tools are not available here, so the device could not be shut down", platform)
}

// ownerPorts answers an Android driver built for recovery with the ports
// another home leased, read from the host registry; it leases none itself
// (LeasedPorts is the registry's own answer, from HostPorts).
type ownerPorts struct {
	*android.HostPorts
	home string
}

var errRecoveryLeasesNoPorts = errors.New("recovery leases no ports")

// ADBServerPort is the owner home's leased adb server port.
func (p ownerPorts) ADBServerPort(ctx context.Context) (int, error) {
	all, err := p.DB.Ports(ctx)
	if err != nil {
		return 0, err
	}
	for _, st := range all {
		if l := st.Lease; l.Purpose == hostreg.PortADBServer && l.Owner.Home == p.home {
			return l.Port, nil
		}
	}
	return 0, fmt.Errorf("the host registry names no adb server port for %s", p.home)
}

// ConsolePort hands back the port the AVD already records: recovery only
// reaches an emulator that runs there, and leases nothing new.
func (ownerPorts) ConsolePort(_ context.Context, _ string, want int) (int, error) {
	if want == 0 {
		return 0, errRecoveryLeasesNoPorts
	}
	return want, nil
}

// ReleaseConsole leaves the owner's lease alone: recovery frees no ports.
func (ownerPorts) ReleaseConsole(context.Context, string, int) error { return nil }
