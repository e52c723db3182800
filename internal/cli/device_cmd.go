package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/hostreg"
)

// The device group reads and recovers host-global claims (issue 10). It
// works from the host registry itself, with no daemon of its own: status
// never starts one and never writes; release talks to the owning daemon
// when there is one and otherwise proves, reconciles and clears.
func (a *app) deviceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "device", Short: "Inspect and recover host-wide device ownership (every simlock home on this machine)"}
	cmd.AddCommand(a.deviceStatusCmd(), a.deviceReleaseCmd())
	return cmd
}

// deviceSelectors narrow the claims a device command acts on. The owner
// home is the global --home, when given explicitly: that is how the
// recovery command `simlock --home H device release K` names the owner.
type deviceSelectors struct {
	platform, udid, avd, serial string
	key                         hostreg.Key
	home                        string // "" means any owner
}

func (s *deviceSelectors) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.platform, "platform", "", "only devices of this platform (ios, android)")
	cmd.Flags().StringVar(&s.udid, "udid", "", "the iOS Simulator with this UDID")
	cmd.Flags().StringVar(&s.avd, "avd", "", "the Android emulator of this AVD name (in any root)")
	cmd.Flags().StringVar(&s.serial, "serial", "", "the USB Android device with this hardware serial")
}

func (s *deviceSelectors) any() bool {
	return s.platform != "" || s.udid != "" || s.avd != "" || s.serial != "" || s.key != "" || s.home != ""
}

// resolve completes the selectors from the positional key and the global
// --home, validating each.
func (a *app) resolveSelectors(cmd *cobra.Command, args []string, s *deviceSelectors) error {
	bad := func(format string, v ...any) error {
		return contract.Errorf(contract.CodeBadRequest, format, v...).WithNext("see `simlock device status` for the keys on this host")
	}
	if len(args) == 1 {
		k, err := hostreg.ParseKey(args[0])
		if err != nil {
			return bad("%v", err)
		}
		s.key = k
	}
	if s.platform != "" && s.platform != "ios" && s.platform != "android" {
		return bad("unknown platform %q (ios, android)", s.platform)
	}
	if s.udid != "" {
		if _, err := hostreg.IOSSimulatorKey(s.udid); err != nil {
			return bad("%v", err)
		}
	}
	if s.serial != "" {
		if _, err := hostreg.AndroidUSBKey(s.serial); err != nil {
			return bad("%v (select an emulator with --avd)", err)
		}
	}
	if f := cmd.Flags().Lookup("home"); f != nil && f.Changed {
		s.home = a.home // already absolute
	}
	return nil
}

func (s *deviceSelectors) match(st hostreg.Status) bool {
	k := string(st.Key)
	switch {
	case s.key != "" && st.Key != s.key,
		s.platform != "" && st.Key.Platform() != s.platform,
		s.home != "" && filepath.Clean(st.Claim.Owner.Home) != s.home:
		return false
	case s.udid != "":
		want, _ := hostreg.IOSSimulatorKey(s.udid)
		return st.Key == want
	case s.avd != "":
		return strings.HasPrefix(k, "android:avd:"+s.avd+":")
	case s.serial != "":
		return k == "android:usb:"+s.serial
	}
	return true
}

// hostDir is the host registry's directory, absolute.
func (a *app) hostDir() string {
	d := config.HostDir(a.env.Getenv)
	if abs, err := filepath.Abs(d); err == nil {
		return abs
	}
	return d
}

// claimView is one claim as `device status --json` prints it.
type claimView struct {
	DeviceKey       string   `json:"deviceKey"`
	Platform        string   `json:"platform"`
	OwnerHome       string   `json:"ownerHome"`
	OwnerPID        int      `json:"ownerPid,omitempty"`
	OwnerStartTime  string   `json:"ownerStartTime,omitempty"`
	LeaseID         string   `json:"leaseId,omitempty"`
	Kind            string   `json:"kind"`
	Command         string   `json:"command,omitempty"`
	State           string   `json:"state"`
	ClaimedAt       string   `json:"claimedAt,omitempty"`
	Classification  string   `json:"classification"`
	Liveness        string   `json:"liveness,omitempty"`
	Detail          string   `json:"detail"`
	FailedSteps     []string `json:"failedSteps"`
	RecoveryCommand string   `json:"recoveryCommand"`
}

// classification names the ownership class as the error contract does
// (hostreg.Class.Public): a claim whose owner runs is live-owner.
func classification(st hostreg.Status) string { return st.Class.Public() }

