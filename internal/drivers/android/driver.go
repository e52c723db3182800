// Package android is simlock's driver for Android Emulators. It owns one
// root directory, used as ANDROID_AVD_HOME, and talks to its emulators
// through a private adb server on a port the shared adb server does not use,
// with console ports outside the range that server scans. Devices it creates
// are therefore invisible to Android Studio and a plain `adb devices`, and it
// cannot reach anything outside its root.
//
// It reaches the SDK tools only through ports.ProcessRunner, files through
// ports.Filesystem and time through ports.Clock, so it is tested against
// recorded tool output; the simulated SDK runs it unchanged.
package android

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/devroot"
	"github.com/simlock/simlock/internal/drivers/listcache"
	"github.com/simlock/simlock/internal/loopback"
	"github.com/simlock/simlock/internal/ports"
)

// Platform is the platform name this driver serves.
const Platform = "android"

const (
	// DefaultADBServerPort is the private adb server's port. The shared
	// server listens on 5037; a second server on another port keeps the two
	// from seeing each other's devices.
	DefaultADBServerPort = 5137
	// DefaultConsolePortBase is the first emulator console port handed out.
	// A default adb server probes console ports 5554–5585 for emulators, so
	// ours start above that range.
	DefaultConsolePortBase = 5700

	sharedADBServerPort = 5037
	scannedPortLow      = 5554
	scannedPortHigh     = 5585

	defaultBootTimeout     = 180 * time.Second
	defaultPollInterval    = time.Second
	defaultShutdownGrace   = 20 * time.Second
	defaultProfileCacheTTL = 10 * time.Minute

	// imageInstallBytes is the conservative free-space estimate reserved
	// before installing one system image.
	imageInstallBytes uint64 = 2 << 30
)

// DiskGuard reserves free disk space for a download so that concurrent
// installs cannot jointly overfill a volume that each alone would fit on.
// One guard is shared by every driver. Reserve fails (wrapping
// core.ErrInsufficientDisk, naming the available bytes) when bytes do not
// fit in the free space left after outstanding reservations.
type DiskGuard interface {
	Reserve(path string, bytes uint64) (release func(), err error)
}

// Tools names the SDK programs; each is looked up on PATH unless it is a
// path. Empty fields keep the default name.
type Tools struct {
	ADB        string
	Emulator   string
	AVDManager string
	SDKManager string
}

// Options configures a Driver. Root is required; every port defaults to its
// real adapter.
type Options struct {
	// Root is the directory the driver owns; it becomes ANDROID_AVD_HOME.
	Root string
	// SDKRoot, when set, is passed to the tools as ANDROID_SDK_ROOT and to
	// sdkmanager as --sdk_root.
	SDKRoot string

	Runner       ports.ProcessRunner
	FS           ports.Filesystem
	Clock        ports.Clock
	Logger       *slog.Logger
	OnDiagnostic func(core.Diagnostic)
	// DiskGuard is consulted before a system image install; nil skips the
	// reservation.
	DiskGuard DiskGuard
	// AcceptLicenses answers yes to sdkmanager's licence prompts during an
	// install (downloads.acceptLicenses); off, such an install is
	// ErrLicenseNotAccepted (licence.go).
	AcceptLicenses bool

	// ADBServerPort is the private adb server's port (default 5137; 5037,
	// the shared server's, is refused).
	ADBServerPort int
	// ConsolePortBase is the first console port handed out (default 5700).
	// It must be even and must not fall in 5554–5585.
	ConsolePortBase int
	// Ports, when set, leases the adb server port and every console port
	// from the host (ADR 0025), so several homes on one host never share
	// one; ADBServerPort is then ignored. Without it the fixed defaults
	// above are used.
	Ports PortAllocator
	Tools Tools

	// GOARCH selects the system image ABI (x86_64 for amd64, arm64-v8a for
	// arm64); default runtime.GOARCH. Tests set it to be host-independent.
	GOARCH string
	// BootTimeout bounds a boot or snapshot restore (default 180s; boots
	// vary by up to a third, so the bound is generous rather than tight).
	BootTimeout time.Duration
	// PollInterval is the readiness probe period (default 1s).
	PollInterval time.Duration
	// ShutdownGrace is how long `adb emu kill` gets before the emulator is
	// signalled (default 20s).
	ShutdownGrace time.Duration
	// NewID returns the random part of a new AVD name; default 8 hex digits
	// from crypto/rand.
	NewID func() string
	// NoAudio launches emulators with -no-audio (SIMLOCK_EMULATOR_AUDIO=false);
	// otherwise the AVD's own audio settings apply.
	NoAudio bool
}

