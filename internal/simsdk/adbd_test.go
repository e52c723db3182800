package simsdk

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testHost is the host end of an adbd connection, as the adb server plays
// it: it acknowledges every WRTE and can write to a stream.
type testHost struct {
	t      *testing.T
	c      net.Conn
	nextID uint32
}

// newTestADBD serves adbd for the fake emulator on 5800 over a pipe.
func newTestADBD(t *testing.T, a *androidHarness) (*testHost, *emuADBDevice) {
	t.Helper()
	s := &sdk{home: a.home, env: func(k string) string { return a.env[k] }, now: time.Now}
	dev := &emuADBDevice{s: s, dir: s.runDir(5800)}
	hostEnd, devEnd := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&adbd{dev: dev}).serve(ctx, devEnd)
	}()
	t.Cleanup(func() {
		cancel()
		hostEnd.Close()
		<-done
	})
	// A hang guard only: a healthy exchange is over in milliseconds.
	_ = hostEnd.SetDeadline(time.Now().Add(waitLimit))
	return &testHost{t: t, c: hostEnd}, dev
}

func (h *testHost) send(p adbPacket) {
	h.t.Helper()
	if _, err := h.c.Write(p.encode()); err != nil {
		h.t.Fatalf("send %v: %v", p, err)
	}
}

func (h *testHost) recv() adbPacket {
	h.t.Helper()
	p, err := readADBPacket(h.c, 1<<20)
	if err != nil {
		h.t.Fatalf("read packet: %v", err)
	}
	return p
}

// connect does the CNXN exchange and returns the device's banner.
func (h *testHost) connect() string {
	h.t.Helper()
	h.send(adbPacket{cmd: adbCmdCNXN, arg0: 0x01000001, arg1: 1 << 20, data: []byte("host::features=shell_v2,cmd\x00")})
	p := h.recv()
	if p.cmd != adbCmdCNXN {
		h.t.Fatalf("handshake answered with %v", p)
	}
	return string(p.data)
}

// open opens a stream; ok is false when the device refused the service.
func (h *testHost) open(service string) (local, remote uint32, ok bool) {
	h.t.Helper()
	h.nextID++
	h.send(adbPacket{cmd: adbCmdOPEN, arg0: h.nextID, data: []byte(service + "\x00")})
	p := h.recv()
	switch {
	case p.cmd == adbCmdOKAY && p.arg1 == h.nextID:
		return h.nextID, p.arg0, true
	case p.cmd == adbCmdCLSE && p.arg1 == h.nextID:
		return h.nextID, 0, false
	}
	h.t.Fatalf("open %s answered with %v", service, p)
	return 0, 0, false
}

// write sends b on a stream and waits for its OKAY, collecting any data
// the device wrote meanwhile into into.
func (h *testHost) write(local, remote uint32, b []byte, into *bytes.Buffer) {
	h.t.Helper()
	h.send(adbPacket{cmd: adbCmdWRTE, arg0: local, arg1: remote, data: b})
	for {
		p := h.recv()
		switch p.cmd {
		case adbCmdOKAY:
			return
		case adbCmdWRTE:
			into.Write(p.data)
			h.send(adbPacket{cmd: adbCmdOKAY, arg0: local, arg1: remote})
		default:
			h.t.Fatalf("waiting for OKAY: %v", p)
		}
	}
}

// drain reads a stream until the device closes it.
func (h *testHost) drain(local, remote uint32, into *bytes.Buffer) {
	h.t.Helper()
	for {
		p := h.recv()
		switch p.cmd {
		case adbCmdWRTE:
			into.Write(p.data)
			h.send(adbPacket{cmd: adbCmdOKAY, arg0: local, arg1: remote})
		case adbCmdCLSE:
			return
		default:
			h.t.Fatalf("reading stream: %v", p)
		}
	}
}

// run opens service, sends stdin (if any), and returns everything the
// device wrote before it closed the stream.
func (h *testHost) run(service string, stdin []byte) []byte {
	h.t.Helper()
	l, r, ok := h.open(service)
	if !ok {
		h.t.Fatalf("service %s refused", service)
	}
	var out bytes.Buffer
	if len(stdin) > 0 {
		h.write(l, r, stdin, &out)
	}
	h.drain(l, r, &out)
	return out.Bytes()
}

// shellFrames splits shell-protocol output into stdout, stderr and the
// exit status (-1 if none came).
func shellFrames(t *testing.T, b []byte) (stdout, stderr string, exit int) {
	t.Helper()
	exit = -1
	r := bytes.NewReader(b)
	var o, e strings.Builder
	for r.Len() > 0 {
		id, data, err := readShellFrame(r)
		if err != nil {
			t.Fatalf("shell frames: %v in %q", err, b)
		}
		switch id {
		case shellIDStdout:
			o.Write(data)
		case shellIDStderr:
			e.Write(data)
		case shellIDExit:
			exit = int(data[0])
		}
	}
	return o.String(), e.String(), exit
}

