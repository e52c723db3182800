package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/sessions"
)

// ownerTokenEnv holds a session's owner token when --owner-token-file is
// not given (owner_token.go: never from the argument list).
const ownerTokenEnv = "SIMLOCK_SESSION_OWNER_TOKEN"

// sessionCmd is `simlock session ...`. Every subcommand talks only to a
// daemon that already runs: preparing a session on a daemon that a
// command line just started would hand out a device no keeper holds.
func (a *app) sessionCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "session", Short: "Sessions: devices by requirements, with durable receipts (session-broker/v1)"}
	var token, tokenFile string
	owner := func() (string, error) {
		if token != "" {
			return "", ownerTokenFromArgs()
		}
		if tokenFile != "" {
			return readOwnerToken(tokenFile, a.env.Stdin)
		}
		if t := a.env.Getenv(ownerTokenEnv); t != "" {
			return t, nil
		}
		return "", contract.Errorf(contract.CodeSessionConfigInvalid, "an owner token is required").
			WithNext("set " + ownerTokenEnv + ", or pass --owner-token-file PATH (mode 0600) or --owner-token-file - (stdin)")
	}
	tokenFlag := func(c *cobra.Command) {
		c.Flags().StringVar(&tokenFile, "owner-token-file", "", "read the session's owner token from this file (mode 0600) or, with -, from stdin's first line (default $"+ownerTokenEnv+")")
		// Kept only to refuse it with the way out: a token in the
		// argument list is readable by every local user.
		c.Flags().StringVar(&token, "owner-token", "", "refused: use $"+ownerTokenEnv+" or --owner-token-file")
		_ = c.Flags().MarkHidden("owner-token")
	}
	printReceipt := func(r contract.SessionReceipt) error {
		if a.jsonOut {
			return a.printJSON(r)
		}
		line := fmt.Sprintf("request %s: %s", r.RequestID, r.Status)
		if r.SessionID != "" {
			line += " session " + r.SessionID
		}
		if r.Device != nil {
			line += " device " + r.Device.ID
		}
		if r.Failure != nil {
			line += fmt.Sprintf(" (%s: %s)", r.Failure.Code, r.Failure.Message)
		}
		if r.CleanupPending {
			line += " cleanup pending"
		}
		a.printf("%s\n", line)
		return nil
	}

	var cfgArg, expPrepare, expDigest string
	var waitMs int64
	prepare := &cobra.Command{
		Use:   "prepare --config JSON|PATH",
		Short: "Prepare a session (the same owner token and config always answer with the same receipt)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := owner()
			if err != nil {
				return err
			}
			cfg, err := sessions.LoadConfig(cfgArg, os.ReadFile)
			if err != nil {
				return err
			}
			in := contract.SessionPrepareIn{Config: cfg, OwnerToken: t, WaitMs: waitMs}
			if expPrepare != "" || expDigest != "" {
				in.Export = &contract.SessionExport{PrepareID: expPrepare, RequestDigest: expDigest}
			}
			r, err := doRead(cmd, a, contract.SessionPrepare, in)
			if err != nil {
				return err
			}
			return printReceipt(r)
		},
	}
	prepare.Flags().StringVar(&cfgArg, "config", "", "the session config: inline JSON (starting with {) or a file path")
	_ = prepare.MarkFlagRequired("config")
	prepare.Flags().Int64Var(&waitMs, "wait-ms", 0, "answer with the pending receipt after this long (0: wait until ready or failed)")
	prepare.Flags().StringVar(&expPrepare, "export-prepare-id", "", "link the receipt to this export prepare id")
	prepare.Flags().StringVar(&expDigest, "export-request-digest", "", "the export's request digest")
	tokenFlag(prepare)
	a.addJSON(prepare)

	status := &cobra.Command{
		Use:   "status REQUEST_ID",
		Short: "Read a session request's receipt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := owner()
			if err != nil {
				return err
			}
			r, err := doRead(cmd, a, contract.SessionStatus, contract.SessionStatusIn{RequestID: args[0], OwnerToken: t})
			if err != nil {
				return err
			}
			return printReceipt(r)
		},
	}
	tokenFlag(status)
	a.addJSON(status)

	abandon := &cobra.Command{
		Use:   "abandon REQUEST_ID",
		Short: "Consume a request id, seen or not: a late prepare of it allocates nothing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := owner()
			if err != nil {
				return err
			}
			r, err := doRead(cmd, a, contract.SessionAbandon, contract.SessionAbandonIn{RequestID: args[0], OwnerToken: t})
			if err != nil {
				return err
			}
			return printReceipt(r)
		},
	}
	tokenFlag(abandon)
	a.addJSON(abandon)

	var budget int64 = -1
	var reason string
	release := &cobra.Command{
		Use:   "release SESSION_ID",
		Short: "Release a session through its reset: released, cleanup_pending or unknown_session",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := owner()
			if err != nil {
				return err
			}
			in := contract.SessionReleaseIn{SessionID: args[0], OwnerToken: t, Reason: reason}
			if budget >= 0 {
				in.ReplyBudgetMs = &budget
			}
			out, err := doRead(cmd, a, contract.SessionRelease, in)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			a.printf("session %s: %s\n", args[0], out.Outcome)
			return nil
		},
	}
	release.Flags().Int64Var(&budget, "reply-budget-ms", -1, "how long to wait for cleanup before answering cleanup_pending (0..30000; default the daemon's)")
	release.Flags().StringVar(&reason, "reason", "", "session_owner_exited when a keeper reports its owner gone")
	tokenFlag(release)
	a.addJSON(release)

	var window int64
	var limit int
	stats := &cobra.Command{
		Use:   "stats",
		Short: "Acquisition and reset statistics over recent receipts, per platform and profile",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := doRead(cmd, a, contract.SessionStats, contract.SessionStatsIn{WindowMs: window, Limit: limit})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			a.printf("%d groups since %s (limit %d, truncated %v)\n", len(out.Groups), time.UnixMilli(out.SinceMs).UTC().Format(time.RFC3339), out.Limit, out.Truncated)
			for _, g := range out.Groups {
				tot := g.Phases["totalMs"]
				a.printf("%s %s: %d acquisitions (total p50 %.0f ms, p90 %.0f ms), %d resets, reuse %.2f, fallback %.2f, retired %d\n",
					g.Platform, g.Profile, g.Acquisitions, tot.P50, tot.P90, g.Resets, g.ReuseHitRate, g.FallbackRate, g.Retirements)
			}
			return nil
		},
	}
	stats.Flags().Int64Var(&window, "window-ms", 0, "how far back to read (default 24 h, at most 30 d)")
	stats.Flags().IntVar(&limit, "limit", 0, "the most receipts to read (default 5000, at most 10000)")
	a.addJSON(stats)

	info := &cobra.Command{
		Use:   "info SESSION_ID",
		Short: "A session's bound device (descriptive only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := doRead(cmd, a, contract.SessionInfo, contract.SessionInfoIn{SessionID: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOut || out.Device == nil {
				return a.printJSON(out)
			}
			a.printf("session %s: %s on %s (%s)\n", out.SessionID, out.Status, out.Device.ID, out.Device.Name)
			return nil
		},
	}
	a.addJSON(info)

	hold := &cobra.Command{
		Use:   "hold SESSION_ID",
		Short: "Keep a session alive by heartbeats until killed or stdin closes, then release it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := owner()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			c, err := a.connect(ctx, true)
			if err != nil {
				return err
			}
			defer c.Close()
			return a.holdSession(ctx, c, args[0], t)
		},
	}
	tokenFlag(hold)

	cmd.AddCommand(prepare, status, abandon, release, stats, info, hold)
	return cmd
}