// Driver is the Android implementation of core.Driver.
type Driver struct {
	root    string
	devRoot *devroot.Root // the ownership proof taken by New
	sdkRoot string
	runner  ports.ProcessRunner
	fs      ports.Filesystem
	clock   ports.Clock
	log     *slog.Logger
	diag    func(core.Diagnostic)
	guard   DiskGuard
	// acceptLicenses: see Options.AcceptLicenses.
	acceptLicenses bool
	adbPort        int
	portBase       int
	ports          PortAllocator
	tools          Tools
	abi            string
	bootLimit      time.Duration
	poll           time.Duration
	grace          time.Duration
	newID          func() string
	noAudio        bool

	// base outlives every call: supervised emulators run under it, and
	// Close cancels it.
	base    context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup

	mu     sync.Mutex
	procs  map[string]*emulatorProc  // by AVD name
	held   map[string]int            // console port leases taken, by AVD name
	holds  map[string][]net.Listener // console pairs bound while their emulator is down
	closed bool

	kb keepBootedBook // keep-booted baselines by AVD (keepbooted.go)

	emuVersion emulatorVersions // the emulator's version by binary (emuversion.go)

	allocMu   sync.Mutex // serializes name and console port allocation
	installMu sync.Mutex // one system image install at a time

	// installed is the installed system images ResolveSpec reads
	// (resolve.go, ADR 0026).
	installed *listcache.Cache[installedList]

	cacheMu    sync.Mutex
	profiles   []deviceProfile
	profilesAt time.Time
	simulated  bool
	simChecked bool
}

var _ core.Driver = (*Driver)(nil)

