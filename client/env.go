package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// The environment FromEnv reads. They mean what they mean to the simlock
// CLI, so a program run next to it reaches the same daemon.
const (
	EnvHome      = "SIMLOCK_HOME"      // the daemon's home; its socket is <home>/simlock.sock (default ~/.simlock)
	EnvURL       = "SIMLOCK_URL"       // when set, the HTTP API at this URL instead of the socket
	EnvToken     = "SIMLOCK_TOKEN"     // the API token (HTTP); on the socket, a stored token presented as the credential
	EnvPrincipal = "SIMLOCK_PRINCIPAL" // the socket session's identity (default go:<host>:<pid>)
)

// SocketPath is the daemon socket under home, laid out as the daemon lays
// it out (a test holds the two together).
func SocketPath(home string) string { return filepath.Join(home, "simlock.sock") }

// FromEnv connects the way the CLI would from the same environment: over
// HTTP to SIMLOCK_URL with SIMLOCK_TOKEN as the bearer token when
// SIMLOCK_URL is set, otherwise over the socket in SIMLOCK_HOME (default
// ~/.simlock) as principal SIMLOCK_PRINCIPAL (default one per process), with
// SIMLOCK_TOKEN, if set, as the session's credential. It never starts a
// daemon (a socket nobody listens on is DAEMON_NOT_RUNNING) and never reads
// the home's admin secret: that secret changes at every daemon start, so a
// long-lived program holding it would lose its session at a restart, while
// a stored token and a principal survive one.
func FromEnv(ctx context.Context) (*Client, error) {
	return fromEnv(ctx, os.Getenv)
}

func fromEnv(ctx context.Context, getenv func(string) string) (*Client, error) {
	if u := getenv(EnvURL); u != "" {
		return DialHTTP(ctx, u, getenv(EnvToken))
	}
	home := getenv(EnvHome)
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no %s and no user home directory: %w", EnvHome, err)
		}
		home = filepath.Join(h, ".simlock")
	}
	principal := getenv(EnvPrincipal)
	if principal == "" {
		host, _ := os.Hostname()
		principal = fmt.Sprintf("go:%s:%d", host, os.Getpid())
	}
	return Dial(ctx, Options{Socket: SocketPath(home), Principal: principal, Credential: getenv(EnvToken),
		Name: "simlock-go-client"})
}
