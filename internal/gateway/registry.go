package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"sort"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// drainFile is workers.json: the gateway's one persisted state. Drain is
// an operator's decision about a machine, not something the machine
// reports, so it survives both a worker reconnect and a gateway restart.
type drainFile struct {
	Version int            `json:"version"`
	Drained []drainedEntry `json:"drained"`
}

type drainedEntry struct {
	ID    string `json:"id"`
	Label string `json:"label,omitempty"`
}

func (g *Gateway) loadDrained() error {
	if g.o.Store != nil {
		return g.loadDrainedFromStore()
	}
	return g.loadDrainFile()
}

// loadDrainedFromStore reads the drained set from the store. A gateway
// that kept it in workers.json before it had a store brings that file's
// entries over once, the first time it starts with an empty set.
func (g *Gateway) loadDrainedFromStore() error {
	ctx := context.Background()
	set, err := g.o.Store.Drained(ctx)
	if err != nil {
		return fmt.Errorf("gateway: read the drained set: %w", err)
	}
	if len(set) == 0 && g.o.DrainFile != "" {
		if err := g.loadDrainFile(); err != nil {
			return err
		}
		for id, label := range g.drained {
			if err := g.o.Store.SetDrained(ctx, id, label, true); err != nil {
				return fmt.Errorf("gateway: bring %s into the store: %w", g.o.DrainFile, err)
			}
		}
		return nil
	}
	maps.Copy(g.drained, set)
	return nil
}

func (g *Gateway) loadDrainFile() error {
	if g.o.DrainFile == "" {
		return nil
	}
	b, err := g.o.FS.ReadFile(g.o.DrainFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gateway: read %s: %w", g.o.DrainFile, err)
	}
	var f drainFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("gateway: %s is not a drained-worker list: %w", g.o.DrainFile, err)
	}
	for _, e := range f.Drained {
		if e.ID != "" {
			g.drained[e.ID] = e.Label
		}
	}
	return nil
}

// saveDrainedLocked persists one change to the drained set: in the store,
// or by rewriting workers.json atomically, owner-only.
func (g *Gateway) saveDrainedLocked(id, label string, drained bool) error {
	if g.o.Store != nil {
		return g.o.Store.SetDrained(context.WithoutCancel(g.ctx), id, label, drained)
	}
	if g.o.DrainFile == "" {
		return nil
	}
	f := drainFile{Version: 1, Drained: []drainedEntry{}}
	for id, label := range g.drained {
		f.Drained = append(f.Drained, drainedEntry{ID: id, Label: label})
	}
	sort.Slice(f.Drained, func(i, j int) bool { return f.Drained[i].ID < f.Drained[j].ID })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return g.o.FS.WriteFileAtomic(g.o.DrainFile, append(b, '\n'))
}

func unknownWorker(id string) *contract.Error {
	return contract.Errorf(contract.CodeUnknownDevice, "the gateway knows no worker %q", id).
		WithDetails("workerId", id).
		WithNext("list workers with `simlock worker list`")
}

// setDrain starts or ends a worker's drain. A drained worker keeps its
// leases and gets no new dispatches. A worker known only from the drained
// set (not connected since the gateway started) can be undrained too.
func (g *Gateway) setDrain(id string, drain bool) (contract.WorkerOut, error) {
	g.mu.Lock()
	w := g.workers[id]
	if w != nil && !w.known {
		w = nil
	}
	label, was := g.drained[id]
	if w == nil && !was {
		g.mu.Unlock()
		return contract.WorkerOut{}, unknownWorker(id)
	}
	if w != nil {
		label = w.label
	}
	var typ string
	if drain && !was {
		g.drained[id] = label
		typ = "worker.drain-started"
	} else if !drain && was {
		delete(g.drained, id)
		typ = "worker.drain-ended"
	}
	if typ != "" {
		if err := g.saveDrainedLocked(id, label, drain); err != nil {
			if drain {
				delete(g.drained, id)
			} else {
				g.drained[id] = label
			}
			g.mu.Unlock()
			return contract.WorkerOut{}, fmt.Errorf("gateway: persist the drained set: %w", err)
		}
	}
	var view contract.WorkerView
	if w != nil {
		view = g.viewLocked(w)
	} else {
		_, still := g.drained[id]
		view = contract.WorkerView{ID: id, Label: label, State: contract.WorkerDisconnected, Drained: still}
	}
	g.mu.Unlock()
	if typ != "" {
		g.publish(events.Event{Type: typ, Data: map[string]any{"workerId": id, "label": label}})
	}
	if !drain {
		g.kickDispatch()
	}
	return contract.WorkerOut{Worker: view}, nil
}

// remove forgets a worker that is not connected. Its drain, if any, stays
// until undrain.
func (g *Gateway) remove(id string) (contract.WorkerOut, error) {
	g.mu.Lock()
	w := g.workers[id]
	if w == nil || !w.known {
		g.mu.Unlock()
		return contract.WorkerOut{}, unknownWorker(id)
	}
	if w.link != nil {
		g.mu.Unlock()
		return contract.WorkerOut{}, contract.Errorf(contract.CodeDeviceInUse, "worker %s is connected; only a disconnected worker can be removed", id).
			WithDetails("workerId", id, "state", w.state).
			WithNext("stop the worker's daemon (or remove its gateway.url) first; `simlock worker drain` stops new leases without disconnecting it")
	}
	view := g.viewLocked(w)
	g.forgetLocked(w)
	g.mu.Unlock()
	g.publish(events.Event{Type: "worker.removed", Reason: "operator", Data: map[string]any{"workerId": id, "label": w.label}})
	return contract.WorkerOut{Worker: view}, nil
}
