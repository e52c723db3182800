package android

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/loopback"
	"github.com/simlock/simlock/internal/ports"
)

// PortAllocator hands out the TCP ports an Android driver needs, shared
// with every other simlock home on the host (ADR 0025): each home's private
// adb server port and each AVD's console port (which covers the adb port
// after it). Without one the driver uses its fixed defaults, which only one
// home per host can.
type PortAllocator interface {
	// ADBServerPort is this home's private adb server port, the same for
	// as long as the home exists: the lease attributes of every device
	// name it.
	ADBServerPort(ctx context.Context) (int, error)
	// ConsolePort leases a console port for avd. want, when non-zero, is
	// the port the AVD already has (from an earlier daemon of this home):
	// it is returned when it is still this home's to take, otherwise a
	// different port is.
	ConsolePort(ctx context.Context, avd string, want int) (int, error)
	// ReleaseConsole ends avd's lease of port, once the AVD is deleted.
	ReleaseConsole(ctx context.Context, avd string, port int) error
	// LeasedPorts reports every port any simlock home leases, as a
	// membership test.
	LeasedPorts(ctx context.Context) (func(port int) bool, error)
}

// Environment of every adb command the driver runs. Whichever adb client
// finds no server on the private port starts one with its own environment,
// so all of them carry the switches that turn off adb's device discovery:
// the server then holds only the emulators that announce themselves to it,
// which are the ones simlock launches (with ANDROID_ADB_SERVER_PORT set to
// this server). The user's emulators on 5554–5585, USB devices and
// network devices found over mDNS stay out of it.
var serverScopeEnv = []string{
	"ADB_EMU=0",  // no scan of the local emulator ports
	"ADB_USB=0",  // no USB device discovery
	"ADB_MDNS=0", // no mDNS service discovery
	// An adb from before ADB_MDNS still honours an empty auto-connect
	// list, and a ceiling below the first scanned port (5555) empties
	// the emulator scan of one from before ADB_EMU.
	"ADB_MDNS_AUTO_CONNECT=",
	"ADB_LOCAL_TRANSPORT_MAX_PORT=" + strconv.Itoa(scannedPortLow-1),
}

const (
	// adbServerPortFirst..adbServerPortLast are where home adb servers
	// are placed: above the shared server's 5037 and below the ports
	// emulators use by default.
	adbServerPortFirst = DefaultADBServerPort
	adbServerPortLast  = scannedPortLow - 2
	consolePortLast    = 65534
	// externalConsoleLow..High are the console ports of emulators started
	// outside simlock: the emulator's own default choice.
	externalConsoleLow  = scannedPortLow
	externalConsoleHigh = scannedPortHigh - 1
)

// HostPorts is the PortAllocator over the host registry, for one daemon
// (owner) of one home.
type HostPorts struct {
	DB    *hostreg.DB
	Owner hostreg.Owner
	// Clock stamps the leases (the registry reads no clock); default the
	// system clock.
	Clock ports.Clock
	// ConsoleBase is the first console port tried (default 5700).
	ConsoleBase int
	// Free is the bind proof; default loopback.Free.
	Free func(port, n int) bool
}

var _ PortAllocator = (*HostPorts)(nil)

func (h *HostPorts) free(n int) func(int) bool {
	f := h.Free
	if f == nil {
		f = loopback.Free
	}
	return func(p int) bool { return f(p, n) }
}

func (h *HostPorts) now() time.Time {
	if h.Clock == nil {
		return ports.SystemClock{}.Now().UTC()
	}
	return h.Clock.Now().UTC()
}

// ADBServerPort implements PortAllocator.
func (h *HostPorts) ADBServerPort(ctx context.Context) (int, error) {
	l, _, err := h.DB.AllocatePort(ctx, hostreg.PortRequest{
		Purpose: hostreg.PortADBServer, Owner: h.Owner, Serves: h.Owner.Home,
		First: adbServerPortFirst, Last: adbServerPortLast, Step: 1,
		Skip: func(p int) bool { return p == sharedADBServerPort },
		Free: h.free(1), Now: h.now(),
	})
	if err != nil {
		return 0, fmt.Errorf("android driver: lease an adb server port: %w", err)
	}
	return l.Port, nil
}

