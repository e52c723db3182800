// Package connlimit keeps one listener from spending the process's file
// descriptors: it caps the connections a listener holds open, and its
// accept loop helper rides out a moment without descriptors (EMFILE,
// ENFILE) instead of stopping for good.
package connlimit

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Default is the cap for one listener: a quarter of the process's open
// file limit, so that a flood on one listener (idle TCP connections to the
// HTTP port) leaves descriptors for the other (the unix socket) and for the
// store. It stays within [8, 1024].
func Default() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1024
	}
	return int(min(max(rl.Cur/4, 8), 1024))
}

// Listen wraps ln so that at most n accepted connections are open at once.
// Accept waits for a slot rather than refusing: a waiting connection stays
// in the kernel's backlog and costs this process no descriptor. n <= 0
// returns ln unchanged.
func Listen(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return &listener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

type listener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &conn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Temporary reports whether an Accept error is worth retrying: the process
// or the system is out of descriptors or buffers for a moment, or one
// connection was aborted before it was accepted.
func Temporary(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// Backoff paces retries of a failing accept: 5 ms doubling to 1 s, reset
// by a success.
type Backoff struct{ d time.Duration }

// Wait sleeps for the next delay, or until ctx ends (false).
func (b *Backoff) Wait(ctx context.Context) bool {
	if b.d == 0 {
		b.d = 5 * time.Millisecond
	} else {
		b.d = min(2*b.d, time.Second)
	}
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Reset is called after a successful accept.
func (b *Backoff) Reset() { b.d = 0 }

// Delay is the delay the last Wait slept.
func (b *Backoff) Delay() time.Duration { return b.d }
