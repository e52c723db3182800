package simsdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// The simulated emulator's adbd: the device end of adb's transport, served
// on the emulator's adb port (console port + 1). A real adb server
// connects there, either because its emulator scan found the port or
// because the emulator announced itself (adbd_announce.go). After the
// CNXN exchange (emulators skip AUTH) the host opens streams, each naming
// a service; the services answer from the same device model that the
// simulated adb binary drives (adbd_services.go, adbd_sync.go).

// adbdDevice is the device behind an adbd connection.
type adbdDevice interface {
	// online blocks until the guest's adbd would answer and returns the
	// banner's system-identity part ("ro.product.name=...;..."). Until it
	// returns the host lists the device as offline, as it does for a
	// booting emulator.
	online(ctx context.Context) (string, error)
	// shell is a device shell for one service: its commands see the
	// device as it is now.
	shell(ctx context.Context) (*devShell, error)
	// files is the device's file system for the sync service.
	files() (deviceFS, error)
	// root answers `adb root`/`adb unroot`: the text adbd prints and
	// whether adbd restarts (which ends the connection).
	root(want bool) (string, bool)
	// restarted is told that adbd dropped its connection to restart, so
	// the device can make itself known to the server again.
	restarted()
}

// adbdFeatures are the features the banner advertises. Each changes how
// a host talks to the device: shell_v2 gives `adb shell` exit codes and a
// separate stderr, cmd makes `adb install` stream the APK to `cmd
// package`, stat_v2/ls_v2 select STA2/LST2 in sync, fixed_push_mkdir lets
// the device create a pushed file's parent directories. abb and abb_exec
// are left out so that install takes the exec: path.
const adbdFeatures = "shell_v2,cmd,stat_v2,ls_v2,fixed_push_mkdir,apex,fixed_push_symlink_timestamp"

// adbd serves the transport protocol for one device.
type adbd struct {
	dev adbdDevice
	log *slog.Logger
}

var errStreamClosed = errors.New("adb stream closed")

// adbdConn is one host connection.
type adbdConn struct {
	d   *adbd
	rw  io.ReadWriteCloser
	ctx context.Context

	wmu sync.Mutex // one packet at a time on the wire

	mu      sync.Mutex
	maxData uint32
	streams map[uint32]*adbdStream
	nextID  uint32
	restart bool // a service asked adbd to restart
}

// serve runs the protocol on rw until the host goes away, ctx ends, or
// adbd restarts. It closes rw.
func (d *adbd) serve(ctx context.Context, rw io.ReadWriteCloser) error {
	ctx, cancel := context.WithCancel(ctx)
	c := &adbdConn{d: d, rw: rw, ctx: ctx, maxData: adbdMaxData, streams: map[uint32]*adbdStream{}}
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { _ = rw.Close() })
	defer func() {
		cancel()
		stop()
		_ = rw.Close()
		c.closeAll()
		wg.Wait()
		if c.restarting() {
			d.dev.restarted()
		}
	}()

	connected := false
	for {
		p, err := readADBPacket(rw, adbdMaxData)
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil || c.restarting() {
				return nil
			}
			return err
		}
		switch p.cmd {
		case adbCmdCNXN:
			// A second CNXN is a host that reconnected on the same
			// socket: its old streams are gone.
			c.closeAll()
			ident, err := d.dev.online(ctx)
			if err != nil {
				return nil // the device went away before adbd came up
			}
			maxData := uint32(adbdMaxData)
			if p.arg1 > 0 && p.arg1 < maxData {
				maxData = p.arg1
			}
			c.mu.Lock()
			c.maxData = maxData
			c.mu.Unlock()
			version := uint32(adbVersion)
			if p.arg0 < version {
				version = p.arg0
			}
			banner := "device::" + ident + ";features=" + adbdFeatures
			if err := c.send(adbPacket{cmd: adbCmdCNXN, arg0: version, arg1: adbdMaxData, data: []byte(banner)}); err != nil {
				return nil
			}
			connected = true
		case adbCmdOPEN:
			if !connected {
				continue
			}
			service := strings.TrimRight(string(p.data), "\x00")
			run, ok := d.service(service)
			if !ok {
				d.logf("adbd: refused service", "service", service)
				_ = c.send(adbPacket{cmd: adbCmdCLSE, arg0: 0, arg1: p.arg0})
				continue
			}
			st := c.open(p.arg0)
			if err := c.send(adbPacket{cmd: adbCmdOKAY, arg0: st.local, arg1: st.remote}); err != nil {
				return nil
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(ctx, st)
				st.close()
			}()
		case adbCmdOKAY:
			if st := c.stream(p.arg1); st != nil {
				st.acked(p.arg0)
			}
		case adbCmdWRTE:
			st := c.stream(p.arg1)
			if st == nil {
				continue // a stream that already closed: its CLSE is on the way
			}
			if !st.deliver(p.data) {
				return fmt.Errorf("adb: host wrote to stream %d before its last write was acknowledged", st.local)
			}
		case adbCmdCLSE:
			if st := c.stream(p.arg1); st != nil {
				st.closedByHost()
			}
		case adbCmdAUTH, adbCmdSTLS, adbCmdSYNC:
			// Emulators need no authentication and speak no TLS; SYNC
			// is obsolete. None of them is answered.
		}
	}
}

