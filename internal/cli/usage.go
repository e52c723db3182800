package cli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/simlock/simlock/contract"
)

// suggestDistance is how far (Levenshtein) a typo may be from a command
// name and still be suggested.
const suggestDistance = 2

// refineTree applies the rules every command shares: suggestions for a
// mistyped subcommand, and command groups that refuse an unknown
// subcommand instead of silently printing their help.
func refineTree(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.SuggestionsMinimumDistance = suggestDistance
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) == 0 {
					return cmd.Help()
				}
				return unknownCommand(cmd, args[0])
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	// Subcommands find the root's function: cobra looks up the parents.
	root.SetFlagErrorFunc(flagError)
}

var unknownFlagRE = regexp.MustCompile(`^unknown flag: --([^\s=]+)`)

// flagError is every command's answer to a flag pflag refused: a
// BAD_REQUEST, and for an unknown flag the nearest flags the command does
// take, as a mistyped command gets the nearest commands.
func flagError(cmd *cobra.Command, err error) error {
	m := unknownFlagRE.FindStringSubmatch(err.Error())
	if m == nil {
		return usageError(cmd, err)
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	e := contract.Errorf(contract.CodeBadRequest, "unknown flag: --%s", m[1])
	s := nearest(m[1], names)
	if len(s) == 0 {
		return e.WithNext(fmt.Sprintf("`%s --help` shows its usage", cmd.CommandPath()))
	}
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = "--" + x
	}
	return e.WithDetails("suggestions", q).WithNext("did you mean " + strings.Join(q, " or ") + "?")
}

func unknownCommand(cmd *cobra.Command, name string) *contract.Error {
	e := contract.Errorf(contract.CodeBadRequest, "unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		return e.WithDetails("suggestions", s).WithNext(didYouMean(cmd.CommandPath(), s))
	}
	return e.WithNext(fmt.Sprintf("`%s --help` lists its commands", cmd.CommandPath()))
}

func didYouMean(prefix string, s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = "`" + strings.TrimSpace(prefix+" "+x) + "`"
	}
	return "did you mean " + strings.Join(q, " or ") + "?"
}

var unknownCommandRE = regexp.MustCompile(`^unknown command "([^"]*)" for "([^"]*)"`)

// usageError turns an error cobra raised before any command ran (an
// unknown flag, a missing argument, an unknown command) into a
// BAD_REQUEST, so it exits 2 and prints as JSON under --json like every
// other refusal. cmd is the command cobra resolved.
func usageError(cmd *cobra.Command, err error) error {
	if contract.AsError(err) != nil {
		return err
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if m := unknownCommandRE.FindStringSubmatch(msg); m != nil && cmd != nil {
		return unknownCommand(cmd, m[1])
	}
	next := "`simlock --help` lists the commands"
	if cmd != nil {
		next = fmt.Sprintf("`%s --help` shows its usage", cmd.CommandPath())
	}
	return contract.Errorf(contract.CodeBadRequest, "%s", msg).WithNext(next)
}