// New validates opts, proves (or establishes) ownership of the root and
// returns a driver scoped to it.
func New(opts Options) (*Driver, error) {
	if opts.Root == "" {
		return nil, errors.New("android driver: Root is required")
	}
	if !filepath.IsAbs(opts.Root) {
		return nil, fmt.Errorf("android driver: Root %q must be an absolute path", opts.Root)
	}
	d := &Driver{
		root:           filepath.Clean(opts.Root),
		sdkRoot:        opts.SDKRoot,
		runner:         opts.Runner,
		fs:             opts.FS,
		clock:          opts.Clock,
		log:            opts.Logger,
		diag:           opts.OnDiagnostic,
		guard:          opts.DiskGuard,
		acceptLicenses: opts.AcceptLicenses,
		noAudio:        opts.NoAudio,
		adbPort:        opts.ADBServerPort,
		portBase:       opts.ConsolePortBase,
		ports:          opts.Ports,
		tools:          opts.Tools,
		bootLimit:      opts.BootTimeout,
		poll:           opts.PollInterval,
		grace:          opts.ShutdownGrace,
		newID:          opts.NewID,
		procs:          map[string]*emulatorProc{},
		held:           map[string]int{},
		holds:          map[string][]net.Listener{},
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
	if d.diag == nil {
		d.diag = func(core.Diagnostic) {}
	}
	if d.ports != nil {
		// New runs once, at daemon start; the bound covers the registry's
		// busy timeout with room to spare.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		port, err := d.ports.ADBServerPort(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		d.adbPort = port
	}
	if d.adbPort == 0 {
		d.adbPort = DefaultADBServerPort
	}
	if d.adbPort == sharedADBServerPort || d.adbPort < 1024 || d.adbPort > 65535 {
		return nil, fmt.Errorf("android driver: ADBServerPort %d is not usable: it must be a private port other than the shared server's %d", d.adbPort, sharedADBServerPort)
	}
	if d.portBase == 0 {
		d.portBase = DefaultConsolePortBase
	}
	if d.portBase%2 != 0 || d.portBase < 1024 || d.portBase > 65500 || inScannedRange(d.portBase) {
		return nil, fmt.Errorf("android driver: ConsolePortBase %d must be even and outside %d–%d, the ports a default adb server scans", d.portBase, scannedPortLow, scannedPortHigh)
	}
	fillTools(&d.tools)
	arch := opts.GOARCH
	if arch == "" {
		arch = runtime.GOARCH
	}
	d.abi = abiFor(arch)
	if d.bootLimit <= 0 {
		d.bootLimit = defaultBootTimeout
	}
	if d.poll <= 0 {
		d.poll = defaultPollInterval
	}
	if d.grace <= 0 {
		d.grace = defaultShutdownGrace
	}
	if d.newID == nil {
		d.newID = randomID
	}
	d.log = ports.Module(d.log, "driver.android")
	d.installed = d.newInstalledCache()
	// A root that has content but no marker belongs to someone else (a
	// user's ~/.android/avd, say): adopting it would let simlock delete
	// their AVDs, so Claim refuses it. Markers written before they carried
	// an id are ours and get one.
	r, err := devroot.Claim(d.fs, d.clock, d.log, d.root, Platform, devroot.AdoptUnnumbered())
	if err != nil {
		return nil, err
	}
	d.devRoot = r
	d.base, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

func fillTools(t *Tools) {
	if t.ADB == "" {
		t.ADB = "adb"
	}
	if t.Emulator == "" {
		t.Emulator = "emulator"
	}
	if t.AVDManager == "" {
		t.AVDManager = "avdmanager"
	}
	if t.SDKManager == "" {
		t.SDKManager = "sdkmanager"
	}
}

// abiFor maps a Go architecture to the system image ABI the host runs
// without translation.
func abiFor(goarch string) string {
	switch goarch {
	case "arm64":
		return "arm64-v8a"
	case "386":
		return "x86"
	case "arm":
		return "armeabi-v7a"
	default:
		return "x86_64"
	}
}

func inScannedRange(consolePort int) bool {
	// The console port and the adb port after it must both stay clear.
	return consolePort+1 >= scannedPortLow && consolePort <= scannedPortHigh
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// Platform implements core.Driver.
func (d *Driver) Platform() string { return Platform }

// Close stops every emulator this driver supervises and waits for their
// processes to exit (or ctx to end). The driver is unusable afterwards.
func (d *Driver) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	for _, p := range d.procs {
		p.markStopping()
	}
	for name, ls := range d.holds {
		loopback.Close(ls)
		delete(d.holds, name)
	}
	d.mu.Unlock()
	d.cancel()
	done := make(chan struct{})
	go func() { d.running.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("android driver: emulators still exiting: %w", ctx.Err())
	}
}

// env is the scoping every command runs with: the root as the AVD home and
// the private adb server. Tools ignore the variables they do not use.
func (d *Driver) env() []string {
	env := []string{
		"ANDROID_AVD_HOME=" + d.root,
		"ANDROID_ADB_SERVER_PORT=" + strconv.Itoa(d.adbPort),
	}
	env = append(env, serverScopeEnv...)
	if d.sdkRoot != "" {
		env = append(env, "ANDROID_SDK_ROOT="+d.sdkRoot, "ANDROID_HOME="+d.sdkRoot)
	}
	return env
}

// command builds a scoped invocation of one SDK tool.
func (d *Driver) command(tool string, args ...string) ports.Command {
	return ports.Command{Name: tool, Args: args, Env: d.env()}
}

// adbArgs prefixes args with the private server port, which adb honours
// even where the environment is not inherited.
func (d *Driver) adbArgs(args ...string) []string {
	return append([]string{"-P", strconv.Itoa(d.adbPort)}, args...)
}

func (d *Driver) adb(ctx context.Context, args ...string) (ports.Result, error) {
	return d.runner.Run(ctx, d.command(d.tools.ADB, d.adbArgs(args...)...))
}

// adbOn runs an adb command against one emulator.
func (d *Driver) adbOn(ctx context.Context, serial string, args ...string) (ports.Result, error) {
	return d.adb(ctx, append([]string{"-s", serial}, args...)...)
}

func (d *Driver) sdkmanager(ctx context.Context, args ...string) (ports.Result, error) {
	if d.sdkRoot != "" {
		args = append([]string{"--sdk_root=" + d.sdkRoot}, args...)
	}
	return d.runner.Run(ctx, d.command(d.tools.SDKManager, args...))
}

// sleep waits d on the clock. It uses AfterFunc and stops the timer when it
// returns early, so an abandoned wait leaves no timer armed.
func (d *Driver) sleep(ctx context.Context, dur time.Duration, stop <-chan struct{}) error {
	fired := make(chan struct{})
	t := d.clock.AfterFunc(dur, func() { close(fired) })
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	case <-stop:
		t.Stop()
		return errEmulatorExited
	}
}

func serialFor(consolePort int) string { return "emulator-" + strconv.Itoa(consolePort) }