// ConsolePort implements PortAllocator.
func (h *HostPorts) ConsolePort(ctx context.Context, avd string, want int) (int, error) {
	base := h.ConsoleBase
	if base == 0 {
		base = DefaultConsolePortBase
	}
	l, _, err := h.DB.AllocatePort(ctx, hostreg.PortRequest{
		Purpose: hostreg.PortConsole, Owner: h.Owner, Serves: avd, Want: want,
		First: base, Last: consolePortLast, Step: 2,
		Skip: func(p int) bool { return p%2 != 0 || inScannedRange(p) },
		Free: h.free(2), Now: h.now(),
	})
	if err != nil {
		return 0, fmt.Errorf("android driver: lease a console port for %s: %w", avd, err)
	}
	return l.Port, nil
}

// ReleaseConsole implements PortAllocator.
func (h *HostPorts) ReleaseConsole(ctx context.Context, avd string, port int) error {
	if err := h.DB.ReleasePort(ctx, port, h.Owner); err != nil {
		return fmt.Errorf("android driver: release console port %d of %s: %w", port, avd, err)
	}
	return nil
}

// LeasedPorts implements PortAllocator.
func (h *HostPorts) LeasedPorts(ctx context.Context) (func(int) bool, error) {
	all, err := h.DB.Ports(ctx)
	if err != nil {
		return nil, err
	}
	return func(p int) bool {
		for _, st := range all {
			if st.Lease.Covers(p) {
				return true
			}
		}
		return false
	}, nil
}

// errPortLost is wrapped when an AVD's recorded console port now belongs
// to someone else: its serial, which the lease attributes carry, would
// name another emulator.
var errPortLost = errors.New("console port taken by another owner")

// consolePort takes the host lease of name's console port (recorded, or
// a new one when recorded is 0) once per driver; later calls are answered
// from memory, so the registry is read on lifecycle transitions only.
func (d *Driver) consolePort(ctx context.Context, name string, recorded int) (int, error) {
	if d.ports == nil {
		return recorded, nil
	}
	d.mu.Lock()
	held, ok := d.held[name]
	d.mu.Unlock()
	if ok && (recorded == 0 || held == recorded) {
		return held, nil
	}
	port, err := d.ports.ConsolePort(ctx, name, recorded)
	if err != nil {
		return 0, err
	}
	// A program outside the registry (another simlock install's emulator, a
	// user's tool) can take the pair between the allocator's bind check and
	// the hold below. A new lease names nothing yet, so hand it back and
	// take another, rather than fail this AVD's first boot on it.
	for attempt := 0; recorded == 0 && attempt < 3 && !loopback.Free(port, 2); attempt++ {
		if rerr := d.ports.ReleaseConsole(ctx, name, port); rerr != nil {
			d.log.Warn("release a console port another program took", "avd", name, "port", port, "err", rerr)
			break
		}
		d.log.Info("console port taken by another program before it was held; leasing another", "avd", name, "port", port)
		if port, err = d.ports.ConsolePort(ctx, name, 0); err != nil {
			return 0, err
		}
	}
	if recorded != 0 && port != recorded {
		// The port the device is known by went to another home while no
		// daemon of this one was running: hand the new one back and fail
		// rather than boot the AVD under a serial its lease does not name.
		if rerr := d.ports.ReleaseConsole(ctx, name, port); rerr != nil {
			d.log.Warn("release unusable console port", "avd", name, "port", port, "err", rerr)
		}
		return 0, fmt.Errorf("android driver: AVD %s: console port %d: %w", name, recorded, errPortLost)
	}
	d.mu.Lock()
	d.held[name] = port
	d.mu.Unlock()
	d.hold(name, port)
	return port, nil
}

