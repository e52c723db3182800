package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	rmetrics "runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/metrics"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/store"
)

// Journal batching: a batch is written journalDelay after its first fact,
// or as soon as it holds journalBatch facts. One transaction (and one WAL
// sync) per batch keeps the journal off the store connection the engine's
// commits use: writing each burst at once doubled a warm grant's latency.
// Pruning runs at start and then on pruneEvery.
const (
	journalBatch = 256
	journalDelay = 500 * time.Millisecond
	pruneEvery   = 10 * time.Minute
	// stopFlushWait bounds how long a stop waits for the journal to catch
	// up with the bus before the store closes.
	stopFlushWait = 5 * time.Second
)

// recorder is the daemon's one bus observer for record keeping: it feeds
// the metrics, writes the audit lines to daemon.log, and journals every
// fact in batches. Being an observer, it never blocks the bus or the
// engine's decisions: it only drains its own queue, and a slow write
// lets that queue grow.
type recorder struct {
	bus       *events.Bus
	db        *store.DB
	clock     ports.Clock
	metrics   *metrics.Metrics
	audit     *slog.Logger
	log       *slog.Logger
	retention struct {
		count  int
		maxAge time.Duration
	}
	obs       *events.Observer
	base      uint64      // the journal's newest seq at start
	stop      chan uint64 // the bus's last seq when the stop began
	done      chan struct{}
	stopOnce  sync.Once
	metricsLn net.Listener // metrics.listen, when set
}

// startRecorder continues the bus's sequence from the journal, binds
// metrics.listen (a taken port fails the start, like http.listen), and
// starts observing the bus before anything is published.
func (d *Daemon) startRecorder(ctx context.Context, o Options) error {
	last, err := d.db.LastSeq(ctx)
	if err != nil {
		return err
	}
	d.bus.ContinueFrom(last)
	d.journal = d.db
	r := &recorder{bus: d.bus, db: d.db, clock: o.Clock, audit: ports.Module(o.Logger, "audit"), log: ports.Module(o.Logger, "events"),
		stop: make(chan uint64, 1), done: make(chan struct{})}
	r.retention.count = o.Config.Events.Retention.Count
	r.retention.maxAge = time.Duration(o.Config.Events.Retention.MaxAgeMs) * time.Millisecond
	r.metrics = metrics.New(metrics.Options{Version: o.Version, GoVersion: runtime.Version(), Mode: o.Config.Mode, Snapshot: d.statusSnapshot})
	if addr := o.Config.Metrics.Listen; addr != "" {
		if r.metricsLn, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("metrics listen on %s: %w", addr, err)
		}
		srv := &http.Server{Handler: metricsOnly(r.metrics.Handler()), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
			ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)}
		go func() {
			if err := srv.Serve(r.metricsLn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("metrics listener stopped", "err", err)
			}
		}()
		d.log.Info("metrics listening", "addr", r.metricsLn.Addr().String())
	}
	r.base = last
	_, r.obs = d.bus.Observe(last)
	d.rec = r
	go r.run()
	return nil
}

// metricsOnly answers GET /metrics on the token-less listener, and the two
// memory reads an operator (or the benchmark harness) needs to tell a leak
// from garbage the collector has not returned yet: a heap profile and a
// forced collection. They live here, not on the HTTP API, because this
// listener is loopback-only and off unless configured; a heap profile holds
// call stacks and sizes, never lease data.
func metricsOnly(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("GET /debug/pprof/heap", serveHeapProfile)
	mux.HandleFunc("POST /debug/gc", serveForcedGC)
	return mux
}

