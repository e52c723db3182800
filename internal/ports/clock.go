// Package ports declares the narrow interfaces through which simlock reaches
// the outside world (clock, processes, files, system statistics, parent
// processes, logging) together with their real adapters. Fakes for tests live
// in ports/fake. Everything in core depends on these interfaces, never on the
// standard library facilities they wrap, so that decisions can be tested
// deterministically.
package ports

import "time"

// Clock is the only source of time for simlock's core.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
	// After returns a channel that receives once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// Timer is a cancellable pending call created by Clock.AfterFunc.
type Timer interface {
	// Stop prevents the call from running; it reports whether it did so.
	Stop() bool
}

// SystemClock is the real wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
