package ports

import (
	"context"
	"os"
	"time"
)

// ParentWatch notifies once when the watched parent process has gone away.
type ParentWatch interface {
	// Watch returns a channel closed when the process that was this
	// process's parent at the time of the call has exited.
	Watch(ctx context.Context) <-chan struct{}
}

// PollParentWatch detects parent death by noticing that this process was
// reparented (its parent pid changed), which is portable across Linux and
// macOS without kqueue/pidfd plumbing.
type PollParentWatch struct {
	Interval time.Duration
}

func (w PollParentWatch) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	start := os.Getppid()
	iv := w.Interval
	if iv <= 0 {
		iv = time.Second
	}
	go func() {
		t := time.NewTicker(iv)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != start {
					close(ch)
					return
				}
			}
		}
	}()
	return ch
}
