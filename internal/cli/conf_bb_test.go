package cli

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

// simlock-architecture, CLI: a held or waiting simlock lease ends on
// "SIGINT/SIGTERM". The context remembers which signal ended it, so the
// command can exit as a shell reports it.
func TestSignalContextNamesTheSignal(t *testing.T) {
	ctx, stop := signalContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(testhost.Scale(30 * time.Second)):
		t.Fatal("SIGTERM did not end the context")
	}
	if sig, ok := stopSignal(ctx); !ok || sig != syscall.SIGTERM {
		t.Fatalf("stopSignal = %v %v", sig, ok)
	}
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := stopSignal(plain); ok {
		t.Fatal("a plain cancel named a signal")
	}
}

// A request a signal withdrew says it gave up its place and exits 128+N.
func TestGaveUpSaysSoAndExitsAsTheSignal(t *testing.T) {
	var stderr strings.Builder
	a := &app{env: Env{Stderr: &stderr}}
	err := a.gaveUp(syscall.SIGTERM, nil)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 143 {
		t.Fatalf("exit %v, want 143", err)
	}
	if out := stderr.String(); !strings.Contains(out, "SIGTERM") || !strings.Contains(out, "gave up its place") || !strings.Contains(out, "REQUEST_CANCELLED") {
		t.Fatalf("stderr %q", out)
	}
	stderr.Reset()
	if err := a.gaveUp(syscall.SIGINT, nil); !errors.As(err, &ee) || ee.code != 130 {
		t.Fatalf("SIGINT: %v", err)
	}
}
