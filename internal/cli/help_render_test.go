package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// valueName is what a back-quoted word in a usage string may be: pflag
// shows the first back-quoted text as the flag's value name, so only a
// deliberate placeholder such as `FILE` belongs in back quotes.
var valueName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// Every command's help renders, and no flag's usage hands pflag a
// back-quoted command (`simlock device status`) that it would print as the
// flag's value name: `--device simlock device status`.
func TestEveryHelpRendersFlagValueNamesCleanly(t *testing.T) {
	a := &app{env: Env{Getenv: func(string) string { return "" }}}
	root := a.rootCmd()
	n := 0
	walk(root, func(c *cobra.Command) {
		var buf bytes.Buffer
		c.SetOut(&buf)
		c.SetErr(&buf)
		if err := c.Help(); err != nil {
			t.Errorf("%s --help: %v", c.CommandPath(), err)
			return
		}
		help := buf.String()
		check := func(fl *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(fl)
			if strings.Contains(fl.Usage, "`") && !valueName.MatchString(name) {
				t.Errorf("%s --%s: pflag reads %q from the usage's back quotes as the value name", c.CommandPath(), fl.Name, name)
			}
			if !fl.Hidden && !strings.Contains(help, "--"+fl.Name) {
				t.Errorf("%s --help does not show --%s", c.CommandPath(), fl.Name)
			}
			n++
		}
		c.LocalFlags().VisitAll(check)
		c.InheritedFlags().VisitAll(check)
	})
	if n < 100 {
		t.Fatalf("checked only %d flags; the walk no longer reaches the command tree", n)
	}
}
