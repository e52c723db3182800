package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// TestDialFailsWhenTheDaemonNeverAnswersHello: a socket whose owner
// accepts and then says nothing (or never accepts: the connection waits in
// the backlog) fails Dial within the handshake bound, with a code that does
// not claim the daemon is absent (so DialOrLaunch starts no second one).
func TestDialFailsWhenTheDaemonNeverAnswersHello(t *testing.T) {
	for _, accept := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "s.sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if accept {
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					defer c.Close()
				}
			}()
		}
		start := time.Now()
		_, err = Dial(context.Background(), Options{Socket: path, HandshakeTimeout: 200 * time.Millisecond})
		if !IsCode(err, contract.CodeConnectionLost) {
			t.Fatalf("accept=%v: %v, want CONNECTION_LOST", accept, err)
		}
		if d := time.Since(start); d > testhost.Scale(3*time.Second) {
			t.Fatalf("accept=%v: Dial returned after %s", accept, d)
		}
	}
}

func TestDialHTTPFailsWhenHelloIsNeverAnswered(t *testing.T) {
	stuck := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stuck)
	ctx, cancel := context.WithTimeout(context.Background(), testhost.Scale(30*time.Second))
	defer cancel()
	start := time.Now()
	if _, err := DialHTTP(ctx, srv.URL, "tok"); err == nil {
		t.Fatal("DialHTTP succeeded against a server that never answers")
	}
	if d := time.Since(start); d > DefaultHandshakeTimeout+testhost.Scale(5*time.Second) {
		t.Fatalf("DialHTTP returned after %s", d)
	}
}
