package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/transport/mcp"
)

func (a *app) mcpCmd() *cobra.Command {
	var admin, deviceTools bool
	var enable []string
	var sessionConfig string
	var slotConfig string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP over stdio for an AI agent",
		Long: `Serve the Model Context Protocol on stdin/stdout for one AI agent session, with the tools
list_devices, lease_simulator, lease_status and release_simulator. Register it in an MCP client
as the command "simlock mcp". The session renews its lease at a third of its TTL and releases it
when stdin closes, on SIGINT/SIGTERM, or when its parent process dies. A tool call starts the
daemon when none is running; logs go to stderr. With --device-tools the agent can also drive
its leased device: device_exec, device_screenshot, device_install, device_open_url, each
confined to the session's own lease. See docs/mcp.md.

The session is an agent: it sees and releases only its own leases. --admin connects with the
operator credential (--token, SIMLOCK_ADMIN_TOKEN or <home>/admin.token) instead.

--slot-config (or SIMLOCK_SLOT_CONFIG) makes the process one execution of a managed slot: the
launch configuration (inline JSON starting with {, or a file path) is validated first, the slot's
device is acquired before initialize is answered, and the tools are confined to that device.

--session-config (or SIMLOCK_SESSION_CONFIG) makes the process the keeper of one broker session: the
config (inline JSON starting with {, or a file path) is checked first, the session is prepared
before initialize is answered and published under capabilities.experimental["simlock/session"];
without a ready session no tools are listed and every call is refused with the typed failure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			slot, err := a.mcpSlot(cmd, slotConfig)
			if err != nil {
				// A launch-config error ends the process before the server
				// starts: one JSON error on stderr, the typed exit code.
				a.jsonOut = true
				return err
			}
			sess, err := a.mcpSession(cmd, sessionConfig)
			if err != nil {
				// A bad session config ends the process before the server
				// starts: one JSON error on stderr, the typed exit code.
				a.jsonOut = true
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			o := mcp.Options{
				Socket:      a.paths().Socket,
				Principal:   a.mcpPrincipal(),
				Launch:      a.launchOptions(),
				Clock:       ports.SystemClock{},
				ParentWatch: ports.PollParentWatch{},
				Logger:      slog.New(slog.NewTextHandler(a.env.Stderr, nil)).With("component", "mcp"),
				Version:     Version,
				DeviceTools: deviceTools,
			}
			if admin {
				o.Credential = func() string { return a.credential(true) }
			}
			for _, name := range enable {
				if name != mcp.ToolSetResources && name != mcp.ToolReconcileResources {
					return contract.Errorf(contract.CodeBadRequest, "--enable-tool %q: the opt-in tools are %s and %s", name,
						mcp.ToolSetResources, mcp.ToolReconcileResources)
				}
			}
			o.EnableTools = enable
			o.Session = sess
			o.Slot = slot
			// The daemon's own config turning resources on serves the
			// tuning tools too; an unreadable file leaves them opt-in.
			if cfg, err := a.loadConfig(); err == nil {
				o.ResourcesEnabled = cfg.Resources.Enabled
			}
			return mcp.Run(ctx, o, a.env.Stdin, a.env.Stdout)
		},
	}
	cmd.Flags().BoolVar(&admin, "admin", false, "connect with the operator credential instead of as an agent")
	cmd.Flags().BoolVar(&deviceTools, "device-tools", false, "also list device_exec, device_screenshot, device_install and device_open_url, confined to the session's lease")
	cmd.Flags().StringVar(&sessionConfig, "session-config", "", "keep one broker session: its config as inline JSON or a file path, prepared before initialize (default $"+mcp.SessionConfigEnv+")")
	cmd.Flags().String("session-owner-token-file", "", "read the session's owner token from this file (mode 0600; default $"+mcp.SessionOwnerTokenEnv+", else one random token per process)")
	cmd.Flags().StringVar(&slotConfig, "slot-config", "", "run one execution of a managed slot: its launch configuration as inline JSON or a file path (default $"+mcp.SlotConfigEnv+")")
	cmd.Flags().StringArrayVar(&enable, "enable-tool", nil, "serve an opt-in tool: set_device_resources or reconcile_device_resources (repeatable; both are on when the daemon config sets resources.enabled)")
	return cmd
}

// mcpPrincipal is the session's identity: SIMLOCK_PRINCIPAL, or one per
// process, named so `simlock status` shows the lease came through MCP.
func (a *app) mcpPrincipal() string {
	if p := a.env.Getenv("SIMLOCK_PRINCIPAL"); p != "" {
		return p
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("mcp:%s:%d", host, os.Getpid())
}

// mcpSession reads and checks a session config, if one is given; nil means
// a plain MCP session. Nothing here reaches a daemon.
func (a *app) mcpSession(cmd *cobra.Command, flag string) (*mcp.SessionOptions, error) {
	cfg, ok, err := mcp.LoadSessionConfig(flag, a.env.Getenv(mcp.SessionConfigEnv), os.ReadFile)
	if err != nil || !ok {
		return nil, err
	}
	// A managed slot picks its device another way; one process cannot be
	// the keeper of both.
	if f := cmd.Flags().Lookup("slot-config"); (f != nil && f.Changed) || a.env.Getenv("SIMLOCK_SLOT_CONFIG") != "" {
		return nil, contract.Errorf(contract.CodeSessionConfigInvalid, "--session-config cannot be combined with --slot-config").
			WithNext("give one of --session-config and --slot-config")
	}
	token := a.env.Getenv(mcp.SessionOwnerTokenEnv)
	if f := cmd.Flags().Lookup("session-owner-token-file"); f != nil && f.Value.String() != "" {
		// Never stdin here: it carries the protocol.
		if f.Value.String() == "-" {
			return nil, contract.Errorf(contract.CodeBadRequest, "--session-owner-token-file - would read stdin, which carries MCP").
				WithNext("pass the path of a file of mode 0600, or set " + mcp.SessionOwnerTokenEnv)
		}
		if token, err = readOwnerToken(f.Value.String(), nil); err != nil {
			return nil, err
		}
	}
	return &mcp.SessionOptions{Config: cfg, OwnerToken: token}, nil
}

// mcpSlot reads and validates a managed slot's launch configuration, if
// one is given; nil means a plain MCP session. Nothing here reaches a
// daemon or a device.
func (a *app) mcpSlot(cmd *cobra.Command, flag string) (*mcp.SlotOptions, error) {
	cfg, ok, err := mcp.LoadSlotConfig(flag, a.env.Getenv(mcp.SlotConfigEnv))
	if err != nil || !ok {
		return nil, err
	}
	// A session configuration picks devices another way; one execution
	// cannot be both.
	if f := cmd.Flags().Lookup("session-config"); (f != nil && f.Changed) || a.env.Getenv("SIMLOCK_SESSION_CONFIG") != "" {
		return nil, contract.Errorf(contract.CodeSlotConfigInvalid, "--slot-config cannot be combined with --session-config").
			WithNext("give one of --slot-config and --session-config")
	}
	return &mcp.SlotOptions{Config: cfg}, nil
}
