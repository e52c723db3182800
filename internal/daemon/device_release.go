package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/drivers/android"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
)

// settleTimeout bounds how long device.release and daemon.stop's clean pass
// wait for a released device's reclaim to settle before shutting it down.
const settleTimeout = 2 * time.Minute

// deviceRelease gives back the device a host-registry key names, the way
// the daemon gives back any device: the lease holding it is released
// through the ordinary path, the reclaim settles, and the running device is
// shut down through the op executor, whose teardown clears the claim last.
// `simlock device release` and `--force` call it on the owning daemon.
func (d *Daemon) deviceRelease(ctx context.Context, _ *dispatch.Call, in contract.DeviceReleaseIn) (contract.DeviceReleaseOut, error) {
	key, err := hostreg.ParseKey(in.DeviceKey)
	if err != nil {
		return contract.DeviceReleaseOut{}, contract.Errorf(contract.CodeBadRequest, "%v", err).
			WithNext("pass a key as `simlock device status` prints it")
	}
	out := contract.DeviceReleaseOut{DeviceKey: string(key)}
	rec, ok := d.deviceByKey(key)
	if !ok {
		return out, contract.Errorf(contract.CodeUnknownDevice, "this daemon (%s) has no device %s", d.self.Home, key).
			WithNext("`simlock device status " + string(key) + "` shows who holds it")
	}
	out.DeviceID = rec.ID
	if err := d.slots.GuardDevice(rec.ID); err != nil {
		return out, err
	}
	// The claim reads releasing from here on (the reference's close order:
	// mark releasing, tear down, clear the claim last), and claimed again
	// if the release ends with no teardown under way.
	if d.claims != nil {
		if err := d.claims.beginRelease(ctx, key); err != nil {
			return out, err
		}
	}
	for _, l := range d.engine.Leases() {
		if l.Holds(rec.ID) {
			if err := d.engine.Release(l.ID); err != nil && !errors.Is(err, core.ErrUnknownLease) {
				d.endRelease(ctx, key, rec.ID)
				return out, err
			}
			out.LeaseID, out.Action = l.ID, "lease-released"
		}
	}
	// A release, once begun, is finished whether or not its caller waits
	// for it (`device release --wait` gives up at its deadline): the
	// teardown runs on its own context.
	type settled struct {
		stopped bool
		err     error
	}
	done := make(chan settled, 1)
	go func() {
		bg := context.WithoutCancel(ctx)
		stopped, err := d.shutdownSettled(bg, rec.ID, "device-release")
		tearingDown := stopped || out.LeaseID != "" && (errors.Is(err, errNotSettled) || errors.Is(err, core.ErrUnknownDevice))
		if !tearingDown {
			d.endRelease(bg, key, rec.ID) // no teardown under way: the claim is claimed again
		}
		done <- settled{stopped, err}
	}()
	var res settled
	select {
	case res = <-done:
	case <-ctx.Done():
		return out, ctx.Err()
	}
	switch err := res.err; {
	case errors.Is(err, core.ErrUnknownDevice) && out.LeaseID != "":
		return out, nil // the reclaim destroyed it: its teardown cleared the claim
	case errors.Is(err, errNotSettled) && out.LeaseID != "":
		return out, nil // still reclaiming: the claim reads releasing; the caller watches it
	case err != nil:
		return out, err
	case res.stopped:
		out.Action = "shut-down"
	case out.LeaseID == "":
		out.Action = "already-stopped"
	}
	return out, nil
}

// endRelease puts key's claim back to claimed (with the lease holding
// device, if any) after a release that did not tear the device down.
func (d *Daemon) endRelease(ctx context.Context, key hostreg.Key, device string) {
	if d.claims == nil {
		return
	}
	lease := ""
	for _, l := range d.engine.Leases() {
		if l.Holds(device) {
			lease = l.ID
		}
	}
	d.claims.endRelease(context.WithoutCancel(ctx), key, lease)
}

var errNotSettled = errors.New("the device did not settle")

// shutdownSettled waits (bounded) for id to leave the transient states a
// release puts it in, then shuts it down if it is running and idle.
func (d *Daemon) shutdownSettled(ctx context.Context, id, lock string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for {
		r, ok := d.engine.Device(id)
		if !ok {
			return false, core.ErrUnknownDevice
		}
		if r.State != core.StateReclaiming && r.State != core.StateProvisioning {
			break
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %s is still %s", errNotSettled, id, r.State)
		case <-d.clock.After(50 * time.Millisecond):
		}
	}
	return d.engine.ShutdownIdle(ctx, id, lock)
}

