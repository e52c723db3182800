package outbox

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// gate is a sink that blocks until released, recording what it wrote.
type gate struct {
	mu      sync.Mutex
	release chan struct{}
	got     []string
}

func (g *gate) Write(b []byte, _ time.Time) error {
	<-g.release
	g.mu.Lock()
	g.got = append(g.got, string(b))
	g.mu.Unlock()
	return nil
}

func (g *gate) written() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.got...)
}

func TestSendNeverBlocksAndOverflowFailsTheBox(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	failed := make(chan error, 1)
	b := New(g, Options{MaxItems: 4, OnFail: func(err error) { failed <- err }})
	start := time.Now()
	ok := 0
	for i := 0; i < 100; i++ {
		if b.Send([]byte("x")) {
			ok++
		}
	}
	if d := time.Since(start); d > testhost.Scale(time.Second) {
		t.Fatalf("sending to a stuck client took %s", d)
	}
	// One message may be in the sink already; at most MaxItems wait.
	if ok > 5 {
		t.Fatalf("%d messages accepted by a box bounded to 4", ok)
	}
	close(g.release)
	select {
	case err := <-failed:
		if !errors.Is(err, ErrOverflow) {
			t.Fatalf("OnFail got %v", err)
		}
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("overflow never failed the box")
	}
	<-b.Done()
	if b.Send([]byte("y")) {
		t.Fatal("a failed box accepted a message")
	}
}

func TestSendLatestKeepsOnlyTheNewestWaitingMessage(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	b := New(g, Options{})
	b.Send([]byte("first")) // the writer takes this and blocks in the sink
	for i := 0; i < 50; i++ {
		b.SendLatest("progress:1", []byte("p"+strings.Repeat("!", i)))
	}
	b.Send([]byte("response"))
	close(g.release)
	b.Close()
	<-b.Done()
	got := g.written()
	want := []string{"first", "p" + strings.Repeat("!", 49), "response"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("written %q, want %q", got, want)
	}
}

func TestAStalledReaderFailsWithinTheDeadline(t *testing.T) {
	a, peer := net.Pipe() // the peer never reads
	defer peer.Close()
	failed := make(chan error, 1)
	b := New(SinkFunc(func(p []byte, dl time.Time) error {
		_ = a.SetWriteDeadline(dl)
		_, err := a.Write(p)
		return err
	}), Options{Stall: 100 * time.Millisecond, OnFail: func(err error) { failed <- err }})
	start := time.Now()
	b.Send([]byte("hello\n"))
	select {
	case err := <-failed:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("OnFail got %v, want a timeout", err)
		}
		if d := time.Since(start); d > testhost.Scale(2*time.Second) {
			t.Fatalf("a stalled write failed after %s", d)
		}
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("a stalled write never failed the box")
	}
}

func TestSendNotifyClosesOnWriteAndOnDiscard(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	b := New(g, Options{})
	w := b.SendNotify([]byte("a"))
	select {
	case <-w:
		t.Fatal("closed before the write")
	case <-time.After(20 * time.Millisecond):
	}
	close(g.release)
	<-w
	b.Abort()
	<-b.Done()
	select {
	case <-b.SendNotify([]byte("b")):
	default:
		t.Fatal("a message refused by an aborted box left its channel open")
	}
}

// A reader slower than its producer slows the producer instead of
// overflowing: every paced message arrives, in order, through a box bounded
// far below their count.
func TestSendPacedWaitsForRoomInsteadOfOverflowing(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	b := New(g, Options{MaxItems: 8})
	go func() {
		for range 200 {
			g.release <- struct{}{} // one write at a time, as a slow reader takes them
		}
	}()
	for i := range 200 {
		if !b.SendPaced(context.Background(), []byte(strconv.Itoa(i))) {
			t.Fatalf("message %d refused: %v", i, b.Err())
		}
	}
	b.Close()
	<-b.Done()
	if err := b.Err(); err != nil {
		t.Fatalf("box failed: %v", err)
	}
	got := g.written()
	if len(got) != 200 || got[0] != "0" || got[199] != "199" {
		t.Fatalf("wrote %d messages (%v ... )", len(got), got[:min(3, len(got))])
	}
}

// A reader that stops altogether still fails the box at the write
// deadline, and that ends a paced sender's wait.
func TestSendPacedEndsWhenTheReaderStops(t *testing.T) {
	stuck := SinkFunc(func(_ []byte, deadline time.Time) error {
		time.Sleep(time.Until(deadline))
		return errors.New("write deadline exceeded")
	})
	b := New(stuck, Options{MaxItems: 4, Stall: 50 * time.Millisecond})
	done := make(chan bool)
	go func() {
		for {
			if !b.SendPaced(context.Background(), []byte("x")) {
				done <- true
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(testhost.Scale(5 * time.Second)):
		t.Fatal("a paced sender waited on a stopped reader past its deadline")
	}
	if b.Err() == nil {
		t.Fatal("the box did not fail")
	}
}

func TestSendPacedHonoursItsContext(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	b := New(g, Options{MaxItems: 2})
	defer b.Abort()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for b.SendPaced(ctx, []byte("x")) {
		if len(g.written()) > 0 {
			t.Fatal("the gate let a write through")
		}
		cancel() // the next wait for room must end at once
	}
}
