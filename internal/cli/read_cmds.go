package cli

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/internal/contract"
)

func (a *app) statusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Daemon health, devices, leases, capacity and the queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := do(cmd, a, contract.StatusGet, contract.StatusGetIn{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(st)
			}
			d := st.Daemon
			a.printf("daemon   %s (pid %d, version %s, mode %s)\n", d.Health, d.PID, d.Version, d.Mode)
			cp := st.Capacity
			a.printf("capacity %s: %d/%d running, %d/%d managed, %d reserved\n", cp.Strategy, cp.Running, cp.MaxRunning, cp.Managed, cp.MaxManaged, cp.Reserved)
			for _, p := range sortedKeys(cp.Platforms) {
				pc := cp.Platforms[p]
				a.printf("  %-8s %d running, %d managed%s\n", p, pc.Running, pc.Managed, limitNote(pc))
			}
			a.printf("\n")
			a.printDevices(st.Devices)
			a.printf("\n")
			a.printLeases(st.Leases)
			a.printf("\nqueue    %d waiting\n", st.QueueDepth)
			for _, q := range st.Queue {
				a.printf("  %d. %s wants %s %s %s (%s, waiting %s)\n", q.Position, q.RequesterID, q.Platform, q.Model, q.OSVersion, q.Phase,
					time.Since(q.EnqueuedAt).Round(time.Second))
			}
			return nil
		},
	}
	a.addJSON(cmd)
	return cmd
}

func limitNote(p contract.PlatformCapacity) string {
	if p.MaxRunning == 0 {
		return ""
	}
	return fmt.Sprintf(" (limits %d running, %d managed)", p.MaxRunning, p.MaxManaged)
}

func (a *app) printDevices(ds []contract.Device) {
	if len(ds) == 0 {
		a.printf("devices  none\n")
		return
	}
	w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "DEVICE\tPLATFORM\tMODEL\tOS\tSTATE\tLEASE\tHANDLE")
	for _, d := range ds {
		h := d.UDID
		if h == "" {
			h = d.Serial
		}
		state := d.State
		if d.Simulated {
			state += " (sim)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Platform, d.Model, d.OSVersion, state, dash(d.LeaseID), h)
	}
	w.Flush()
}

func (a *app) printLeases(ls []contract.Lease) {
	if len(ls) == 0 {
		a.printf("leases   none\n")
		return
	}
	w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "LEASE\tREQUESTER\tDEVICE\tEXPIRES\tLAST RENEWED\tSERVED")
	for _, l := range ls {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s (in %s)\t%s\t%s\n", l.LeaseID, l.RequesterID, l.DeviceID, l.ExpiresAt.Format(time.RFC3339),
			time.Until(l.ExpiresAt).Round(time.Second), l.LastRenewedAt.Format(time.RFC3339), servedText(l.Timing))
	}
	w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (a *app) listCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Every managed device and its state (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := do(cmd, a, contract.ListGet, contract.ListGetIn{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			a.printDevices(out.Devices)
			return nil
		},
	}
	a.addJSON(cmd)
	return cmd
}

func (a *app) catalogCmd() *cobra.Command {
	var platform string
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Models and OS runtimes each platform can serve",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := do(cmd, a, contract.CatalogGet, contract.CatalogGetIn{Platform: platform})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			for _, p := range out.Platforms {
				a.printf("%s\n", p.Platform)
				if p.Error != "" {
					a.printf("  unavailable: %s\n", p.Error)
					continue
				}
				var rts []string
				for _, r := range p.Runtimes {
					if r.Available {
						rts = append(rts, r.Name)
					}
				}
				a.printf("  runtimes: %s\n", strings.Join(rts, ", "))
				var ms []string
				for _, m := range p.Models {
					ms = append(ms, m.Name)
				}
				a.printf("  models:   %s\n", strings.Join(ms, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&platform, "platform", "", "only this platform")
	a.addJSON(cmd)
	return cmd
}

func (a *app) eventsCmd() *cobra.Command {
	var follow bool
	var since uint64
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Recent business events (lease granted, device reclaimed, ...); --follow streams new ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer c.Close()
			show := func(e contract.Event) {
				if a.jsonOut {
					a.printJSON(e)
					return
				}
				var parts []string
				for _, kv := range [][2]string{{"lease", e.LeaseID}, {"device", e.DeviceID}, {"requester", e.RequesterID}, {"reason", e.Reason}} {
					if kv[1] != "" {
						parts = append(parts, kv[0]+"="+kv[1])
					}
				}
				a.printf("%s  %-28s %s\n", e.At.Local().Format("15:04:05.000"), e.Type, strings.Join(parts, " "))
			}
			out, err := c.Events(cmd.Context(), contract.EventsSubscribeIn{Since: since, Follow: follow}, show)
			if err != nil {
				return err
			}
			if out.Dropped && !a.jsonOut {
				a.printf("(older events have left the buffer)\n")
			}
			for _, e := range out.Events {
				show(e)
			}
			if follow {
				select {
				case <-cmd.Context().Done():
				case <-c.Done():
					return contract.Errorf(contract.CodeConnectionLost, "the daemon went away")
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream new events until interrupted")
	cmd.Flags().Uint64Var(&since, "since", 0, "only events after this sequence number")
	a.addJSON(cmd)
	return cmd
}

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show the daemon's effective configuration"}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the running daemon's effective configuration as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := do(cmd, a, contract.ConfigGet, contract.ConfigGetIn{})
			if err != nil {
				return err
			}
			return a.printJSON(out)
		},
	}
	a.addJSON(show)
	cmd.AddCommand(show)
	return cmd
}

// servedText is a lease's timing record in one short cell: the admission
// path, then the queue wait and each measured phase.
func servedText(t *contract.LeaseTiming) string {
	if t == nil {
		return "-"
	}
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
	parts := []string{t.Path, "wait " + ms(t.QueueWaitMs)}
	for _, p := range []struct {
		name string
		v    *int64
	}{{"download", t.DownloadMs}, {"evict", t.EvictMs}, {"provision", t.ProvisionMs}, {"boot", t.BootMs}, {"ready", t.ReadinessMs}} {
		if p.v != nil {
			parts = append(parts, p.name+" "+ms(*p.v))
		}
	}
	return strings.Join(parts, ", ")
}
