// Package ios is simlock's iOS Simulator driver. It drives `xcrun simctl`,
// by default scoped with `--set <root>` to a device set directory simlock
// created and marked, so it never sees or touches the user's own
// simulators. In default device-set mode (deviceset.go, ADR 0033) it works
// in the user's default set instead and proves each device its own by a
// record and a mark. It reaches processes, files and time only through
// internal/ports.
package ios

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/devroot"
	"github.com/simlock/simlock/internal/drivers/listcache"
	"github.com/simlock/simlock/internal/ports"
)

// Platform is the platform name this driver serves.
const Platform = "ios"

// RuntimeDownloadBytes is the disk space reserved before installing an iOS
// runtime: a conservative estimate of one simulator runtime image.
const RuntimeDownloadBytes uint64 = 8 << 30

// DiskGuard reserves free disk space ahead of a large download. One guard is
// shared by every driver so that concurrent installs cannot each see enough
// space and jointly fill the volume. Reserve fails with an error wrapping
// core.ErrInsufficientDisk (naming required and available bytes) when the
// reservation does not fit; release gives the bytes back.
type DiskGuard interface {
	Reserve(path string, bytes uint64) (release func(), err error)
}

// Timeouts bound each kind of simctl call. Zero fields take the defaults.
type Timeouts struct {
	// Command bounds list, create, shutdown, erase and delete (default 2m;
	// erase can take tens of seconds on a loaded machine).
	Command time.Duration
	// Boot bounds `bootstatus -b`, the boot and the wait for it (default 180s: boots
	// take ~30s but vary by a third or more, so this is a ceiling for a stuck
	// device, not a service level).
	Boot time.Duration
	// ShutdownVerify is how long Shutdown waits for the device set to report
	// the device as Shutdown (default 60s).
	ShutdownVerify time.Duration
	// Poll is the interval between state checks while verifying (default 1s).
	Poll time.Duration
	// Download bounds a runtime install through xcodebuild (default 2h).
	Download time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&t.Command, 2*time.Minute)
	def(&t.Boot, 180*time.Second)
	def(&t.ShutdownVerify, 60*time.Second)
	def(&t.Poll, time.Second)
	def(&t.Download, 2*time.Hour)
	return t
}

// Options configures a Driver. Only Root is required; ports default to the
// real adapters.
type Options struct {
	// Root is the device set directory, passed to every simctl call as
	// --set. It must be absolute. With DefaultSet it holds only simlock's
	// own state (the root marker and the created-devices record).
	Root string
	// DefaultSet creates the devices in the default CoreSimulator set
	// (drivers.ios.deviceSet "default"), where xcodebuild and other tools
	// find them.
	DefaultSet bool
	Runner     ports.ProcessRunner
	FS         ports.Filesystem
	Clock      ports.Clock
	Logger     *slog.Logger
	// OnDiagnostic receives facts the daemon may publish as events
	// (component.install-*). It is called synchronously.
	OnDiagnostic func(core.Diagnostic)
	Xcrun        string // default "xcrun"
	Xcodebuild   string // default "xcodebuild"
	Timeouts     Timeouts
	// DiskGuard, when set, is asked for space before a runtime download.
	DiskGuard DiskGuard
	// Slim, when enabled, applies the slim resource profile after every
	// boot (slim.go).
	Slim Slim
	// Clone, when enabled, provisions by cloning a golden device
	// (clone.go, ADR 0041).
	Clone Clone
}

// Driver implements core.Driver over simctl.
type Driver struct {
	root       string
	xcrun      string
	xcodebuild string
	runner     ports.ProcessRunner
	fs         ports.Filesystem
	clock      ports.Clock
	log        *slog.Logger
	onDiag     func(core.Diagnostic)
	timeouts   Timeouts
	guard      DiskGuard

	// devRoot is the ownership proof taken at start-up; RevalidateRoot
	// re-checks it.
	devRoot *devroot.Root

	simMu     sync.Mutex
	simKnown  bool
	simulated bool

	// installMu serialises runtime installs: two requests for the same
	// missing runtime must not start two multi-GB downloads.
	installMu sync.Mutex

	// listing is the device types and runtimes ResolveSpec reads
	// (resolve.go, ADR 0026).
	listing *listcache.Cache[*List]

	defaultSet bool
	// createdMu guards the created-devices record and erasing, the
	// devices whose mark an erase in flight has wiped (deviceset.go).
	createdMu sync.Mutex
	erasing   map[string]bool
	// res is the resource controller's state (resources.go, slim.go).
	res resourceState
	// clone is the golden devices' state (clone.go).
	clone cloneState
}

