package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
)

// leaseLine is what `simlock lease` prints: the contract's lease, field for
// field (worker included, through a gateway), plus the role the connection
// resolved to, so a caller knows whether it is admin. Embedding keeps it
// one shape with the contract rather than a hand-kept copy.
type leaseLine struct {
	contract.Lease
	Role contract.Role `json:"role"`
}

// leaseFlags are the lease request's command-line flags, one set shared by
// every command that takes a lease (lease, run), so they cannot drift apart.
type leaseFlags struct {
	in                  contract.LeaseRequestIn
	ttl, timeout        time.Duration
	resources, hardware string
	deviceSpecs         []string // --device-spec, one per member of a group (group_flags.go)
	flags               *pflag.FlagSet
}

func (lf *leaseFlags) register(f *pflag.FlagSet) {
	lf.flags = f
	f.StringArrayVar(&lf.deviceSpecs, "device-spec", nil, "lease several devices at once, all or none: repeat once per device, e.g. --device-spec platform=ios,model=\"iPhone 16\" --device-spec platform=android (keys platform, model, os)")
	f.StringVar(&lf.in.Platform, "platform", "ios", "ios or android")
	f.StringVar(&lf.in.Model, "model", "", "device model, e.g. \"iPhone 16\" (default: the platform's default)")
	f.StringVar(&lf.in.OSVersion, "os", "", "OS version, e.g. 18.0 (default: newest installed that runs the model)")
	f.DurationVar(&lf.ttl, "ttl", 0, "lease TTL (default lease.defaultTtlMs)")
	f.DurationVar(&lf.timeout, "timeout", 0, "give up waiting in the queue after this long (default: wait)")
	f.BoolVar(&lf.in.NoWait, "no-wait", false, "fail with NO_CAPACITY instead of queueing")
	f.StringVar(&lf.in.RequesterID, "requester", "", "requester id (default $SIMLOCK_REQUESTER, else one per process under your principal)")
	f.BoolVar(&lf.in.AllowDownload, "allow-download", false, "permit installing a missing OS runtime (multi-GB)")
	f.StringVar(&lf.in.Device, "device", "", "lease this device only: a device id, UDID, AVD name or host key (see 'simlock device status')")
	f.StringVar(&lf.in.IdempotencyKey, "idempotency-key", "", "make the request safe to repeat: the same key returns the same lease (or refusal), never a second device")
	f.StringVar(&lf.resources, "resources", "", "tune the device before the grant: GROUP=enabled|disabled,... (see 'simlock resources groups'); on iOS an unprovable entry fails the request")
	f.StringVar(&lf.hardware, "hardware", "", "Android emulator hardware written before boot: memoryMb=4096,cpuCores=2,gpuMode=swiftshader,...")
}

// request checks the flags and returns the lease request they describe.
func (lf *leaseFlags) request() (contract.LeaseRequestIn, error) {
	in := lf.in
	in.TTLMs = lf.ttl.Milliseconds()
	in.TimeoutMs = lf.timeout.Milliseconds()
	if in.IdempotencyKey != "" && in.RequesterID == "" {
		// The key is scoped to its requester, and the default
		// requester is new with every process.
		return in, contract.Errorf(contract.CodeBadRequest, "--idempotency-key needs --requester").
			WithNext("pass the same --requester with every repeat of the request")
	}
	if len(lf.deviceSpecs) > 0 {
		return lf.groupRequest(in)
	}
	if err := checkPlatform(in.Platform, false); err != nil {
		return in, err
	}
	if err := leaseTuning(&in, lf.resources, lf.hardware); err != nil {
		return in, err
	}
	return in, nil
}

// acquire connects and requests the lease the flags describe, showing
// progress on stderr. A request interrupted while queued is withdrawn.
// On success the caller owns c.
func (a *app) acquire(ctx context.Context, lf *leaseFlags) (*client.Client, contract.Lease, *progressLine, error) {
	if lf.in.RequesterID == "" {
		// Read before the checks: a requester from the environment is as
		// stable as the flag, so it carries an idempotency key too.
		lf.in.RequesterID = a.env.Getenv("SIMLOCK_REQUESTER")
	}
	in, err := lf.request()
	if err != nil {
		return nil, contract.Lease{}, nil, err
	}
	if len(in.Devices) == 0 {
		if err := a.checkModel(ctx, in.Platform, in.Model); err != nil {
			return nil, contract.Lease{}, nil, err
		}
	}
	for _, m := range in.Devices {
		if err := a.checkModel(ctx, m.Platform, m.Model); err != nil {
			return nil, contract.Lease{}, nil, err
		}
	}
	c, err := a.connect(ctx, false)
	if err != nil {
		return nil, contract.Lease{}, nil, err
	}
	in.RequesterID = a.requester(in.RequesterID, c.Hello().Principal)
	pl := a.newProgressLine()
	l, err := c.LeaseRequest(ctx, in, pl.update)
	pl.stop()
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted while queued: withdraw the request.
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, cerr := client.Do(cctx, c, contract.LeaseCancel, contract.LeaseCancelIn{RequesterID: in.RequesterID})
			if sig, ok := stopSignal(ctx); ok {
				err = a.gaveUp(sig, cerr)
			}
		}
		c.Close()
		return nil, contract.Lease{}, nil, err
	}
	return c, l, pl, nil
}

