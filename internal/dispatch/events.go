package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core/events"
)

// EventOut is a bus event as the contract shows it. A fleet fact carries
// its worker in the payload, surfaced as workerId.
func EventOut(e events.Event) contract.Event {
	ce := contract.Event{Seq: e.Seq, Type: e.Type, At: e.At.UTC(), DeviceID: e.DeviceID, LeaseID: e.LeaseID,
		RequesterID: e.RequesterID, Platform: e.Platform, Reason: e.Reason, Data: e.Data}
	if id, ok := e.Data["workerId"].(string); ok {
		ce.WorkerID = id
	}
	return ce
}

// GapOut is a bus gap as the contract shows it (nil stays nil).
func GapOut(g *events.Gap) *contract.EventsGap {
	if g == nil {
		return nil
	}
	return &contract.EventsGap{FromSeq: g.FromSeq, ToSeq: g.ToSeq}
}

// Journal is the durable record of earlier facts that events.subscribe
// replays from (the daemon's SQLite journal). Nil: the ring only.
type Journal interface {
	// EventsBetween returns the journaled facts with from <= Seq <= to, in
	// sequence order.
	EventsBetween(ctx context.Context, from, to uint64) ([]events.Event, error)
	// FirstSeqAt is the sequence number of the oldest journaled fact at or
	// after t; ok is false when there is none.
	FirstSeqAt(ctx context.Context, t time.Time) (seq uint64, ok bool, err error)
	// LastSeq is the newest journaled sequence number (0: empty).
	LastSeq(ctx context.Context) (uint64, error)
}

// ServeEvents answers events.subscribe from bus, for a worker and a gateway
// alike: the buffered events after in.Since, and with Follow every later one
// as an "event" push until ctx or stop ends, in sequence order. A follower
// that reads too slowly for the ring is pushed a "gap" naming exactly what
// it missed, then continues. An agent sees only the facts about what it
// owns (and every gap, since a gap may hide its own facts); an admin sees
// all. spawn runs the follower (nil: a plain goroutine) and may refuse
// (return false) when its owner is closing.
//
// With a journal, what the ring no longer holds (earlier runs, or facts it
// overwrote) is read from the journal first: a since below the ring, or a
// sinceTime, replays history and then follows live, without a gap or a
// duplicate in between. Without either, only this run's facts are read.
func ServeEvents(ctx context.Context, call *Call, bus *events.Bus, journal Journal, now time.Time, in contract.EventsSubscribeIn, stop <-chan struct{}, spawn func(func()) bool) (contract.EventsSubscribeOut, error) {
	visible := func(e contract.Event) bool {
		return call.Session.Role == contract.RoleAdmin || contract.OwnerOf(e) == call.Session.Principal
	}
	if in.SinceTime != "" && in.Since != 0 {
		return contract.EventsSubscribeOut{}, contract.Errorf(contract.CodeBadRequest, "since and sinceTime cannot be combined").
			WithNext("pass either a sequence number (since) or a time (sinceTime)")
	}
	since := in.Since
	var notBefore time.Time // sinceTime: facts older than it are left out
	if in.SinceTime != "" {
		t, err := contract.ParseSinceTime(in.SinceTime, now)
		if err != nil {
			return contract.EventsSubscribeOut{}, err
		}
		notBefore = t
		since = bus.Base() // without a journal: this run's ring, filtered by time
		if journal != nil {
			first, ok, err := journal.FirstSeqAt(ctx, t)
			if err != nil {
				return contract.EventsSubscribeOut{}, fmt.Errorf("read the events journal: %w", err)
			}
			if !ok {
				// Nothing journaled that recent: whatever there is, is
				// newer than the journal and still in the ring.
				first, err = journal.LastSeq(ctx)
				first++
			}
			if err != nil {
				return contract.EventsSubscribeOut{}, fmt.Errorf("read the events journal: %w", err)
			}
			since = first - 1
		}
	} else if since == 0 {
		// The default is this run's buffer; earlier runs only on request.
		since = bus.Base()
	}
	var evs []events.Event
	var gap *events.Gap
	var sub *events.Follower
	if in.Follow {
		// One step: the follower starts right after the backlog, so
		// nothing falls in between and nothing is sent twice.
		evs, gap, sub = bus.Follow(since)
	} else {
		evs, gap = bus.Since(since)
	}
	if gap != nil && journal != nil {
		var err error
		var older []events.Event
		if older, gap, err = fillGap(ctx, journal, *gap); err != nil {
			if sub != nil {
				sub.Close()
			}
			return contract.EventsSubscribeOut{}, fmt.Errorf("read the events journal: %w", err)
		}
		evs = append(older, evs...)
	}
	out := contract.EventsSubscribeOut{Events: []contract.Event{}, Dropped: gap != nil, Gap: GapOut(gap)}
	for _, e := range evs {
		if e.At.Before(notBefore) {
			continue
		}
		if ce := EventOut(e); visible(ce) {
			out.Events = append(out.Events, ce)
		}
	}
	if !in.Follow {
		return out, nil
	}
	if spawn == nil {
		spawn = func(f func()) bool { go f(); return true }
	}
	call.After(func() {
		started := spawn(func() {
			defer sub.Close()
			fctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-stop:
					cancel()
				case <-fctx.Done():
				}
			}()
			for {
				it, err := sub.Next(fctx)
				switch {
				case err != nil:
					return
				case it.Gap != nil:
					call.Push(contract.NotifyGap, *GapOut(it.Gap))
				default:
					if ce := EventOut(it.Event); visible(ce) {
						call.Push(contract.NotifyEvent, ce)
					}
				}
			}
		})
		if !started {
			sub.Close()
		}
	})
	return out, nil
}

// fillGap reads the facts of a ring gap from the journal. It returns the
// longest run of consecutive journaled facts that ends at the gap's end, and
// what is left of the gap before it (nil when the journal had it all): one
// gap at most, and nothing out of order.
func fillGap(ctx context.Context, j Journal, g events.Gap) ([]events.Event, *events.Gap, error) {
	evs, err := j.EventsBetween(ctx, g.FromSeq, g.ToSeq)
	if err != nil {
		return nil, nil, err
	}
	start := len(evs)
	for want := g.ToSeq; start > 0 && evs[start-1].Seq == want; want-- {
		start--
	}
	evs = evs[start:]
	if len(evs) == 0 {
		return nil, &g, nil
	}
	if first := evs[0].Seq; first > g.FromSeq {
		return evs, &events.Gap{FromSeq: g.FromSeq, ToSeq: first - 1}, nil
	}
	return evs, nil, nil
}
