package claims

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
)

// settleTimeout bounds how long device.release and daemon.stop's clean pass
// wait for a released device's reclaim to settle before shutting it down.
const settleTimeout = 2 * time.Minute

// DeviceRelease gives back the device a host-registry key names, the way
// the daemon gives back any device: the lease holding it is released
// through the ordinary path, the reclaim settles, and the running device is
// shut down through the op executor, whose teardown clears the claim last.
// `simlock device release` and `--force` call it on the owning daemon.
func (s *System) DeviceRelease(ctx context.Context, _ *dispatch.Call, in contract.DeviceReleaseIn) (contract.DeviceReleaseOut, error) {
	key, err := hostreg.ParseKey(in.DeviceKey)
	if err != nil {
		return contract.DeviceReleaseOut{}, contract.Errorf(contract.CodeBadRequest, "%v", err).
			WithNext("pass a key as `simlock device status` prints it")
	}
	out := contract.DeviceReleaseOut{DeviceKey: string(key)}
	rec, ok := s.deviceByKey(key)
	if !ok {
		return out, contract.Errorf(contract.CodeUnknownDevice, "this daemon (%s) has no device %s", s.self.Home, key).
			WithNext("`simlock device status " + string(key) + "` shows who holds it")
	}
	out.DeviceID = rec.ID
	if err := s.guard(rec.ID); err != nil {
		return out, err
	}
	// The claim reads releasing from here on (the reference's close order:
	// mark releasing, tear down, clear the claim last), and claimed again
	// if the release ends with no teardown under way.
	if err := s.claims.beginRelease(ctx, key); err != nil {
		return out, err
	}
	for _, l := range s.engine.Leases() {
		if l.Holds(rec.ID) {
			if err := s.engine.Release(l.ID); err != nil && !errors.Is(err, core.ErrUnknownLease) {
				s.endRelease(ctx, key, rec.ID)
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
		stopped, err := s.shutdownSettled(bg, rec.ID, "device-release")
		tearingDown := stopped || out.LeaseID != "" && (errors.Is(err, errNotSettled) || errors.Is(err, core.ErrUnknownDevice))
		if !tearingDown {
			s.endRelease(bg, key, rec.ID) // no teardown under way: the claim is claimed again
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
func (s *System) endRelease(ctx context.Context, key hostreg.Key, device string) {
	lease := ""
	for _, l := range s.engine.Leases() {
		if l.Holds(device) {
			lease = l.ID
		}
	}
	s.claims.endRelease(context.WithoutCancel(ctx), key, lease)
}

var errNotSettled = errors.New("the device did not settle")

// shutdownSettled waits (bounded) for id to leave the transient states a
// release puts it in, then shuts it down if it is running and idle.
func (s *System) shutdownSettled(ctx context.Context, id, lock string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for {
		r, ok := s.engine.Device(id)
		if !ok {
			return false, core.ErrUnknownDevice
		}
		if r.State != core.StateReclaiming && r.State != core.StateProvisioning {
			break
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %s is still %s", errNotSettled, id, r.State)
		case <-s.clock.After(50 * time.Millisecond):
		}
	}
	return s.idle.ShutdownIdle(ctx, id, lock)
}

// deviceByKey finds this daemon's device with the canonical key.
func (s *System) deviceByKey(key hostreg.Key) (core.DeviceRecord, bool) {
	for _, r := range s.engine.Devices() {
		if r.Handle == "" {
			continue
		}
		if k, err := s.DeviceKey(r.Platform, r.Handle, r.Attrs); err == nil && k == key {
			return r, true
		}
	}
	return core.DeviceRecord{}, false
}

// CleanBeforeStop is daemon.stop's clean pass: every lease is released
// through the ordinary path, and every device left running is shut down
// once its reclaim settled, each through the op executor so that its
// claim is cleared by the ordinary teardown. What could not be shut down
// is reported, never assumed. Without a system or an engine (a gateway)
// nothing runs, and the report is empty.
func (s *System) CleanBeforeStop(ctx context.Context) *contract.DaemonCleanReport {
	rep := &contract.DaemonCleanReport{ReleasedLeases: []string{}, ShutDown: []string{}}
	if s == nil || s.engine == nil {
		return rep
	}
	if ids := s.engine.ReleaseWhere(func(core.LeaseRecord) bool { return true }); ids != nil {
		rep.ReleasedLeases = ids
	}
	for _, r := range s.engine.Devices() {
		_, err := s.shutdownSettled(ctx, r.ID, "clean")
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

// DeviceReleaseError maps the refusals of this file (the daemon's error
// mapping calls it).
func DeviceReleaseError(err error) *contract.Error {
	if errors.Is(err, core.ErrDeviceBusy) {
		return contract.Errorf(contract.CodeDeviceInUse, "%s", err.Error()).
			WithNext("retry once the device's operation settled, or `simlock device status` to see it")
	}
	return nil
}

// DriverBuilder builds ownerHome's driver for platform over the owner's
// configuration, the way that home's daemon builds it (the daemon's driver
// wiring), allocating nothing on the owner's behalf; done releases what
// the driver needed.
type DriverBuilder func(ctx context.Context, ownerHome string, cfg config.Config, getenv func(string) string, platform string) (drv core.Driver, done func(), err error)

// Recovery reaches another home's devices as that home's daemon would
// (Owners): through the platform driver Build makes over the owner's
// roots, and by their processes, listed with Runner, once the tools cannot
// see them. Getenv is the environment the owners' roots and the host
// directory are read from (nil: the process's).
type Recovery struct {
	Build  DriverBuilder
	Runner ports.ProcessRunner
	Getenv func(string) string
}

var _ Owners = Recovery{}

// Reconcile shuts down the device key names the way ownerHome's own
// daemon would, for `device release --stale` and `--force` when that daemon
// is gone or cannot cooperate: the owner's configuration gives its device
// roots, and the platform driver built over them runs its ordinary
// shutdown (iOS: simctl on the owner's device set; Android: the emulator's
// recorded console port through the owner root's private adb server). The
// cleanup is owner-scoped: a key outside the owner's roots is refused.
// A device its root no longer holds is reported as gone (notFound); when
// the root itself is gone, its device may still run, and is found and
// ended by its process (orphanproc.go).
func (rc Recovery) Reconcile(ctx context.Context, ownerHome string, key hostreg.Key) (notFound bool, err error) {
	getenv := rc.Getenv
	drv, ref, root, done, err := rc.ownerDriver(ctx, ownerHome, key)
	if gone := (rootGoneError{}); errors.As(err, &gone) {
		found, err := endDeviceProcs(ctx, rc.Runner, gone.root, key, consolePortOf(ctx, getenv, ownerHome, key))
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
	found, err := endDeviceProcs(ctx, rc.Runner, root, key, consolePortOf(ctx, getenv, ownerHome, key))
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

// Observe lists the owner's root for the device key names, the way
// Reconcile reaches it, and says whether it runs there; it changes
// nothing. The automatic reclaim (ownership.go) asks it before deciding
// whether a dead owner's device must be shut down or only its claim
// cleared.
func (rc Recovery) Observe(ctx context.Context, ownerHome string, key hostreg.Key) (hostreg.DeviceRun, error) {
	getenv := rc.Getenv
	drv, ref, root, done, err := rc.ownerDriver(ctx, ownerHome, key)
	if gone := (rootGoneError{}); errors.As(err, &gone) {
		return observeDeviceProcs(ctx, rc.Runner, gone.root, key, consolePortOf(ctx, getenv, ownerHome, key))
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
	if run, err := observeDeviceProcs(ctx, rc.Runner, root, key, consolePortOf(ctx, getenv, ownerHome, key)); err != nil || run == hostreg.DeviceRunning {
		return hostreg.DeviceRunning, err
	}
	return listed, nil
}

// errRootGone: the owner's device root for the platform does not exist.
var errRootGone = errors.New("the owner's device root no longer exists")

// ownerDriver builds the platform driver of ownerHome for key, over the
// owner's roots (see Reconcile), and the device reference it names.
// done releases what the driver needed (the host registry, for Android).
func (rc Recovery) ownerDriver(ctx context.Context, ownerHome string, key hostreg.Key) (drv core.Driver, ref core.DeviceRef, root string, done func(), err error) {
	getenv := rc.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := config.Load(config.PathsFor(ownerHome).Config)
	if err != nil {
		return nil, ref, "", nil, fmt.Errorf("read the owner's configuration: %w", err)
	}
	roots, err := DeviceRoots(cfg, ownerHome)
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
	if drv, done, err = rc.Build(ctx, ownerHome, cfg, getenv, platform); err != nil {
		return nil, ref, "", nil, err
	}
	return drv, ref, root, done, nil
}
