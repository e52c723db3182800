package cli

import (
	"errors"
	"os"
	"os/exec"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// passthroughCmd runs a platform tool scoped to simlock's device root: the
// daemon knows the root and the refusal list, this process has the
// terminal, so an interactive session keeps its tty and its exit code.
func (a *app) passthroughCmd(tool, short string) *cobra.Command {
	return &cobra.Command{
		Use:                tool + " [ARGS...]",
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if arg == "--help" || arg == "-h" {
					if len(args) == 1 {
						return cmd.Help()
					}
				}
			}
			c, err := a.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			out, err := client.Do(cmd.Context(), c, contract.Passthrough, contract.PassthroughIn{
				Tool: tool, Args: args, Terminal: term.IsTerminal(int(os.Stdin.Fd()))})
			c.Close()
			if err != nil {
				return err
			}
			run := exec.CommandContext(cmd.Context(), out.Command, out.Args...)
			run.Env = append(os.Environ(), out.Env...)
			run.Stdin, run.Stdout, run.Stderr = a.env.Stdin, a.env.Stdout, a.env.Stderr
			if err := run.Run(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return exitError{ee.ExitCode()}
				}
				return err
			}
			return nil
		},
	}
}
