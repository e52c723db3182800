package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
)

// workerCmd is the operator's view of a fleet, run against a gateway.
func (a *app) workerCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "worker", Short: "List, drain, undrain and remove a gateway's workers (admin, gateway mode)"}
	list := &cobra.Command{
		Use:   "list",
		Short: "The workers the gateway knows: state, drain, capacity, leases",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := do(cmd, a, contract.WorkerList, contract.WorkerListIn{})
			if err != nil {
				return notAGateway(err)
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			if len(out.Workers) == 0 {
				a.printf("no workers have joined\n")
				return nil
			}
			w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "WORKER\tLABEL\tSTATE\tDRAINED\tDEVICES\tLEASES\tVERSION\tLAST SEEN")
			for _, v := range out.Workers {
				fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%d\t%d\t%s\t%s\n", v.ID, dash(v.Label), v.State, v.Drained, v.Devices, v.Leases,
					dash(v.Version), v.LastSeenAt.Local().Format(time.DateTime))
			}
			return w.Flush()
		},
	}
	a.addJSON(list)
	one := func(use, short string, op contract.Operation[contract.WorkerIn, contract.WorkerOut]) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " WORKER_ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				out, err := do(cmd, a, op, contract.WorkerIn{ID: args[0]})
				if err != nil {
					return notAGateway(err)
				}
				if a.jsonOut {
					return a.printJSON(out)
				}
				a.printf("%s: %s, drained %v\n", out.Worker.ID, out.Worker.State, out.Worker.Drained)
				return nil
			},
		}
		a.addJSON(c)
		return c
	}
	cmd.AddCommand(list,
		one("drain", "Send a worker no new leases; its leases stay (survives restarts)", contract.WorkerDrain),
		one("undrain", "End a worker's drain", contract.WorkerUndrain),
		one("remove", "Forget a disconnected worker (refused while connected)", contract.WorkerRemove))
	return cmd
}

// notAGateway explains a worker operation refused because the daemon is a
// worker: the protocol's own advice (upgrade one side) would mislead.
func notAGateway(err error) error {
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeUnknownOperation {
		return err
	}
	return contract.Errorf(contract.CodeUnknownOperation, "this daemon is a worker, not a gateway: it has no workers to manage").
		WithNext("run `simlock worker ...` against the gateway: --url http://GATEWAY:PORT with an operator token")
}
