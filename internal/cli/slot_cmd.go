package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
)

// slotCmd is the operator's view of managed slots (ADR 0049): the host
// registry's assignments and free pool, and the reset of a runner
// incarnation's scope.
func (a *app) slotCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "slot", Short: "Managed slots: list assignments, reset a runner incarnation's scope (admin)"}
	list := &cobra.Command{
		Use:   "list",
		Short: "Every slot assignment and free-pool device in the host registry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := doRead(cmd, a, contract.SlotList, contract.SlotListIn{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			if len(out.Assignments) == 0 && len(out.FreePool) == 0 {
				a.printf("no managed slots\n")
				return nil
			}
			w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "SCOPE\tNAMESPACE\tINCARNATION\tSLOT\tSTATE\tGEN\tDEVICE\tLEASE")
			for _, s := range out.Assignments {
				dev := "-"
				if s.Device != nil {
					dev = s.Device.StableID
				}
				fmt.Fprintf(w, "%.12s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", s.ScopeKey, s.RunnerNamespace, s.RunnerIncarnation, s.SlotIndex, s.State,
					s.AssignmentGeneration, dev, dash(s.LeaseID))
			}
			for _, f := range out.FreePool {
				fmt.Fprintf(w, "-\t-\t-\t-\tfree-pool\t-\t%s\t-\n", f.StableID)
			}
			return w.Flush()
		},
	}
	a.addJSON(list)

	var ns, inc, hostScope string
	var waitMs int64
	var force bool
	reset := &cobra.Command{
		Use:   "reset-scope",
		Short: "Invalidate a runner incarnation's scope once its owners and cleanup settle; its devices go to the free pool",
		Long: "Invalidate a runner incarnation's scope once its owners and cleanup settle; its devices go to the free pool.\n" +
			"Prints the JSON result. Exit 0: invalidated; 2: still waiting (stderr lists each force refusal); 1: no scope matched or failure.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if waitMs < 0 || waitMs > 60000 {
				return contract.Errorf(contract.CodeBadRequest, "--wait-ms %d is outside 0..60000", waitMs)
			}
			out, err := do(cmd, a, contract.SlotResetScope, contract.SlotResetScopeIn{RunnerNamespace: ns, RunnerIncarnation: inc,
				ManagedHostScope: hostScope, WaitMs: &waitMs, Force: force})
			if err != nil {
				return err
			}
			if err := a.printJSON(out); err != nil {
				return err
			}
			switch out.Outcome {
			case "invalidated":
				return nil
			case "waiting":
				for _, s := range out.Scopes {
					for _, f := range s.ForceRefusals {
						rem := ""
						if f.RemainingMs != nil {
							rem = fmt.Sprintf(" (%d ms left)", *f.RemainingMs)
						}
						fmt.Fprintf(a.env.Stderr, "simlock: scope %.12s slot %d: %s%s: %s\n", s.ScopeKey, f.SlotIndex, f.Reason, rem, f.Message)
					}
				}
				return exitError{2}
			}
			fmt.Fprintf(a.env.Stderr, "simlock: no scope of namespace %q incarnation %q\n", ns, inc)
			return exitError{1}
		},
	}
	reset.Flags().StringVar(&ns, "runner-namespace", "", "the runner namespace (required)")
	reset.Flags().StringVar(&inc, "incarnation", "", "the runner incarnation to retire (required)")
	reset.Flags().StringVar(&hostScope, "managed-host-scope", "", "only the scope of this managed host scope")
	reset.Flags().Int64Var(&waitMs, "wait-ms", 10000, "how long to wait for owners and cleanup to settle, 0..60000")
	reset.Flags().BoolVar(&force, "force", false, "clear what is provably safe (dead owners, settling past its cap); refusals are listed")
	_ = reset.MarkFlagRequired("runner-namespace")
	_ = reset.MarkFlagRequired("incarnation")
	cmd.AddCommand(list, reset)
	return cmd
}
