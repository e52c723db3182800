// Package mcp is simlock's stdio MCP server: one agent session per process,
// exposing its tools (leasing: list_devices, lease_simulator, lease_status,
// release_simulator; resources; and, opt-in, the device tools) over the
// typed client. It keeps only what MCP needs on
// top of the client: the connection lifecycle (a new client after the old
// one is lost), the holding policy (renew at TTL/3, release on exit) and the
// progress relay. Every decision stays with the daemon.
package mcp

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/internal/ports"
)

// Options configure a stdio MCP session.
type Options struct {
	// Socket is the daemon's unix socket.
	Socket string
	// Principal is the session's identity: it owns the leases the session
	// takes, across reconnects.
	Principal string
	// Credential, when it returns non-empty, makes each new connection an
	// admin session. It is asked again at every dial, so a restarted
	// daemon's new secret is picked up. Nil means agent.
	Credential func() string
	// Launch starts a daemon when a tool call finds nothing listening.
	// Only tool calls launch; the renew timer and the exit release never do.
	Launch client.LaunchOptions
	// Clock drives the renew timer (default the system clock).
	Clock ports.Clock
	// ParentWatch ends the session when the parent process dies (default
	// ports.PollParentWatch).
	ParentWatch ports.ParentWatch
	// Logger receives the session's diagnostics; never stdout, which
	// carries the protocol (default: discard).
	Logger *slog.Logger
	// Version is reported to the MCP client and in the daemon's logs.
	Version string
	// DeviceTools lists the tools that drive the leased device
	// (device_exec, device_screenshot, device_install, device_open_url).
	DeviceTools bool
	// EnableTools names opt-in tools to serve (set_device_resources,
	// reconcile_device_resources); ResourcesEnabled, the daemon config's
	// resources.enabled, serves both.
	EnableTools      []string
	ResourcesEnabled bool
	// Session, when set, makes the process the keeper of one broker
	// session (--session-config), prepared before initialize.
	Session *SessionOptions
	// Slot, when set, makes the session one execution of a managed slot
	// (--slot-config): acquired before initialize, confined to its device.
	Slot *SlotOptions
}

func (o Options) withDefaults() Options {
	if o.Credential == nil {
		o.Credential = func() string { return "" }
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock{}
	}
	if o.ParentWatch == nil {
		o.ParentWatch = ports.PollParentWatch{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return o
}

// Run serves MCP on stdin/stdout until stdin reaches EOF, ctx ends (a
// signal) or the parent process dies; then it releases the leases the
// session holds. Those ends are normal and return nil; a release that
// failed is returned (its lease stays until its deadline).
func Run(ctx context.Context, o Options, stdin io.Reader, stdout io.Writer) error {
	o = o.withDefaults()
	if o.Session != nil {
		return runSessionAcquire(ctx, o, stdin, stdout)
	}
	if o.Slot != nil {
		return runSlot(ctx, o, stdin, stdout)
	}
	life, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newSession(o, life)

	parentGone := o.ParentWatch.Watch(life)
	go func() {
		select {
		case <-parentGone:
			o.Logger.Info("parent process exited; ending the MCP session")
			cancel()
		case <-life.Done():
		}
	}()

	// Our own line transport: a malformed line is answered, not fatal.
	err := s.server().Run(life, &lineTransport{r: stdin, w: stdout, log: o.Logger})
	cancel()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		o.Logger.Error("MCP transport failed", "err", err)
	}
	return errors.Join(err, s.close())
}
