// Package loopback binds TCP ports on 127.0.0.1. An Android emulator's
// console and adb ports are a pair: the driver holds a leased pair while its
// emulator is down (so every program on the host sees it taken), and the
// simulated emulator binds its pair while it runs, as the real one does.
//
// Every bind that is closed again soon (a proof that a port is free, a held
// pair let go for an emulator to take) runs under a read lock of
// syscall.ForkLock. A process this one is starting holds a copy of every
// descriptor from its fork until its exec closes them; a listener closed
// in that window stays bound in the child, so the next bind of its port
// fails although nothing uses it. That is how eight Android devices
// provisioned at once used to fail a boot with "in use by another
// program": one goroutine let its pair go while another was starting an
// adb. The fork takes the lock for writing until its (vfork) child is
// released, so a proof's transient listener is never copied, and a closed
// held pair stays bound at most for the instant of that child's exec;
// the driver's boot proof looks again briefly to cover it (and macOS,
// where fork does not wait for the exec at all).
package loopback

import (
	"net"
	"strconv"
	"syscall"
)

// Hold listens on ports first..first+n-1. Connections are accepted and
// closed at once, so nothing that probes a held port hangs. When any port
// cannot be bound, none is held.
func Hold(first, n int) ([]net.Listener, bool) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	ls, ok := listen(first, n)
	if !ok {
		return nil, false
	}
	for _, l := range ls {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
	}
	return ls, true
}

// Bind listens on ports first..first+n-1 like Hold, but leaves accepting
// to the caller, which serves them (the simulated emulator answers adb on
// its adb port). When any port cannot be bound, none is held.
func Bind(first, n int) ([]net.Listener, bool) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return listen(first, n)
}

// Free reports whether ports first..first+n-1 can all be bound right now.
// When it returns, none of them is bound by this process.
func Free(first, n int) bool {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	ls, ok := listen(first, n)
	closeAll(ls)
	return ok
}

// Close closes every listener. When it returns, their ports are unbound,
// not kept by a child process that is still starting.
func Close(ls []net.Listener) {
	if len(ls) == 0 {
		return
	}
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	closeAll(ls)
}

// listen binds every port of the range or, failing one, none. The caller
// holds the fork lock.
func listen(first, n int) ([]net.Listener, bool) {
	var ls []net.Listener
	for p := first; p < first+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			closeAll(ls)
			return nil, false
		}
		ls = append(ls, l)
	}
	return ls, true
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}
