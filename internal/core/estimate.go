package core

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// TimingStore keeps the measured driver timings across daemon runs, so the
// first progress ETA after a start is this home's figure, not the driver's
// fixed guess. Keys are opaque to the store.
type TimingStore interface {
	LoadTimings(ctx context.Context) (map[string]time.Duration, error)
	SaveTimings(ctx context.Context, timings map[string]time.Duration) error
}

// estimates remembers how long driver operations took on this machine, so
// a progress ETA tracks the host's own speed (a loaded CI box, a simulated
// SDK at a fraction of real time) rather than the driver's fixed guess.
type estimates struct {
	mu   sync.Mutex
	seen map[string]time.Duration // platform + "/" + op [+ "@" + scope] -> smoothed duration
	// scope separates figures measured under different speeds of one
	// platform (Config.TimingScope); "" is the plain platform.
	scope string
	// save persists a snapshot after each measurement (nil: memory only);
	// saveMu keeps an older snapshot from overwriting a newer one.
	save   func(map[string]time.Duration)
	saveMu sync.Mutex
}

func (s *estimates) key(platform string, op DriverOp) string {
	k := platform + "/" + string(op)
	if s.scope != "" {
		k += "@" + s.scope
	}
	return k
}

// seed starts from figures an earlier run measured.
func (s *estimates) seed(m map[string]time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]time.Duration{}
	}
	for k, d := range m {
		if d > 0 {
			s.seen[k] = d
		}
	}
}

// observe folds one successful operation's duration in; half weight to the
// newest keeps the figure current without one outlier owning it.
func (s *estimates) observe(platform string, op DriverOp, d time.Duration) {
	if d <= 0 {
		return
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	if s.seen == nil {
		s.seen = map[string]time.Duration{}
	}
	k := s.key(platform, op)
	if old, ok := s.seen[k]; ok {
		d = (old + d) / 2
	}
	s.seen[k] = d
	var snap map[string]time.Duration
	if s.save != nil {
		snap = make(map[string]time.Duration, len(s.seen))
		for k, v := range s.seen {
			snap[k] = v
		}
	}
	s.mu.Unlock()
	if snap != nil {
		s.save(snap)
	}
}

// of is the measured figure for op, or the driver's own estimate before
// anything was measured.
func (s *estimates) of(drv Driver, op DriverOp) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.seen[s.key(drv.Platform(), op)]; ok {
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

// attach seeds the estimates from store and saves every later measurement
// to it. A store that fails costs only the ETA's accuracy, so failures are
// logged, never returned.
func (s *estimates) attach(store TimingStore, log *slog.Logger) {
	// Construction reads one small row; nothing waits on it to cancel.
	ctx := context.Background()
	m, err := store.LoadTimings(ctx)
	if err != nil {
		log.Warn("load measured timings; ETAs start from the drivers' guesses", "err", err)
	}
	s.seed(m)
	s.save = func(m map[string]time.Duration) {
		if err := store.SaveTimings(ctx, m); err != nil {
			log.Warn("save measured timings", "err", err)
		}
	}
}
