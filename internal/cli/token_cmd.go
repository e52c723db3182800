package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
)

func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Mint, list and revoke API tokens (admin)"}
	var role, name string
	create := &cobra.Command{
		Use:   "create",
		Short: "Mint a token; the secret is printed once and only its hash is kept",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := do(cmd, a, contract.TokenCreate, contract.TokenCreateIn{Role: role, Name: name})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]string{"id": out.ID, "role": out.Role, "name": out.Name, "token": out.Token})
			}
			a.printf("%s\n", out.Token)
			fmt.Fprintf(a.env.Stderr, "token %s (%s, role %s) created; the secret above is shown only once\n", out.ID, out.Name, out.Role)
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "", "agent, operator or worker")
	create.Flags().StringVar(&name, "name", "", "a unique name to recognise it by")
	_ = create.MarkFlagRequired("role")
	a.addJSON(create)

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := do(cmd, a, contract.TokenList, contract.TokenListIn{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tROLE\tCREATED")
			for _, t := range out.Tokens {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, t.CreatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	a.addJSON(list)

	revoke := &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke a token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := do(cmd, a, contract.TokenRevoke, contract.TokenRevokeIn{ID: args[0]})
			if err != nil {
				return err
			}
			return a.printJSON(out)
		},
	}
	a.addJSON(revoke)
	cmd.AddCommand(create, list, revoke)
	return cmd
}
