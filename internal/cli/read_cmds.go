package cli

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
)

func (a *app) statusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Daemon health, devices, leases, capacity and the queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := doRead(cmd, a, contract.StatusGet, contract.StatusGetIn{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(st)
			}
			d := st.Daemon
			a.printf("daemon   %s (pid %d, version %s, mode %s)\n", d.Health, d.PID, d.Version, d.Mode)
			cp := st.Capacity
			a.printf("capacity %s: %d/%d running, %d/%d managed, %d reserved%s\n", cp.Strategy, cp.Running, cp.MaxRunning, cp.Managed, cp.MaxManaged, cp.Reserved, ramNote(cp))
			for _, p := range sortedKeys(cp.Platforms) {
				pc := cp.Platforms[p]
				a.printf("  %-8s %d running, %d managed, %s RAM%s\n", p, pc.Running, pc.Managed, gibs(pc.RAMUsedBytes), limitNote(pc))
			}
			if cp.Host != nil {
				a.printf("host     %s\n", hostLine(*cp.Host))
				for _, l := range hostWaiterLines(*cp.Host) {
					a.printf("%s\n", l)
				}
			}
			a.printWarmPool(st.WarmPool)
			a.printGoldens(st.Goldens)
			a.printf("\n")
			a.printDevices(st.Devices, st.Capacity.DeviceRAMBytes)
			a.printf("\n")
			a.printLeases(st.Leases)
			a.printf("\nqueue    %d waiting\n", st.QueueDepth)
			for _, q := range st.Queue {
				a.printf("  %d. %s wants %s %s %s (%s, waiting %s)\n", q.Position, q.RequesterID, q.Platform, q.Model, q.OSVersion, q.Phase,
					time.Since(q.EnqueuedAt).Round(time.Second))
			}
			if more := st.QueueDepth - len(st.Queue); more > 0 {
				a.printf("  ... and %d more (queue.list pages the whole queue)\n", more)
			}
			return nil
		},
	}
	a.addJSON(cmd)
	return cmd
}

// printWarmPool explains every warm target, one line each; nothing when
// there is none and demand is off (the pool is then just what is ready).
func (a *app) printWarmPool(w *contract.WarmPool) {
	if w == nil || (!w.Demand && len(w.Targets) == 0) {
		return
	}
	mode := "configured targets only"
	if w.Demand {
		mode = "following demand over " + windowText(time.Duration(w.WindowMs)*time.Millisecond)
	}
	a.printf("warm     %s\n", mode)
	for _, t := range w.Targets {
		a.printf("  %s: %s (%d ready now)\n", t.Spec, t.Explanation, t.Ready)
	}
}

// printGoldens shows clone provisioning's goldens and refused golden
// builds, one line each; nothing when there are none (clone provisioning
// off, default device set, or nothing built yet and nothing refused).
func (a *app) printGoldens(g *contract.Goldens) {
	if g == nil || (len(g.Devices) == 0 && len(g.NotBuilt) == 0) {
		return
	}
	a.printf("goldens  %d kept, %d not built (clone sources; never leased, each takes a managed slot)\n", len(g.Devices), len(g.NotBuilt))
	for _, d := range g.Devices {
		line := fmt.Sprintf("  %s %s on %s: %s", d.Platform, shortID(d.ModelID), shortID(d.RuntimeID), d.State)
		if d.Handle != "" && !strings.HasPrefix(d.Handle, "building:") {
			line += " " + d.Handle
		}
		if d.State == "stuck" {
			line += ", removal failed"
			if d.Error != "" {
				line += " (" + d.Error + ")"
			}
			if d.RetryAt != nil {
				line += "; tried again from " + d.RetryAt.UTC().Format(time.RFC3339)
			}
		}
		a.printf("%s\n", line)
	}
	for _, n := range g.NotBuilt {
		line := fmt.Sprintf("  %s %s on %s: not built, %s", n.Platform, shortID(n.ModelID), shortID(n.RuntimeID), n.Reason)
		if n.Retrying {
			line += " (retrying now)"
		}
		a.printf("%s\n", line)
	}
}

// shortID drops a reverse-DNS prefix from a simulator identifier
// ("com.apple.CoreSimulator.SimDeviceType.iPhone-16" -> "iPhone-16");
// the full identifier is in --json.
func shortID(id string) string {
	if i := strings.LastIndexByte(id, '.'); i >= 0 && i < len(id)-1 {
		return id[i+1:]
	}
	return id
}

// windowText writes a window as the explanations do: "1 h", "10 min".
func windowText(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%g s", d.Seconds())
}

// ramNote shows the one RAM budget all platforms share, when the strategy
// plans one.
func ramNote(c contract.Capacity) string {
	if c.RAMBudgetBytes == 0 {
		return fmt.Sprintf(", %s RAM", gibs(c.RAMUsedBytes))
	}
	return fmt.Sprintf(", %s/%s RAM budget", gibs(c.RAMUsedBytes), gibs(c.RAMBudgetBytes))
}

