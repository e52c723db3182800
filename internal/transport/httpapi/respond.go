package httpapi

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
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
	ls := &lineStream{w: w, rc: http.NewResponseController(w)}
	defer ls.close()
	notify := func(m string, p any) { ls.write(http.StatusOK, pushLine{Method: m, Params: p}) }
	res, after, err := s.b.Dispatch(r.Context(), sess, method, params, notify)
	if err != nil {
		ls.write(StatusFor(err.Code), ErrorBody{Error: err})
		runAfter(after)
		return
	}
	ls.write(okStatus, resultLine{Result: res})
	if !parsePrefer(r.Header).keepOpen {
		ls.close()
		runAfter(after)
		return
	}
	runAfter(after)
	<-r.Context().Done() // pushes flow until the client leaves or the server closes
}

// lineStream writes NDJSON lines, serialized, each flushed. The status is
// that of the first line, so a call refused before any push still gets its
// table status. Writes after close are dropped: a push can race the end of
// the handler.
type lineStream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	closed  bool
}

func (ls *lineStream) write(status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return
	}
	if !ls.started {
		ls.started = true
		ls.w.Header().Set("Content-Type", mediaNDJSON)
		ls.w.Header().Set("Cache-Control", "no-store")
		ls.w.WriteHeader(status)
	}
	_ = ls.rc.SetWriteDeadline(time.Now().Add(writeStall))
	if _, err := ls.w.Write(append(b, '\n')); err != nil {
		ls.closed = true
		return
	}
	_ = ls.rc.Flush()
}

func (ls *lineStream) close() {
	ls.mu.Lock()
	ls.closed = true
	ls.mu.Unlock()
}
