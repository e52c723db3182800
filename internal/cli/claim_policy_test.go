package cli

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
)

// Every runnable command declares a claim policy, and every declaration
// names a command that exists.
func TestEveryCommandDeclaresAClaimPolicy(t *testing.T) {
	a := &app{env: OSEnv()}
	declared := commandClaimPolicies()
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Name() != "help" && c.Name() != "completion" && (c.Parent() == nil || c.Parent().Name() != "completion") {
			path := c.CommandPath()
			seen[path] = true
			p, ok := declared[path]
			switch {
			case !ok:
				t.Errorf("%q declares no claim policy: add it to commandClaimPolicies", path)
			case !slices.Contains(contract.ClaimPolicies(), p):
				t.Errorf("%q declares unknown claim policy %q", path, p)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := a.rootCmd()
	root.InitDefaultCompletionCmd()
	walk(root)
	for path := range declared {
		if !seen[path] {
			t.Errorf("commandClaimPolicies names %q, which is not a command", path)
		}
	}
}