var _ core.Driver = (*Driver)(nil)
var _ core.Eraser = (*Driver)(nil)

// New claims the device root (creating and marking it when absent) and
// returns a driver scoped to it. It runs no external command.
func New(opts Options) (*Driver, error) {
	if opts.Root == "" {
		return nil, errors.New("ios: Options.Root is required")
	}
	if !filepath.IsAbs(opts.Root) {
		return nil, fmt.Errorf("ios: device root %q must be an absolute path", opts.Root)
	}
	d := &Driver{
		root:       filepath.Clean(opts.Root),
		xcrun:      opts.Xcrun,
		xcodebuild: opts.Xcodebuild,
		runner:     opts.Runner,
		fs:         opts.FS,
		clock:      opts.Clock,
		log:        opts.Logger,
		onDiag:     opts.OnDiagnostic,
		timeouts:   opts.Timeouts.withDefaults(),
		guard:      opts.DiskGuard,
		defaultSet: opts.DefaultSet,
		erasing:    map[string]bool{},
		clone:      cloneState{enabled: opts.Clone.Enabled, building: map[string]bool{}, ready: map[string]bool{}},
	}
	if d.xcrun == "" {
		d.xcrun = "xcrun"
	}
	if d.xcodebuild == "" {
		d.xcodebuild = "xcodebuild"
	}
	if d.runner == nil {
		d.runner = ports.ExecRunner{}
	}
	if d.fs == nil {
		d.fs = ports.OSFilesystem{}
	}
	if d.clock == nil {
		d.clock = ports.SystemClock{}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.log = d.log.With("driver", Platform)
	if d.onDiag == nil {
		d.onDiag = func(core.Diagnostic) {}
	}
	d.listing = d.newListingCache()
	slim, err := opts.Slim.resolve()
	if err != nil {
		return nil, err
	}
	d.res.slim = slim
	r, err := devroot.Claim(d.fs, d.clock, d.log, d.root, Platform)
	if err != nil {
		return nil, err
	}
	d.devRoot = r
	d.loadGoldenView()
	return d, nil
}

// Root returns the device set directory the driver is scoped to.
func (d *Driver) Root() string { return d.root }

func (d *Driver) Platform() string { return Platform }

// Estimate reflects measured timings: create and erase are sub-second, a
// boot is a ~30s floor.
func (d *Driver) Estimate(op core.DriverOp) time.Duration {
	switch op {
	case core.OpProvision:
		return time.Second
	case core.OpBoot:
		return 30 * time.Second
	case core.OpReclaim:
		return 31 * time.Second
	case core.OpShutdown:
		return 2 * time.Second
	case core.OpDestroy:
		return time.Second
	}
	return 0
}

// Provision creates a shut-down device for spec inside the root.
func (d *Driver) Provision(ctx context.Context, spec core.Spec) (core.Provisioned, error) {
	if spec.ModelID == "" || spec.RuntimeID == "" {
		return core.Provisioned{}, fmt.Errorf("ios: provision: spec lacks a device type or runtime (%q, %q)", spec.ModelID, spec.RuntimeID)
	}
	name, err := deviceName()
	if err != nil {
		return core.Provisioned{}, err
	}
	if spec.NameHint != "" {
		name = spec.NameHint
	}
	udid, cloned := "", false
	if d.cloneOn() {
		// Outside the create's command deadline: an inline golden build
		// boots, and the clone has a deadline of its own.
		udid, cloned = d.provisionByClone(ctx, spec, name, true)
	}
	cctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl create")
	defer cancel()
	if !cloned {
		out, err := d.simctl(cctx, "create", name, spec.ModelID, spec.RuntimeID)
		if err != nil {
			// The runtime or device type may have gone since it was listed.
			d.listing.Invalidate()
			return core.Provisioned{}, err
		}
		if udid, err = ParseCreateOutput(string(out)); err != nil {
			return core.Provisioned{}, fmt.Errorf("ios: %w", err)
		}
	}
	setDir := d.root
	if d.defaultSet {
		if setDir, err = d.adopt(cctx, udid); err != nil {
			return core.Provisioned{}, err
		}
	}
	d.log.Info("device created", "udid", udid, "cloned", cloned, "name", name, "deviceType", spec.ModelID, "runtime", spec.RuntimeID, "deviceSet", setDir)
	return d.provisioned(ctx, spec, udid, name, setDir), nil
}

// provisioned describes a device just made in setDir.
func (d *Driver) provisioned(ctx context.Context, spec core.Spec, udid, name, setDir string) core.Provisioned {
	return core.Provisioned{
		Handle:    udid,
		Name:      name,
		Attrs:     mergeAttrs(map[string]string{core.AttrUDID: udid, core.AttrDeviceSet: setDir}, d.provisionFacts(spec.ModelID)),
		Simulated: d.isSimulated(ctx),
	}
}

// adopt proves a device just created in the default set simlock's: the
// mark in its data directory, then the record. A device that cannot be
// marked is deleted again (simctl has just printed its UDID to this call,
// so it is certainly simlock's).
func (d *Driver) adopt(ctx context.Context, udid string) (string, error) {
	dataPath, err := d.markDevice(ctx, udid)
	if err == nil {
		err = d.updateCreated(func(r *createdRecord) {
			r.Devices[udid] = createdDevice{CreatedAt: d.clock.Now().UTC(), DataPath: dataPath}
		})
	}
	if err != nil {
		if _, derr := d.simctl(ctx, "delete", udid); derr != nil {
			d.log.Warn("could not delete a device it failed to mark", "udid", udid, "err", derr)
		}
		return "", fmt.Errorf("ios: mark new device %s as simlock's: %w", udid, err)
	}
	return d.deviceSetDir(dataPath), nil
}

// deviceName is "simlock-" plus a short random suffix: recognisable in
// simctl output, unique enough within one device set.
func deviceName() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "simlock-" + hex.EncodeToString(b[:]), nil
}

