package simsdk

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// launchctl's exit statuses for the failures simulated here: they are the
// errno-style codes launchctl prints in front of its messages.
const (
	lcUsage       = 64
	lcNoService   = 113 // "Could not find service"
	lcNoProcess   = 3   // bootout of a job that is not loaded
	lcNoFile      = 2   // bootstrap of a path that does not exist
	lcIOError     = 5   // bootstrap of a job that is already loaded
	lcDisabledSvc = 119 // bootstrap of a disabled job
)

const launchctlUsage = "Usage: launchctl <subcommand> ... | help [subcommand]\n"

// spawnLaunchctl simulates launchctl inside a booted simulator: the
// subcommands the iOS driver's resource controller runs, in the system
// domain only, with state kept per device (ios_resources.go).
func (s *sdk) spawnLaunchctl(ctx context.Context, ds deviceSet, d *iosDevice, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(s.stderr, launchctlUsage)
		return lcUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "print", "print-disabled":
		// Reads may be slow: the slow-probe fault delays them (not scaled,
		// it models a loaded machine, not the tool's own work).
		if f, fired, err := s.fire(faultLaunchctlSlow); err != nil {
			return s.report(err)
		} else if fired {
			ms, _ := strconv.Atoi(f.Value)
			if err := sleepCtx(ctx, time.Duration(ms)*time.Millisecond); err != nil {
				return s.report(err)
			}
		}
	}
	switch sub {
	case "print":
		return s.launchctlPrint(ds, d, rest)
	case "print-disabled":
		return s.launchctlPrintDisabled(ds, d, rest)
	case "disable", "enable":
		return s.launchctlOverride(ds, d, sub, rest)
	case "bootout":
		return s.launchctlBootout(ds, d, rest)
	case "bootstrap":
		return s.launchctlBootstrap(ds, d, rest)
	case "help":
		fmt.Fprint(s.stdout, launchctlUsage)
		return 0
	}
	fmt.Fprintf(s.stderr, "Unrecognized subcommand: %s\n%s", sub, launchctlUsage)
	return lcUsage
}

// serviceTarget splits "system/<label>"; only the system domain exists
// inside a simulator's launchd_sim as far as this simulation goes.
func (s *sdk) serviceTarget(sub string, args []string) (string, bool) {
	if len(args) != 1 {
		fmt.Fprintf(s.stderr, "Usage: launchctl %s <service-target>\n", sub)
		return "", false
	}
	label, ok := strings.CutPrefix(args[0], "system/")
	if !ok || label == "" || strings.Contains(label, "/") {
		fmt.Fprintf(s.stderr, "Unrecognized target specifier.\nUsage: launchctl %s <service-target>\n", sub)
		return "", false
	}
	return label, true
}

func findJob(jobs []simJob, label string) (simJob, bool) {
	for _, j := range jobs {
		if j.Label == label {
			return j, true
		}
	}
	return simJob{}, false
}

// withLaunchd runs fn on the device's launchd state under the device
// set's lock and stores it when fn changed it.
func (s *sdk) withLaunchd(ds deviceSet, d *iosDevice, fn func(st *launchdState) (changed bool, err error)) error {
	return s.withSetLock(ds, func() error {
		st, err := loadLaunchd(ds, d)
		if err != nil {
			return err
		}
		changed, err := fn(&st)
		if err != nil || !changed {
			return err
		}
		return writeJSONAtomic(launchdStatePath(ds, d), &st)
	})
}

// launchctl print system/<label>: the job's description, or "Could not
// find service" when it is not loaded (or the runtime lacks it).
func (s *sdk) launchctlPrint(ds deviceSet, d *iosDevice, args []string) int {
	label, ok := s.serviceTarget("print", args)
	if !ok {
		return lcUsage
	}
	st, err := loadLaunchd(ds, d)
	if err != nil {
		return s.report(err)
	}
	j, shipped := findJob(s.jobsOf(d), label)
	if !shipped || !st.loaded(label) {
		fmt.Fprintf(s.stderr, "Could not find service %q in domain for system\n", label)
		return lcNoService
	}
	rt, _ := runtimeOf(d)
	pid := 1000 + slices.IndexFunc(simJobs, func(x simJob) bool { return x.Label == label })
	fmt.Fprintf(s.stdout, "system/%s = {\n", label)
	fmt.Fprintf(s.stdout, "\tactive count = 1\n\tpath = %s\n\ttype = LaunchDaemon\n\tstate = running\n\n", j.plistPath(rt))
	fmt.Fprintf(s.stdout, "\tprogram = %s\n\targuments = {\n\t\t%s\n\t}\n\n", rt.runtimeRoot()+j.Program, rt.runtimeRoot()+j.Program)
	fmt.Fprintf(s.stdout, "\tdomain = system\n\tminimum runtime = 10\n\texit timeout = 5\n\truns = 1\n\tpid = %d\n", pid)
	fmt.Fprintf(s.stdout, "\timmediate reason = speculative\n\tforks = 0\n\texecs = 1\n\tinitialized = 1\n\ttrampolined = 1\n")
	fmt.Fprintf(s.stdout, "\tstarted suspended = 0\n\tproxy started suspended = 0\n\tlast exit code = (never exited)\n\n")
	fmt.Fprintf(s.stdout, "\tspawn type = daemon (3)\n\tjetsam priority = 40\n\tjetsam memory limit (active) = %d MB\n}\n", j.MB*2)
	return 0
}

