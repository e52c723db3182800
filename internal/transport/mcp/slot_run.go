package mcp

import (
	"context"
	"errors"
	"io"
)

// runSlot serves one managed-slot execution. The acquisition comes first,
// before the server reads initialize (stdin is read ahead meanwhile, so its
// end still aborts it); then the server runs with the result published and
// every tool call gated by the execution's state; the execution ends with
// stdin, a signal (ctx) or its owner, and is released on the way out.
func runSlot(ctx context.Context, o Options, stdin io.Reader, stdout io.Writer) error {
	life, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newSession(o, life)
	be := o.Slot.Backend
	if be == nil {
		be = daemonSlots{s: s}
	}
	x := newSlotExec(*o.Slot, be, o.Clock, o.Logger)
	x.dials = func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.dials
	}
	s.slot = x

	in := newStdinPump(stdin)
	watch := o.Slot.OwnerWatch
	if watch == nil {
		watch = execOwnerWatch{pid: o.Slot.Config.ExecutionOwnerPid}
	}
	ownerGone := watch.Watch(life)
	abort := make(chan string, 2)
	go func() {
		eof := in.eof
		for {
			select {
			case <-eof:
				// The server still answers what was read (initialize), then
				// ends at the EOF itself.
				x.setEndReason("stdin_eof")
				abort <- "stdin closed"
				eof = nil
			case <-ownerGone:
				o.Logger.Info("the execution owner is gone; ending the execution")
				x.setEndReason("owner_exited")
				abort <- "the execution owner exited"
				cancel()
				return
			case <-life.Done():
				return
			}
		}
	}()

	x.acquire(life, abort)
	x.start()

	err := s.server().Run(life, &lineTransport{r: in, w: stdout, log: o.Logger})
	if ctx.Err() != nil {
		x.setEndReason("signal") // unless stdin or the owner ended it first
	}
	cancel()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		o.Logger.Error("MCP transport failed", "err", err)
	}
	// close cancels nothing new (life is done), waits for the tool call in
	// flight, then releases the execution (its slot hook) before the client
	// goes.
	return errors.Join(err, s.close())
}