func (d *adbd) logf(msg string, args ...any) {
	if d.log != nil {
		d.log.Debug(msg, args...)
	}
}

func (c *adbdConn) send(p adbPacket) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.rw.Write(p.encode())
	return err
}

func (c *adbdConn) open(remote uint32) *adbdStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	st := &adbdStream{
		c: c, local: c.nextID, remote: remote,
		inbox: make(chan []byte, 1), ready: make(chan struct{}, 1), done: make(chan struct{}),
	}
	c.streams[st.local] = st
	return st
}

func (c *adbdConn) stream(local uint32) *adbdStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[local]
}

func (c *adbdConn) forget(local uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, local)
}

func (c *adbdConn) closeAll() {
	c.mu.Lock()
	all := make([]*adbdStream, 0, len(c.streams))
	for _, st := range c.streams {
		all = append(all, st)
	}
	c.mu.Unlock()
	for _, st := range all {
		st.closedByHost()
	}
}

// requestRestart makes the connection end once the current service has
// answered, as adbd does when it restarts as root.
func (c *adbdConn) requestRestart() {
	c.mu.Lock()
	c.restart = true
	c.mu.Unlock()
	_ = c.rw.Close()
}

func (c *adbdConn) restarting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restart
}

func (c *adbdConn) payloadMax() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.maxData)
}

// adbdStream is one open stream, seen by its service as a byte stream.
// Flow control is adb's: after each WRTE the sender waits for the peer's
// OKAY, so at most one payload is in flight each way.
type adbdStream struct {
	c             *adbdConn
	local, remote uint32

	inbox   chan []byte   // the host's unread WRTE (one at most)
	ready   chan struct{} // the host's OKAY for our last WRTE
	done    chan struct{} // closed when either side closed the stream
	once    sync.Once
	hostEnd bool // set before done closes when the host closed it
	pending []byte
	wmu     sync.Mutex
}

// deliver queues a host write; false when one was already unacknowledged.
func (st *adbdStream) deliver(b []byte) bool {
	select {
	case st.inbox <- b:
		return true
	default:
		return false
	}
}

func (st *adbdStream) acked(remote uint32) {
	if st.remote == 0 {
		st.remote = remote
	}
	select {
	case st.ready <- struct{}{}:
	default:
	}
}

// Read returns the host's bytes; io.EOF once the stream is closed and
// everything the host sent has been read.
func (st *adbdStream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(st.pending) == 0 {
		var chunk []byte
		select {
		case chunk = <-st.inbox:
		default:
			select {
			case chunk = <-st.inbox:
			case <-st.done:
				return 0, io.EOF
			}
		}
		// Acknowledge at once: the host may send its next payload while
		// this one is consumed, and the inbox has room for it.
		if err := st.c.send(adbPacket{cmd: adbCmdOKAY, arg0: st.local, arg1: st.remote}); err != nil {
			return 0, err
		}
		st.pending = chunk
	}
	n := copy(p, st.pending)
	st.pending = st.pending[n:]
	return n, nil
}

// Write sends p in payloads no larger than the connection allows, each
// after the host acknowledged the one before.
func (st *adbdStream) Write(p []byte) (int, error) {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	max := st.c.payloadMax()
	n := 0
	for n < len(p) {
		chunk := p[n:min(len(p), n+max)]
		select {
		case <-st.done:
			return n, errStreamClosed
		default:
		}
		if err := st.c.send(adbPacket{cmd: adbCmdWRTE, arg0: st.local, arg1: st.remote, data: chunk}); err != nil {
			return n, err
		}
		select {
		case <-st.ready:
		case <-st.done:
			return n, errStreamClosed
		}
		n += len(chunk)
	}
	return n, nil
}

// close ends the stream from the device's side: CLSE, unless the host
// closed it first.
func (st *adbdStream) close() {
	st.once.Do(func() {
		close(st.done)
		st.c.forget(st.local)
		_ = st.c.send(adbPacket{cmd: adbCmdCLSE, arg0: st.local, arg1: st.remote})
	})
}

func (st *adbdStream) closedByHost() {
	st.once.Do(func() {
		st.hostEnd = true
		close(st.done)
		st.c.forget(st.local)
	})
}