func viewOf(st hostreg.Status) claimView {
	c := st.Claim
	v := claimView{DeviceKey: string(st.Key), Platform: st.Key.Platform(), OwnerHome: c.Owner.Home, OwnerPID: c.Owner.PID,
		OwnerStartTime: c.Owner.Start, LeaseID: c.LeaseID, Kind: string(c.Kind), Command: c.Command, State: string(c.State),
		Classification: classification(st), Liveness: string(st.Liveness), Detail: st.Detail,
		FailedSteps: []string{}, RecoveryCommand: hostreg.RecoveryCommand(st)}
	if !c.ClaimedAt.IsZero() {
		v.ClaimedAt = c.ClaimedAt.UTC().Format(time.RFC3339)
	}
	if len(c.FailedSteps) > 0 {
		v.FailedSteps = c.FailedSteps
	}
	return v
}

func (a *app) deviceStatusCmd() *cobra.Command {
	var sel deviceSelectors
	cmd := &cobra.Command{
		Use:   "status [device-key]",
		Short: "Show who owns each device on this host, read from the host registry (starts no daemon, changes nothing)",
		Long: "Reads every claim in the host registry ($SIMLOCK_HOST_DIR) and classifies its owner: live-owner, releasing, " +
			"release-failed, orphaned (owner pid dead or reused, or owner home gone) or inconsistent (an unreadable record). " +
			"Works with every daemon stopped and writes nothing. Narrow with a device key, --platform, --udid, --avd, " +
			"--serial, or the global --home for one owner home. Each claim carries the exact command that recovers it.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.resolveSelectors(cmd, args, &sel); err != nil {
				return err
			}
			rep, err := hostreg.InspectReport(cmd.Context(), a.hostDir(), hostreg.SystemProber{})
			if err != nil {
				return hostRegistryError(err)
			}
			views := []claimView{}
			for _, st := range rep.Claims {
				if sel.match(st) {
					views = append(views, viewOf(st))
				}
			}
			reclaimed := []reclaimView{}
			for _, r := range rep.Reclaimed {
				if sel.match(hostreg.Status{Key: r.Key, Claim: hostreg.Claim{Owner: r.Owner}}) {
					reclaimed = append(reclaimed, reclaimViewOf(r))
				}
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"hostDir": a.hostDir(), "claims": views, "reclaimed": reclaimed})
			}
			defer a.printReclaimed(reclaimed)
			if len(views) == 0 {
				a.printf("no device is claimed on this host (registry %s)\n", a.hostDir())
				return nil
			}
			for _, v := range views {
				a.printf("%s\n  owner: %s (pid %d)  %s", v.DeviceKey, v.OwnerHome, v.OwnerPID, v.Kind)
				if v.LeaseID != "" {
					a.printf(" %s", v.LeaseID)
				}
				if v.Command != "" {
					a.printf(" (%s)", v.Command)
				}
				a.printf("  state: %s\n  classification: %s: %s\n", v.State, v.Classification, v.Detail)
				if len(v.FailedSteps) > 0 {
					a.printf("  failed steps: %s\n", strings.Join(v.FailedSteps, ", "))
				}
				a.printf("  recover: %s\n", v.RecoveryCommand)
			}
			return nil
		},
	}
	sel.add(cmd)
	a.addJSON(cmd)
	return cmd
}

// reclaimView is one automatic reclaim in `device status --json`: another
// home's daemon found the owner proven gone and took the claim back (ADR
// 0059).
type reclaimView struct {
	DeviceKey string `json:"deviceKey"`
	OwnerHome string `json:"ownerHome"`
	OwnerPID  int    `json:"ownerPid"`
	LeaseID   string `json:"leaseId,omitempty"`
	// Reason is the owner's liveness: dead, reused or home-gone.
	Reason string `json:"reason"`
	// Action: cleared (the device was proven not running) or shut-down.
	Action  string    `json:"action"`
	ByHome  string    `json:"byHome"`
	ByPID   int       `json:"byPid"`
	At      time.Time `json:"at"`
	Summary string    `json:"summary"`
}

