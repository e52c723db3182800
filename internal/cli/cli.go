// Package cli is simlock's command-line interface: the operator's full
// interface to the daemon, plus the multi-call entry for the simulated SDK
// tools. Output goes through the injected writers so tests can capture it.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/simsdk"
)

// Env is the process environment the CLI runs in.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Environ is the full environment, for launching the daemon.
	Environ []string
	// StdinTerminal reports whether a person can answer a prompt on Stdin;
	// nil detects it from Stdin itself (tests set it).
	StdinTerminal func() bool
	// StderrTerminal reports whether Stderr is a terminal a person watches
	// (progress lines); nil detects it from Stderr itself.
	StderrTerminal func() bool
}

// OSEnv is the real process environment.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Environ: os.Environ()}
}

// Run executes the CLI with args (without the program name... see below)
// and returns the process exit code. args[0] is the program name: when the
// binary is invoked as one of the simulated SDK tools (a link named xcrun,
// adb, ...), it behaves as that tool.
func Run(ctx context.Context, args []string, env Env) int {
	tool := filepath.Base(args[0])
	if slices.Contains(simsdk.Tools, tool) {
		return simsdk.Main(ctx, tool, args[1:], env.Stdin, env.Stdout, env.Stderr, env.Getenv)
	}
	if len(args) > 1 && args[1] == "__simsdk-device" {
		return simsdk.DeviceProcessMain(ctx, args[2:])
	}
	a := &app{env: env}
	root := a.rootCmd()
	root.SetArgs(args[1:])
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if !a.running {
		// Nothing ran: cobra refused the command line itself.
		err = usageError(cmd, err)
		if slices.Contains(args[1:], "--json") {
			a.jsonOut = true
		}
	}
	return a.report(err)
}

// app holds global flags and helpers shared by commands.
type app struct {
	env        Env
	home       string
	configPath string
	token      string
	url        string
	jsonOut    bool
	// running is set once cobra accepted the command line and the command
	// itself starts: an error before that is a usage error.
	running bool
}

// exitError carries a specific exit code with an already-printed message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// report prints a refused command's error and returns its exit code: the
// error object as JSON on stderr with --json, otherwise one line plus the
// next step.
func (a *app) report(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	ce := contract.AsError(err)
	if ce == nil {
		if errors.Is(err, context.Canceled) {
			return 130
		}
		fmt.Fprintf(a.env.Stderr, "simlock: %v\n", err)
		return 1
	}
	if a.jsonOut {
		b, _ := json.Marshal(map[string]any{"error": ce})
		fmt.Fprintln(a.env.Stderr, string(b))
	} else {
		fmt.Fprintf(a.env.Stderr, "simlock: %s: %s\n", ce.Code, ce.Message)
		if ce.NextAction != "" {
			fmt.Fprintf(a.env.Stderr, "  next: %s\n", ce.NextAction)
		}
	}
	return ce.Info().ExitCode
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "simlock",
		Short:         "Exclusive, time-limited leases on iOS Simulators and Android Emulators",
		Long:          "simlock hands booted, clean simulators and emulators to AI agents and CI runners,\none exclusive TTL lease at a time, queueing fairly when none is free.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.running = true
			a.resolve()
			return nil
		},
	}
	root.PersistentFlags().StringVar(&a.home, "home", "", "simlock's data directory (default $SIMLOCK_HOME or ~/.simlock)")
	root.PersistentFlags().StringVar(&a.configPath, "config", "", "configuration file (default <home>/config.json)")
	root.PersistentFlags().StringVar(&a.token, "token", "", "credential: an API token (with --url; default $SIMLOCK_TOKEN), or on the socket an operator token or the admin secret (default $SIMLOCK_ADMIN_TOKEN, then <home>/admin.token)")
	root.PersistentFlags().StringVar(&a.url, "url", "", "reach a remote daemon or gateway over HTTP instead of the local socket (default $SIMLOCK_URL)")
	root.AddCommand(a.daemonCmd(), a.leaseCmd(), a.releaseCmd(), a.statusCmd(), a.listCmd(), a.catalogCmd(),
		a.eventsCmd(), a.tokenCmd(), a.demoCmd(), a.simsdkCmd(), a.configCmd(),
		a.cleanupCmd(), a.doctorCmd(), a.deviceCmd(), a.nukeCmd(), a.execCmd(), a.runCmd(), a.selftestCmd(), a.resourcesCmd(), a.mcpCmd(), a.workerCmd(), a.slotCmd(), a.sessionCmd(), a.capabilitiesCmd(), a.consoleCmd(), a.versionCmd(), a.hostCmd(),
		a.passthroughCmd("simctl", "Run xcrun simctl scoped to simlock's iOS device set"),
		a.passthroughCmd("adb", "Run adb against simlock's private adb server"))
	refineTree(root)
	applyExamples(root, commandExamples())
	a.registerCompletions(root)
	return root
}