// releaseConsole ends name's port lease (after the AVD is deleted).
func (d *Driver) releaseConsole(ctx context.Context, name string, port int) {
	if d.ports == nil || port == 0 {
		return
	}
	d.unhold(name)
	if err := d.ports.ReleaseConsole(ctx, name, port); err != nil {
		d.log.Warn("release console port", "avd", name, "port", port, "err", err)
		return
	}
	d.mu.Lock()
	delete(d.held, name)
	d.mu.Unlock()
}

// hold keeps name's console pair bound while its emulator is not running,
// so that the lease is visible to every program on the host, not only to
// simlock homes reading the registry: a bind proof elsewhere fails on it.
// A pair that cannot be bound (its emulator runs, or another program has
// it) is not held; the boot's proof finds out which.
func (d *Driver) hold(name string, port int) {
	if d.ports == nil || port == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.holds[name] != nil {
		return
	}
	if p := d.procs[name]; p != nil && p.alive() {
		return
	}
	if ls, ok := loopback.Hold(port, 2); ok {
		d.holds[name] = ls
	}
}

// holdExited is hold for the supervisor of name's emulator, whose process
// has exited but which has not yet said so.
func (d *Driver) holdExited(name string, port int) {
	if d.ports == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.holds[name] != nil {
		return
	}
	if ls, ok := loopback.Hold(port, 2); ok {
		d.holds[name] = ls
	}
}

// unhold closes name's held pair.
func (d *Driver) unhold(name string) {
	d.mu.Lock()
	ls := d.holds[name]
	delete(d.holds, name)
	d.mu.Unlock()
	loopback.Close(ls)
}

// proofAttempts and proofRetryDelay bound how long a boot looks for its
// console pair to come free.
const (
	proofAttempts   = 4
	proofRetryDelay = 25 * time.Millisecond
)

// proveConsoleFree lets go of the held pair and binds it once more just
// before an emulator is launched on it, so a program that took one since
// the lease fails the boot with a clear reason instead of the emulator's.
func (d *Driver) proveConsoleFree(ctx context.Context, name string, port int) error {
	if d.ports == nil {
		return nil
	}
	d.unhold(name)
	// Where a fork does not wait for its child's exec (macOS), a child
	// started just before the unhold may keep the pair bound for a moment
	// (see package loopback): look again before blaming another program.
	for attempt := 0; ; attempt++ {
		if loopback.Free(port, 2) {
			return nil
		}
		if attempt == proofAttempts-1 {
			break
		}
		if err := d.sleep(ctx, proofRetryDelay, nil); err != nil {
			return err
		}
	}
	return fmt.Errorf("android driver: cannot boot %s: console port %d or adb port %d is in use by another program", name, port, port+1)
}

// startServer makes sure the private adb server runs before an emulator
// starts: an emulator announces itself to the server once, when it starts,
// and with discovery switched off nothing else would find it.
func (d *Driver) startServer(ctx context.Context) error {
	if d.ports == nil {
		return nil
	}
	if _, err := d.adb(ctx, "start-server"); err != nil {
		return fmt.Errorf("android driver: start the private adb server on port %d: %w", d.adbPort, err)
	}
	return nil
}

// ExternalRunning counts the emulators running on this host that no
// simlock home started: an emulator's console port in 5554–5584 (where an
// emulator started by hand or by Android Studio lands) that cannot be
// bound and is not leased by any home. It only binds and closes local
// ports: it runs no adb command, so it never starts the user's adb server
// or touches a device.
func (d *Driver) ExternalRunning(ctx context.Context) (int, error) {
	leased := func(int) bool { return false }
	if d.ports != nil {
		var err error
		if leased, err = d.ports.LeasedPorts(ctx); err != nil {
			return 0, err
		}
	}
	n := 0
	for p := externalConsoleLow; p <= externalConsoleHigh; p += 2 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if leased(p) || loopback.Free(p, 1) {
			continue
		}
		n++
	}
	return n, nil
}