func reclaimViewOf(r hostreg.Reclaimed) reclaimView {
	why := map[hostreg.Liveness]string{hostreg.LivenessDead: "its daemon was not running",
		hostreg.LivenessReused: "its daemon's pid belonged to another process", hostreg.LivenessHomeGone: "its home no longer existed"}[r.Reason]
	if why == "" {
		why = string(r.Reason)
	}
	did := "the device was not running, so the claim was cleared"
	if r.Action == "shut-down" {
		did = "the device was shut down with the owner's roots, then the claim was cleared"
	}
	return reclaimView{DeviceKey: string(r.Key), OwnerHome: r.Owner.Home, OwnerPID: r.Owner.PID, LeaseID: r.LeaseID,
		Reason: string(r.Reason), Action: r.Action, ByHome: r.By.Home, ByPID: r.By.PID, At: r.At,
		Summary: fmt.Sprintf("reclaimed from %s (pid %d) because %s; %s", r.Owner.Home, r.Owner.PID, why, did)}
}

// printReclaimed lists the recent automatic reclaims after the claims.
func (a *app) printReclaimed(rs []reclaimView) {
	if len(rs) == 0 {
		return
	}
	a.printf("recently reclaimed (automatic, by the host watchers):\n")
	for _, r := range rs {
		a.printf("%s  %s\n  %s\n  by: %s (pid %d)\n", r.DeviceKey, r.At.Format(time.RFC3339), r.Summary, r.ByHome, r.ByPID)
	}
}

// releaseResult is one claim's outcome in `device release --json`.
type releaseResult struct {
	DeviceKey      string `json:"deviceKey"`
	OwnerHome      string `json:"ownerHome"`
	Classification string `json:"classification"`
	// Via says who released it: "owner" (the owning daemon, through its
	// ordinary release), "stale" (orphan proven, device shut down, claim
	// cleared) or "force".
	Via string `json:"via"`
	// Action is the owning daemon's answer (device.release), when asked.
	Action string `json:"action,omitempty"`
	// DeviceShutDown: the device was proven shut down (or absent from its
	// owner's root) before the claim was cleared here.
	DeviceShutDown bool `json:"deviceShutDown"`
	Cleared        bool `json:"cleared"`
	// ReclaimedBy names the home whose daemon reclaimed the dead owner's
	// claim first, when --stale found that reclaim under way or done.
	ReclaimedBy string   `json:"reclaimedBy,omitempty"`
	Warnings    []string `json:"warnings"`
}

func (a *app) deviceReleaseCmd() *cobra.Command {
	var sel deviceSelectors
	var stale, force bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "release <device-key | selectors>",
		Short: "Give a claimed device back: through its owning daemon, or recover it with --stale or --force",
		Long: "Without a flag, asks the owning daemon (found from the claim's owner home) to release the device through " +
			"its ordinary release path; the claim is cleared by its teardown, last. --stale recovers the claim of an owner " +
			"proven gone (pid dead or reused, or home deleted): the device is shut down with the owner's own roots, then the " +
			"claim is cleared if it is unchanged and still orphaned; it refuses a live owner and never frees an inconsistent " +
			"record. --force asks the owning daemon first and, if it cannot cooperate, shuts the device down with the owner's " +
			"roots and clears the record, inconsistent ones included.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if stale && force {
				return contract.Errorf(contract.CodeBadRequest, "--stale and --force exclude each other").
					WithNext("use --stale for a dead owner, --force only when it is really needed")
			}
			if err := a.resolveSelectors(cmd, args, &sel); err != nil {
				return err
			}
			if !sel.any() {
				return contract.Errorf(contract.CodeBadRequest, "name the device: a key, --udid, --avd, --serial or --platform").
					WithNext("see `simlock device status` for the claimed devices")
			}
			ctx := cmd.Context()
			sts, err := hostreg.Inspect(ctx, a.hostDir(), hostreg.SystemProber{})
			if err != nil {
				return hostRegistryError(err)
			}
			var picked []hostreg.Status
			for _, st := range sts {
				if sel.match(st) {
					picked = append(picked, st)
				}
			}
			results := []releaseResult{}
			var firstErr error
			if len(picked) > 0 {
				db, err := hostreg.Open(ctx, a.hostDir())
				if err != nil {
					return hostRegistryError(err)
				}
				defer db.Close()
				for _, st := range picked {
					var r releaseResult
					var err error
					switch {
					case stale:
						r, err = a.releaseStale(ctx, db, st, wait)
					case force:
						r, err = a.releaseForce(ctx, db, st, wait)
					default:
						r, err = a.releaseViaOwner(ctx, db, st, wait)
					}
					if err != nil {
						if firstErr == nil {
							firstErr = err
						}
						if !a.jsonOut && len(picked) > 1 {
							fmt.Fprintf(a.env.Stderr, "simlock: %s: %v\n", st.Key, err)
						}
						continue
					}
					results = append(results, r)
				}
			}
			if a.jsonOut {
				a.printJSON(map[string]any{"released": results})
			} else {
				if len(picked) == 0 {
					a.printf("no claim matches: the device is free\n")
				}
				for _, r := range results {
					a.printf("%s: released (%s", r.DeviceKey, r.Via)
					if r.Action != "" {
						a.printf(", %s", r.Action)
					}
					a.printf(")\n")
					for _, w := range r.Warnings {
						a.printf("  warning: %s\n", w)
					}
				}
			}
			return firstErr
		},
	}
	sel.add(cmd)
	cmd.Flags().BoolVar(&stale, "stale", false, "recover the claim of an owner proven gone: shut the device down, then clear the claim")
	cmd.Flags().BoolVar(&force, "force", false, "ask the owner first, then shut the device down and clear the claim whatever its state")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the owning daemon's teardown to clear the claim")
	a.addJSON(cmd)
	return cmd
}

