package daemon

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/drivers/ios"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
)

// buildDrivers constructs the enabled drivers. A platform whose tools are
// missing is skipped with a warning rather than failing the daemon: a Mac
// without the Android SDK still serves iOS.
func buildDrivers(o Options, diag func(platform string) func(core.Diagnostic), androidPorts android.PortAllocator) ([]core.Driver, error) {
	guard := &diskGuard{stats: o.Stats}
	var out []core.Driver
	if o.Config.Drivers.IOS.On() && toolsPresent(o, "ios", "xcrun") {
		root, err := filepath.Abs(o.Config.DriverRoot(o.Home, "ios"))
		if err != nil {
			return nil, err
		}
		// In default device-set mode the root keeps only simlock's own state;
		// the devices go to the user's default set (ADR 0033).
		drv, err := ios.New(ios.Options{Root: root, Runner: o.Runner, FS: o.FS, Clock: o.Clock,
			Logger: ports.Module(o.Logger, "driver.ios"), OnDiagnostic: diag("ios"), DiskGuard: guard,
			DefaultSet: o.Config.IOSDeviceSet() == config.DeviceSetDefault,
			Slim:       ios.Slim{Enabled: o.Config.Drivers.IOS.Slim.Enabled, Groups: o.Config.Drivers.IOS.Slim.Groups},
			Clone:      ios.Clone{Enabled: o.Config.Drivers.IOS.Clone.On()}})
		if err != nil {
			return nil, fmt.Errorf("ios driver: %w", err)
		}
		out = append(out, drv)
	}
	if o.Config.Drivers.Android.On() && toolsPresent(o, "android", "adb", "emulator", "avdmanager") {
		root, err := filepath.Abs(o.Config.DriverRoot(o.Home, "android"))
		if err != nil {
			return nil, err
		}
		drv, err := android.New(android.Options{Root: root, Runner: o.Runner, FS: o.FS, Clock: o.Clock,
			Logger: ports.Module(o.Logger, "driver.android"), OnDiagnostic: diag("android"), DiskGuard: guard,
			Ports: androidPorts, AcceptLicenses: o.Config.Downloads.AcceptLicenses,
			NoAudio: o.Getenv("SIMLOCK_EMULATOR_AUDIO") == "false"})
		if err != nil {
			return nil, fmt.Errorf("android driver: %w", err)
		}
		out = append(out, drv)
	}
	return out, nil
}

// androidPorts leases the Android driver's adb server and console ports
// from the host registry as this daemon (ADR 0025), so two homes on one
// host never share one. openHost has run by the time drivers are built.
func (d *Daemon) androidPorts() android.PortAllocator {
	return &android.HostPorts{DB: d.host, Owner: d.self, Clock: d.clock}
}

// toolsPresent reports whether the platform's tools are on PATH. A driver
// whose tools are missing is not started: the platform then answers
// UNSUPPORTED_PLATFORM naming what is available, rather than failing every
// request with a tool-not-found error.
func toolsPresent(o Options, platform string, tools ...string) bool {
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			o.Logger.Warn("platform tools not found; driver not started", "platform", platform, "tool", t)
			return false
		}
	}
	return true
}

// diskGuard reserves disk space for component installs across every driver,
// so two concurrent multi-GB downloads cannot each see enough free space and
// jointly overfill the volume.
type diskGuard struct {
	stats ports.SystemStats
	mu    sync.Mutex
	held  uint64
}

func (g *diskGuard) Reserve(path string, bytes uint64) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	free, err := g.stats.FreeDiskBytes(path)
	if err != nil {
		return nil, fmt.Errorf("read free disk space: %w", err)
	}
	avail := uint64(0)
	if free > g.held {
		avail = free - g.held
	}
	if avail < bytes {
		return nil, core.NewSpecError(core.ErrInsufficientDisk,
			fmt.Sprintf("installing needs about %d bytes free, %d are available", bytes, avail),
			"requiredBytes", bytes, "availableBytes", avail)
	}
	g.held += bytes
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.held -= bytes
			g.mu.Unlock()
		})
	}, nil
}

// diagnostic bridges a driver's diagnostics onto the event bus (drivers never
// see the bus), into the durable log for component installs, and, for an
// install a lease request caused, into that request's progress pushes.
func (d *Daemon) diagnostic(platform string) func(core.Diagnostic) {
	return func(dg core.Diagnostic) {
		d.bus.Publish(events.Event{Type: dg.Type, Platform: platform, RequesterID: dg.RequesterID, Reason: dg.Message, Data: dg.Data})
		switch dg.Type {
		case "component.installed", "component.install-failed":
			d.log.Info(dg.Type, "platform", platform, "requesterId", dg.RequesterID, "message", dg.Message, "data", dg.Data)
		}
		if dg.RequesterID == "" {
			return
		}
		if f, ok := d.progressFor.Load(dg.RequesterID); ok {
			phase := map[string]string{"component.install-started": "downloading", "component.install-progress": "downloading",
				"component.installed": "installed", "component.install-failed": "install-failed"}[dg.Type]
			if phase != "" {
				msg := dg.Message
				if pct, ok := dg.Data["percent"]; ok {
					msg = fmt.Sprintf("%v%% %s", pct, msg)
				}
				f.(func(contract.Progress))(contract.Progress{Phase: phase, Message: msg})
			}
		}
	}
}

// StandaloneDrivers builds the drivers o's configuration enables, wired as
// a daemon wires them, for a command that drives them without a daemon
// (simlock selftest). Android ports are leased from the host registry as
// o.Home, so they never collide with a running daemon's; done gives them
// back and closes the registry.
func StandaloneDrivers(ctx context.Context, o Options) (drivers []core.Driver, done func(), err error) {
	o = o.withDefaults()
	dir := o.HostDir
	if dir == "" {
		dir = config.HostDir(o.Getenv)
	}
	host, err := hostreg.Open(ctx, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open the host registry in %s (SIMLOCK_HOST_DIR): %w", dir, err)
	}
	home, err := filepath.Abs(o.Home)
	if err != nil {
		host.Close()
		return nil, nil, err
	}
	self, err := hostreg.Self(home)
	if err != nil {
		host.Close()
		return nil, nil, fmt.Errorf("host registry: %w", err)
	}
	noDiag := func(string) func(core.Diagnostic) { return func(core.Diagnostic) {} }
	drivers, err = buildDrivers(o, noDiag, &android.HostPorts{DB: host, Owner: self, Clock: o.Clock})
	if err != nil {
		host.Close()
		return nil, nil, err
	}
	done = func() {
		// Ports this home still leases (its adb server's) end with it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if st, err := host.Ports(rctx); err == nil {
			for _, p := range st {
				if p.Lease.Owner == self {
					_ = host.ReleasePort(rctx, p.Lease.Port, self)
				}
			}
		}
		host.Close()
	}
	return drivers, done, nil
}