// holdSession keeps the session (client.KeepSession) until ctx ends or
// stdin reaches EOF, then releases it: the keeper's owner is gone. A lost
// daemon is dialled again (a restart hands the session off to the next
// one) for up to holdRedialFor; a session that ended stops the hold
// without a release.
func (a *app) holdSession(ctx context.Context, c *client.Client, sid, token string) error {
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, a.env.Stdin)
		stop()
	}()
	err := client.KeepSession(kctx, client.KeepSessionOptions{SessionID: sid, OwnerToken: token, GiveUpAfter: holdRedialFor,
		Conn: func(context.Context) (*client.Client, error) { return c, nil },
		OnRetry: func(ctx context.Context, err error) {
			fmt.Fprintf(a.env.Stderr, "simlock: session %s: heartbeat failed (%v); trying again\n", sid, err)
			if nc, derr := a.connect(ctx, true); derr == nil {
				c.Close()
				c = nc
			}
		}})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 35*time.Second)
	defer cancel()
	out, err := client.Do(rctx, c, contract.SessionRelease, contract.SessionReleaseIn{SessionID: sid, OwnerToken: token})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stderr, "simlock: session %s: %s\n", sid, out.Outcome)
	return nil
}

// holdRedialFor is how long a hold keeps dialling a daemon that went away:
// the handoff grace a restarted daemon gives its sessions.
const holdRedialFor = 30 * time.Second

// capabilitiesCmd is `simlock capabilities`: the contracts the running
// daemon serves. It never starts one.
func (a *app) capabilitiesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "capabilities",
		Short: "The contracts the running daemon serves (session-broker/v1, ...)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := doRead(cmd, a, contract.CapabilitiesGet, contract.CapabilitiesGetIn{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			a.printf("%s\n", strings.Join(out.Contracts, "\n"))
			return nil
		},
	}
	a.addJSON(cmd)
	return cmd
}
