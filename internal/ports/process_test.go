package ports

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// counter counts what it is given and keeps nothing.
type counter struct{ n atomic.Int64 }

func (c *counter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

func TestExecRunnerStreamsAndKeepsOnlyATail(t *testing.T) {
	const size = 8 << 20
	var out, errs counter
	r := ExecRunner{Grace: 200 * time.Millisecond}
	// 8 MiB of "y\n" then a marker: the Result must hold the marker and
	// no more than TailBytes, the writer every byte.
	res, err := r.Run(context.Background(), Command{Name: "sh",
		Args:   []string{"-c", "yes | head -c " + itoa(size) + "; printf END; echo oops >&2; exit 4"},
		Stdout: &out, Stderr: &errs})
	var ee *ExitError
	if !errors.As(err, &ee) || res.ExitCode != 4 {
		t.Fatalf("res code %d err %v", res.ExitCode, err)
	}
	if got := out.n.Load(); got != size+3 {
		t.Fatalf("the writer saw %d bytes, want %d", got, size+3)
	}
	if len(res.Stdout) != TailBytes || !bytes.HasSuffix(res.Stdout, []byte("y\nEND")) {
		t.Fatalf("stdout tail is %d bytes ending %q", len(res.Stdout), res.Stdout[max(0, len(res.Stdout)-8):])
	}
	if string(res.Stderr) != "oops\n" || !strings.Contains(ee.Error(), "oops") {
		t.Fatalf("stderr tail %q, error %v", res.Stderr, ee)
	}
}

// gate blocks every write until its context is done, as a push writer for a
// client that stopped reading would.
type gate struct {
	ctx    context.Context
	writes atomic.Int64
	first  chan struct{}
}

func (g *gate) Write(p []byte) (int, error) {
	if g.writes.Add(1) == 1 {
		close(g.first)
	}
	<-g.ctx.Done()
	return 0, g.ctx.Err()
}

func TestExecRunnerEndsWhenAStalledWriterGivesUpOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &gate{ctx: ctx, first: make(chan struct{})}
	r := ExecRunner{Grace: 200 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, Command{Name: "sh", Args: []string{"-c", "yes"}, Stdout: g})
		done <- err
	}()
	// The program is held back by the stalled writer; the deadline is only
	// a guard against a hung test.
	deadline := time.After(testhost.Scale(10 * time.Second))
	select {
	case err := <-done:
		t.Fatalf("Run returned %v before the writer was unblocked", err)
	case <-deadline:
		t.Fatal("no write reached the writer")
	case <-g.first:
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
	case <-deadline:
		t.Fatal("Run did not return after cancel")
	}
	if n := g.writes.Load(); n != 1 {
		t.Fatalf("%d writes reached a writer that never returned from the first", n)
	}
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	for _, tc := range []struct {
		writes []string
		want   string
	}{
		{[]string{"ab", "cd"}, "abcd"},
		{[]string{"abc", "defg"}, "cdefg"},
		{[]string{"abcdefgh"}, "defgh"},
		{[]string{"abcde", "f"}, "bcdef"},
		{[]string{"", "x"}, "x"},
	} {
		tl := NewTail(5)
		for _, w := range tc.writes {
			if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("write %q: %d %v", w, n, err)
			}
		}
		if got := string(tl.Bytes()); got != tc.want {
			t.Errorf("%q: tail %q, want %q", tc.writes, got, tc.want)
		}
		if cap(tl.buf) > 8 {
			t.Errorf("%q: buffer grew to %d", tc.writes, cap(tl.buf))
		}
	}
}
