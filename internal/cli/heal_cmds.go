package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
)

func (a *app) cleanupCmd() *cobra.Command {
	var in contract.CleanupRunIn
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Run the idle-device cleanup rules now (admin); --dry-run previews",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := do(cmd, a, contract.CleanupRun, in)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			if len(out.Actions) == 0 {
				a.printf("nothing to clean up\n")
				return nil
			}
			w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "RULE\tDEVICE\tACTION\tRESULT\tREASON")
			for _, x := range out.Actions {
				res := "would run"
				switch {
				case x.Error != "":
					res = "failed: " + x.Error
				case x.Skipped != "":
					res = "skipped: " + x.Skipped
				case x.Executed:
					res = "done"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", x.Rule, x.DeviceID, x.Action, res, x.Reason)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&in.DryRun, "dry-run", false, "only show what would be done")
	cmd.Flags().StringVar(&in.Rule, "rule", "", "run only this rule (idle-shutdown, idle-destroy)")
	a.addJSON(cmd)
	return cmd
}

func (a *app) doctorCmd() *cobra.Command {
	var in contract.DoctorRunIn
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Compare the registry with the devices in simlock's roots; --fix repairs (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := do(cmd, a, contract.DoctorRun, in)
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := a.printJSON(out); err != nil {
					return err
				}
				for _, f := range out.Findings {
					if !f.Fixed {
						return exitError{1}
					}
				}
				return nil
			}
			// Goldens are listed, never findings: a healthy daemon keeps them.
			for _, g := range out.Goldens {
				state := "ready"
				switch {
				case g.Reclaiming:
					state = "reclaiming (deleted to free its managed slot for a request)"
				case g.Building:
					state = "building (booted once in the background; counts as running until it shuts down)"
				case g.Stuck:
					state = "stuck (its removal failed; tried again after a backoff, see simlock status)"
				}
				a.printf("golden %s %s: %s on %s, %s (kept for clone provisioning; nuke deletes it)\n", g.Platform, g.Handle, g.ModelID, g.RuntimeID, state)
			}
			for _, k := range slices.Sorted(maps.Keys(out.GoldensNotBuilt)) {
				a.printf("golden %s not built: %s (devices of it are created, not cloned)\n", strings.ReplaceAll(k, "|", " "), out.GoldensNotBuilt[k])
			}
			if out.Healthy {
				a.printf("healthy: the registry matches every device root\n")
				return nil
			}
			w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "KIND\tPLATFORM\tDEVICE\tDETAIL\tACTION\tFIXED")
			for _, f := range out.Findings {
				dev := f.DeviceID
				if dev == "" {
					dev = f.Handle
				}
				fixed := "no"
				if f.Fixed {
					fixed = "yes"
				} else if f.Error != "" {
					fixed = "failed: " + f.Error
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Kind, f.Platform, dev, f.Detail, dash(f.Action), fixed)
			}
			w.Flush()
			for _, f := range out.Findings {
				if !f.Fixed {
					return exitError{1} // findings remain: scripts can tell
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&in.Fix, "fix", false, "repair what can be repaired (admin)")
	cmd.Flags().BoolVar(&in.PurgeOrphans, "purge-orphans", false, "destroy devices in simlock's roots that the registry does not know (admin)")
	a.addJSON(cmd)
	return cmd
}

func (a *app) nukeCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "nuke",
		Short: "Reset (admin): release every lease, cancel pending requests, destroy every managed device",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return contract.Errorf(contract.CodeBadRequest, "nuke destroys every device simlock manages").
					WithNext("run `simlock nuke --yes` if you mean it")
			}
			out, err := do(cmd, a, contract.NukeRun, contract.NukeRunIn{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			a.printf("released %d lease(s), cancelled %d request(s), destroyed %d device(s)\n",
				len(out.ReleasedLeases), len(out.CancelledRequests), len(out.DestroyedDevices))
			for id, e := range out.Failed {
				a.printf("  %s: %s\n", id, e)
			}
			if len(out.Failed) > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the reset")
	a.addJSON(cmd)
	return cmd
}