// MakeReady boots the device and waits until it is usable, in one SDK
// process: `simctl bootstatus <udid> -b` boots a shut-down device and
// monitors it until it has booted, and reports a booted one at once. A
// device that is already booted (or booting) is not an error.
func (d *Driver) MakeReady(ctx context.Context, dev core.DeviceRef) error {
	udid, err := handle(dev)
	if err != nil {
		return err
	}
	if err := d.requireOwned(ctx, udid); err != nil {
		return err
	}
	// One deadline covers the boot and the wait: what matters to the caller
	// is the time until the device is usable.
	bctx, cancel := d.withTimeout(ctx, d.timeouts.Boot, "boot "+udid)
	defer cancel()
	out, err := bootAndWait(bctx, d.simctl, udid)
	if err != nil {
		return err
	}
	bs := ParseBootStatus(string(out))
	d.log.Debug("device ready", "udid", udid, "alreadyBooted", bs.AlreadyBooted, "progressBlocks", len(bs.Progress))
	// Slim mode: after every boot, a reclaim's erase included (slim.go).
	return d.applySlim(ctx, dev)
}

// bootAndWait runs `bootstatus <udid> -b` through run. When its boot is
// refused because the device is already Booted or Booting (someone else
// started it between bootstatus's look and its boot), the device is on its
// way up, and one more `bootstatus -b` waits for it or reports it booted.
// Any other failure is returned as simctl reported it.
func bootAndWait(ctx context.Context, run func(context.Context, ...string) ([]byte, error), udid string) ([]byte, error) {
	out, err := run(ctx, "bootstatus", udid, "-b")
	if st, ok := stateOf(err); ok && (st == StateBooted || st == StateBooting) {
		return run(ctx, "bootstatus", udid, "-b")
	}
	return out, err
}

// Reclaim wipes the device (shutdown, erase) and boots it again: erase is the
// measured-fastest clean-state strategy and needs no golden device.
func (d *Driver) Reclaim(ctx context.Context, dev core.DeviceRef) error {
	if err := d.Erase(ctx, dev); err != nil {
		return err
	}
	return d.MakeReady(ctx, dev)
}

