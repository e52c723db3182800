package mcp

import (
	"bytes"
	"io"
	"sync"
)

// stdinPump reads stdin ahead of the MCP transport. A slot's acquisition
// runs before the server answers initialize, and must still notice stdin
// reaching EOF meanwhile (the launcher gave up); the lines that arrive
// during it (initialize itself) are kept, in order, for the server.
type stdinPump struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  bytes.Buffer
	err  error
	// eof is closed once stdin has ended (EOF or a read error).
	eof chan struct{}
}

func newStdinPump(r io.Reader) *stdinPump {
	p := &stdinPump{eof: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	go p.pump(r)
	return p
}

func (p *stdinPump) pump(r io.Reader) {
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		p.mu.Lock()
		p.buf.Write(chunk[:n])
		if err != nil {
			p.err = err
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		if err != nil {
			close(p.eof)
			return
		}
	}
}

// Read hands out buffered bytes first, then the end stdin reached.
func (p *stdinPump) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() == 0 && p.err == nil {
		p.cond.Wait()
	}
	if p.buf.Len() > 0 {
		return p.buf.Read(b)
	}
	return 0, p.err
}