// deviceByKey finds this daemon's device with the canonical key.
func (d *Daemon) deviceByKey(key hostreg.Key) (core.DeviceRecord, bool) {
	for _, r := range d.engine.Devices() {
		if r.Handle == "" {
			continue
		}
		if k, err := d.deviceKey(r.Platform, r.Handle, r.Attrs); err == nil && k == key {
			return r, true
		}
	}
	return core.DeviceRecord{}, false
}

// cleanBeforeStop is daemon.stop's clean pass: every lease is released
// through the ordinary path, and every device left running is shut down
// once its reclaim settled, each through the op executor so that its
// claim is cleared by the ordinary teardown. What could not be shut down
// is reported, never assumed.
func (d *Daemon) cleanBeforeStop(ctx context.Context) *contract.DaemonCleanReport {
	rep := &contract.DaemonCleanReport{ReleasedLeases: []string{}, ShutDown: []string{}}
	if d.engine == nil {
		return rep
	}
	if ids := d.engine.ReleaseWhere(func(core.LeaseRecord) bool { return true }); ids != nil {
		rep.ReleasedLeases = ids
	}
	for _, r := range d.engine.Devices() {
		_, err := d.shutdownSettled(ctx, r.ID, "clean")
		switch {
		case errors.Is(err, core.ErrUnknownDevice):
			// destroyed by its reclaim: nothing runs
		case err != nil:
			if rep.Failed == nil {
				rep.Failed = map[string]string{}
			}
			rep.Failed[r.ID] = err.Error()
		default: // shut down now, or already stopped
			rep.ShutDown = append(rep.ShutDown, r.ID)
		}
	}
	return rep
}

// deviceReleaseError maps the refusals of this file (errors.go calls it).
func deviceReleaseError(err error) *contract.Error {
	if errors.Is(err, core.ErrDeviceBusy) {
		return contract.Errorf(contract.CodeDeviceInUse, "%s", err.Error()).
			WithNext("retry once the device's operation settled, or `simlock device status` to see it")
	}
	return nil
}

// ReconcileDevice shuts down the device key names the way ownerHome's own
// daemon would, for `device release --stale` and `--force` when that daemon
// is gone or cannot cooperate: the owner's configuration gives its device
// roots, and the platform driver built over them runs its ordinary
// shutdown (iOS: simctl on the owner's device set; Android: the emulator's
// recorded console port through the owner root's private adb server). The
// cleanup is owner-scoped: a key outside the owner's roots is refused.
// A device its root no longer holds is reported as gone (notFound); when
// the root itself is gone, its device may still run, and is found and
// ended by its process (orphanproc.go).
func ReconcileDevice(ctx context.Context, ownerHome string, getenv func(string) string, key hostreg.Key) (notFound bool, err error) {
	drv, ref, root, done, err := ownerDriver(ctx, ownerHome, getenv, key)
	if gone := (rootGoneError{}); errors.As(err, &gone) {
		found, err := endDeviceProcs(ctx, ports.ExecRunner{}, gone.root, key, consolePortOf(ctx, getenv, ownerHome, key))
		return !found && err == nil, err
	}
	if err != nil {
		return false, err
	}
	defer done()
	shutErr := drv.Shutdown(ctx, ref)
	notFound = errors.Is(shutErr, core.ErrDeviceNotFound)
	// The platform tools end only what they can reach: an emulator its
	// home's adb server no longer knows is out of their sight while its
	// process runs. Whatever still runs the device is ended by its process
	// before the caller clears the claim (orphanproc.go).
	found, err := endDeviceProcs(ctx, ports.ExecRunner{}, root, key, consolePortOf(ctx, getenv, ownerHome, key))
	switch {
	case err != nil:
		return false, err
	case found:
		return false, nil // ended by its process
	case shutErr != nil && !notFound:
		return false, shutErr
	}
	return notFound, nil
}

