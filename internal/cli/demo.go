package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/simsdk"
)

func (a *app) demoCmd() *cobra.Command {
	var speed string
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A narrated run on the simulated SDK: two agents contend for one iPhone",
		Long: `Runs a throwaway daemon over the simulated SDK in a temporary home, with room
for one running device, and narrates two agents contending for it: a grant,
a wait in the queue, a release that returns at once while the device is
purged in the background, the grant to the waiter, and a lease that expires
because nobody renewed it. Needs no Xcode and no Android SDK.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runDemo(cmd.Context(), speed, keep)
		},
	}
	cmd.Flags().StringVar(&speed, "speed", "0.05", "simulated SDK time scale (1 = real Xcode timings, 0 = instant)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary home afterwards for inspection")
	return cmd
}

type narrator struct {
	a     *app
	start time.Time
}

func (n narrator) say(format string, args ...any) {
	fmt.Fprintf(n.a.env.Stdout, "[%5.1fs] %s\n", time.Since(n.start).Seconds(), fmt.Sprintf(format, args...))
}

func (a *app) runDemo(ctx context.Context, speed string, keep bool) (err error) {
	n := narrator{a: a, start: time.Now()}
	tmp, err := os.MkdirTemp("", "simlock-demo-")
	if err != nil {
		return err
	}
	home, sdk, simHome := filepath.Join(tmp, "home"), filepath.Join(tmp, "sdk"), filepath.Join(tmp, "simsdk")
	if err := simsdk.Install(sdk); err != nil {
		return err
	}
	cfg := `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},"lease":{"defaultTtlMs":60000,"maxTtlMs":600000}}`
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
		return err
	}
	// The demo's devices are simulated and its own: a host registry of its
	// own keeps the machine's other simlock homes (and their host limit)
	// out of the story, and the demo's devices out of theirs.
	env := append(os.Environ(), "PATH="+sdk+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SIMLOCK_HOME="+home, "SIMLOCK_SIMSDK_HOME="+simHome, "SIMLOCK_SIMSDK_SPEED="+speed,
		"SIMLOCK_HOST_DIR="+filepath.Join(tmp, "host"))

	fmt.Fprintln(a.env.Stdout, "simlock demo: two agents, one simulated iPhone, room for one running device")
	fmt.Fprintln(a.env.Stdout, "  home "+home)
	fmt.Fprintln(a.env.Stdout, "  simulated SDK "+sdk+" (speed "+speed+" x real timings)")
	fmt.Fprintln(a.env.Stdout)

	pid, err := client.Launch(client.LaunchOptions{Args: []string{"daemon", "run", "--home", home}, Env: env, LogFile: filepath.Join(home, "daemon.out")})
	if err != nil {
		return err
	}
	sock := filepath.Join(home, "simlock.sock")
	defer func() {
		// Stop the daemon and every simulated device, whatever happened.
		if c, derr := client.Dial(context.Background(), client.Options{Socket: sock, Principal: "demo", Credential: readToken(home)}); derr == nil {
			_, _ = client.Do(context.Background(), c, contract.DaemonStop, contract.DaemonStopIn{})
			select {
			case <-c.Done():
			case <-time.After(30 * time.Second):
			}
			c.Close()
		}
		_ = simsdk.Reset(simHome)
		if keep {
			fmt.Fprintln(a.env.Stdout, "kept "+tmp)
		} else {
			os.RemoveAll(tmp)
		}
	}()
	dial := func(principal string) (*client.Client, error) {
		return client.DialRetry(ctx, client.Options{Socket: sock, Principal: principal, Name: "simlock-demo"}, 20*time.Second)
	}
	agentA, err := dial("agent-A")
	if err != nil {
		return err
	}
	defer agentA.Close()
	n.say("daemon started (pid %d) over the simulated SDK; agents connect as agent-A and agent-B", pid)

	// The operator's view: events narrate what happens in the background.
	admin, err := client.Dial(ctx, client.Options{Socket: sock, Principal: "demo-observer", Credential: readToken(home)})
	if err != nil {
		return err
	}
	defer admin.Close()
	evctx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	interesting := map[string]bool{"device.provisioned": true, "device.ready": true, "lease.released": true, "lease.expired": true, "device.reclaimed": true}
	if _, err := admin.Events(evctx, contract.EventsSubscribeIn{Follow: true}, func(e contract.Event) {
		if interesting[e.Type] {
			extra := e.Reason
			if extra != "" {
				extra = " (" + extra + ")"
			}
			n.say("    event %s %s%s", e.Type, first(e.LeaseID, e.DeviceID), extra)
		}
	}); err != nil {
		return err
	}

	n.say("agent-A asks for an iPhone 16")
	la, err := agentA.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16"}, func(p contract.Progress) {
		if p.EtaMs <= 0 {
			n.say("    agent-A: %s %s", p.Phase, p.DeviceID)
			return
		}
		n.say("    agent-A: %s %s (about %s)", p.Phase, p.DeviceID, time.Duration(p.EtaMs)*time.Millisecond)
	})
	if err != nil {
		return fmt.Errorf("agent-A lease: %w", err)
	}
	d := la.Device
	n.say("agent-A holds %s on %s: %s, iOS %s, UDID %s", la.LeaseID, d.ID, d.Model, d.OSVersion, d.UDID)
	if out, err := exec.Command(filepath.Join(sdk, "xcrun"), "simctl", "--set", d.DeviceSet, "list", "devices").CombinedOutput(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, d.UDID) {
				n.say("    xcrun simctl --set <root> list devices:%s", strings.TrimRight(line, " "))
			}
		}
	}

	agentB, err := dial("agent-B")
	if err != nil {
		return err
	}
	defer agentB.Close()
	n.say("agent-B asks too, willing to wait up to 60s; the only running slot is taken")
	type res struct {
		l   contract.Lease
		err error
	}
	bDone := make(chan res, 1)
	bAsked := time.Now()
	queued := make(chan struct{}, 1)
	go func() {
		l, err := agentB.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16", TimeoutMs: 60000, TTLMs: 3000},
			func(p contract.Progress) {
				if p.Phase == "queued" {
					n.say("    agent-B: queued at position %d", p.QueuePosition)
					select {
					case queued <- struct{}{}:
					default:
					}
				}
			})
		bDone <- res{l, err}
	}()
	select {
	case <-queued:
	case r := <-bDone:
		return fmt.Errorf("agent-B was not queued: %v", r.err)
	}
	time.Sleep(time.Second)
	n.say("agent-C tries with --no-wait and is refused at once:")
	agentC, err := dial("agent-C")
	if err != nil {
		return err
	}
	_, cerr := agentC.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", Model: "iPhone 16", NoWait: true}, nil)
	agentC.Close()
	if ce := contract.AsError(cerr); ce != nil {
		n.say("    agent-C: %s (retryable %v): %s", ce.Code, ce.Retryable, ce.NextAction)
	}

	t0 := time.Now()
	if _, err := client.Do(ctx, agentA, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: la.LeaseID}); err != nil {
		return err
	}
	n.say("agent-A releases %s; the call returned in %s, the purge (shutdown + erase + boot) runs in the background", la.LeaseID, time.Since(t0).Round(time.Millisecond))

	r := <-bDone
	if r.err != nil {
		return fmt.Errorf("agent-B lease: %w", r.err)
	}
	n.say("agent-B granted %s on %s after waiting %s, the same device, freshly erased", r.l.LeaseID, r.l.Device.ID, time.Since(bAsked).Round(100*time.Millisecond))
	n.say("agent-B's lease has a 3s TTL and agent-B never renews it...")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		if _, err := client.Do(ctx, agentB, contract.LeaseGet, contract.LeaseGetIn{LeaseID: r.l.LeaseID}); client.IsCode(err, contract.CodeUnknownLease) {
			break
		}
	}
	// Wait for the purge to settle so the final status is calm.
	for time.Now().Before(deadline) {
		st, err := client.Do(ctx, admin, contract.StatusGet, contract.StatusGetIn{})
		if err == nil && len(st.Devices) > 0 && st.Devices[0].Runtime.Lifecycle == contract.StateReady {
			n.say("the device is %s again and warm for the next agent (%d lease(s), %d queued)", st.Devices[0].Runtime.Lifecycle, len(st.Leases), st.QueueDepth)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopEvents()
	st, err := client.Do(ctx, admin, contract.StatusGet, contract.StatusGetIn{})
	if err == nil {
		b, _ := json.Marshal(st.Capacity)
		n.say("capacity now: %s", b)
	}
	n.say("done: lease, queue, no-wait refusal, release with background reclaim, grant to the waiter, TTL expiry")
	return nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func readToken(home string) string {
	b, _ := os.ReadFile(filepath.Join(home, "admin.token"))
	return strings.TrimSpace(string(b))
}
