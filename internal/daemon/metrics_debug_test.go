package daemon

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The token-less metrics listener answers the two memory reads and still
// nothing else: a forced collection reports a live heap, the heap profile
// is pprof's gzip-compressed format, and other debug paths stay unknown.
func TestMetricsListenerServesForcedGCAndHeapProfileOnly(t *testing.T) {
	h := metricsOnly(http.NotFoundHandler())

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/debug/gc", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("POST /debug/gc: %d %s", rec.Code, rec.Body)
	}
	var out forcedGC
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("POST /debug/gc body %q: %v", rec.Body, err)
	}
	if out.HeapLiveBytes == 0 || out.HeapObjects == 0 || out.GoroutineCount == 0 {
		t.Fatalf("forced GC reported %+v, want a live heap, objects and goroutines", out)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap?gc=1", nil))
	if rec.Code != http.StatusOK || !bytes.HasPrefix(rec.Body.Bytes(), []byte{0x1f, 0x8b}) {
		t.Fatalf("GET /debug/pprof/heap: %d, %d bytes, want a gzip profile", rec.Code, rec.Body.Len())
	}

	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/debug/gc"},
		{http.MethodGet, "/debug/pprof/goroutine"},
		{http.MethodGet, "/debug/pprof/"},
	} {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code == http.StatusOK {
			t.Errorf("%s %s answered 200, want it refused", c.method, c.path)
		}
	}
}
