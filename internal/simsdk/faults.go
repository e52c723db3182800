package simsdk

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Fault names. doc.go describes what each one does; the table below says
// which take a value.
const (
	faultBootFail     = "boot-fail"
	faultBootHang     = "boot-hang"
	faultCrashAfter   = "crash-after"
	faultEraseFail    = "erase-fail"
	faultCreateFail   = "create-fail"
	faultInstallFail  = "install-fail"
	faultInstallNoop  = "install-noop"
	faultShutdownHang = "shutdown-hang"
	faultSnapshotFail = "snapshot-fail"
	// faultRoleUnavailable makes `cmd role` fail as on an image without
	// the role service.
	faultRoleUnavailable = "role-unavailable"
	faultSlowProbe       = "slow-probe"
	// faultWindowDumpSlow delays `dumpsys window`, the Android live-state
	// probe (android_window.go).
	faultWindowDumpSlow = "window-dump-slow"

	faultLaunchctlMissing   = "launchctl-missing"
	faultLaunchctlWriteNoop = "launchctl-write-noop"
	faultLaunchctlSlow      = "launchctl-slow"
)

// faultTakesValue lists every known fault and whether it needs "=value".
var faultTakesValue = map[string]bool{
	faultBootFail:        false,
	faultBootHang:        false,
	faultCrashAfter:      true,
	faultEraseFail:       false,
	faultCreateFail:      false,
	faultInstallFail:     false,
	faultInstallNoop:     false,
	faultShutdownHang:    false,
	faultSnapshotFail:    false,
	faultRoleUnavailable: false,
	faultSlowProbe:       true,
	faultWindowDumpSlow:  true,

	faultLaunchctlMissing:   true,
	faultLaunchctlWriteNoop: false,
	faultLaunchctlSlow:      true,
}

// fault is one entry of SIMLOCK_SIMSDK_FAULTS: name[=value][@count].
type fault struct {
	Name  string
	Value string
	Count int    // 0 = unlimited
	Key   string // the entry as written; keys its fired count in state
}

// parseFaults parses the comma-separated fault list. Unknown names and
// malformed entries are errors: a fault that silently does nothing would
// make a test pass for the wrong reason.
func parseFaults(spec string) ([]fault, error) {
	var out []fault
	for _, raw := range strings.Split(spec, ",") {
		item := strings.TrimSpace(raw)
		if item == "" {
			continue
		}
		f := fault{Key: item}
		rest := item
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			n, err := strconv.Atoi(rest[i+1:])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("fault %q: count after @ must be a positive integer", item)
			}
			f.Count = n
			rest = rest[:i]
		}
		name, value, hasValue := strings.Cut(rest, "=")
		f.Name = strings.TrimSpace(name)
		f.Value = strings.TrimSpace(value)
		takes, known := faultTakesValue[f.Name]
		switch {
		case !known:
			return nil, fmt.Errorf("unknown fault %q (known: %s)", f.Name, knownFaults())
		case takes && !hasValue:
			return nil, fmt.Errorf("fault %q needs a value (%s=N)", item, f.Name)
		case !takes && hasValue:
			return nil, fmt.Errorf("fault %q takes no value", item)
		}
		if f.Name == faultCrashAfter || f.Name == faultSlowProbe || f.Name == faultLaunchctlSlow || f.Name == faultWindowDumpSlow {
			if ms, err := strconv.Atoi(f.Value); err != nil || ms < 0 {
				return nil, fmt.Errorf("fault %q: value must be milliseconds >= 0", item)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

func knownFaults() string {
	return strings.Join([]string{faultBootFail, faultBootHang, faultCrashAfter + "=MS",
		faultEraseFail, faultCreateFail, faultInstallFail, faultInstallNoop, faultShutdownHang, faultSnapshotFail, faultRoleUnavailable, faultSlowProbe + "=MS", faultWindowDumpSlow + "=MS",
		faultLaunchctlMissing + "=LABEL", faultLaunchctlWriteNoop, faultLaunchctlSlow + "=MS"}, ", ")
}

// fire reports whether the named fault fires now, consuming one use of a
// count-limited entry. Counts live in the home state, under its lock, so
// "erase-fail@1" fails exactly one erase across all concurrent processes.
func (s *sdk) fire(name string) (fault, bool, error) {
	for _, f := range s.faults {
		if f.Name != name {
			continue
		}
		if f.Count == 0 {
			return f, true, nil
		}
		fired := false
		err := updateHomeState(s.home, func(st *homeState) (bool, error) {
			if st.FaultsFired[f.Key] >= f.Count {
				return false, nil
			}
			if st.FaultsFired == nil {
				st.FaultsFired = map[string]int{}
			}
			st.FaultsFired[f.Key]++
			fired = true
			return true, nil
		})
		if err != nil {
			return f, false, err
		}
		if fired {
			return f, true, nil
		}
	}
	return fault{}, false, nil
}

// isProbe reports whether a tool invocation is one of the inventory
// probes slow-probe delays: the device listings `simctl list devices`,
// `adb devices` and `emulator -list-avds`.
func isProbe(tool string, args []string) bool {
	has := func(w string) bool {
		for _, a := range args {
			if a == w {
				return true
			}
		}
		return false
	}
	switch tool {
	case "xcrun":
		return has("simctl") && has("list") && has("devices")
	case "adb":
		return has("devices")
	case "emulator":
		return has("-list-avds")
	}
	return false
}

// slowProbe delays an inventory probe by the slow-probe fault's
// milliseconds (not scaled by SPEED: the fault is about a probe slower
// than its caller's budget, whatever the device timings).
func (s *sdk) slowProbe(ctx context.Context, tool string, args []string) error {
	if !isProbe(tool, args) {
		return nil
	}
	f, fired, err := s.fire(faultSlowProbe)
	if err != nil || !fired {
		return err
	}
	ms, _ := strconv.Atoi(f.Value)
	return sleepCtx(ctx, time.Duration(ms)*time.Millisecond)
}
