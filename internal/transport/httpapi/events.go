package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/transport/outbox"
)

// serveEvents streams events.subscribe as Server-Sent Events: the backlog
// after ?since= (or the Last-Event-ID a reconnecting EventSource sends),
// then every new event, in sequence order, until the client leaves or the
// server closes. Each event is one SSE message whose id is the event's seq
// and whose data is the contract Event. What the client can no longer get
// (the ring has moved past it, or it read too slowly) arrives in its place
// as one "gap" message; a comment line keeps idle proxies from timing out.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, rt route) {
	params, cerr := rt.input(w, r)
	if cerr != nil {
		writeError(w, cerr, nil)
		return
	}
	var in contract.EventsSubscribeIn
	if err := contract.Decode(params, &in); err != nil {
		writeError(w, contract.AsError(err), nil)
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		seq, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			writeError(w, contract.Errorf(contract.CodeBadRequest, "Last-Event-ID %q is not an event seq", id), nil)
			return
		}
		// A reconnect resumes where it left off, whatever the URL's
		// sinceTime first asked for.
		in.Since, in.SinceTime = seq, ""
	}
	in.Follow = true
	params, _ = json.Marshal(in)

	lift(w)
	sse := newSSEWriter(w, s.writeStall)
	defer sse.close()
	sink := newEventSink(sse.event, sse.gap)
	res, after, err := s.b.Dispatch(r.Context(), sessionOf(r), rt.op.Name, params, sink.notify)
	if err != nil {
		writeError(w, err, nil)
		runAfter(after)
		return
	}
	out, _ := asSubscribeOut(res)
	w.Header().Set("Content-Type", mediaSSE)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // ask reverse proxies not to buffer the stream
	w.WriteHeader(http.StatusOK)
	sink.start(out)
	sse.flush()
	runAfter(after)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sse.box.Done(): // the client stopped reading and was cut off
			return
		case <-s.clock.After(keepAlive):
			sse.comment("keep-alive")
		}
	}
}

// sseWriter queues SSE writes in an outbox, so the event follower never
// waits on the client; its writer goroutine owns the ResponseWriter until
// close. A client that stops reading fails the box (see outbox).
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	box *outbox.Box
}

func newSSEWriter(w http.ResponseWriter, stall time.Duration) *sseWriter {
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	s.box = outbox.New(outbox.SinkFunc(s.writeChunk), outbox.Options{Stall: stall})
	return s
}

func (s *sseWriter) event(e contract.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	s.message("", strconv.FormatUint(e.Seq, 10), string(b))
}

// gap tells the client that events FromSeq..ToSeq will never reach it:
// the ring no longer held them when it asked (Last-Event-ID or ?since=
// too old) or it read too slowly. The message's id is ToSeq, so a
// reconnecting EventSource resumes after the gap instead of asking for
// it again.
func (s *sseWriter) gap(g contract.EventsGap) {
	b, err := json.Marshal(g)
	if err != nil {
		return
	}
	s.message(contract.NotifyGap, strconv.FormatUint(g.ToSeq, 10), string(b))
}

// message writes one SSE message. data is a single line of JSON, so it
// needs no splitting across data: fields.
func (s *sseWriter) message(event, id, data string) {
	msg := ""
	if event != "" {
		msg += "event: " + event + "\n"
	}
	if id != "" {
		msg += "id: " + id + "\n"
	}
	s.write(msg + "data: " + data + "\n\n")
}

func (s *sseWriter) comment(text string) { s.write(": " + text + "\n\n") }

func (s *sseWriter) write(chunk string) { s.box.Send([]byte(chunk)) }

// writeChunk runs on the writer goroutine; an empty chunk only flushes.
func (s *sseWriter) writeChunk(b []byte, deadline time.Time) error {
	_ = s.rc.SetWriteDeadline(deadline)
	if len(b) > 0 {
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

func (s *sseWriter) flush() { s.box.Send(nil) }

// close stops the writer before the handler returns the ResponseWriter.
func (s *sseWriter) close() {
	s.box.Abort()
	<-s.box.Done()
}