// Erase implements core.Eraser: the device is shut down and erased, and
// left shut down, so the core can decide whether to boot it at all.
func (d *Driver) Erase(ctx context.Context, dev core.DeviceRef) error {
	udid, err := handle(dev)
	if err != nil {
		return err
	}
	// No listing to prove the shutdown here: simctl erase refuses a device
	// in any state but Shutdown ("Unable to erase contents and settings in
	// current state: ..."), so an erase that succeeds is that proof, and
	// the `simctl list` after the shutdown added a process and no fact.
	// Only when the erase names a state does the driver wait for the
	// device set to say Shutdown, and erase again.
	if err := d.requireOwned(ctx, udid); err != nil {
		return fmt.Errorf("ios: reclaim %s: %w", udid, err)
	}
	if err := d.stop(ctx, udid); err != nil {
		return fmt.Errorf("ios: reclaim %s: %w", udid, err)
	}
	if d.defaultSet {
		// Erase empties the data directory and with it the mark; until it
		// is written again this erase vouches for the device.
		d.createdMu.Lock()
		d.erasing[udid] = true
		d.createdMu.Unlock()
		defer func() {
			d.createdMu.Lock()
			delete(d.erasing, udid)
			d.createdMu.Unlock()
		}()
	}
	err = d.erase(ctx, udid)
	if st, ok := stateOf(err); ok && st != StateShutdown {
		d.log.Debug("erase: device not shut down yet; waiting for it", "udid", udid, "state", st)
		if err := d.waitState(ctx, udid, StateShutdown); err != nil {
			return fmt.Errorf("ios: reclaim %s: %w", udid, err)
		}
		err = d.erase(ctx, udid)
	}
	if err != nil {
		return fmt.Errorf("ios: reclaim %s: %w", udid, err)
	}
	if d.defaultSet {
		mctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "mark "+udid)
		defer cancel()
		if _, err := d.markDevice(mctx, udid); err != nil {
			return fmt.Errorf("ios: reclaim %s: mark again after erase: %w", udid, err)
		}
	}
	return nil
}

// erase runs simctl erase within the command budget.
func (d *Driver) erase(ctx context.Context, udid string) error {
	ectx, cancel := d.withTimeout(ctx, d.timeouts.Command, "erase "+udid)
	defer cancel()
	_, err := d.simctl(ectx, "erase", udid)
	return err
}

// Shutdown stops the device and then proves it stopped by reading the device
// set until it reports Shutdown.
func (d *Driver) Shutdown(ctx context.Context, dev core.DeviceRef) error {
	udid, err := handle(dev)
	if err != nil {
		return err
	}
	if err := d.requireOwned(ctx, udid); err != nil {
		return err
	}
	if err := d.stop(ctx, udid); err != nil {
		return err
	}
	return d.waitState(ctx, udid, StateShutdown)
}

// stop runs simctl shutdown; a device already shut down or on its way
// there is not an error. It proves nothing about the device's state.
func (d *Driver) stop(ctx context.Context, udid string) error {
	sctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "shutdown "+udid)
	_, err := d.simctl(sctx, "shutdown", udid)
	cancel()
	if err != nil {
		st, ok := stateOf(err)
		if !ok || (st != StateShutdown && st != StateShuttingDown) {
			return err
		}
	}
	return nil
}

// waitState polls the device set through the Clock until udid reports want.
func (d *Driver) waitState(ctx context.Context, udid string, want DeviceState) error {
	wctx, cancel := d.withTimeout(ctx, d.timeouts.ShutdownVerify, "waiting for "+udid+" to reach "+string(want))
	defer cancel()
	for {
		l, err := d.listDevices(wctx)
		if err != nil {
			return err
		}
		dev, ok := l.Device(udid)
		if !ok {
			return fmt.Errorf("ios: device %s: %w", udid, core.ErrDeviceNotFound)
		}
		if dev.State == want {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("ios: device %s still %s: %w", udid, dev.State, context.Cause(wctx))
		case <-d.clock.After(d.timeouts.Poll):
		}
	}
}