func shellFrame(id byte, b []byte) []byte {
	var buf bytes.Buffer
	_ = writeShellFrame(&buf, id, b)
	return buf.Bytes()
}

// The handshake carries the device's identity and features; services
// answer from the shared device model.
func TestADBDHandshakeAndShell(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "adbd1")
	h, _ := newTestADBD(t, a)
	banner := h.connect()
	product, device := productNames(hostABI())
	if !strings.HasPrefix(banner, "device::ro.product.name="+product+";ro.product.model=") ||
		!strings.Contains(banner, ";ro.product.device="+device+";features=") || !strings.Contains(banner, "shell_v2") {
		t.Errorf("banner %q", banner)
	}

	// Shell v2: stdout and stderr apart, the exit status at the end.
	out, errOut, code := shellFrames(t, h.run("shell,v2,raw:echo hi; cat /nope; exit 3", nil))
	if out != "hi\n" || errOut != "cat: /nope: No such file or directory\n" || code != 3 {
		t.Errorf("shell v2: out %q err %q exit %d", out, errOut, code)
	}
	// stdin frames feed the command until close-stdin.
	in := append(shellFrame(shellIDStdin, []byte("one\ntwo\n")), shellFrame(shellIDCloseStdin, nil)...)
	if out, _, code := shellFrames(t, h.run("shell,v2,raw:grep t", in)); out != "two\n" || code != 0 {
		t.Errorf("shell v2 stdin: %q exit %d", out, code)
	}
	// A pty merges stderr and ends lines with CR LF.
	if out, errOut, _ := shellFrames(t, h.run("shell,v2,pty:echo a; cat /nope", nil)); out != "a\r\ncat: /nope: No such file or directory\r\n" || errOut != "" {
		t.Errorf("shell v2 pty: %q / %q", out, errOut)
	}
	// v1 and exec: one raw stream, no status.
	if got := string(h.run("shell:echo x; cat /nope", nil)); got != "x\ncat: /nope: No such file or directory\n" {
		t.Errorf("shell v1: %q", got)
	}
	if got := string(h.run("exec:getprop ro.product.device", nil)); got != device+"\n" {
		t.Errorf("exec getprop: %q", got)
	}
	if _, _, ok := h.open("jdwp:1234"); ok {
		t.Error("an unknown service was opened")
	}
}

// A setprop through adbd is seen by the simulated adb binary: one model.
func TestADBDSharesTheDeviceModel(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "adbd2")
	h, _ := newTestADBD(t, a)
	h.connect()
	h.run("shell,v2,raw:setprop debug.simlock.x 42", nil)
	if r := a.shell("emulator-5800", "getprop debug.simlock.x"); r.stdout != "42\n" {
		t.Errorf("simulated adb sees %+v after an adbd setprop", r)
	}
	a.ok("adb", "-s", "emulator-5800", "shell", "echo from-binary > /data/local/tmp/f")
	if got := string(h.run("exec:cat /data/local/tmp/f", nil)); got != "from-binary\n" {
		t.Errorf("adbd reads %q", got)
	}
}

// The streamed install: the APK's bytes follow the command on the stream.
func TestADBDStreamedInstall(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "adbd3")
	h, _ := newTestADBD(t, a)
	h.connect()
	apk := binaryManifest(t, "com.example.streamed")
	out := h.run("exec:cmd package 'install' -S "+strconv.Itoa(len(apk)), apk)
	if string(out) != "Success\n" {
		t.Fatalf("install answered %q", out)
	}
	if r := a.shell("emulator-5800", "pm list packages -3"); r.stdout != "package:com.example.streamed\n" {
		t.Errorf("packages after a streamed install: %+v", r)
	}
}

func syncReq(id string, body []byte) []byte {
	b := make([]byte, 8+len(body))
	copy(b, id)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(body)))
	copy(b[8:], body)
	return b
}

