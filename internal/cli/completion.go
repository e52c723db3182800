package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// completionWait bounds a completion's talk with the daemon: a shell
// waiting on Tab must never hang.
const completionWait = 2 * time.Second

// registerCompletions teaches the shell completion (cobra's `completion`
// command) simlock's values: platforms, models and lease ids from the
// daemon, cleanup rules. A completion never starts a daemon; without one
// it offers what it knows offline, or nothing.
func (a *app) registerCompletions(root *cobra.Command) {
	for _, path := range [][]string{{"lease"}, {"run"}, {"selftest"}, {"catalog"}, {"device", "status"}, {"device", "release"}} {
		if c, _, err := root.Find(path); err == nil && c.Flags().Lookup("platform") != nil {
			_ = c.RegisterFlagCompletionFunc("platform", completePlatforms)
		}
	}
	for _, path := range [][]string{{"lease"}, {"run"}} {
		if c, _, err := root.Find(path); err == nil {
			_ = c.RegisterFlagCompletionFunc("model", a.completeModels)
		}
	}
	if c, _, err := root.Find([]string{"cleanup"}); err == nil {
		_ = c.RegisterFlagCompletionFunc("rule", completeCleanupRules)
	}
	for _, path := range [][]string{{"lease", "renew"}, {"lease", "get"}, {"release"}, {"exec"}} {
		if c, _, err := root.Find(path); err == nil {
			c.ValidArgsFunction = a.completeLeaseIDs
		}
	}
}

func completePlatforms(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return knownPlatforms, cobra.ShellCompDirectiveNoFileComp
}

func completeCleanupRules(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	// The daemon is this same binary: its rules are these.
	var out []string
	for _, r := range core.CleanupRules() {
		out = append(out, r.Name())
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completionClient dials a daemon that already runs, or returns nil.
func (a *app) completionClient(ctx context.Context) *client.Client {
	a.resolve()
	if a.url != "" {
		tok := a.token
		if tok == "" {
			tok = a.env.Getenv("SIMLOCK_TOKEN")
		}
		c, err := client.DialHTTP(ctx, a.url, tok, client.WithClientName("simlock-cli "+Version))
		if err != nil {
			return nil
		}
		return c
	}
	c, err := client.Dial(ctx, client.Options{Socket: a.paths().Socket, Principal: a.principal(),
		Name: "simlock-cli " + Version, Credential: a.credential(false)})
	if err != nil {
		return nil
	}
	return c
}

func (a *app) completeModels(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(cmd.Context(), completionWait)
	defer cancel()
	c := a.completionClient(ctx)
	if c == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer c.Close()
	platform, _ := cmd.Flags().GetString("platform")
	cat, err := client.Do(ctx, c, contract.CatalogGet, contract.CatalogGetIn{Platform: platform})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, p := range cat.Platforms {
		for _, m := range p.Models {
			out = append(out, cobra.CompletionWithDesc(m.Name, p.Platform))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (a *app) completeLeaseIDs(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		// Every command here takes one lease id (exec's tool follows --).
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionWait)
	defer cancel()
	c := a.completionClient(ctx)
	if c == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer c.Close()
	list, err := client.Do(ctx, c, contract.LeaseList, contract.LeaseListIn{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, l := range list.Leases {
		desc := l.Platform + " " + l.DeviceID
		if l.Device != nil {
			desc = strings.TrimSpace(l.Device.Model + " " + l.Device.OSVersion)
		}
		out = append(out, cobra.CompletionWithDesc(l.LeaseID, desc+", "+l.RequesterID))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
