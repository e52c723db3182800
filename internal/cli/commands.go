package cli

import "github.com/spf13/cobra"

// CommandPaths lists every visible command of the CLI as its path without
// the program name ("lease renew", "daemon start"), for the test that holds
// docs/cli.md to the command tree. Cobra's own help and completion
// commands, added only at execution, are not in it.
func CommandPaths() []string {
	var out []string
	var walk func(c *cobra.Command, prefix string)
	walk = func(c *cobra.Command, prefix string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			p := prefix + sub.Name()
			out = append(out, p)
			walk(sub, p+" ")
		}
	}
	walk((&app{env: OSEnv()}).rootCmd(), "")
	return out
}
