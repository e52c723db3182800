package httpapi

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/simlock/simlock/contract"
)

// net/http answers a request it cannot read (a header value with a control
// byte, a malformed Host, an oversized header block) itself, before any
// handler runs, with a plain-text body. typedListener rewrites exactly
// those answers into the contract's error shape, so every refusal the API
// gives, on every route, is the typed JSON error.
type typedListener struct{ net.Listener }

func (l typedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &typedConn{Conn: c}, nil
}

// typedConn passes every write through, except net/http's own refusal of
// an unreadable request.
type typedConn struct{ net.Conn }

func (c *typedConn) Write(b []byte) (int, error) {
	if out, ok := typedRefusal(b); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// plainRefusalHeaders are the headers net/http writes, and only there,
// after the status line of a request it could not read: no Date, unlike
// any response a handler writes.
const plainRefusalHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// typedRefusal recognises one such refusal in b (a status line, those
// headers, then its text) and returns it as a BAD_REQUEST body under the
// same status.
func typedRefusal(b []byte) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if len(b) < len(proto)+3 || string(b[:len(proto)]) != proto {
		return nil, false
	}
	s := string(b)
	i := strings.Index(s, plainRefusalHeaders)
	if i < 0 || strings.Contains(s[:i], "\r\n") {
		return nil, false
	}
	status, err := strconv.Atoi(s[len(proto) : len(proto)+3])
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	why := strings.TrimSpace(s[i+len(plainRefusalHeaders):])
	e := contract.Errorf(contract.CodeBadRequest, "the HTTP request could not be read (%s)", why).
		WithNext("send a well-formed HTTP/1.1 request: a Host header, header names and values without control bytes, headers within 64 KiB")
	body, _ := json.Marshal(ErrorBody{Error: e})
	body = append(body, '\n')
	head := fmt.Sprintf("%s%d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		proto, status, http.StatusText(status), mediaJSON, len(body))
	return append([]byte(head), body...), true
}