// Destroy deletes the device. A device that is already gone counts as
// destroyed.
func (d *Driver) Destroy(ctx context.Context, dev core.DeviceRef) error {
	udid, err := handle(dev)
	if err != nil {
		return err
	}
	// In the default set a device simlock cannot prove its own is, to
	// simlock, already gone: the record is dropped, the device untouched.
	if err := d.requireOwned(ctx, udid); err != nil {
		if errors.Is(err, core.ErrDeviceNotFound) {
			return d.forget(udid)
		}
		return err
	}
	if err := d.Shutdown(ctx, dev); err != nil {
		if errors.Is(err, core.ErrDeviceNotFound) {
			return d.forget(udid)
		}
		// A device stuck mid-transition may still delete; try before
		// giving up.
		d.log.Warn("destroy: shutdown failed, deleting anyway", "udid", udid, "err", err)
	}
	dctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "delete "+udid)
	defer cancel()
	if _, err := d.simctl(dctx, "delete", udid); err != nil && !errors.Is(err, core.ErrDeviceNotFound) {
		return err
	}
	d.log.Info("device deleted", "udid", udid)
	d.forgetResources(udid)
	return d.forget(udid)
}

// forget drops a deleted device from the created-devices record.
func (d *Driver) forget(udid string) error {
	if !d.defaultSet || !d.recorded(udid) {
		return nil
	}
	return d.updateCreated(func(r *createdRecord) { delete(r.Devices, udid) })
}

// ListManaged reports simlock's devices. In the private set membership is
// the proof of ownership, so no name filter applies; in the default set
// only the devices proven simlock's (record and mark) are listed.
func (d *Driver) ListManaged(ctx context.Context) ([]core.Observed, error) {
	lctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl list devices")
	defer cancel()
	l, err := d.listDevices(lctx)
	if err != nil {
		return nil, err
	}
	devs, err := d.provenDevices(l)
	if err != nil {
		return nil, err
	}
	out := make([]core.Observed, 0, len(devs))
	for _, dev := range devs {
		if dev.UDID == "" {
			continue
		}
		out = append(out, core.Observed{Handle: dev.UDID, Name: dev.Name, Run: runState(dev.State)})
	}
	return out, nil
}

// runState maps simctl's states onto the core's three values. Anything in
// motion, and any state this driver does not know, is transitioning: the
// health monitor must never read it as a crash.
func runState(s DeviceState) core.RunState {
	switch s {
	case StateBooted:
		return core.RunRunning
	case StateShutdown:
		return core.RunStopped
	default:
		return core.RunTransitioning
	}
}

// Catalog lists the iOS device types and runtimes this machine has.
func (d *Driver) Catalog(ctx context.Context) (core.Catalog, error) {
	lctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl list")
	defer cancel()
	l, err := d.listAll(lctx)
	if err != nil {
		return core.Catalog{}, err
	}
	return catalogOf(l), nil
}

func catalogOf(l *List) core.Catalog {
	var c core.Catalog
	for _, t := range l.DeviceTypes {
		if !isIOSType(t) {
			continue
		}
		m := core.CatalogModel{Name: t.Name, Identifier: t.Identifier, Family: t.ProductFamily, ProductModel: t.ModelIdentifier}
		if !t.MinRuntime.IsZero() {
			m.MinOS = t.MinRuntime.String()
		}
		if t.HasMax() {
			m.MaxOS = t.MaxRuntime.String()
		}
		c.Models = append(c.Models, m)
	}
	for _, r := range l.Runtimes {
		if !isIOSRuntime(r) {
			continue
		}
		c.Runtimes = append(c.Runtimes, core.CatalogRuntime{
			Name: r.Name, Version: r.Version, Build: r.Build, Identifier: r.Identifier,
			Available: r.Available, SupportedModels: r.SupportedDeviceTypes,
		})
	}
	return c
}

// RevalidateRoot re-reads the root marker and checks it is the one claimed
// at start-up.
func (d *Driver) RevalidateRoot(ctx context.Context) error { return d.devRoot.Revalidate() }

// ---- plumbing ----

// handle returns the device's UDID. Only UDIDs are passed to simctl: it also
// accepts device names, and a name could match a device outside simlock's
// intent.
func handle(dev core.DeviceRef) (string, error) {
	h := dev.Handle
	if h == "" {
		h = dev.Attrs[core.AttrUDID]
	}
	if !IsUDID(h) {
		return "", fmt.Errorf("ios: device %q has no valid UDID handle (%q): %w", dev.ID, h, core.ErrDeviceNotFound)
	}
	return h, nil
}

