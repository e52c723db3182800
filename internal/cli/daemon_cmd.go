package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/ports"
)

func (a *app) daemonCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "daemon", Short: "Run, start, stop and inspect the daemon"}
	cmd.AddCommand(a.daemonRunCmd(), a.daemonStartCmd(), a.daemonStopCmd(), a.daemonStatusCmd(), a.daemonLogsCmd())
	return cmd
}

func (a *app) loadConfig() (config.Config, error) {
	return config.Load(a.configPath)
}

func (a *app) daemonRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return contract.Errorf(contract.CodeBadRequest, "%v", err).WithNext("fix the configuration file")
			}
			p := a.paths()
			if err := os.MkdirAll(p.Home, 0o700); err != nil {
				return err
			}
			logFile, err := ports.OpenRotatingFile(p.Log, cfg.Log.RotateBytes)
			if err != nil {
				return err
			}
			defer logFile.Close()
			logger := ports.NewLogger(logFile, ports.ParseLevel(cfg.Log.Level))
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			d, err := daemon.Start(ctx, daemon.Options{Home: p.Home, Config: cfg, Version: Version, Logger: logger, Getenv: a.env.Getenv})
			if err != nil {
				logger.Error("daemon failed to start", "err", err)
				return err
			}
			mode := cfg.Mode
			if d.HTTPAddr() != "" {
				fmt.Fprintf(a.env.Stderr, "simlock %s %s listening on %s and http://%s (pid %d)\n", mode, Version, p.Socket, d.HTTPAddr(), os.Getpid())
			} else {
				fmt.Fprintf(a.env.Stderr, "simlock %s %s listening on %s (pid %d)\n", mode, Version, p.Socket, os.Getpid())
			}
			select {
			case <-ctx.Done():
				return d.Stop()
			case <-d.Done():
				return d.Wait()
			}
		},
	}
}

func (a *app) daemonStartCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background (does nothing if one is running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			o := client.Options{Socket: a.paths().Socket, Principal: a.principal(), Name: "simlock-cli"}
			if c, err := client.Dial(ctx, o); err == nil {
				defer c.Close()
				return a.printDaemonStatus(ctx, c, "already running")
			}
			if _, err := a.loadConfig(); err != nil {
				return contract.Errorf(contract.CodeBadRequest, "%v", err).WithNext("fix the configuration file")
			}
			c, err := a.launchAndDial(ctx, o)
			if err != nil {
				return err
			}
			defer c.Close()
			return a.printDaemonStatus(ctx, c, "started")
		},
	}
	a.addJSON(cmd)
	return cmd
}

func (a *app) printDaemonStatus(ctx context.Context, c *client.Client, verb string) error {
	st, err := client.Do(ctx, c, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(map[string]any{"pid": st.Daemon.PID, "version": st.Daemon.Version, "socket": st.Daemon.Socket,
			"health": st.Daemon.Health, "mode": st.Daemon.Mode, "home": st.Daemon.Home, "instanceId": st.Daemon.InstanceID})
	}
	a.printf("daemon %s: pid %d, version %s, health %s, socket %s\n", verb, st.Daemon.PID, st.Daemon.Version, st.Daemon.Health, st.Daemon.Socket)
	return nil
}

func (a *app) daemonStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Report whether the daemon runs, its pid, version and health",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := client.Options{Socket: a.paths().Socket, Principal: a.principal(), Name: "simlock-cli"}
			c, err := client.Dial(cmd.Context(), o)
			if err != nil {
				if a.jsonOut {
					a.printJSON(map[string]any{"health": "stopped", "socket": a.paths().Socket})
				} else {
					a.printf("daemon not running (socket %s)\n", a.paths().Socket)
				}
				return exitError{3}
			}
			defer c.Close()
			return a.printDaemonStatus(cmd.Context(), c, "running")
		},
	}
	a.addJSON(cmd)
	return cmd
}

func (a *app) daemonStopCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon gracefully (in-flight purges settle first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			o := client.Options{Socket: a.paths().Socket, Principal: a.principal(), Name: "simlock-cli", Credential: a.credential(false)}
			c, err := client.Dial(ctx, o)
			if client.IsCode(err, contract.CodeDaemonNotRunning) {
				a.printf("daemon not running\n")
				return nil
			}
			if err != nil && !client.IsCode(err, contract.CodeProtocolUnsupported) {
				return err
			}
			if c == nil {
				return err
			}
			if _, err := client.Do(ctx, c, contract.DaemonStop, contract.DaemonStopIn{}); err != nil {
				c.Close()
				return err
			}
			select {
			case <-c.Done():
			case <-time.After(3 * time.Minute):
				return fmt.Errorf("daemon did not stop within 3 minutes")
			}
			// The socket closes before the last files are cleaned; wait
			// until the lock is free so `daemon start` right after works.
			for i := 0; i < 200; i++ {
				if _, err := os.Stat(a.paths().PID); os.IsNotExist(err) {
					break
				}
				time.Sleep(25 * time.Millisecond)
			}
			a.printf("daemon stopped\n")
			return nil
		},
	}
	return cmd
}

func (a *app) daemonLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Print the daemon's log (rotated generation first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := a.paths().Log
			for _, f := range []string{p + ".1", p} {
				b, err := os.ReadFile(f)
				if err == nil {
					a.env.Stdout.Write(b)
				}
			}
			if !follow {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			off, _ := f.Seek(0, io.SeekEnd)
			for {
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(300 * time.Millisecond):
				}
				st, err := os.Stat(p)
				if err == nil && st.Size() < off { // rotated
					f.Close()
					if f, err = os.Open(p); err != nil {
						return err
					}
					off = 0
				}
				f.Seek(off, io.SeekStart)
				n, _ := io.Copy(a.env.Stdout, f)
				off += n
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	return cmd
}
