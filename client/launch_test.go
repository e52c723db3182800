package client

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
)

// A daemon that dies during startup is reported with the reason it wrote,
// not after the whole wait (the CLI and the MCP server both launch through
// here).
func TestLaunchAndDialReportsADaemonThatExitedAtOnce(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "daemon.out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := LaunchAndDial(ctx, Options{Socket: filepath.Join(dir, "none.sock"), Principal: "t"}, LaunchOptions{
		Exe:     "/bin/sh",
		Args:    []string{"-c", `echo "simlock: listen tcp 127.0.0.1:7070: bind: address already in use" >&2; exit 1`},
		LogFile: log,
		Wait:    time.Hour, // only the exit may end this call
	})
	if !IsCode(err, contract.CodeDaemonStartupFailed) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("got %v, want DAEMON_STARTUP_FAILED with the daemon's own reason", err)
	}
}
