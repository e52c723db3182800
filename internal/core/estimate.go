package core

import (
	"sync"
	"time"
)

// estimates remembers how long driver operations took on this machine, so
// a progress ETA tracks the host's own speed (a loaded CI box, a simulated
// SDK at a fraction of real time) rather than the driver's fixed guess.
type estimates struct {
	mu   sync.Mutex
	seen map[string]time.Duration // platform + "/" + op -> smoothed duration
}

// observe folds one successful operation's duration in; half weight to the
// newest keeps the figure current without one outlier owning it.
func (s *estimates) observe(platform string, op DriverOp, d time.Duration) {
	if d <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]time.Duration{}
	}
	k := platform + "/" + string(op)
	if old, ok := s.seen[k]; ok {
		d = (old + d) / 2
	}
	s.seen[k] = d
}

// of is the measured figure for op, or the driver's own estimate before
// anything was measured.
func (s *estimates) of(drv Driver, op DriverOp) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.seen[drv.Platform()+"/"+string(op)]; ok {
		return d
	}
	return drv.Estimate(op)
}

// measure runs one driver operation and, when it succeeds, records how
// long it took on now, the engine's clock.
func (s *estimates) measure(now func() time.Time, drv Driver, op DriverOp, f func() error) error {
	start := now()
	err := f()
	if err == nil {
		s.observe(drv.Platform(), op, now().Sub(start))
	}
	return err
}
