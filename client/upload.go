package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"

	"github.com/simlock/simlock/contract"
)

// Upload streams r into the lease's scratch directory on the machine that
// holds the device, under name (a base name such as "app.apk"); a later
// Exec names it as {upload:NAME}. Over the socket the file travels as
// device.upload chunks of at most contract.UploadChunkBytes, each sent
// after the previous one was stored, so neither side holds more than a
// chunk; over HTTP it is one streamed PUT. When r reports its size (an
// *os.File, a *bytes.Reader, ...) the daemon refuses a file over its cap
// before anything is sent.
func (c *Client) Upload(ctx context.Context, leaseID, name string, r io.Reader) (contract.DeviceUploadOut, error) {
	if err := contract.ValidateUploadName(name); err != nil {
		return contract.DeviceUploadOut{}, err
	}
	size := sizeOf(r)
	if ht, ok := c.t.(*httpTransport); ok {
		return ht.upload(ctx, leaseID, name, r, size)
	}
	in := contract.DeviceUploadIn{LeaseID: leaseID, Name: name, SizeBytes: max(size, 0)}
	// Read one chunk ahead, so the last chunk can say Final.
	cur, next := make([]byte, contract.UploadChunkBytes), make([]byte, contract.UploadChunkBytes)
	n, eof, err := fill(r, cur)
	if err != nil {
		return contract.DeviceUploadOut{}, err
	}
	for {
		// m stays 0 when the reader has ended: the current chunk is the
		// last, also when the file ends exactly on a chunk boundary.
		m := 0
		if !eof {
			if m, eof, err = fill(r, next); err != nil {
				return contract.DeviceUploadOut{}, err
			}
		}
		in.Data, in.Final = cur[:n], m == 0
		var out contract.DeviceUploadOut
		if err := c.call(ctx, contract.DeviceUpload.Name, in, &out, nil); err != nil {
			return contract.DeviceUploadOut{}, err
		}
		if in.Final {
			return out, nil
		}
		in.Offset += int64(n)
		in.SizeBytes = 0
		cur, next, n = next, cur, m
	}
}

// fill reads until buf is full or r ends; eof reports the end.
func fill(r io.Reader, buf []byte) (n int, eof bool, err error) {
	n, err = io.ReadFull(r, buf)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return n, true, nil
	case err != nil:
		return n, false, fmt.Errorf("read the file to upload: %w", err)
	}
	return n, false, nil
}

// sizeOf is r's remaining length when r can tell, or -1.
func sizeOf(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Len() int }:
		return int64(v.Len())
	case interface{ Stat() (fs.FileInfo, error) }:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			if s, ok := r.(io.Seeker); ok {
				if pos, err := s.Seek(0, io.SeekCurrent); err == nil {
					return fi.Size() - pos
				}
			}
		}
	}
	return -1
}

// upload is PUT /v1/leases/{id}/uploads/{name} with the raw file as the
// body, streamed; only the caller's context bounds it.
func (t *httpTransport) upload(ctx context.Context, leaseID, name string, r io.Reader, size int64) (contract.DeviceUploadOut, error) {
	const method = "device.upload"
	if err := t.lostErr(); err != nil {
		return contract.DeviceUploadOut{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.root, cancel)()
	u := t.base + "/v1/leases/" + url.PathEscape(leaseID) + "/uploads/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(rctx, http.MethodPut, u, io.NopCloser(r))
	if err != nil {
		return contract.DeviceUploadOut{}, contract.Errorf(contract.CodeBadRequest, "build the upload request: %v", err)
	}
	if size >= 0 {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	req.Header.Set("Authorization", "Bearer "+t.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", t.ua)
	resp, err := t.waiting.Do(req)
	if err != nil {
		return contract.DeviceUploadOut{}, t.failed(ctx, method, err)
	}
	defer resp.Body.Close()
	var out contract.DeviceUploadOut
	if err := t.readJSON(ctx, method, resp, &out); err != nil {
		return contract.DeviceUploadOut{}, err
	}
	return out, nil
}
