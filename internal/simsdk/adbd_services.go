package simsdk

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"
)

// The services an adbd stream can name, as the host sends them:
//
//	shell:CMD             shell without the shell protocol: stdout and
//	                      stderr share the stream and no exit status comes
//	                      back (a command given: raw; none: a pty session)
//	shell,v2,raw:CMD      the shell protocol (below); "pty" instead of
//	shell,v2,pty:CMD      "raw" asks for a terminal, which merges stderr
//	                      into stdout and ends lines with CR LF
//	exec:CMD              raw both ways, stderr merged, no exit status:
//	                      exec-out, and the streamed `cmd package install -S`
//	sync:                 the file protocol (adbd_sync.go)
//	root:, unroot:        adbd's privilege switch
//
// Shell protocol v2 frames every message as a one-byte id, a 4-byte
// little-endian length and the bytes: stdin 0, stdout 1, stderr 2, exit 3
// (one byte: the status), close-stdin 4, window-size 5.

type adbdService func(ctx context.Context, st *adbdStream)

const (
	shellIDStdin      = 0
	shellIDStdout     = 1
	shellIDStderr     = 2
	shellIDExit       = 3
	shellIDCloseStdin = 4
	shellIDWindowSize = 5

	// shellMaxFrame bounds one shell-protocol frame from the host: adb
	// sends stdin in pieces of a few KiB.
	shellMaxFrame = 1 << 20
)

// service resolves a service name; ok is false for a service this adbd
// does not offer, which the host sees as a refused open.
func (d *adbd) service(name string) (adbdService, bool) {
	switch {
	case name == "sync:":
		return d.syncService, true
	case name == "root:" || name == "unroot:":
		want := name == "root:"
		return func(ctx context.Context, st *adbdStream) {
			text, restart := d.dev.root(want)
			_, _ = io.WriteString(st, text)
			if restart {
				st.c.requestRestart()
			}
		}, true
	case strings.HasPrefix(name, "exec:"):
		cmd := strings.TrimPrefix(name, "exec:")
		return func(ctx context.Context, st *adbdStream) {
			d.rawShell(ctx, st, cmd, false)
		}, true
	case strings.HasPrefix(name, "shell"):
		opts, cmd, ok := strings.Cut(strings.TrimPrefix(name, "shell"), ":")
		if !ok || (opts != "" && !strings.HasPrefix(opts, ",")) {
			return nil, false
		}
		v2, pty := false, cmd == ""
		for _, o := range strings.Split(opts, ",") {
			switch {
			case o == "v2":
				v2 = true
			case o == "raw":
				pty = false
			case o == "pty":
				pty = true
			}
		}
		if v2 {
			return func(ctx context.Context, st *adbdStream) { d.shellV2(ctx, st, cmd, pty) }, true
		}
		return func(ctx context.Context, st *adbdStream) { d.rawShell(ctx, st, cmd, pty) }, true
	}
	return nil, false
}

// crlfWriter turns LF into CR LF, as a terminal's line discipline does.
type crlfWriter struct{ w io.Writer }

func (c crlfWriter) Write(p []byte) (int, error) {
	if _, err := c.w.Write([]byte(strings.ReplaceAll(string(p), "\n", "\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// runShell runs cmd (or, when cmd is empty, the lines read from stdin,
// as an interactive shell session) on a fresh device shell.
func (d *adbd) runShell(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
	sh, err := d.dev.shell(ctx)
	if err != nil {
		_, _ = io.WriteString(stderr, "/system/bin/sh: "+err.Error()+"\n")
		return 1
	}
	if cmd != "" {
		return sh.runLine(cmd, stdout, stderr, stdin)
	}
	code := 0
	sc := bufio.NewScanner(stdin)
	for !sh.exited && sc.Scan() {
		code = sh.runLine(sc.Text(), stdout, stderr, nil)
	}
	return code
}

// rawShell serves shell: without the protocol, and exec:.
func (d *adbd) rawShell(ctx context.Context, st *adbdStream, cmd string, pty bool) {
	var out io.Writer = &lockedWriter{w: st}
	if pty {
		out = crlfWriter{w: out}
	}
	d.runShell(ctx, cmd, st, out, out)
}

// shellFrameWriter writes one shell-protocol stream (stdout or stderr).
type shellFrameWriter struct {
	mu *sync.Mutex
	w  io.Writer
	id byte
}

func (f shellFrameWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := writeShellFrame(f.w, f.id, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func writeShellFrame(w io.Writer, id byte, p []byte) error {
	b := make([]byte, 5+len(p))
	b[0] = id
	binary.LittleEndian.PutUint32(b[1:], uint32(len(p)))
	copy(b[5:], p)
	_, err := w.Write(b)
	return err
}

// readShellFrame reads one shell-protocol frame.
func readShellFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(h[1:])
	if n > shellMaxFrame {
		return 0, nil, errors.New("shell protocol frame too large")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, err
	}
	return h[0], b, nil
}

// shellV2 serves the shell protocol: stdin frames feed the command,
// stdout and stderr go back apart, and the exit status ends the session.
func (d *adbd) shellV2(ctx context.Context, st *adbdStream, cmd string, pty bool) {
	stdinR, stdinW := io.Pipe()
	go func() {
		// The host's frames, until it closes stdin or the stream.
		for {
			id, b, err := readShellFrame(st)
			if err != nil {
				_ = stdinW.CloseWithError(io.EOF)
				return
			}
			switch id {
			case shellIDStdin:
				if _, err := stdinW.Write(b); err != nil {
					// The command is done with stdin; keep draining
					// frames so the host's writes are acknowledged.
					continue
				}
			case shellIDCloseStdin:
				_ = stdinW.Close()
			case shellIDWindowSize:
			}
		}
	}()
	var mu sync.Mutex
	var stdout, stderr io.Writer = shellFrameWriter{mu: &mu, w: st, id: shellIDStdout}, shellFrameWriter{mu: &mu, w: st, id: shellIDStderr}
	if pty {
		stdout = crlfWriter{w: stdout}
		stderr = stdout
	}
	code := d.runShell(ctx, cmd, stdinR, stdout, stderr)
	_ = stdinR.Close() // a feeder blocked on an unread stdin lets go
	mu.Lock()
	_ = writeShellFrame(st, shellIDExit, []byte{byte(code)})
	mu.Unlock()
}
