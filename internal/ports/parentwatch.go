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
	start := os.Getppid()
	return PollUntil(ctx, w.Interval, func() bool { return os.Getppid() != start })
}

// PollUntil returns a channel closed once gone reports true, asked every
// interval (default one second) until ctx ends.
func PollUntil(ctx context.Context, interval time.Duration, gone func() bool) <-chan struct{} {
	ch := make(chan struct{})
	if interval <= 0 {
		interval = time.Second
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if gone() {
					close(ch)
					return
				}
			}
		}
	}()
	return ch
}
