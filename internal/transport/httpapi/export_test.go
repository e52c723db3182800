package httpapi

// Test-only views into the server's frontend state, for the black-box
// tests (package httpapi_test) that run the HTTP server over a real daemon.
// Tests use them to wait for a state, never to change one.

const (
	MediaNDJSON = mediaNDJSON
	MediaSSE    = mediaSSE
)

// PollsWaiting counts the polls waiting on handles (their timers armed).
func PollsWaiting(s *Server) int {
	t := s.requests
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.m {
		n += p.polls
	}
	return n
}

// HandlesWaiting counts the handles still waiting for an outcome
// (answered ones stay a while for retried polls).
func HandlesWaiting(s *Server) int {
	t := s.requests
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.m {
		if !p.finished {
			n++
		}
	}
	return n
}

// HandleState reports on handle id, or with "" on the one still waiting.
func HandleState(s *Server, id string) (progress, finished bool) {
	t := s.requests
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.m {
		if p.id == id || id == "" && !p.finished {
			return p.progress != nil, p.finished
		}
	}
	return false, false
}

// NoticesBuffered reports how many notices wait for lease id and whether
// the lease has ended.
func NoticesBuffered(s *Server, id string) (n int, ended bool) {
	b := s.notices
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.leases[id]; ok {
		return len(e.notes), e.ended
	}
	return 0, false
}

// OpenAPIBytes is the document the server serves at /v1/openapi.json.
func OpenAPIBytes(s *Server) []byte { return s.openapi() }