// Sync: a SEND then a RECV of the same path round-trips the bytes, STAT
// and STA2 describe the file, a missing one, and a read-only target FAILs.
func TestADBDSync(t *testing.T) {
	a := newAndroid(t)
	r := fakeRun(t, a, "adbd4")
	fsys := dataFS{run: r, lock: func(fn func() error) error { return fn() }}
	content := bytes.Repeat([]byte("0123456789abcdef"), 9000) // > one DATA chunk
	var in bytes.Buffer
	in.Write(syncReq("SEND", []byte("/sdcard/dir/f.bin,33188")))
	for rest := content; len(rest) > 0; {
		n := min(len(rest), syncDataMax)
		in.Write(syncReq("DATA", rest[:n]))
		rest = rest[n:]
	}
	in.Write(syncReq("DONE", nil)[:8])
	in.Write(syncReq("STAT", []byte("/sdcard/dir/f.bin")))
	in.Write(syncReq("STA2", []byte("/sdcard/missing")))
	in.Write(syncReq("RECV", []byte("/sdcard/dir/f.bin")))
	in.Write(syncReq("SEND", []byte("/system/x,33188")))
	in.Write(syncReq("DATA", []byte("x")))
	in.Write(syncReq("DONE", nil)[:8])
	in.Write(syncReq("QUIT", nil))
	var out bytes.Buffer
	if err := serveSync(&in, &out, fsys); err != nil {
		t.Fatal(err)
	}
	b := out.Bytes()
	take := func(n int) []byte {
		t.Helper()
		if len(b) < n {
			t.Fatalf("sync answer ends early")
		}
		x := b[:n]
		b = b[n:]
		return x
	}
	u32 := func() uint32 { return binary.LittleEndian.Uint32(take(4)) }
	if id := string(take(4)); id != "OKAY" || u32() != 0 {
		t.Fatalf("SEND answered %s", id)
	}
	if id := string(take(4)); id != "STAT" {
		t.Fatalf("STAT answered %s", id)
	}
	if mode, size := u32(), u32(); mode != 0o100644 || size != uint32(len(content)) {
		t.Errorf("STAT mode %o size %d", mode, size)
	}
	u32() // mtime
	if id := string(take(4)); id != "STA2" || u32() != 2 {
		t.Errorf("STA2 of a missing file: %s, want ENOENT", id)
	}
	take(64)
	var got []byte
	for {
		id := string(take(4))
		n := u32()
		if id == "DONE" {
			break
		}
		if id != "DATA" {
			t.Fatalf("RECV answered %s", id)
		}
		got = append(got, take(int(n))...)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("RECV returned %d bytes, not the %d sent", len(got), len(content))
	}
	if id := string(take(4)); id != "FAIL" {
		t.Errorf("SEND to /system answered %s", id)
	} else if msg := string(take(int(u32()))); msg != "couldn't create file: Read-only file system" {
		t.Errorf("FAIL %q", msg)
	}
	host, _ := devicePath(r, "/sdcard/dir/f.bin")
	if onDisk, err := os.ReadFile(host); err != nil || !bytes.Equal(onDisk, content) {
		t.Errorf("pushed file on the data partition: %d bytes, %v", len(onDisk), err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(host)); len(ents) != 1 {
		t.Errorf("push left %d entries beside the file (temporary files?)", len(ents))
	}
}

// Flow control: a payload larger than the negotiated maximum goes out in
// pieces, each after the host's OKAY.
func TestADBDSplitsWritesToTheNegotiatedMax(t *testing.T) {
	a := newAndroid(t)
	fakeRun(t, a, "adbd5")
	h, _ := newTestADBD(t, a)
	h.send(adbPacket{cmd: adbCmdCNXN, arg0: 0x01000001, arg1: 4096, data: []byte("host::\x00")})
	if p := h.recv(); p.cmd != adbCmdCNXN {
		t.Fatalf("handshake: %v", p)
	}
	l, r, _ := h.open("exec:yes | head -c 20000")
	total := 0
	for {
		p := h.recv()
		if p.cmd == adbCmdCLSE {
			break
		}
		if p.cmd != adbCmdWRTE || len(p.data) > 4096 {
			t.Fatalf("got %v, want WRTE of at most 4096 bytes", p)
		}
		total += len(p.data)
		h.send(adbPacket{cmd: adbCmdOKAY, arg0: l, arg1: r})
	}
	if total != 20000 {
		t.Errorf("received %d bytes, want 20000", total)
	}
}

// A device that is not yet online does not answer CNXN, which is how the
// host shows it offline.
func TestADBDWaitsForTheDeviceToComeOnline(t *testing.T) {
	a := newAndroid(t)
	r := fakeRun(t, a, "adbd6")
	later := time.Now().Add(time.Hour)
	r.OnlineAt = &later
	s := &sdk{home: a.home, env: func(k string) string { return a.env[k] }, now: time.Now}
	if err := writeRun(s.runDir(5800), r); err != nil {
		t.Fatal(err)
	}
	h, _ := newTestADBD(t, a)
	h.send(adbPacket{cmd: adbCmdCNXN, arg0: 0x01000001, arg1: 1 << 20, data: []byte("host::\x00")})
	got := make(chan adbPacket, 1)
	go func() {
		p, err := readADBPacket(h.c, 1<<20)
		if err == nil {
			got <- p
		}
		close(got)
	}()
	// Give adbd many polls' worth of chances to answer early.
	select {
	case p, ok := <-got:
		if ok {
			t.Fatalf("offline device answered %v", p)
		}
	case <-time.After(20 * pollInterval):
	}
	now := time.Now()
	r.OnlineAt = &now
	if err := writeRun(s.runDir(5800), r); err != nil {
		t.Fatal(err)
	}
	if p, ok := <-got; !ok || p.cmd != adbCmdCNXN {
		t.Fatalf("online device answered %v (%v)", p, ok)
	}
}

var _ io.Reader = (*adbdStream)(nil)
