package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/daemon/daemontest"
	"github.com/simlock/simlock/internal/transport/httpapi"
)

func newUploadFixture(t *testing.T, maxBytes int64) *fixture {
	t.Helper()
	st := daemontest.Start(t, daemontest.Options{Config: func(c *config.Config) { c.Upload.MaxBytes = maxBytes }})
	f := &fixture{t: t, st: st, clk: st.Clock, principals: map[string]string{}}
	f.agent, _ = st.Token(contract.TokenRoleAgent, "agent1")
	f.agent2, _ = st.Token(contract.TokenRoleAgent, "agent2")
	f.s = httpapi.New(httpapi.Options{Backend: st.Backend(), Clock: st.Clock, Version: "1.2.3"})
	f.ts = httptest.NewServer(f.s.Handler())
	t.Cleanup(f.ts.Close)
	t.Cleanup(f.s.Close)
	return f
}

// put sends body as a PUT; known says whether Content-Length is sent (a
// reader the client cannot size goes out chunked).
func (f *fixture) put(path, token string, body []byte, known bool) (int, []byte) {
	f.t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if !known {
		rd = io.MultiReader(rd)
	}
	req, _ := http.NewRequest(http.MethodPut, f.ts.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestUploadPutStreamsTheBodyIntoTheLeasesScratch(t *testing.T) {
	f := newUploadFixture(t, 8<<20)
	l := f.lease(f.agent)
	data := bytes.Repeat([]byte("simlock!"), (3*contract.UploadChunkBytes+5)/8)
	for _, known := range []bool{true, false} {
		status, b := f.put("/v1/leases/"+l.LeaseID+"/uploads/app.apk", f.agent, data, known)
		var out contract.DeviceUploadOut
		sum := sha256.Sum256(data)
		if status != 200 || json.Unmarshal(b, &out) != nil || !out.Complete || out.Received != int64(len(data)) || out.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("PUT (length known %v): %d %s", known, status, b)
		}
	}
	// The fake tool echoes its arguments: {upload:app.apk} became the path.
	resp := f.req("POST", "/v1/leases/"+l.LeaseID+"/exec", f.agent, `{"tool":"fakectl","args":["install","{upload:app.apk}"]}`,
		"Accept", httpapi.MediaNDJSON)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var path string
	for _, line := range strings.Split(string(b), "\n") {
		var push struct {
			Params contract.ExecOutput `json:"params"`
		}
		if json.Unmarshal([]byte(line), &push) == nil && push.Params.Stream == "stdout" {
			path = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(push.Params.Chunk), "install "))
		}
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) || filepath.Base(path) != "app.apk" {
		t.Fatalf("exec saw %q (%v) in %s", path, err, b)
	}

	// Over the cap: 413 before anything is stored, declared or not.
	for _, known := range []bool{true, false} {
		status, b := f.put("/v1/leases/"+l.LeaseID+"/uploads/big.bin", f.agent, make([]byte, 8<<20+1), known)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), string(contract.CodeUploadTooLarge)) {
			t.Fatalf("over the cap (length known %v): %d %s", known, status, b)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("the scratch holds %d entries after refusals", len(ents))
	}
	// Not the caller's lease, and not a base name.
	if status, _ := f.put("/v1/leases/"+l.LeaseID+"/uploads/x.bin", f.agent2, []byte("x"), true); status != http.StatusForbidden {
		t.Fatalf("another agent's PUT: %d", status)
	}
	if status, _ := f.put("/v1/leases/"+l.LeaseID+"/uploads/..", f.agent, []byte("x"), true); status == 200 {
		t.Fatal("a PUT to .. was stored")
	}
}

// The route splits any body: empty, on a chunk boundary, one byte past it;
// with a Content-Length or chunked.
func TestUploadPutSplitsEveryLength(t *testing.T) {
	f := newUploadFixture(t, 8<<20)
	l := f.lease(f.agent)
	for _, size := range []int{0, 1, contract.UploadChunkBytes, contract.UploadChunkBytes + 1, 2 * contract.UploadChunkBytes} {
		data := bytes.Repeat([]byte{0x5a}, size)
		for _, known := range []bool{true, false} {
			status, b := f.put("/v1/leases/"+l.LeaseID+"/uploads/f.bin", f.agent, data, known)
			var out contract.DeviceUploadOut
			sum := sha256.Sum256(data)
			if status != 200 || json.Unmarshal(b, &out) != nil || out.Received != int64(size) || out.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("%d bytes (length known %v): %d %s", size, known, status, b)
			}
		}
	}
}
