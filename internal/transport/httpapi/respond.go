package httpapi

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/transport/outbox"
)

// StatusFor is the one mapping from a contract error code to an HTTP
// status: the error table's HTTPStatus column (a code this build does not
// know gets UNKNOWN_DAEMON_ERROR's row).
func StatusFor(code contract.Code) int { return contract.InfoFor(code).HTTPStatus }

// ErrorBody is every error response: the contract error object, unchanged,
// so it is byte-identical to the socket's error.data. Notices rides beside
// it only on a renew that finds its lease gone (see notices.go).
type ErrorBody struct {
	Error   *contract.Error        `json:"error"`
	Notices []contract.LeaseNotice `json:"notices,omitempty"`
}

const (
	mediaJSON   = "application/json"
	mediaNDJSON = "application/x-ndjson"
	mediaSSE    = "text/event-stream"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, contract.Errorf(contract.CodeInternal, "encode response: %v", err), nil)
		return
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError answers e with its table status. A 401 names the scheme; a
// retry hint becomes Retry-After too.
func writeError(w http.ResponseWriter, e *contract.Error, notices []contract.LeaseNotice) {
	status := StatusFor(e.Code)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="simlock"`)
	}
	if e.RetryAfterMs != nil && *e.RetryAfterMs > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt((*e.RetryAfterMs+999)/1000, 10))
	}
	b, _ := json.Marshal(ErrorBody{Error: e, Notices: notices})
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// accepts reports whether the Accept header names media type mt.
func accepts(r *http.Request, mt string) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if t, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && t == mt {
				return true
			}
		}
	}
	return false
}

// prefs is what the Prefer header (RFC 7240) asks for.
type prefs struct {
	wait         time.Duration
	hasWait      bool
	respondAsync bool
	// keepOpen keeps an NDJSON response open after its result line, for
	// operations whose pushes outlive the response (followed events).
	keepOpen bool
}

func parsePrefer(h http.Header) prefs {
	var p prefs
	for _, v := range h.Values("Prefer") {
		for _, part := range strings.Split(v, ",") {
			tok, val, _ := strings.Cut(strings.TrimSpace(part), "=")
			tok = strings.ToLower(strings.TrimSpace(tok))
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch tok {
			case "wait":
				if n, err := strconv.ParseInt(val, 10, 64); err == nil && n >= 0 {
					p.wait, p.hasWait = capWait(n), true
				}
			case "respond-async":
				p.respondAsync = true
			case "keep-open":
				p.keepOpen = true
			}
		}
	}
	return p
}

func capWait(seconds int64) time.Duration {
	if seconds > int64(MaxWait/time.Second) {
		return MaxWait
	}
	return time.Duration(seconds) * time.Second
}

// The deadlines below are kernel I/O plumbing, so they read the wall clock
// even when a fake ports.Clock drives the waits.

// lift removes the server's read and write deadlines for a request whose
// length the dispatcher or the route's own cap governs (see Serve).
func lift(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

// call runs one operation for the request and answers it: JSON with the
// table status, or NDJSON when the client accepts it (pushes as lines, then
// the result line; kept open afterwards with Prefer: keep-open).
func (s *Server) call(w http.ResponseWriter, r *http.Request, method string, params json.RawMessage, okStatus int) {
	lift(w)
	sess := sessionOf(r)
	if accepts(r, mediaNDJSON) {
		s.stream(w, r, sess, method, params, okStatus)
		return
	}
	res, after, err := s.b.Dispatch(r.Context(), sess, method, params, nil)
	if err != nil {
		writeError(w, err, nil)
	} else {
		writeJSON(w, okStatus, res)
	}
	runAfter(after)
}

func runAfter(after func()) {
	if after != nil {
		after()
	}
}

// Lines of an NDJSON response. A push carries method and params, the final
// line result or error; the error line has the same shape as ErrorBody.
type pushLine struct {
	Method string `json:"method"`
	Params any    `json:"params"`
}

type resultLine struct {
	Result any `json:"result"`
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, sess contract.Session, method string, params json.RawMessage, okStatus int) {
	// A client that stops reading is cut off, and its call withdrawn, as a
	// socket client's would be: the pushes only ever queue (see outbox).
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ls := newLineStream(w, s.writeStall, cancel)
	defer ls.close(ctx)
	notify := func(m string, p any) { ls.push(ctx, m, p) }
	res, after, err := s.b.Dispatch(ctx, sess, method, params, notify)
	if err != nil {
		ls.finish(StatusFor(err.Code), ErrorBody{Error: err})
		runAfter(after)
		return
	}
	ls.finish(okStatus, resultLine{Result: res})
	if !parsePrefer(r.Header).keepOpen {
		runAfter(after)
		return
	}
	runAfter(after)
	<-ctx.Done() // pushes flow until the client leaves, stops reading, or the server closes
}

// lineStream writes NDJSON lines through an outbox: its one writer
// goroutine owns the ResponseWriter until close, each line is flushed with
// a write deadline, and producers never wait. The status is that of the
// first line, so a call refused before any push still gets its table
// status.
type lineStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	box *outbox.Box

	mu      sync.Mutex
	status  int  // of the first line queued
	queued  bool // a line has been queued
	started bool // the writer has sent the header
}

func newLineStream(w http.ResponseWriter, stall time.Duration, onFail func()) *lineStream {
	ls := &lineStream{w: w, rc: http.NewResponseController(w)}
	ls.box = outbox.New(outbox.SinkFunc(ls.writeLine), outbox.Options{Stall: stall, OnFail: func(error) { onFail() }})
	return ls
}

// writeLine runs on the writer goroutine only.
func (ls *lineStream) writeLine(b []byte, deadline time.Time) error {
	ls.mu.Lock()
	if !ls.started {
		ls.started = true
		ls.w.Header().Set("Content-Type", mediaNDJSON)
		ls.w.Header().Set("Cache-Control", "no-store")
		ls.w.WriteHeader(ls.status)
	}
	ls.mu.Unlock()
	_ = ls.rc.SetWriteDeadline(deadline)
	if _, err := ls.w.Write(b); err != nil {
		return err
	}
	return ls.rc.Flush()
}

func (ls *lineStream) line(status int, v any) ([]byte, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	ls.mu.Lock()
	if !ls.queued {
		ls.queued, ls.status = true, status
	}
	ls.mu.Unlock()
	return append(b, '\n'), true
}

// push queues a push line; only the newest progress waits to be written,
// and command output waits for room (outbox.SendPaced) so a slow reader
// slows only its own command.
func (ls *lineStream) push(ctx context.Context, method string, params any) {
	b, ok := ls.line(http.StatusOK, pushLine{Method: method, Params: params})
	if !ok {
		return
	}
	switch method {
	case contract.NotifyProgress:
		ls.box.SendLatest("progress", b)
	case contract.NotifyOutput:
		ls.box.SendPaced(ctx, b)
	default:
		ls.box.Send(b)
	}
}

// finish queues the result (or error) line and waits until it is written
// or the stream has failed: the after hooks follow the response.
func (ls *lineStream) finish(status int, v any) {
	if b, ok := ls.line(status, v); ok {
		<-ls.box.SendNotify(b)
	}
}

// close ends the stream before the handler returns, after which the
// ResponseWriter is not ours: what is queued is written (each write
// bounded) unless the client is gone.
func (ls *lineStream) close(ctx context.Context) {
	if ctx.Err() != nil {
		ls.box.Abort()
	} else {
		ls.box.Close()
	}
	<-ls.box.Done()
}