// serveHeapProfile writes the heap profile (pprof's binary format; ?gc=1
// collects first, so it shows what is live). runtime/pprof, not
// net/http/pprof: importing that one registers handlers on the process-wide
// default mux as a side effect.
func serveHeapProfile(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("gc") == "1" {
		runtime.GC()
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := pprof.Lookup("heap").WriteTo(w, 0); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// forcedGC is POST /debug/gc's answer.
type forcedGC struct {
	// HeapLiveBytes is the heap the last collection marked live.
	HeapLiveBytes uint64 `json:"heapLiveBytes"`
	// HeapObjects counts the objects in the heap after it.
	HeapObjects uint64 `json:"heapObjects"`
	// GoroutineCount is how many goroutines exist, a leak's other face.
	GoroutineCount int `json:"goroutines"`
}

// serveForcedGC collects garbage and hands freed memory back to the
// operating system before answering, so the process's RSS read right after
// is what the live heap and the runtime really hold.
func serveForcedGC(w http.ResponseWriter, _ *http.Request) {
	debug.FreeOSMemory()
	samples := []rmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/objects:objects"}}
	rmetrics.Read(samples)
	out := forcedGC{GoroutineCount: runtime.NumGoroutine()}
	if samples[0].Value.Kind() == rmetrics.KindUint64 {
		out.HeapLiveBytes = samples[0].Value.Uint64()
	}
	if samples[1].Value.Kind() == rmetrics.KindUint64 {
		out.HeapObjects = samples[1].Value.Uint64()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// statusSnapshot is status.get as an admin sees it, for the gauges.
func (d *Daemon) statusSnapshot(ctx context.Context) (contract.StatusGetOut, error) {
	if d.disp == nil {
		return contract.StatusGetOut{}, errors.New("not serving yet")
	}
	call := &dispatch.Call{Session: contract.Session{Principal: "metrics", Role: contract.RoleAdmin, Compatible: true}}
	out, cerr := d.disp.Dispatch(ctx, call, contract.StatusGet.Name, []byte("{}"))
	if cerr != nil {
		return contract.StatusGetOut{}, cerr
	}
	switch st := out.(type) {
	case contract.StatusGetOut:
		return st, nil
	case *contract.StatusGetOut:
		return *st, nil
	}
	return contract.StatusGetOut{}, fmt.Errorf("status.get answered %T", out)
}

// MetricsHandler serves the daemon's metrics (the HTTP API mounts it).
func (d *Daemon) MetricsHandler() http.Handler {
	if d.rec == nil {
		return nil
	}
	return d.rec.metrics.Handler()
}

// MetricsAddr is the metrics.listen address ("" when off).
func (d *Daemon) MetricsAddr() string {
	if d.rec == nil || d.rec.metricsLn == nil {
		return ""
	}
	return d.rec.metricsLn.Addr().String()
}

func (r *recorder) run() {
	defer close(r.done)
	defer r.obs.Close()
	var batch []events.Event
	written := r.base        // the newest seq journaled or handed to a write
	var due <-chan time.Time // the pending batch's write time (nil: none pending)
	flush := func() {
		due = nil
		if len(batch) == 0 {
			return
		}
		if err := r.db.AppendEvents(context.Background(), batch); err != nil {
			// The facts are still on the bus and in the metrics; only the
			// history across a restart misses them.
			r.log.Error("journal write failed; events dropped from the journal", "fromSeq", batch[0].Seq, "toSeq", batch[len(batch)-1].Seq, "err", err)
		}
		written = batch[len(batch)-1].Seq
		batch = batch[:0]
	}
	take := func(e events.Event) {
		r.metrics.Observe(e)
		auditLine(r.audit, e)
		batch = append(batch, e)
		if len(batch) >= journalBatch {
			flush()
		} else if due == nil {
			due = r.clock.After(journalDelay)
		}
	}
	r.prune()
	prune := r.clock.After(pruneEvery)
	for {
		select {
		case e, ok := <-r.obs.C():
			if !ok {
				flush()
				return
			}
			take(e)
		case <-due:
			flush()
		case <-prune:
			r.prune()
			prune = r.clock.After(pruneEvery)
		case target := <-r.stop:
			// Everything published before the stop reaches the journal,
			// so the next start continues after it and reuses no seq.
			flush()
			deadline := r.clock.After(stopFlushWait)
			for written < target {
				select {
				case e, ok := <-r.obs.C():
					if !ok {
						flush()
						return
					}
					take(e)
					if e.Seq >= target {
						flush()
					}
				case <-deadline:
					flush()
					r.log.Warn("stopping before the journal caught up", "journaled", written, "published", target)
					return
				}
			}
			flush()
			return
		}
	}
}

func (r *recorder) prune() {
	before := r.clock.Now().Add(-r.retention.maxAge)
	n, err := r.db.PruneEvents(context.Background(), r.retention.count, before)
	if err != nil {
		r.log.Warn("events journal prune failed", "err", err)
		return
	}
	if n > 0 {
		r.log.Debug("events journal pruned", "dropped", n)
	}
}

// stopRecorder journals what is still queued and stops the observer and
// the metrics listener; the store may close after it.
func (d *Daemon) stopRecorder() {
	r := d.rec
	if r == nil {
		return
	}
	r.stopOnce.Do(func() {
		if r.metricsLn != nil {
			r.metricsLn.Close()
		}
		r.stop <- r.bus.LastSeq()
		<-r.done
	})
}