// launchctl print-disabled system: the override database, quoted labels
// with "=> disabled" or "=> enabled", in label order.
func (s *sdk) launchctlPrintDisabled(ds deviceSet, d *iosDevice, args []string) int {
	if len(args) != 1 || args[0] != "system" {
		fmt.Fprint(s.stderr, "Usage: launchctl print-disabled <domain-target>\n")
		return lcUsage
	}
	st, err := loadLaunchd(ds, d)
	if err != nil {
		return s.report(err)
	}
	labels := make([]string, 0, len(st.Overrides))
	for l := range st.Overrides {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	fmt.Fprint(s.stdout, "disabled services = {\n")
	for _, l := range labels {
		word := "enabled"
		if st.Overrides[l] {
			word = "disabled"
		}
		fmt.Fprintf(s.stdout, "\t%q => %s\n", l, word)
	}
	fmt.Fprint(s.stdout, "}\n")
	return 0
}

// writeIgnored reports whether the write-noop fault swallows this write:
// launchctl then exits 0 having changed nothing, a write that does not
// stick.
func (s *sdk) writeIgnored() (bool, error) {
	_, fired, err := s.fire(faultLaunchctlWriteNoop)
	return fired, err
}

// launchctl disable|enable system/<label>: writes the override. Like the
// real one it accepts any label, shipped or not, and leaves the job as it
// is: the change takes effect at the next load.
func (s *sdk) launchctlOverride(ds deviceSet, d *iosDevice, sub string, args []string) int {
	label, ok := s.serviceTarget(sub, args)
	if !ok {
		return lcUsage
	}
	if ignored, err := s.writeIgnored(); err != nil || ignored {
		return s.report(err)
	}
	err := s.withLaunchd(ds, d, func(st *launchdState) (bool, error) {
		if st.Overrides == nil {
			st.Overrides = map[string]bool{}
		}
		st.Overrides[label] = sub == "disable"
		return true, nil
	})
	return s.report(err)
}

// launchctl bootout system/<label>: unloads a loaded job.
func (s *sdk) launchctlBootout(ds deviceSet, d *iosDevice, args []string) int {
	label, ok := s.serviceTarget("bootout", args)
	if !ok {
		return lcUsage
	}
	_, shipped := findJob(s.jobsOf(d), label)
	// Decided before the lock: fault counts live under the home's lock.
	ignored, err := s.writeIgnored()
	if err != nil {
		return s.report(err)
	}
	code := 0
	err = s.withLaunchd(ds, d, func(st *launchdState) (bool, error) {
		if !shipped || !st.loaded(label) {
			code = lcNoProcess
			return false, nil
		}
		if ignored {
			return false, nil
		}
		st.setLoaded(label, false)
		return true, nil
	})
	if err != nil {
		return s.report(err)
	}
	if code != 0 {
		fmt.Fprintf(s.stderr, "Boot-out failed: %d: No such process\n", code)
	}
	return code
}

// launchctl bootstrap system <plist>: loads the job a shipped definition
// describes, unless it is disabled or already loaded.
func (s *sdk) launchctlBootstrap(ds deviceSet, d *iosDevice, args []string) int {
	if len(args) != 2 || args[0] != "system" {
		fmt.Fprint(s.stderr, "Usage: launchctl bootstrap <domain-target> [service-path service-path2 ...] | <service-target>\n")
		return lcUsage
	}
	rt, _ := runtimeOf(d)
	var job simJob
	found := false
	for _, j := range s.jobsOf(d) {
		if filepath.Clean(args[1]) == j.plistPath(rt) {
			job, found = j, true
		}
	}
	ignored, err := s.writeIgnored()
	if err != nil {
		return s.report(err)
	}
	code, text := 0, ""
	err = s.withLaunchd(ds, d, func(st *launchdState) (bool, error) {
		switch {
		case !found:
			code, text = lcNoFile, "No such file or directory"
		case st.Overrides[job.Label]:
			code, text = lcDisabledSvc, "Service is disabled"
		case st.loaded(job.Label):
			code, text = lcIOError, "Input/output error"
		case ignored:
		default:
			st.setLoaded(job.Label, true)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return s.report(err)
	}
	if code != 0 {
		fmt.Fprintf(s.stderr, "Bootstrap failed: %d: %s\n", code, text)
	}
	return code
}
