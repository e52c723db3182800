package cli

import (
	"context"
	"fmt"
	"image/png"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/captures"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/ports"
)

// selftestReport is what `simlock selftest --json` prints.
type selftestReport struct {
	Passed    bool               `json:"passed"`
	Root      string             `json:"root"`
	Platforms []selftestPlatform `json:"platforms"`
	// Recorded is the manifest `--record` wrote, when it was asked for.
	Recorded *selftestRecorded `json:"recorded,omitempty"`
}

type selftestPlatform struct {
	Platform   string         `json:"platform"`
	Passed     bool           `json:"passed"`
	Simulated  bool           `json:"simulated"`
	Model      string         `json:"model,omitempty"`
	OSVersion  string         `json:"osVersion,omitempty"`
	Device     string         `json:"device,omitempty"`
	DurationMs int64          `json:"durationMs"`
	Steps      []selftestStep `json:"steps"`
}

// Step outcomes.
const (
	stepPassed  = "passed"
	stepFailed  = "failed"
	stepSkipped = "skipped"
)

type selftestStep struct {
	Name       string          `json:"name"`
	Result     string          `json:"result"`
	DurationMs int64           `json:"durationMs"`
	Detail     string          `json:"detail,omitempty"`
	Error      *contract.Error `json:"error,omitempty"`
}

