package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/simlock/simlock/contract"
)

// serveUpload is PUT /v1/leases/{id}/uploads/{name}: the raw body is read a
// chunk at a time and each chunk goes through the dispatcher as the same
// device.upload call a socket client sends, so the cap, the disk guard and
// (on a gateway) the forwarding to the worker are the socket path's own.
// At most two chunks of the body are in memory, and the body is read only
// as fast as chunks are stored, so a slow disk or worker slows the sender
// (ADR 0034).
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.RawQuery) > 0 {
		writeError(w, contract.Errorf(contract.CodeBadRequest, "PUT /v1/leases/{id}/uploads/{name} takes no query parameters"), nil)
		return
	}
	in := contract.DeviceUploadIn{LeaseID: r.PathValue("id"), Name: r.PathValue("name")}
	if r.ContentLength > 0 {
		in.SizeBytes = r.ContentLength
	}
	// The server's 30 s request deadline would cut a large file off;
	// instead each chunk must arrive within writeStall of the last.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	sess := sessionOf(r)
	body := r.Body
	if body == nil {
		body = http.NoBody
	}
	started := false
	dispatch := func(ctx context.Context, in contract.DeviceUploadIn) (any, *contract.Error) {
		params, err := json.Marshal(in)
		if err != nil {
			return nil, contract.Errorf(contract.CodeInternal, "encode an upload chunk: %v", err)
		}
		res, after, cerr := s.b.Dispatch(ctx, sess, contract.DeviceUpload.Name, params, nil)
		runAfter(after)
		return res, cerr
	}
	fail := func(cerr *contract.Error) {
		if started {
			// Leave nothing half-received behind; the daemon drops it.
			_, _ = dispatch(context.WithoutCancel(r.Context()), contract.DeviceUploadIn{LeaseID: in.LeaseID, Name: in.Name, Abort: true})
		}
		writeError(w, cerr, nil)
	}
	read := func(buf []byte) (int, bool, *contract.Error) {
		// Kernel I/O plumbing, so it reads the wall clock.
		_ = rc.SetReadDeadline(time.Now().Add(s.writeStall))
		n, err := io.ReadFull(body, buf)
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return n, true, nil
		case err != nil:
			return n, false, contract.Errorf(contract.CodeBadRequest, "reading the upload body: %v", err)
		}
		return n, false, nil
	}
	// With a Content-Length the count says which chunk is the last, so each
	// chunk is stored before the next is read and an oversized file is
	// refused after one chunk; a chunked body is read one chunk ahead, to
	// tell the last chunk by the end of the body.
	known := r.ContentLength >= 0
	cur := make([]byte, contract.UploadChunkBytes)
	var next []byte
	if !known {
		next = make([]byte, contract.UploadChunkBytes)
	}
	n, eof, cerr := read(cur)
	if cerr != nil {
		fail(cerr)
		return
	}
	for {
		m, last := 0, eof
		if known {
			last = eof || in.Offset+int64(n) >= r.ContentLength
		} else if !eof {
			if m, eof, cerr = read(next); cerr != nil {
				fail(cerr)
				return
			}
			// Nothing left after this chunk: it is the last.
			last = m == 0
		}
		in.Data, in.Final = cur[:n], last
		started = true
		res, cerr := dispatch(r.Context(), in)
		if cerr != nil {
			fail(cerr)
			return
		}
		if in.Final {
			writeJSON(w, http.StatusOK, res)
			return
		}
		in.Offset += int64(n)
		in.SizeBytes = 0
		if known {
			if n, eof, cerr = read(cur); cerr != nil {
				fail(cerr)
				return
			}
			continue
		}
		cur, next, n = next, cur, m
	}
}