func (d *Driver) listAll(ctx context.Context) (*List, error) {
	out, err := d.simctl(ctx, "list", "-j")
	if err != nil {
		return nil, err
	}
	return ParseListJSON(out)
}

func (d *Driver) listDevices(ctx context.Context) (*List, error) {
	out, err := d.simctl(ctx, "list", "devices", "-j")
	if err != nil {
		return nil, err
	}
	return ParseListJSON(out)
}

// simctl runs `xcrun simctl --set <root> args...` (no --set in default
// mode) and returns its stdout.
func (d *Driver) simctl(ctx context.Context, args ...string) ([]byte, error) {
	full := append(append([]string{"simctl"}, d.setArgs()...), args...)
	res, err := d.runner.Run(ctx, ports.Command{Name: d.xcrun, Args: full})
	if err != nil {
		return res.Stdout, d.commandError(ctx, "simctl "+args[0], res, err)
	}
	return res.Stdout, nil
}

// commandError turns a failed run into a CommandError carrying the parsed
// simctl error, or the timeout that cancelled it.
func (d *Driver) commandError(ctx context.Context, what string, res ports.Result, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("ios: %s: %w", what, context.Cause(ctx))
	}
	ce := &CommandError{Command: what, ExitCode: res.ExitCode, Err: err}
	stderr := string(res.Stderr)
	if se, ok := ParseError(stderr); ok {
		ce.Sim = se
	}
	// simctl prints "Invalid device: <udid>" (no SimError header) for a UDID
	// the set does not contain.
	ce.NotFound = strings.Contains(stderr, "Invalid device")
	return ce
}

// CommandError is a simctl or xcodebuild invocation that failed.
type CommandError struct {
	Command  string // "simctl boot"
	ExitCode int
	Sim      *SimError // parsed from stderr, nil if stderr had none
	NotFound bool      // the device named does not exist in the set
	Err      error     // usually *ports.ExitError
}

func (e *CommandError) Error() string {
	if e.Sim != nil {
		return fmt.Sprintf("ios: %s: %s", e.Command, e.Sim.Error())
	}
	return fmt.Sprintf("ios: %s: %v", e.Command, e.Err)
}

func (e *CommandError) Unwrap() []error {
	errs := []error{e.Err}
	if e.Sim != nil {
		errs = append(errs, e.Sim)
	}
	if e.NotFound {
		errs = append(errs, core.ErrDeviceNotFound)
	}
	return errs
}

// stateOf reports the state a simctl "Unable to X in current state: S" error
// names.
func stateOf(err error) (DeviceState, bool) {
	var se *SimError
	if !errors.As(err, &se) {
		return "", false
	}
	return se.CurrentState()
}

// TimeoutError is the cause of a context the driver cancelled because an
// operation outran its budget. It matches context.DeadlineExceeded.
type TimeoutError struct {
	Op    string
	After time.Duration
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("%s: timed out after %s", e.Op, e.After) }

func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// withTimeout is context.WithTimeout driven by the Clock port, so tests
// control when deadlines fire.
func (d *Driver) withTimeout(ctx context.Context, dur time.Duration, op string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := d.clock.AfterFunc(dur, func() { cancel(&TimeoutError{Op: op, After: dur}) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// isSimulated asks `xcrun --version` once whether the toolchain is simlock's
// simulated SDK. A failed probe is not cached, and reports false.
func (d *Driver) isSimulated(ctx context.Context) bool {
	d.simMu.Lock()
	defer d.simMu.Unlock()
	if d.simKnown {
		return d.simulated
	}
	cctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "xcrun --version")
	defer cancel()
	res, err := d.runner.Run(cctx, ports.Command{Name: d.xcrun, Args: []string{"--version"}})
	if err != nil {
		d.log.Warn("xcrun --version failed; assuming a real toolchain", "err", err)
		return false
	}
	d.simKnown = true
	d.simulated = strings.Contains(strings.ToLower(string(res.Stdout)+string(res.Stderr)), "simulated")
	return d.simulated
}