// ObserveDevice lists the owner's root for the device key names, the way
// ReconcileDevice reaches it, and says whether it runs there; it changes
// nothing. The automatic reclaim (ownership.go) asks it before deciding
// whether a dead owner's device must be shut down or only its claim
// cleared.
func ObserveDevice(ctx context.Context, ownerHome string, getenv func(string) string, key hostreg.Key) (hostreg.DeviceRun, error) {
	drv, ref, root, done, err := ownerDriver(ctx, ownerHome, getenv, key)
	if gone := (rootGoneError{}); errors.As(err, &gone) {
		return observeDeviceProcs(ctx, ports.ExecRunner{}, gone.root, key, consolePortOf(ctx, getenv, ownerHome, key))
	}
	if err != nil {
		return hostreg.DeviceUnknown, err
	}
	defer done()
	obs, err := drv.ListManaged(ctx)
	if err != nil {
		return hostreg.DeviceUnknown, err
	}
	listed := hostreg.DeviceAbsent
	for _, o := range obs {
		if !strings.EqualFold(o.Handle, ref.Handle) {
			continue
		}
		switch o.Run {
		case core.RunRunning:
			return hostreg.DeviceRunning, nil
		case core.RunStopped:
			listed = hostreg.DeviceStopped
		default:
			return hostreg.DeviceUnknown, nil
		}
	}
	// Stopped or absent in a listing is proof only of what the tools see:
	// a fresh driver knows an emulator by its home's adb server, which
	// forgets it when restarted, and one launched just before its daemon
	// died may not have announced itself yet. Its process still names it.
	if run, err := observeDeviceProcs(ctx, ports.ExecRunner{}, root, key, consolePortOf(ctx, getenv, ownerHome, key)); err != nil || run == hostreg.DeviceRunning {
		return hostreg.DeviceRunning, err
	}
	return listed, nil
}

// errRootGone: the owner's device root for the platform does not exist.
var errRootGone = errors.New("the owner's device root no longer exists")

// ownerDriver builds the platform driver of ownerHome for key, over the
// owner's roots (see ReconcileDevice), and the device reference it names.
// done releases what the driver needed (the host registry, for Android).
func ownerDriver(ctx context.Context, ownerHome string, getenv func(string) string, key hostreg.Key) (drv core.Driver, ref core.DeviceRef, root string, done func(), err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := config.Load(config.PathsFor(ownerHome).Config)
	if err != nil {
		return nil, ref, "", nil, fmt.Errorf("read the owner's configuration: %w", err)
	}
	o := Options{Home: ownerHome, Config: cfg, Getenv: getenv, Clock: ports.SystemClock{}, Runner: ports.ExecRunner{},
		Stats: ports.HostStats{}, FS: ports.OSFilesystem{}, Logger: slog.New(slog.DiscardHandler)}
	roots, err := deviceRoots(o)
	if err != nil {
		return nil, ref, "", nil, err
	}
	platform := key.Platform()
	switch {
	case strings.HasPrefix(string(key), "ios:udid:"):
		ref.Handle = strings.TrimPrefix(string(key), "ios:udid:")
	case strings.HasPrefix(string(key), "android:avd:"):
		name, root, _ := strings.Cut(strings.TrimPrefix(string(key), "android:avd:"), ":")
		if root != roots["android"] {
			return nil, ref, "", nil, fmt.Errorf("%s is not in the owner's Android root %s: not the owner's to clean up", key, roots["android"])
		}
		ref.Handle = name
	default:
		return nil, ref, "", nil, fmt.Errorf("no platform cleanup for %s", key)
	}
	ref.ID = string(key)
	// A root that no longer exists is never handed to the platform tools:
	// simctl creates a missing device set, which would bring a deleted home
	// back (and with it, its liveness). Its devices may still run; the
	// callers look for them by process (orphanproc.go).
	if _, err := os.Stat(roots[platform]); errors.Is(err, os.ErrNotExist) {
		return nil, ref, "", nil, rootGoneError{root: roots[platform]}
	}
	root = roots[platform]
	done = func() {}
	// The owner's private adb server port is leased in the host registry:
	// reach the owner's server there, and allocate nothing on its behalf.
	var ap android.PortAllocator
	if platform == "android" {
		host, err := hostreg.Open(ctx, config.HostDir(getenv))
		if err != nil {
			return nil, ref, "", nil, fmt.Errorf("open the host registry: %w", err)
		}
		done = func() { host.Close() }
		ap = ownerPorts{HostPorts: &android.HostPorts{DB: host}, home: ownerHome}
	}
	drivers, err := buildDrivers(o, func(string) func(core.Diagnostic) { return func(core.Diagnostic) {} }, ap)
	if err != nil {
		done()
		return nil, ref, "", nil, err
	}
	for _, drv := range drivers {
		if drv.Platform() == platform {
			return drv, ref, root, done, nil
		}
	}
	done()
	return nil, ref, "", nil, fmt.Errorf("the %s tools are not available here, so the device could not be shut down", platform)
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
