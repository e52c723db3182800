package uplink

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func acceptor(t *testing.T, attached chan<- net.Conn) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var rejected []string
	a := &Acceptor{
		Verify: func(_ context.Context, tok string) (string, bool, error) {
			switch tok {
			case "worker-tok":
				return "worker", true, nil
			case "agent-tok":
				return "agent", true, nil
			}
			return "", false, nil
		},
		Attach: func(ctx context.Context, id, label string, conn net.Conn) {
			attached <- conn
			<-ctx.Done()
		},
		Rejected: func(reason, _ string) { mu.Lock(); rejected = append(rejected, reason); mu.Unlock() },
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return srv, &rejected
}

func wsURL(srv *httptest.Server) string { return "ws" + strings.TrimPrefix(srv.URL, "http") }

func TestUplinkCarriesLinesBothWays(t *testing.T) {
	attached := make(chan net.Conn, 1)
	srv, _ := acceptor(t, attached)
	conn, err := Dial(context.Background(), wsURL(srv), "worker-tok", "w1", "mac-a")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gw := <-attached
	go gw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"hello"}` + "\n"))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, `"hello"`) {
		t.Fatalf("%q %v", line, err)
	}
	go conn.Write([]byte("pong\n"))
	if line, _ := bufio.NewReader(gw).ReadString('\n'); line != "pong\n" {
		t.Fatalf("%q", line)
	}
}

func TestUplinkRefusals(t *testing.T) {
	srv, rejected := acceptor(t, make(chan net.Conn, 1))
	var rej *RejectedError
	if _, err := Dial(context.Background(), wsURL(srv), "", "w1", ""); !errors.As(err, &rej) || rej.Status != 401 {
		t.Fatalf("no token: %v", err)
	}
	if _, err := Dial(context.Background(), wsURL(srv), "nope", "w1", ""); !errors.As(err, &rej) || rej.Status != 401 {
		t.Fatalf("unknown token: %v", err)
	}
	if _, err := Dial(context.Background(), wsURL(srv), "agent-tok", "w1", ""); !errors.As(err, &rej) || rej.Status != 403 || !strings.Contains(rej.Body, "FORBIDDEN") {
		t.Fatalf("agent token: %v", err)
	}
	if len(*rejected) != 3 {
		t.Fatalf("rejections reported: %v", *rejected)
	}
}

// TestUplinkAcceptsTheBearerSchemeInAnyCase, as every other route does.
func TestUplinkAcceptsTheBearerSchemeInAnyCase(t *testing.T) {
	attached := make(chan net.Conn, 4)
	srv, _ := acceptor(t, attached)
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		h := http.Header{}
		h.Set("Authorization", scheme+" worker-tok")
		h.Set(HeaderWorkerID, "w-"+scheme)
		c, _, err := websocket.Dial(context.Background(), Endpoint(wsURL(srv)), &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		c.CloseNow()
		<-attached
	}
	h := http.Header{}
	h.Set("Authorization", "Basic worker-tok")
	h.Set(HeaderWorkerID, "w")
	if _, resp, err := websocket.Dial(context.Background(), Endpoint(wsURL(srv)), &websocket.DialOptions{HTTPHeader: h}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("Basic scheme: %v", err)
	}
}

func TestConnectorRedialsAfterADisconnect(t *testing.T) {
	served := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dials := 0
	c := &Connector{URL: "ws://x", Min: time.Millisecond, Max: 5 * time.Millisecond,
		Dial: func(context.Context, string, string, string, string) (net.Conn, error) {
			dials++
			if dials == 2 {
				return nil, errors.New("gateway down")
			}
			a, b := net.Pipe()
			b.Close() // the gateway hangs up at once
			return a, nil
		},
		Serve: func(_ context.Context, conn net.Conn) {
			conn.Read(make([]byte, 1))
			served <- struct{}{}
		},
	}
	go c.Run(ctx)
	<-served
	<-served // a failed dial in between did not stop it
	cancel()
}

func TestValidateURL(t *testing.T) {
	for raw, ok := range map[string]bool{"ws://gw:7420": true, "wss://gw.example": true, "http://gw": false, "https://gw": false, "ws://": false} {
		if err := ValidateURL(raw); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