// resolve fills the defaults of the global flags from the environment.
// Completion calls it too: cobra runs no PreRun hooks for __complete.
func (a *app) resolve() {
	if a.home == "" {
		a.home = config.Home(a.env.Getenv)
	}
	if abs, err := filepath.Abs(a.home); err == nil {
		a.home = abs
	}
	if a.configPath == "" {
		a.configPath = config.PathsFor(a.home).Config
	}
	if a.url == "" {
		a.url = a.env.Getenv("SIMLOCK_URL")
	}
}

// addJSON registers --json on a read command.
func (a *app) addJSON(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&a.jsonOut, "json", false, "print machine-readable JSON")
}

func (a *app) paths() config.Paths { return config.PathsFor(a.home) }

// principal is who this invocation acts for on the socket: the person at
// the terminal, so every shell of one OS user is the same principal and
// `simlock release --all` from a new shell finds what an earlier `simlock
// lease --detach` took (ADR 0097). SIMLOCK_PRINCIPAL replaces it for a
// caller, such as an agent, that wants an identity of its own.
func (a *app) principal() string {
	if p := a.env.Getenv("SIMLOCK_PRINCIPAL"); p != "" {
		return p
	}
	return "cli:" + osUser(a.env.Getenv)
}

// osUser names the OS user running this process: the account database
// first, then $USER, then the numeric uid (a container may have no entry).
func osUser(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := getenv("USER"); u != "" {
		return u
	}
	return "uid" + strconv.Itoa(os.Getuid())
}

// requester is the requester id a lease request names: --requester, then
// SIMLOCK_REQUESTER, then (for the person identity on the socket) one id
// per process scoped under the principal. A requester holds one lease at
// a time, so two shells of one person must not share it, while the scope
// ("<principal>/...") keeps both inside what `release --all` releases.
// An empty answer lets the daemon use the session's principal, as it does
// for SIMLOCK_PRINCIPAL and for an HTTP token.
func (a *app) requester(flag, principal string) string {
	if flag != "" {
		return flag
	}
	if r := a.env.Getenv("SIMLOCK_REQUESTER"); r != "" {
		return r
	}
	if a.url != "" || a.env.Getenv("SIMLOCK_PRINCIPAL") != "" || principal == "" {
		return ""
	}
	return principal + "/" + strconv.Itoa(os.Getpid())
}

