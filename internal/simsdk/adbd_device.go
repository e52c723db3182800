package simsdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// emuADBDevice is a running simulated emulator as its adbd serves it.
// Every answer reads the run record afresh, so the adbd and the simulated
// adb binary (which reads the same record from another process) see one
// device: a setprop or an install through either shows through the other.
type emuADBDevice struct {
	s   *sdk
	dir string // the emulator's run directory
	// announce tells the adb server about the emulator again; nil when
	// no server is to be told.
	announce func()
}

func (e *emuADBDevice) current() (*emuRun, error) {
	r, err := readRun(e.dir)
	if err != nil {
		return nil, fmt.Errorf("the device is not running: %w", err)
	}
	return r, nil
}

func (e *emuADBDevice) online(ctx context.Context) (string, error) {
	for {
		if r, err := readRun(e.dir); err == nil && r.state(e.s.now()) == "device" {
			return adbdIdentity(r, e.s.now()), nil
		}
		if err := sleepCtx(ctx, pollInterval); err != nil {
			return "", err
		}
	}
}

// adbdIdentity is the system-identity part of the banner, which the host
// shows in `adb devices -l` as product:, model: and device:.
func adbdIdentity(r *emuRun, now time.Time) string {
	p := deviceProps(r, now)
	return "ro.product.name=" + p.get("ro.product.name") +
		";ro.product.model=" + p.get("ro.product.model") +
		";ro.product.device=" + p.get("ro.product.device")
}

func (e *emuADBDevice) shell(ctx context.Context) (*devShell, error) {
	r, err := e.current()
	if err != nil {
		return nil, err
	}
	return &devShell{s: e.s, ctx: ctx, run: r}, nil
}

func (e *emuADBDevice) files() (deviceFS, error) {
	r, err := e.current()
	if err != nil {
		return nil, err
	}
	return dataFS{run: r, lock: func(fn func() error) error { return e.s.withDataLock(r.AVDDir, fn) }}, nil
}

// root answers as the simulated adb binary does: an image with Play
// Store is a production build, whose adbd refuses; the others restart.
// The device keeps no root state, as the simulated binary keeps none.
func (e *emuADBDevice) root(want bool) (string, bool) {
	if !want {
		return "adbd not running as root\n", false
	}
	if r, err := e.current(); err == nil && strings.HasPrefix(r.Tag, "google_apis_playstore") {
		return "adbd cannot run as root in production builds\n", false
	}
	return "restarting adbd as root\n", true
}

// restarted: a server that learnt of the emulator from its announcement
// does not reconnect by itself once the connection drops, so the emulator
// announces itself again, as it does when its adbd comes back.
func (e *emuADBDevice) restarted() {
	if e.announce != nil {
		go e.announce()
	}
}

// announceToServer sends the emulator's registration to the adb server
// on serverPort: the smart-socket request "host:emulator:<adb port>"
// behind its 4-hex-digit length. The server answers nothing and connects
// to the adb port itself; no server listening is not an error (the real
// emulator carries on quietly too).
func announceToServer(ctx context.Context, serverPort, adbPort int) (bool, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(serverPort)))
	if err != nil {
		return false, nil
	}
	defer c.Close()
	req := "host:emulator:" + strconv.Itoa(adbPort)
	if _, err := fmt.Fprintf(c, "%04x%s", len(req), req); err != nil {
		return false, fmt.Errorf("announce to the adb server on port %d: %w", serverPort, err)
	}
	return true, nil
}

// serveADBD serves adbd on l until ctx ends; it returns once every
// connection it accepted has been closed. accepted, when set, is called
// for each connection.
func (s *sdk) serveADBD(ctx context.Context, l net.Listener, dev adbdDevice, accepted func()) {
	d := &adbd{dev: dev, log: slog.New(slog.DiscardHandler)}
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if accepted != nil {
			accepted()
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.serve(ctx, c)
		}()
	}
}
