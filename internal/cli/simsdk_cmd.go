package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/simsdk"
)

func (a *app) simsdkCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "simsdk",
		Short: "The simulated SDK: fake xcrun/adb/emulator/avdmanager/sdkmanager for machines without Xcode",
	}
	install := &cobra.Command{
		Use:   "install DIR",
		Short: "Write xcrun, xcodebuild, adb, emulator, avdmanager and sdkmanager links into DIR",
		Long:  "Write the simulated SDK's tool links into DIR; put DIR first on PATH to use them.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := simsdk.Install(args[0]); err != nil {
				return err
			}
			a.printf("simulated SDK installed in %s; use it with: export PATH=%s:$PATH\n", args[0], args[0])
			return nil
		},
	}
	ps := &cobra.Command{
		Use:   "ps",
		Short: "List running simulated device processes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			procs, err := simsdk.PS(simsdk.Home(a.env.Getenv))
			if err != nil {
				return err
			}
			if a.jsonOut {
				if procs == nil {
					procs = []simsdk.Proc{}
				}
				return a.printJSON(procs)
			}
			w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "PLATFORM\tID\tPID\tNAME")
			for _, p := range procs {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", p.Platform, p.ID, p.PID, p.Name)
			}
			return w.Flush()
		},
	}
	a.addJSON(ps)
	reset := &cobra.Command{
		Use:   "reset",
		Short: "Stop every simulated device and clear the simulated state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home := simsdk.Home(a.env.Getenv)
			if err := simsdk.Reset(home); err != nil {
				return err
			}
			a.printf("simulated SDK state in %s cleared\n", home)
			return nil
		},
	}
	cmd.AddCommand(install, ps, reset)
	return cmd
}