// credential resolves the admin credential: --token, SIMLOCK_ADMIN_TOKEN,
// then the local admin.token file (retried briefly: a daemon that is still
// starting writes it just after claiming the socket).
func (a *app) credential(retry bool) string {
	if a.token != "" {
		return a.token
	}
	if t := a.env.Getenv("SIMLOCK_ADMIN_TOKEN"); t != "" {
		return t
	}
	for i := 0; ; i++ {
		if b, err := os.ReadFile(a.paths().AdminToken); err == nil {
			return strings.TrimSpace(string(b))
		}
		if !retry || i >= 10 {
			return ""
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connect dials the daemon, auto-starting one when nothing listens (unless
// noLaunch). Without a credential it falls back to an agent session and
// says so once on stderr.
func (a *app) connect(ctx context.Context, noLaunch bool) (*client.Client, error) {
	if a.url != "" {
		// Remote: the bearer token is the identity; nothing is launched.
		tok := a.token
		if tok == "" {
			tok = a.env.Getenv("SIMLOCK_TOKEN")
		}
		if tok == "" {
			return nil, contract.Errorf(contract.CodeUnauthenticated, "%s needs an API token", a.url).
				WithNext("pass --token or set SIMLOCK_TOKEN (mint one with `simlock token create --role agent` on the daemon's machine)")
		}
		c, err := client.DialHTTP(ctx, a.url, tok, client.WithClientName("simlock-cli "+Version))
		if ce := contract.AsError(err); ce != nil && ce.Code == contract.CodeDaemonNotRunning {
			// The code's usual advice starts a local daemon, which would
			// not answer at this URL.
			ce.NextAction = "check the URL, and that the daemon on that machine runs with http.enabled and listens where it points"
		}
		return c, err
	}
	o := client.Options{Socket: a.paths().Socket, Principal: a.principal(), Name: "simlock-cli " + Version}
	o.Credential = a.credential(false)
	var c *client.Client
	var err error
	if noLaunch {
		c, err = client.Dial(ctx, o)
		if ce := contract.AsError(err); ce != nil && ce.Code == contract.CodeDaemonNotRunning {
			return nil, contract.Errorf(contract.CodeDaemonNotRunning, "no daemon running (socket %s)", o.Socket).
				WithDetails("socket", o.Socket).
				WithNext("start one with `simlock daemon start`; `simlock lease` also starts one when it needs a device")
		}
	} else {
		c, err = client.Dial(ctx, o)
		if client.IsCode(err, contract.CodeDaemonNotRunning) {
			// A bad config would only surface in daemon.out after a long
			// wait; say so now instead.
			if _, cerr := config.Load(a.configPath); cerr != nil {
				return nil, contract.Errorf(contract.CodeBadRequest, "cannot start the daemon: %v", cerr).
					WithNext("fix " + a.configPath)
			}
			fmt.Fprintln(a.env.Stderr, "simlock: no daemon running; starting one")
			o.Credential = ""
			c, err = a.launchAndDial(ctx, o)
			if err != nil {
				return nil, err
			}
			// Reconnect as admin now that the new daemon wrote its secret.
			if cred := a.credential(true); cred != "" {
				c.Close()
				o.Credential = cred
				c, err = client.Dial(ctx, o)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if c.Hello().Role != contract.RoleAdmin {
		why := "no admin credential found"
		if o.Credential != "" {
			why = "the credential is an agent token"
		}
		fmt.Fprintf(a.env.Stderr, "simlock: %s; connected as agent (only your own leases are visible)\n", why)
	}
	return c, nil
}

// launchAndDial starts a daemon and dials it until it answers; a daemon
// that exits during startup is reported at once with its own reason
// (client.LaunchAndDial).
func (a *app) launchAndDial(ctx context.Context, o client.Options) (*client.Client, error) {
	return client.LaunchAndDial(ctx, o, a.launchOptions())
}

func (a *app) launchOptions() client.LaunchOptions {
	env := a.env.Environ
	env = append(env, "SIMLOCK_HOME="+a.home)
	args := []string{"daemon", "run", "--home", a.home}
	if a.configPath != "" {
		args = append(args, "--config", a.configPath)
	}
	return client.LaunchOptions{Args: args, Env: env, LogFile: filepath.Join(a.home, "daemon.out")}
}

// printJSON writes v as one JSON line to stdout.
func (a *app) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.env.Stdout, string(b))
	return err
}

func (a *app) printf(format string, args ...any) {
	fmt.Fprintf(a.env.Stdout, format, args...)
}

// doRead runs one read-only operation: it never starts a daemon, since
// starting one only to report that nothing runs would be a lie.
func doRead[In, Out any](cmd *cobra.Command, a *app, op contract.Operation[In, Out], in In) (Out, error) {
	c, err := a.connect(cmd.Context(), true)
	if err != nil {
		var zero Out
		return zero, err
	}
	defer c.Close()
	return client.Do(cmd.Context(), c, op, in)
}

// do runs one operation on a fresh connection (auto-starting the daemon).
func do[In, Out any](cmd *cobra.Command, a *app, op contract.Operation[In, Out], in In) (Out, error) {
	c, err := a.connect(cmd.Context(), false)
	if err != nil {
		var zero Out
		return zero, err
	}
	defer c.Close()
	return client.Do(cmd.Context(), c, op, in)
}
