package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio transport reads lines itself instead of using the go-sdk's
// IOTransport, which ends the session (and so releases the agent's lease)
// on the first line it cannot decode. Here a bad line gets a JSON-RPC error
// answer and the session goes on; only EOF or a read error ends it.
const (
	// maxLine bounds one inbound line; a longer one is skipped and answered.
	maxLine = 16 << 20
	// maxDepth bounds nesting, well past anything a tool call needs.
	maxDepth = 100
)

// lineTransport is an mcpsdk.Transport over newline-delimited JSON.
type lineTransport struct {
	r   io.Reader
	w   io.Writer
	log *slog.Logger
}

func (t *lineTransport) Connect(context.Context) (mcpsdk.Connection, error) {
	c := &lineConn{w: t.w, log: t.log, in: make(chan read), closed: make(chan struct{})}
	go c.readLoop(t.r)
	return c, nil
}

type read struct {
	msg jsonrpc.Message
	err error
}

type lineConn struct {
	log *slog.Logger
	in  chan read

	wmu sync.Mutex
	w   io.Writer

	closeOnce sync.Once
	closed    chan struct{}
}

var _ mcpsdk.Connection = (*lineConn)(nil)

func (c *lineConn) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, tooLong, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			var msg jsonrpc.Message
			var bad *badLine
			if tooLong {
				bad = &badLine{code: jsonrpc.CodeParseError, msg: fmt.Sprintf("line longer than %d bytes", maxLine)}
			} else {
				msg, bad = decodeLine(line)
			}
			if bad != nil {
				c.log.Warn("answered a malformed MCP line", "code", bad.code, "err", bad.msg)
				c.answer(bad)
			} else if !c.deliver(read{msg: msg}) {
				return
			}
		}
		if err != nil {
			c.deliver(read{err: err})
			return
		}
	}
}

func (c *lineConn) deliver(r read) bool {
	select {
	case c.in <- r:
		return true
	case <-c.closed:
		return false
	}
}

// readLine reads one line without its newline. A line over maxLine is
// consumed to its end and reported as tooLong, with no content.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLine {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// badLine is a line that is not a JSON-RPC message, and how to answer it.
type badLine struct {
	code int64
	msg  string
	id   any // the request's id when it has one; JSON null otherwise
}

// decodeLine turns a line into a message, or says why it is none: not
// JSON (truncated, garbage), an array (batches are gone from MCP), too
// deeply nested are parse errors; a JSON object that is not a message is
// an invalid request, answered with its id when it has one.
func decodeLine(line []byte) (jsonrpc.Message, *badLine) {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		return nil, &badLine{code: jsonrpc.CodeParseError, msg: "parse error: the line is not valid JSON"}
	}
	if line[0] != '{' {
		return nil, &badLine{code: jsonrpc.CodeParseError, msg: "parse error: a message must be a JSON object (batches are not supported)"}
	}
	if depth(line) > maxDepth {
		return nil, &badLine{code: jsonrpc.CodeParseError, msg: fmt.Sprintf("parse error: JSON nested deeper than %d levels", maxDepth)}
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		bad := &badLine{code: jsonrpc.CodeInvalidRequest, msg: "invalid request: " + err.Error()}
		var head struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(line, &head) == nil {
			switch head.ID.(type) {
			case string, float64:
				bad.id = head.ID
			}
		}
		return nil, bad
	}
	return msg, nil
}

// depth is the deepest nesting of objects and arrays in valid JSON.
func depth(b []byte) int {
	deepest, d := 0, 0
	inString, escaped := false, false
	for _, ch := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
		case ch == '"':
			inString = true
		case ch == '{' || ch == '[':
			d++
			deepest = max(deepest, d)
		case ch == '}' || ch == ']':
			d--
		}
	}
	return deepest
}

// answer writes the error response itself: JSON-RPC wants "id": null when
// the id could not be read, which the SDK's encoder leaves out.
func (c *lineConn) answer(bad *badLine) {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": bad.id,
		"error": map[string]any{"code": bad.code, "message": bad.msg}})
	if err != nil {
		return
	}
	_ = c.writeLine(b)
}

func (c *lineConn) writeLine(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(append(b, '\n'))
	return err
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case r := <-c.in:
		return r.msg, r.err
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeLine(b)
}

// Close stops delivering lines. A read of stdin in progress cannot be
// interrupted portably; the reader goroutine ends at its next line or EOF.
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }
