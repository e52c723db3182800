package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// consoleCmd prints (or opens) a sign-in link to the web console. The link
// carries a one-time code the daemon minted for this command's credential,
// never the credential: see docs/adr/0027-console-sign-in-by-one-time-code.md.
func (a *app) consoleCmd() *cobra.Command {
	var open bool
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Print (or --open) a one-time sign-in link to the web console",
		Long: "console asks the daemon (or, with --url, a remote daemon or gateway) for a one-time code and\n" +
			"prints the web console's address with the code in it. The link works once, within 60 s; the\n" +
			"browser exchanges it for a session kept in that tab only. The HTTP frontend must be enabled\n" +
			"(http.enabled in the configuration; a gateway always serves it).",
		Example: "  simlock console            # print the link\n  simlock console --open     # and open it in the default browser",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base, cred, err := a.consoleTarget(cmd.Context())
			if err != nil {
				return err
			}
			code, err := mintConsoleCode(cmd.Context(), base, cred)
			if err != nil {
				return err
			}
			link := base + code.Path
			if a.jsonOut {
				if err := a.printJSON(map[string]any{"url": link, "expiresAt": code.ExpiresAt}); err != nil {
					return err
				}
			} else {
				a.printf("%s\n", link)
				fmt.Fprintf(a.env.Stderr, "simlock: the link signs in once, until %s; it does not contain your token\n",
					code.ExpiresAt.Local().Format(time.TimeOnly))
			}
			if open {
				if err := a.openBrowser(link); err != nil {
					fmt.Fprintf(a.env.Stderr, "simlock: could not open a browser (%v); open the link above yourself\n", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the link in the default browser ($BROWSER, else open or xdg-open)")
	a.addJSON(cmd)
	return cmd
}

// consoleTarget finds the console's base URL and the credential that
// mints the code: the --url daemon with its API token, or the local daemon
// (asked for its HTTP address) with the admin secret or --token.
func (a *app) consoleTarget(ctx context.Context) (base, cred string, err error) {
	if a.url != "" {
		cred = a.token
		if cred == "" {
			cred = a.env.Getenv("SIMLOCK_TOKEN")
		}
		if cred == "" {
			return "", "", contract.Errorf(contract.CodeUnauthenticated, "%s needs an API token", a.url).
				WithNext("pass --token or set SIMLOCK_TOKEN")
		}
		return strings.TrimRight(a.url, "/"), cred, nil
	}
	c, err := a.connect(ctx, true)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	st, err := client.Do(ctx, c, contract.StatusGet, contract.StatusGetIn{})
	if err != nil {
		return "", "", err
	}
	if st.Daemon.HTTP == "" {
		return "", "", contract.Errorf(contract.CodeBadRequest, "the daemon's HTTP frontend is disabled, and the console is served by it").
			WithNext(fmt.Sprintf("set http.enabled to true in %s (http.listen defaults to 127.0.0.1:7420), then restart the daemon (`simlock daemon stop`)", a.configPath))
	}
	cred = a.credential(false)
	if cred == "" {
		return "", "", contract.Errorf(contract.CodeUnauthenticated, "no credential to sign the console in with").
			WithNext("run this as the daemon's user (it reads <home>/admin.token), or pass --token with an operator or agent token")
	}
	return "http://" + dialable(st.Daemon.HTTP), cred, nil
}

// dialable turns a wildcard listen address into one a local browser can
// reach.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

type consoleCode struct {
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expiresAt"`
	Path      string    `json:"path"`
}

// mintConsoleCode calls POST /v1/console/codes with cred in the
// Authorization header, the only place the credential travels.
func mintConsoleCode(ctx context.Context, base, cred string) (consoleCode, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/console/codes", http.NoBody)
	if err != nil {
		return consoleCode{}, fmt.Errorf("console URL %q: %w", base, err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return consoleCode{}, contract.Errorf(contract.CodeDaemonNotRunning, "cannot reach the console at %s: %v", base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		var eb struct {
			Error *contract.Error `json:"error"`
		}
		if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
			if eb.Error.Code == contract.CodeUnknownOperation {
				eb.Error.NextAction = "this daemon predates the web console; upgrade it"
			}
			return consoleCode{}, eb.Error
		}
		return consoleCode{}, fmt.Errorf("POST %s/v1/console/codes: %s", base, resp.Status)
	}
	var code consoleCode
	if err := json.Unmarshal(b, &code); err != nil || code.Code == "" || !strings.HasPrefix(code.Path, "/") {
		return consoleCode{}, fmt.Errorf("POST %s/v1/console/codes: unexpected answer %q", base, b)
	}
	return code, nil
}

// openBrowser starts the user's browser on link without waiting for it.
func (a *app) openBrowser(link string) error {
	name := a.env.Getenv("BROWSER")
	switch {
	case name != "":
	case runtime.GOOS == "darwin":
		name = "open"
	default:
		name = "xdg-open"
	}
	c := exec.Command(name, link)
	if err := c.Start(); err != nil {
		return err
	}
	go func() { _ = c.Wait() }()
	return nil
}