// inUse is the DEVICE_IN_USE refusal for st: not retryable, with the owner
// and the command that recovers it.
func inUse(st hostreg.Status, reason, msg string) *contract.Error {
	c := st.Claim
	e := contract.Errorf(contract.CodeDeviceInUse, "%s", msg).WithDetails(
		"reason", reason, "classification", classification(st), "deviceKey", string(st.Key),
		"owner", map[string]any{"home": c.Owner.Home, "leaseId": c.LeaseID, "daemonPid": c.Owner.PID, "daemonStartTime": c.Owner.Start},
		"recovery", map[string]any{"command": hostreg.RecoveryCommand(st)})
	e.Retryable = false
	if rc := hostreg.RecoveryCommand(st); rc != "" {
		e.WithNext("run `" + rc + "`")
	}
	return e
}

func (a *app) releaseStale(ctx context.Context, db *hostreg.DB, st hostreg.Status, wait time.Duration) (releaseResult, error) {
	r := releaseResult{DeviceKey: string(st.Key), OwnerHome: st.Claim.Owner.Home, Classification: classification(st), Via: "stale", Warnings: []string{}}
	switch st.Class {
	case hostreg.ClassOrphaned:
	case hostreg.ClassInconsistent:
		return r, inUse(st, hostreg.ReasonNotOrphaned, fmt.Sprintf("the claim on %s is unreadable (%s): corruption is no proof that nobody owns it", st.Key, st.Detail))
	default:
		return r, inUse(st, hostreg.ReasonNotOrphaned, fmt.Sprintf("%s is held by a live owner, home %s (pid %d): --stale never interrupts one", st.Key, st.Claim.Owner.Home, st.Claim.Owner.PID))
	}
	if st.BeingReclaimed() {
		return a.awaitReclaim(ctx, st, r, wait)
	}
	// Mark the record first, as a daemon's reclaimer does: a running
	// daemon's watcher sees the reclaim under way and keeps off it, so the
	// shutdown below and the clear after it are this command's alone (a
	// watcher that found the device stopped half-way would otherwise clear
	// the claim under it).
	marked, err := db.BeginReclaim(ctx, st.Key, st, time.Now())
	if errors.Is(err, hostreg.ErrClaimChanged) {
		cur, held := a.current(ctx, st.Key)
		switch {
		case !held:
			return a.freedMeanwhile(ctx, r), nil
		case cur.BeingReclaimed():
			return a.awaitReclaim(ctx, cur, r, wait)
		}
		return r, inUse(cur, hostreg.ReasonHeld, fmt.Sprintf("the claim on %s changed while this command looked at it; it is now home %s's", st.Key, cur.Claim.Owner.Home))
	}
	// Both registry writes refuse alike when the owner came back meanwhile.
	var ce *hostreg.ConflictError
	ownerBack := func() error {
		now := hostreg.Classify(ctx, hostreg.SystemProber{}, st.Claim)
		return inUse(now, ce.Reason, "the owner is no longer proven gone: "+ce.Detail)
	}
	if errors.As(err, &ce) {
		return r, ownerBack()
	}
	if err != nil {
		return r, err
	}
	if err := a.reconcile(ctx, st, &r); err != nil {
		return r, fmt.Errorf("%s: the device could not be shut down, so its claim stays (marked for %s, then any daemon's reclaimer retries): %w",
			st.Key, hostreg.ReclaimTimeout, err)
	}
	cleared, err := db.ReleaseStale(ctx, st.Key, marked)
	if errors.As(err, &ce) {
		return r, ownerBack()
	}
	if err != nil {
		return r, err
	}
	r.Cleared = cleared
	return r, nil
}