// hostLine is the host-wide view on one line: every simlock home and the
// devices booted outside simlock, against capacity.host.
func hostLine(h contract.HostCapacity) string {
	limit := "no limit"
	if h.MaxRunning > 0 {
		limit = fmt.Sprint(h.MaxRunning)
	}
	s := fmt.Sprintf("%d/%s running (%d ours, %d other homes, %d external)", h.Booted, limit, h.Ours, h.OtherHomes, h.ExternalDevices)
	var notes []string
	for _, p := range sortedKeys(h.Platforms) {
		hp := h.Platforms[p]
		if hp.MaxRunning > 0 {
			notes = append(notes, fmt.Sprintf("%s %d/%d", p, hp.Booted, hp.MaxRunning))
		}
		if hp.ExternalError != "" {
			notes = append(notes, p+" external count failing, last count kept")
		} else if !hp.ExternalKnown {
			notes = append(notes, p+" external not counted")
		}
	}
	if len(notes) > 0 {
		s += "; " + strings.Join(notes, ", ")
	}
	return s
}

func gibs(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

func limitNote(p contract.PlatformCapacity) string {
	if p.MaxRunning == 0 {
		return ""
	}
	return fmt.Sprintf(" (limits %d running, %d managed)", p.MaxRunning, p.MaxManaged)
}

// printDevices lists devices; with ram (status) it adds the footprint each
// running device is charged against the RAM budget.
func (a *app) printDevices(ds []contract.Device, ram map[string]uint64) {
	if len(ds) == 0 {
		a.printf("devices  none\n")
		return
	}
	w := tabwriter.NewWriter(a.env.Stdout, 0, 2, 2, ' ', 0)
	head := "DEVICE\tPLATFORM\tMODEL\tOS\tSTATE\tLEASE\tHANDLE"
	if ram != nil {
		head += "\tRAM"
	}
	fmt.Fprintln(w, head)
	for _, d := range ds {
		h := d.UDID
		if h == "" {
			h = d.Serial
		}
		state := d.Runtime.Lifecycle
		if d.Simulated {
			state += " (sim)"
		}
		if d.OwnerSystem != "" {
			state += " [" + d.OwnerSystem + "]" // never a plain lease's
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", d.ID, d.Platform, d.Model, d.OSVersion, state, dash(d.Runtime.LeaseID()), h)
		if ram != nil {
			r := "-"
			if b, ok := ram[d.ID]; ok {
				r = gibs(b)
			}
			row += "\t" + r
		}
		fmt.Fprintln(w, row)
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
	var booted bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Every managed device and its state (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := doRead(cmd, a, contract.ListGet, contract.ListGetIn{Booted: booted})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			a.printDevices(out.Devices, nil)
			if e := out.Enrichment; e != nil && !e.Complete {
				fmt.Fprintf(a.env.Stderr, "incomplete: %s; retry in %d ms for the rest\n", e.Reason, e.RetryAfterMs)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&booted, "booted", false, "only the devices observed running")
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
			if err := checkPlatform(platform, true); err != nil {
				return err
			}
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
	var since string
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Recent business events (lease granted, device reclaimed, ...); --follow streams new ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := eventsSince(since, time.Now())
			if err != nil {
				return err
			}
			in.Follow = follow
			c, err := a.connect(cmd.Context(), true)
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
			showGap := func(g contract.EventsGap) {
				if a.jsonOut {
					a.printJSON(map[string]any{"gap": g})
					return
				}
				a.printf("(events %d-%d are lost to this reader: they left the daemon's buffer before it read them)\n", g.FromSeq, g.ToSeq)
			}
			// Live pushes arrive on the connection's goroutine and may
			// come before the backlog is printed; hold them until it is.
			var mu sync.Mutex
			var held []func()
			printed := false
			later := func(f func()) {
				mu.Lock()
				defer mu.Unlock()
				if !printed {
					held = append(held, f)
					return
				}
				f()
			}
			out, err := c.EventStream(cmd.Context(), in,
				func(e contract.Event) { later(func() { show(e) }) },
				func(g contract.EventsGap) { later(func() { showGap(g) }) })
			if err != nil {
				return err
			}
			mu.Lock()
			if out.Gap != nil {
				showGap(*out.Gap)
			} else if out.Dropped && !a.jsonOut {
				a.printf("(older events have left the buffer)\n")
			}
			for _, e := range out.Events {
				show(e)
			}
			for _, f := range held {
				f()
			}
			held, printed = nil, true
			mu.Unlock()
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
	cmd.Flags().StringVar(&since, "since", "", "only events after this sequence number, or since a time: a duration back (90s, 1h, 7d) or RFC 3339; reaches across restarts through the events journal")
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
			out, err := doRead(cmd, a, contract.ConfigGet, contract.ConfigGetIn{})
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

// eventsSince reads --since: a bare number is a sequence number, anything
// else a time (checked here, so a typo never reaches the daemon).
func eventsSince(s string, now time.Time) (contract.EventsSubscribeIn, error) {
	if s == "" {
		return contract.EventsSubscribeIn{}, nil
	}
	if seq, err := strconv.ParseUint(s, 10, 64); err == nil {
		if seq == 0 {
			// On the wire since 0 is the default (this run's buffer);
			// asked for by hand it means every event: the journal from
			// its first moment.
			return contract.EventsSubscribeIn{SinceTime: time.Unix(0, 0).UTC().Format(time.RFC3339)}, nil
		}
		return contract.EventsSubscribeIn{Since: seq}, nil
	}
	if _, err := contract.ParseSinceTime(s, now); err != nil {
		return contract.EventsSubscribeIn{}, err
	}
	return contract.EventsSubscribeIn{SinceTime: s}, nil
}