// gaveUp reports a request a stop signal withdrew while it waited and
// returns the exit a shell gives for that signal (128+N). cancelErr is the
// withdrawal's own failure, if any.
func (a *app) gaveUp(sig syscall.Signal, cancelErr error) error {
	what := "the request was withdrawn and gave up its place in the queue"
	if cancelErr != nil && !client.IsCode(cancelErr, contract.CodeNoPendingRequest) {
		what = fmt.Sprintf("it gave up its place, but withdrawing the request failed (%v); the daemon withdraws it once it sees this client gone", cancelErr)
	}
	a.report(contract.Errorf(contract.CodeRequestCancelled, "%s while waiting for a device: %s", signalName(sig), what))
	return exitError{128 + int(sig)}
}

func (a *app) leaseCmd() *cobra.Command {
	var lf leaseFlags
	var detach bool
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Lease a ready device; prints one JSON line, then holds the lease until exit",
		Long: `Lease a ready device. Prints one JSON line on stdout, then stays alive renewing
the lease at a third of its TTL, and releases it on exit, SIGINT/SIGTERM or when
its parent process dies. With --detach it prints the lease and exits, leaving the
lease to expire unless something renews it (simlock lease renew ID).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			c, l, pl, err := a.acquire(ctx, &lf)
			if err != nil {
				return err
			}
			defer c.Close()
			line := leaseLine{Lease: l, Role: c.Hello().Role}
			if err := a.printJSON(line); err != nil {
				return err
			}
			if pl.tty {
				fmt.Fprintln(a.env.Stderr, grantSummary(l, time.Now()))
			}
			if detach {
				return nil
			}
			err = a.hold(ctx, c, l)
			if err == nil && pl.tty {
				fmt.Fprintf(a.env.Stderr, "simlock: released %s\n", l.LeaseID)
			}
			return err
		},
	}
	lf.register(cmd.Flags())
	cmd.Flags().BoolVar(&detach, "detach", false, "print the lease and exit without holding it")
	a.addJSON(cmd) // the grant is always JSON; --json makes errors JSON too
	cmd.AddCommand(a.leaseRenewCmd(), a.leaseCancelCmd(), a.leaseListCmd(), a.leaseGetCmd())
	return cmd
}

// hold renews the lease at a third of its TTL until the process is told to
// stop, its parent dies, or the lease is lost; then it releases.
func (a *app) hold(ctx context.Context, c *client.Client, l contract.Lease) error {
	parentGone := ports.PollParentWatch{}.Watch(ctx)
	every := time.Duration(l.TTLMs) * time.Millisecond / 3
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// The daemon pushes lease-scoped facts; a lost lease ends the hold at
	// once instead of at the next renew.
	lost := make(chan contract.LeaseNotice, 1)
	c.OnNotice(func(n contract.LeaseNotice) {
		switch {
		case n.LeaseID != l.LeaseID:
		case n.Type == contract.NotifyLeaseLost:
			select {
			case lost <- n:
			default:
			}
		default:
			fmt.Fprintf(a.env.Stderr, "simlock: %s: %s %s\n", n.LeaseID, n.Type, n.Reason)
		}
	})
	release := func(why string) error {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client.Do(rctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
		if err != nil && !client.IsCode(err, contract.CodeUnknownLease) {
			fmt.Fprintf(a.env.Stderr, "simlock: release %s (%s) failed: %v\n", l.LeaseID, why, err)
			return exitError{1}
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return release("signal")
		case <-parentGone:
			return release("parent exited")
		case <-c.Done():
			fmt.Fprintf(a.env.Stderr, "simlock: lost the daemon connection; lease %s stays until %s unless renewed\n", l.LeaseID, l.ExpiresAt.Format(time.RFC3339))
			return exitError{1}
		case n := <-lost:
			fmt.Fprintf(a.env.Stderr, "simlock: lease %s was lost (%s)\n", l.LeaseID, n.Reason)
			return exitError{1}
		case <-t.C:
			_, err := client.Do(ctx, c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: l.LeaseID})
			if client.IsCode(err, contract.CodeUnknownLease) {
				fmt.Fprintf(a.env.Stderr, "simlock: lease %s was lost (expired or released elsewhere)\n", l.LeaseID)
				return exitError{1}
			}
			// Any other failure is retried on the next tick.
		}
	}
}

func (a *app) leaseRenewCmd() *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "renew LEASE_ID",
		Short: "Renew a lease (by its stored TTL, or --ttl)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer c.Close()
			l, err := client.Do(cmd.Context(), c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: args[0], TTLMs: ttl.Milliseconds()})
			if err != nil {
				return err
			}
			return a.printJSON(l)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "new TTL for this and later renews")
	a.addJSON(cmd)
	return cmd
}

func (a *app) leaseCancelCmd() *cobra.Command {
	var requester string
	cmd := &cobra.Command{
		Use:   "cancel",
		Short: "Withdraw a queued lease request",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if requester == "" {
				requester = a.env.Getenv("SIMLOCK_REQUESTER")
			}
			c, err := a.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := client.Do(cmd.Context(), c, contract.LeaseCancel, contract.LeaseCancelIn{RequesterID: requester})
			if requester == "" && client.IsCode(err, contract.CodeNoPendingRequest) {
				out, err = a.cancelScoped(cmd.Context(), c, err)
			}
			if err != nil {
				return err
			}
			return a.printJSON(out)
		},
	}
	cmd.Flags().StringVar(&requester, "requester", "", "requester whose request to cancel (default $SIMLOCK_REQUESTER, else yours)")
	a.addJSON(cmd)
	return cmd
}

// cancelScoped withdraws the queued requests of the requester ids scoped
// under the session's principal: a person's `simlock lease` waits as one id
// per process (see app.requester), which a plain cancel by principal does
// not name. notFound is returned when none is queued.
func (a *app) cancelScoped(ctx context.Context, c *client.Client, notFound error) (contract.LeaseCancelOut, error) {
	scope := c.Hello().Principal + "/"
	var mine []string
	for in := (contract.QueueListIn{Limit: 1000}); ; {
		page, err := client.Do(ctx, c, contract.QueueList, in)
		if err != nil {
			return contract.LeaseCancelOut{}, err
		}
		for _, q := range page.Entries {
			if strings.HasPrefix(q.RequesterID, scope) {
				mine = append(mine, q.RequesterID)
			}
		}
		if in.Cursor = page.NextCursor; in.Cursor == "" {
			break
		}
	}
	cancelled := false
	for _, r := range mine {
		_, err := client.Do(ctx, c, contract.LeaseCancel, contract.LeaseCancelIn{RequesterID: r})
		if err != nil && !client.IsCode(err, contract.CodeNoPendingRequest) {
			return contract.LeaseCancelOut{}, err
		}
		cancelled = cancelled || err == nil
	}
	if !cancelled {
		return contract.LeaseCancelOut{}, notFound
	}
	return contract.LeaseCancelOut{Cancelled: true}, nil
}

func (a *app) leaseListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List leases (yours; all of them with an admin credential)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := doRead(cmd, a, contract.LeaseList, contract.LeaseListIn{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(out)
			}
			a.printLeases(out.Leases)
			return nil
		},
	}
	a.addJSON(cmd)
	return cmd
}

func (a *app) releaseCmd() *cobra.Command {
	var all, everyone, yes bool
	var requester string
	cmd := &cobra.Command{
		Use:   "release [LEASE_ID]",
		Short: "Release a lease (or --all of yours); returns at once, the device is reclaimed in the background",
		Long: `Release one lease by id, or with --all every lease of a requester and of the
requester ids scoped under it ("<requester>/..."). The requester is --requester,
else $SIMLOCK_REQUESTER, else your principal: $SIMLOCK_PRINCIPAL, or cli:<OS user>,
under which every lease this OS user took from any shell is scoped. Releasing
every lease of every requester takes --everyone and an admin credential; on a
terminal it asks first (--yes skips the question), and without a terminal it
needs --yes.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if everyone {
				all = true
			}
			if all && len(args) == 0 || !all && len(args) == 1 {
				return nil
			}
			return contract.Errorf(contract.CodeBadRequest, "give exactly one lease id, or --all")
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if everyone && requester != "" {
				return contract.Errorf(contract.CodeBadRequest, "--everyone and --requester exclude each other")
			}
			if !all && requester != "" {
				return contract.Errorf(contract.CodeBadRequest, "--requester goes with --all; a lease id names one lease already")
			}
			if everyone && !yes && !a.stdinTerminal() {
				return contract.Errorf(contract.CodeBadRequest, "--everyone releases every requester's leases and there is no terminal to confirm it").
					WithNext("add --yes to release every lease without a prompt")
			}
			c, err := a.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer c.Close()
			if !all {
				out, err := client.Do(cmd.Context(), c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: args[0]})
				if err != nil {
					return err
				}
				return a.printJSON(out)
			}
			if everyone && !yes {
				ok, err := a.confirmEveryone(cmd.Context(), c)
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintln(a.env.Stderr, "simlock: nothing released")
					return exitError{1}
				}
			}
			if requester == "" && !everyone {
				requester = a.env.Getenv("SIMLOCK_REQUESTER")
			}
			// No requester means the session's own principal, which the
			// daemon knows better than we do (over HTTP it is the token's).
			in := contract.LeaseReleaseAllIn{RequesterID: requester, Everyone: everyone}
			out, err := client.Do(cmd.Context(), c, contract.LeaseReleaseAll, in)
			if err != nil {
				return err
			}
			if len(out.Released) == 0 && !everyone {
				// A lease taken under another principal or requester id
				// (an agent's SIMLOCK_PRINCIPAL, a --requester) is not
				// in this namespace.
				who := requester
				if who == "" {
					who = "your principal (" + c.Hello().Principal + ")"
				}
				fmt.Fprintf(a.env.Stderr, "simlock: no leases of %s; name the lease id, pass the --requester it was taken with, or --everyone (admin)\n", who)
			}
			return a.printJSON(out)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "release every lease of yours (see --requester)")
	f.StringVar(&requester, "requester", "", "with --all: the requester whose leases to release (default $SIMLOCK_REQUESTER, else your principal)")
	f.BoolVar(&everyone, "everyone", false, "release every lease of every requester (admin; asks on a terminal)")
	f.BoolVar(&yes, "yes", false, "with --everyone: do not ask for confirmation")
	a.addJSON(cmd)
	return cmd
}