// awaitReclaim waits, up to wait, for the reclaim a daemon's watcher has
// under way on st to finish, and reports the device freed by it.
func (a *app) awaitReclaim(ctx context.Context, st hostreg.Status, r releaseResult, wait time.Duration) (releaseResult, error) {
	deadline := time.Now().Add(wait)
	// Say so once: the wait can last the reclaimer's whole shutdown, and a
	// caller (or a test) learns from this line that the command is waiting.
	fmt.Fprintf(a.env.Stderr, "simlock: a daemon's watcher is reclaiming %s (dead owner home %s); waiting up to %s for it to finish\n",
		st.Key, st.Claim.Owner.Home, wait)
	for {
		cur, held := a.current(ctx, st.Key)
		if !held {
			return a.freedMeanwhile(ctx, r), nil
		}
		if !cur.BeingReclaimed() {
			return r, inUse(cur, hostreg.ReasonHeld, fmt.Sprintf("a daemon's reclaim of %s ended without freeing it; it is now %s (home %s)",
				st.Key, cur.Class.Public(), cur.Claim.Owner.Home))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return r, notReleased(cur, fmt.Sprintf("a daemon's watcher is reclaiming %s and has not finished after --wait %s", st.Key, wait))
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freedMeanwhile is the answer for a claim that went away while this
// command worked on it: a running daemon's watcher reclaimed the dead
// owner's claim first (named from the registry's history when it is
// there). The device is free; this command cleared nothing.
func (a *app) freedMeanwhile(ctx context.Context, r releaseResult) releaseResult {
	by := "another command or a daemon's watcher"
	if rep, err := hostreg.InspectReport(ctx, a.hostDir(), hostreg.SystemProber{}); err == nil {
		for _, rc := range rep.Reclaimed {
			if string(rc.Key) == r.DeviceKey && rc.Owner.Home == r.OwnerHome {
				by = fmt.Sprintf("the daemon of home %s (pid %d), %s", rc.By.Home, rc.By.PID, rc.Action)
				r.ReclaimedBy = rc.By.Home
				break
			}
		}
	}
	r.Warnings = append(r.Warnings, "the claim was already released by "+by+": the device is free")
	return r
}

// reconcile shuts st's device down with its owner's roots.
func (a *app) reconcile(ctx context.Context, st hostreg.Status, r *releaseResult) error {
	home := st.Claim.Owner.Home
	if home == "" || !filepath.IsAbs(home) {
		return fmt.Errorf("the record names no usable owner home (%q), so the owner's roots are unknown", home)
	}
	notFound, err := daemon.ReconcileDevice(ctx, home, a.env.Getenv, st.Key)
	if err != nil {
		return err
	}
	r.DeviceShutDown = true
	if notFound {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the device is no longer in the owner's root (%s): nothing there can run it", home))
	}
	return nil
}

func (a *app) releaseForce(ctx context.Context, db *hostreg.DB, st hostreg.Status, wait time.Duration) (releaseResult, error) {
	r := releaseResult{DeviceKey: string(st.Key), OwnerHome: st.Claim.Owner.Home, Classification: classification(st), Via: "force", Warnings: []string{}}
	if st.Class != hostreg.ClassInconsistent && st.Class != hostreg.ClassOrphaned {
		or, err := a.releaseViaOwner(ctx, db, st, wait)
		if err == nil {
			or.Via = "owner"
			return or, nil
		}
		r.Action = or.Action
		r.Warnings = append(r.Warnings, "the owning daemon did not release the device: "+err.Error())
		// The owner may have changed something: judge the record as it is now.
		if cur, ok := a.current(ctx, st.Key); !ok {
			r.Cleared = true
			return r, nil
		} else {
			st = cur
		}
	}
	if err := a.reconcile(ctx, st, &r); err != nil {
		r.Warnings = append(r.Warnings, "the device was not proven shut down: "+err.Error())
	}
	cleared, err := db.ForceRelease(ctx, st.Key, st)
	if err != nil {
		return r, err
	}
	if !cleared {
		// A daemon's watcher may have reclaimed an orphan's claim while
		// this command shut its device down: say who freed it.
		if _, held := a.current(ctx, st.Key); !held {
			return a.freedMeanwhile(ctx, r), nil
		}
	}
	r.Cleared = cleared
	return r, nil
}

// current re-inspects one key; ok is false when it is free.
func (a *app) current(ctx context.Context, key hostreg.Key) (hostreg.Status, bool) {
	sts, err := hostreg.Inspect(ctx, a.hostDir(), hostreg.SystemProber{})
	if err != nil {
		return hostreg.Status{Key: key}, true
	}
	for _, st := range sts {
		if st.Key == key {
			return st, true
		}
	}
	return hostreg.Status{}, false
}

// releaseViaOwner asks the claim's owning daemon to release the device
// (device.release on the owner home's socket, with that home's admin
// credential when this user can read it) and waits for its teardown to
// clear the claim.
func (a *app) releaseViaOwner(ctx context.Context, db *hostreg.DB, st hostreg.Status, wait time.Duration) (releaseResult, error) {
	r := releaseResult{DeviceKey: string(st.Key), OwnerHome: st.Claim.Owner.Home, Classification: classification(st), Via: "owner", Warnings: []string{}}
	switch st.Class {
	case hostreg.ClassOrphaned:
		return r, inUse(st, "owner-gone", fmt.Sprintf("the owner of %s is gone (%s); recover it with --stale", st.Key, st.Detail))
	case hostreg.ClassInconsistent:
		return r, inUse(st, "inconsistent", fmt.Sprintf("the claim on %s is unreadable (%s); only --force clears it", st.Key, st.Detail))
	}
	home := st.Claim.Owner.Home
	p := config.PathsFor(home)
	cred := ""
	if home == a.home {
		cred = a.credential(false)
	} else if b, err := os.ReadFile(p.AdminToken); err == nil {
		cred = strings.TrimSpace(string(b))
	}
	forced := st
	forced.Class = hostreg.ClassInconsistent // for the --force recovery command
	c, err := client.Dial(ctx, client.Options{Socket: p.Socket, Principal: a.principal(), Name: "simlock-cli " + Version,
		Credential: cred, HandshakeTimeout: 5 * time.Second})
	if err != nil {
		return r, inUse(st, "owner-unreachable", fmt.Sprintf("the owning daemon of %s (home %s) does not answer: %v; `%s` interrupts it", st.Key, home, err, hostreg.RecoveryCommand(forced)))
	}
	defer c.Close()
	// --wait bounds the whole release: the owner's answer (its settle wait
	// can be long when a teardown hangs) and the claim's clearing after it.
	deadline := time.Now().Add(wait)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	out, err := client.Do(wctx, c, contract.DeviceRelease, contract.DeviceReleaseIn{DeviceKey: string(st.Key)})
	answered := err == nil
	if err != nil && wctx.Err() == nil {
		return r, err
	}
	r.Action = out.Action
	for {
		cur, held := a.current(ctx, st.Key)
		if !held {
			r.Cleared, r.DeviceShutDown = true, out.Action != "lease-released"
			return r, nil
		}
		if cur.Claim.Owner != st.Claim.Owner {
			return r, inUse(cur, hostreg.ReasonHeld, fmt.Sprintf("%s was released and is now held by home %s", st.Key, cur.Claim.Owner.Home))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			what := fmt.Sprintf("the owning daemon answered %q", out.Action)
			if !answered {
				what = "the owning daemon has not finished the release"
			}
			return r, notReleased(cur, fmt.Sprintf("%s, but its claim on %s is still %s after --wait %s", what, st.Key, cur.Class.Public(), wait))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// releaseRetryAfterMs is the retry hint of a release whose teardown is
// still under way when --wait ends.
const releaseRetryAfterMs = 5000

// notReleased is the answer of a release whose wait ended with the claim
// still held by its owner: DEVICE_IN_USE classified as the claim is now. A
// teardown under way (releasing) is retryable after a bounded delay, as the
// reference has it; any other class is a live owner's, and is not.
func notReleased(cur hostreg.Status, msg string) *contract.Error {
	e := inUse(cur, "release-pending", msg)
	if cur.Class == hostreg.ClassReleasing {
		e.Retryable = true
		e.WithRetryAfter(releaseRetryAfterMs).WithNext("the owner's teardown is under way: retry after retryAfterMs, " +
			"or `simlock device status " + string(cur.Key) + "` to follow it")
	}
	return e
}