func (a *app) selftestCmd() *cobra.Command {
	var platform, record string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Run a device's whole lifecycle against the toolchain on PATH, timing each step",
		Long: `Check that simlock's drivers work with the Xcode or Android SDK on this machine: for each
platform (or --platform), create a device in a temporary root of the selftest's own, then resolve,
create, boot, wait for readiness, run a command on it, reclaim, shut down and destroy it, timing
every step. It never touches a daemon, its home or any device outside that root, and it removes
the root at the end. Prints a table (or, with --json, one JSON report) and exits 0 only when
every step of every platform passed.

With --record DIR it also captures what the tools print for the commands simlock parses or
its simulated SDK models (simctl's listings, xcodebuild -version, launchctl print-disabled,
adb devices -l and getprop, emulator -list-avds and -version, avdmanager list, and the texts
of a few refused commands), scrubbed of user names, home paths, host names, UDIDs and serial
numbers, into DIR with a manifest.json. See docs/real-machine.md for sending them to us.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if platform != "" {
				if err := checkPlatform(platform, false); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rep, err := a.selftest(ctx, platform, record)
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				a.printSelftest(rep)
			}
			if !rep.Passed {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&platform, "platform", "", "ios or android (default: every platform whose tools are on PATH)")
	cmd.Flags().DurationVar(&timeout, "timeout", 20*time.Minute, "give up after this long; the device is still destroyed")
	cmd.Flags().StringVar(&record, "record", "", "also capture the tools' outputs, scrubbed, into this directory (with a manifest.json)")
	a.addJSON(cmd)
	return cmd
}

// selftest builds the drivers as a daemon would, from the default
// configuration over a fresh temporary home (never the user's config, whose
// roots or device-set mode could point at someone's devices), and runs the
// lifecycle on each.
func (a *app) selftest(ctx context.Context, only, record string) (selftestReport, error) {
	home, err := os.MkdirTemp("", "simlock-selftest-")
	if err != nil {
		return selftestReport{}, err
	}
	defer os.RemoveAll(home)
	cfg := config.Default()
	switch only {
	case "ios":
		cfg.Drivers.Android.Enabled = new(false)
	case "android":
		cfg.Drivers.IOS.Enabled = new(false)
	}
	drivers, done, err := daemon.StandaloneDrivers(ctx, daemon.Options{Home: home, Config: cfg, Getenv: a.env.Getenv})
	if err != nil {
		return selftestReport{}, err
	}
	defer done()
	rep := selftestReport{Passed: true, Root: home, Platforms: []selftestPlatform{}}
	var rec *captures.Recorder
	if record != "" {
		if rec, err = newSelftestRecorder(record, home, a.env.Getenv); err != nil {
			return selftestReport{}, err
		}
	}
	platforms := []string{"ios", "android"}
	if only != "" {
		platforms = []string{only}
	}
	for _, p := range platforms {
		var drv core.Driver
		for _, d := range drivers {
			if d.Platform() == p {
				drv = d
			}
		}
		if drv == nil {
			if only == "" {
				continue // not on this machine; only an asked-for platform must be there
			}
			rep.Platforms = append(rep.Platforms, missingToolchain(p))
			rep.Passed = false
			continue
		}
		fmt.Fprintf(a.env.Stderr, "simlock: selftest %s in %s\n", p, home)
		pr := a.selftestPlatform(ctx, drv, home, rec)
		rep.Platforms = append(rep.Platforms, pr)
		rep.Passed = rep.Passed && pr.Passed
	}
	if len(rep.Platforms) == 0 {
		rep.Passed = false
		rep.Platforms = append(rep.Platforms, missingToolchain("ios"), missingToolchain("android"))
	}
	if rec != nil {
		got, err := finishRecording(rec, rep)
		if err != nil {
			return rep, err
		}
		rep.Recorded = got
	}
	return rep, nil
}

// missingToolchain is a platform whose tools are not on PATH: its first
// step fails and says what was looked for.
func missingToolchain(p string) selftestPlatform {
	tools := map[string]string{"ios": "xcrun", "android": "adb, emulator and avdmanager"}[p]
	pr := selftestPlatform{Platform: p}
	pr.Steps = append(pr.Steps, selftestStep{Name: "resolve", Result: stepFailed,
		Error: contract.Errorf(contract.CodeUnsupportedPlatform, "%s: %s not found on PATH", p, tools).
			WithNext("install the toolchain (docs/real-machine.md) and put it on PATH")})
	for _, s := range []string{"create", "boot", "readiness", "exec", "reclaim", "shutdown", "destroy"} {
		pr.Steps = append(pr.Steps, selftestStep{Name: s, Result: stepSkipped})
	}
	return pr
}

// selftestPlatform runs the lifecycle once. After a failure the remaining
// steps are skipped, but a device that was created is still shut down and
// destroyed, so nothing outlives the selftest.
func (a *app) selftestPlatform(ctx context.Context, drv core.Driver, scratch string, rec *captures.Recorder) selftestPlatform {
	start := time.Now()
	pr := selftestPlatform{Platform: drv.Platform(), Passed: true}
	var spec core.Spec
	var ref core.DeviceRef
	created, stopped, destroyed := false, false, false
	failed := false
	step := func(name string, run func(context.Context) (string, error)) {
		st := selftestStep{Name: name}
		if failed {
			st.Result = stepSkipped
			pr.Steps = append(pr.Steps, st)
			return
		}
		t0 := time.Now()
		detail, err := run(ctx)
		st.DurationMs = time.Since(t0).Milliseconds()
		st.Detail = detail
		if err != nil {
			st.Result, st.Error = stepFailed, daemon.ContractError(err)
			if st.Error.Code == contract.CodeInternal {
				// Not a simlock bug here: the toolchain answered unexpectedly.
				st.Error.NextAction = "check the toolchain against docs/real-machine.md, then run the failing command by hand"
			}
			failed, pr.Passed = true, false
		} else {
			st.Result = stepPassed
		}
		fmt.Fprintf(a.env.Stderr, "simlock: selftest %s %-9s %s (%s)\n", pr.Platform, name, st.Result, time.Duration(st.DurationMs)*time.Millisecond)
		pr.Steps = append(pr.Steps, st)
	}
	step("resolve", func(ctx context.Context) (string, error) {
		var err error
		spec, err = drv.ResolveSpec(ctx, core.SpecRequest{Platform: drv.Platform(), RequesterID: "selftest"})
		pr.Model, pr.OSVersion = spec.Model, spec.OSVersion
		return strings.TrimSpace(spec.Model + " " + spec.OSVersion + " (" + spec.RuntimeID + ")"), err
	})
	step("create", func(ctx context.Context) (string, error) {
		p, err := drv.Provision(ctx, spec)
		if err != nil {
			return "", err
		}
		created = true
		ref = core.DeviceRef{ID: "selftest", Handle: p.Handle, Name: p.Name, Spec: spec, Attrs: p.Attrs, Data: p.Data}
		pr.Simulated, pr.Device = p.Simulated, p.Handle
		return p.Name + " " + p.Handle, nil
	})
	step("boot", func(ctx context.Context) (string, error) {
		return "", drv.MakeReady(ctx, ref)
	})
	step("readiness", func(ctx context.Context) (string, error) {
		return observe(ctx, drv, ref.Handle, core.RunRunning)
	})
	step("exec", func(ctx context.Context) (string, error) { return selftestExec(ctx, drv, ref, scratch) })
	if rec != nil {
		step("record", func(ctx context.Context) (string, error) { return recordPlatform(ctx, rec, drv, ref, scratch) })
	}
	step("reclaim", func(ctx context.Context) (string, error) {
		if err := drv.Reclaim(ctx, ref); err != nil {
			return "", err
		}
		return observe(ctx, drv, ref.Handle, core.RunRunning)
	})
	step("shutdown", func(ctx context.Context) (string, error) {
		if err := drv.Shutdown(ctx, ref); err != nil {
			return "", err
		}
		stopped = true
		return observe(ctx, drv, ref.Handle, core.RunStopped)
	})
	step("destroy", func(ctx context.Context) (string, error) {
		if err := drv.Destroy(ctx, ref); err != nil {
			return "", err
		}
		destroyed = true
		if _, err := observe(ctx, drv, ref.Handle, ""); err != nil {
			return "", err
		}
		return "gone from the root", nil
	})
	if created && !destroyed {
		// Clean up on a context of its own: the selftest's may be what ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if !stopped {
			_ = drv.Shutdown(cctx, ref)
		}
		if err := drv.Destroy(cctx, ref); err != nil {
			fmt.Fprintf(a.env.Stderr, "simlock: selftest could not destroy %s: %v\n", ref.Handle, err)
		}
	}
	pr.DurationMs = time.Since(start).Milliseconds()
	return pr
}

// observe checks, by the driver's own listing, that the device is in the
// state the step left it in; want "" means it must be gone.
func observe(ctx context.Context, drv core.Driver, handle string, want core.RunState) (string, error) {
	list, err := drv.ListManaged(ctx)
	if err != nil {
		return "", err
	}
	for _, o := range list {
		if o.Handle != handle {
			continue
		}
		if want == "" {
			return "", fmt.Errorf("%s is still listed in the root after destroy", handle)
		}
		if o.Run != want {
			return "", fmt.Errorf("%s is %s, want %s", handle, o.Run, want)
		}
		if o.MarkOK != nil && !*o.MarkOK {
			return "", fmt.Errorf("%s lacks simlock's provenance mark", handle)
		}
		return "listed " + string(o.Run), nil
	}
	if want == "" {
		return "", nil
	}
	return "", fmt.Errorf("%s is not listed in the root", handle)
}

// selftestExec runs one harmless command on the device the way device.exec
// does: resolved by the driver, pinned to the device, with its env. On iOS
// it is a screenshot (the display works and the file is a PNG), on Android
// the boot-completed property.
func selftestExec(ctx context.Context, drv core.Driver, ref core.DeviceRef, scratch string) (string, error) {
	pt, ok := drv.(core.Passthrougher)
	if !ok {
		return "", fmt.Errorf("the %s driver runs no tools", drv.Platform())
	}
	shot := filepath.Join(scratch, "selftest.png")
	tool, args := "adb", []string{"shell", "getprop", "sys.boot_completed"}
	if drv.Platform() == "ios" {
		tool, args = "simctl", []string{"io", ref.Handle, "screenshot", "--type=png", shot}
	}
	cmd, err := pt.ResolvePassthrough(tool, args, core.PassthroughScope{Pin: &ref})
	if err != nil {
		return "", err
	}
	for k, v := range ref.Attrs {
		if name, ok := strings.CutPrefix(k, core.AttrEnvPrefix); ok {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	line := tool + " " + strings.Join(args, " ")
	res, err := ports.ExecRunner{}.Run(ctx, cmd)
	if err != nil {
		return line, fmt.Errorf("%s: %w", line, err)
	}
	if tool == "adb" {
		if out := strings.TrimSpace(string(res.Stdout)); out != "1" {
			return line, fmt.Errorf("%s printed %q, want 1", line, out)
		}
		return line + ": 1", nil
	}
	f, err := os.Open(shot)
	if err != nil {
		return line, fmt.Errorf("%s wrote no file: %w", line, err)
	}
	defer f.Close()
	img, err := png.DecodeConfig(f)
	if err != nil {
		return line, fmt.Errorf("%s wrote no PNG: %w", line, err)
	}
	return fmt.Sprintf("simctl io screenshot: %dx%d PNG", img.Width, img.Height), nil
}

// printSelftest is the report for people: one table per platform.
func (a *app) printSelftest(rep selftestReport) {
	for _, p := range rep.Platforms {
		verdict := "PASS"
		if !p.Passed {
			verdict = "FAIL"
		}
		what := strings.TrimSpace(p.Model + " " + p.OSVersion)
		if p.Simulated {
			what += " (simulated SDK)"
		}
		a.printf("%s %s %s  %s\n", verdict, p.Platform, what, time.Duration(p.DurationMs)*time.Millisecond)
		tw := tabwriter.NewWriter(a.env.Stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  STEP\tRESULT\tTIME\tDETAIL")
		for _, s := range p.Steps {
			detail := s.Detail
			if s.Error != nil {
				detail = string(s.Error.Code) + ": " + s.Error.Message
				if s.Error.NextAction != "" {
					detail += " (next: " + s.Error.NextAction + ")"
				}
			}
			dur := "-"
			if s.Result != stepSkipped {
				dur = (time.Duration(s.DurationMs) * time.Millisecond).String()
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.Name, s.Result, dur, detail)
		}
		tw.Flush()
	}
	if rep.Passed {
		a.printf("selftest passed\n")
	} else {
		a.printf("selftest FAILED (see docs/real-machine.md)\n")
	}
}
