package cli

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/claims"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/hostreg"
)

// hostRegistryError gives a host registry error read by the CLI itself
// (device status, device release) the daemon's code where it has one:
// a damaged registry is HOST_REGISTRY_DAMAGED, naming the file and the
// repair, exactly as from a daemon.
func hostRegistryError(err error) error {
	var dmg *hostreg.DamagedError
	if errors.As(err, &dmg) {
		return daemon.ContractError(err)
	}
	return err
}

func (a *app) hostCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "host", Short: "Inspect and repair the host registry shared by every home of this user"}
	cmd.AddCommand(a.hostRepairCmd())
	return cmd
}

func (a *app) hostRepairCmd() *cobra.Command {
	var homes []string
	var force bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Rebuild a damaged host registry from every home's own records",
		Long: "Judges the host registry ($SIMLOCK_HOST_DIR/host.db). When SQLite cannot read it (HOST_REGISTRY_DAMAGED), " +
			"moves it and its -wal/-shm aside as host.db.damaged-<UTC time>, creates a fresh registry, and fills it from " +
			"the homes the host directory records (each daemon records its home there at start) plus any --include-home: " +
			"a home whose daemon runs writes its own claims into the new file (its watcher notices the replaced file; the " +
			"repair waits up to --wait for it), and a stopped home's running devices, read from its own store, are claimed " +
			"in its name so that its next daemon adopts them and its leases stay intact. A readable registry is left alone " +
			"unless --force.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := claims.RepairOptions{HostDir: a.hostDir(), Homes: homes, Force: force, ReopenWait: wait}
			if !a.jsonOut {
				o.Progress = func(format string, args ...any) { a.printf(format+"\n", args...) }
			}
			rep, err := daemon.RepairHost(cmd.Context(), o)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(rep)
			}
			if rep.Repaired {
				a.printf("host registry rebuilt: %d home(s)\n", len(rep.Homes))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&homes, "include-home", nil, "also restore this home (repeatable): one the host directory has no record of")
	cmd.Flags().BoolVar(&force, "force", false, "rebuild even a registry SQLite can read")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for each running daemon to move to the new registry")
	a.addJSON(cmd)
	return cmd
}
