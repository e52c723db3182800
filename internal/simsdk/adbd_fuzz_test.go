package simsdk

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzADBPacket: any bytes either decode to a packet that encodes back to
// the same header and payload, or fail; a decoded payload never exceeds
// the limit, whatever length the header claims.
func FuzzADBPacket(f *testing.F) {
	f.Add(adbPacket{cmd: adbCmdCNXN, arg0: adbVersion, arg1: 1 << 20, data: []byte("host::features=shell_v2\x00")}.encode())
	f.Add(adbPacket{cmd: adbCmdOPEN, arg0: 1, data: []byte("shell,v2,raw:id\x00")}.encode())
	f.Add(adbPacket{cmd: adbCmdOKAY, arg0: 1, arg1: 2}.encode())
	f.Add([]byte("CNXN"))
	const limit = 4096
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := readADBPacket(bytes.NewReader(b), limit)
		if err != nil {
			return
		}
		if len(p.data) > limit {
			t.Fatalf("payload of %d bytes passed a %d limit", len(p.data), limit)
		}
		enc := p.encode()
		// The checksum is not verified on reading, so it is the one
		// field that may differ.
		if !bytes.Equal(enc[:16], b[:16]) || !bytes.Equal(enc[20:], b[20:len(enc)]) {
			t.Fatalf("re-encoding %v changed it:\n%x\n%x", p, enc, b[:len(enc)])
		}
	})
}

// FuzzADBDSync: whatever a host sends on a sync stream, the session ends
// (no hang, no panic) and nothing is written outside the data partition.
func FuzzADBDSync(f *testing.F) {
	f.Add(append(syncReq("STAT", []byte("/sdcard")), syncReq("QUIT", nil)...))
	f.Add(append(append(syncReq("SEND", []byte("/sdcard/a,420")), syncReq("DATA", []byte("hello"))...), syncReq("DONE", nil)...))
	f.Add(syncReq("RECV", []byte("/data/local/tmp/x")))
	f.Add(syncReq("LIS2", []byte("/")))
	f.Add(append(syncReq("SEND", []byte("/sdcard/../../../etc/x,420")), syncReq("DONE", nil)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		root := t.TempDir()
		data := filepath.Join(root, "data")
		if err := freshUserdata(data); err != nil {
			t.Fatal(err)
		}
		fsys := dataFS{run: &emuRun{DataDir: data}, lock: func(fn func() error) error { return fn() }}
		err := serveSync(bytes.NewReader(b), io.Discard, fsys)
		if err != nil && !errors.Is(err, errSyncProtocol) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		ents, err := os.ReadDir(root)
		if err != nil || len(ents) != 1 || ents[0].Name() != "data" {
			t.Fatalf("the session wrote outside the data partition: %v %v", ents, err)
		}
	})
}
