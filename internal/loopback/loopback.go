// Package loopback binds TCP ports on 127.0.0.1. An Android emulator's
// console and adb ports are a pair: the driver holds a leased pair while its
// emulator is down (so every program on the host sees it taken), and the
// simulated emulator binds its pair while it runs, as the real one does.
package loopback

import (
	"net"
	"strconv"
)

// Hold listens on ports first..first+n-1. Connections are accepted and
// closed at once, so nothing that probes a held port hangs. When any port
// cannot be bound, none is held.
func Hold(first, n int) ([]net.Listener, bool) {
	var ls []net.Listener
	for p := first; p < first+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			Close(ls)
			return nil, false
		}
		ls = append(ls, l)
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

// Free reports whether ports first..first+n-1 can all be bound right now.
func Free(first, n int) bool {
	var ls []net.Listener
	defer func() { Close(ls) }()
	for p := first; p < first+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		ls = append(ls, l)
	}
	return true
}

// Close closes every listener.
func Close(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}
