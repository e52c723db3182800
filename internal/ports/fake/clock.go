// Package fake holds deterministic test doubles for the ports: a clock that
// moves only when told to, a process runner that replays scripted output, and
// fixed system statistics.
package fake

import (
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/ports"
)

// Clock is a manually advanced ports.Clock. Timers fire, in deadline order,
// only inside Advance.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*timer
}

type timer struct {
	c   *Clock
	at  time.Time
	seq int
	f   func()
	ch  chan time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) AfterFunc(d time.Duration, f func()) ports.Timer {
	return c.add(d, f, nil)
}

func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.add(d, nil, ch)
	return ch
}

func (c *Clock) add(d time.Duration, f func(), ch chan time.Time) *timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, at: c.now.Add(d), seq: c.seq, f: f, ch: ch}
	c.timers = append(c.timers, t)
	return t
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Pending reports how many timers are armed.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Advance moves the clock forward by d, running every timer that falls due,
// synchronously and in deadline order (AfterFunc callbacks run on the
// caller's goroutine so tests stay deterministic).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool {
			if c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].seq < c.timers[j].seq
			}
			return c.timers[i].at.Before(c.timers[j].at)
		})
		if len(c.timers) == 0 || c.timers[0].at.After(target) {
			c.now = target
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		if t.at.After(c.now) {
			c.now = t.at
		}
		now := c.now
		c.mu.Unlock()
		if t.f != nil {
			t.f()
		}
		if t.ch != nil {
			t.ch <- now
		}
	}
}