// stdinTerminal reports whether someone can answer a prompt on stdin.
func (a *app) stdinTerminal() bool {
	if a.env.StdinTerminal != nil {
		return a.env.StdinTerminal()
	}
	f, ok := a.env.Stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirmEveryone asks on the terminal before every lease of every
// requester goes, naming how many that is.
func (a *app) confirmEveryone(ctx context.Context, c *client.Client) (bool, error) {
	list, err := client.Do(ctx, c, contract.LeaseList, contract.LeaseListIn{})
	if err != nil {
		return false, err
	}
	fmt.Fprintf(a.env.Stderr, "Release every lease of every requester (%d now)? [y/N] ", len(list.Leases))
	answer, _ := bufio.NewReader(a.env.Stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// leaseGetCmd reads a lease (lse_…) or a lease request's receipt (req_…).
func (a *app) leaseGetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show a lease, or a lease request's state by its request id (req_…)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !strings.HasPrefix(args[0], "req_") {
				l, err := doRead(cmd, a, contract.LeaseGet, contract.LeaseGetIn{LeaseID: args[0]})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(l)
				}
				a.printLeases([]contract.Lease{l})
				return nil
			}
			r, err := doRead(cmd, a, contract.LeaseRequestStatus, contract.LeaseRequestStatusIn{RequestID: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(r)
			}
			a.printf("request  %s (%s, requester %s)\n", r.RequestID, r.Platform, r.RequesterID)
			state := r.State
			if r.QueuePosition > 0 {
				state += fmt.Sprintf(" at position %d", r.QueuePosition)
			}
			if r.Interrupted {
				state += " (interrupted: repeat it with the same idempotency key)"
			}
			a.printf("state    %s\n", state)
			if r.Error != nil {
				a.printf("error    %s: %s\n", r.Error.Code, r.Error.Message)
			}
			if r.LeaseID != "" {
				a.printf("lease    %s\n", r.LeaseID)
			}
			if r.Timing != nil {
				a.printf("served   %s\n", servedText(r.Timing))
			}
			return nil
		},
	}
	a.addJSON(cmd)
	return cmd
}

// leaseTuning fills the request's resources and hardware from their flags,
// checked for the platform before anything is sent.
func leaseTuning(in *contract.LeaseRequestIn, resources, hardware string) error {
	if resources != "" {
		m, err := parseResourceMap([]string{resources})
		if err != nil {
			return err
		}
		if in.Device == "" {
			if err := contract.ValidateResourceRequest(in.Platform, m); err != nil {
				return err
			}
		}
		in.Resources = m
	}
	if hardware != "" {
		if in.Platform != "android" && in.Device == "" {
			return contract.Errorf(contract.CodeBadRequest, "--hardware applies to Android emulators only").
				WithNext("add --platform android, or drop --hardware")
		}
		hw, err := parseHardware(hardware)
		if err != nil {
			return err
		}
		in.Hardware = hw
	}
	return nil
}
