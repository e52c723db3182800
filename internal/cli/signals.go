package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// stopped is the cause of a context a stop signal ended.
type stopped struct{ sig syscall.Signal }

func (s stopped) Error() string { return signalName(s.sig) + " received" }

// signalContext is a context that SIGINT or SIGTERM cancels, remembering
// which one (stopSignal reads it), so a command can exit the way a shell
// reports that signal.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			if sig, ok := s.(syscall.Signal); ok {
				cancel(stopped{sig})
			} else {
				cancel(nil)
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// stopSignal reports the signal that ended ctx, if one did.
func stopSignal(ctx context.Context) (syscall.Signal, bool) {
	var s stopped
	if errors.As(context.Cause(ctx), &s) {
		return s.sig, true
	}
	return 0, false
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}
