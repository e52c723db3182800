package simsdk

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
)

func (h *harness) launchctl(udid string, args ...string) result {
	return h.simctl(append([]string{"spawn", udid, "launchctl"}, args...)...)
}

// mustLC runs launchctl in the device and checks its exit status.
func (h *harness) mustLC(udid string, code int, args ...string) result {
	h.t.Helper()
	r := h.launchctl(udid, args...)
	if r.code != code {
		h.t.Fatalf("launchctl %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, r.code, code, r.stdout, r.stderr)
	}
	return r
}

func (h *harness) bootedIOS(runtime string) string {
	h.t.Helper()
	udid := h.create("Res", "iPhone 15", runtime)
	h.must("boot", udid)
	h.waitState(udid, "Booted")
	return udid
}

// The subcommands, their output formats and their failures, as launchctl
// prints them: a job stays loaded after disable until bootout, a disabled
// job cannot be bootstrapped, and nothing is reported on success.
func TestLaunchctlOverridesAndJobs(t *testing.T) {
	h := newHarness(t)
	udid := h.bootedIOS("iOS 18.0")
	const job = "system/com.apple.chronod"
	r := h.mustLC(udid, 0, "print", job)
	if !strings.HasPrefix(r.stdout, job+" = {\n") || !strings.Contains(r.stdout, "/RuntimeRoot/System/Library/LaunchDaemons/com.apple.chronod.plist\n") ||
		!strings.Contains(r.stdout, "\tstate = running\n") || !strings.HasSuffix(r.stdout, "}\n") {
		t.Fatalf("print:\n%s", r.stdout)
	}
	path := strings.Split(strings.Split(r.stdout, "\tpath = ")[1], "\n")[0]
	if r := h.mustLC(udid, 0, "print-disabled", "system"); r.stdout != "disabled services = {\n}\n" {
		t.Fatalf("print-disabled on a fresh device: %q", r.stdout)
	}
	if r := h.mustLC(udid, 0, "disable", job); r.stdout+r.stderr != "" {
		t.Fatalf("disable printed %q", r.stdout+r.stderr)
	}
	if r := h.mustLC(udid, 0, "print-disabled", "system"); r.stdout != "disabled services = {\n\t\"com.apple.chronod\" => disabled\n}\n" {
		t.Fatalf("print-disabled: %q", r.stdout)
	}
	h.mustLC(udid, 0, "print", job) // disable alone leaves the job loaded
	h.mustLC(udid, 0, "bootout", job)
	if r := h.mustLC(udid, 113, "print", job); r.stderr != "Could not find service \"com.apple.chronod\" in domain for system\n" {
		t.Fatalf("print of an unloaded job: %q", r.stderr)
	}
	if r := h.mustLC(udid, 3, "bootout", job); r.stderr != "Boot-out failed: 3: No such process\n" {
		t.Fatalf("second bootout: %q", r.stderr)
	}
	if r := h.mustLC(udid, 119, "bootstrap", "system", path); r.stderr != "Bootstrap failed: 119: Service is disabled\n" {
		t.Fatalf("bootstrap of a disabled job: %q", r.stderr)
	}
	h.mustLC(udid, 0, "enable", job)
	if r := h.mustLC(udid, 0, "print-disabled", "system"); !strings.Contains(r.stdout, "\"com.apple.chronod\" => enabled\n") {
		t.Fatalf("print-disabled after enable: %q", r.stdout)
	}
	h.mustLC(udid, 0, "bootstrap", "system", path)
	h.mustLC(udid, 0, "print", job)
	if r := h.mustLC(udid, 5, "bootstrap", "system", path); r.stderr != "Bootstrap failed: 5: Input/output error\n" {
		t.Fatalf("bootstrap of a loaded job: %q", r.stderr)
	}
	h.mustLC(udid, 2, "bootstrap", "system", "/nowhere/com.apple.chronod.plist")
	h.mustLC(udid, 64, "print", "com.apple.chronod")
	h.mustLC(udid, 64, "frobnicate")
	h.mustLC(udid, 64, "print-disabled", "gui/501")
	h.mustLC(udid, 113, "print", "system/com.apple.nosuchd")
}

// A reboot loads every job whose override is not disabled; an erase
// forgets the overrides with the rest of the device's data.
func TestLaunchctlStateAcrossRebootAndErase(t *testing.T) {
	h := newHarness(t)
	udid := h.bootedIOS("iOS 18.0")
	h.mustLC(udid, 0, "disable", "system/com.apple.searchd") // no bootout: loaded until the next boot
	h.mustLC(udid, 0, "disable", "system/com.apple.chronod")
	h.mustLC(udid, 0, "bootout", "system/com.apple.chronod")
	h.mustLC(udid, 0, "enable", "system/com.apple.chronod") // enabled again, but not loaded until the next boot
	h.mustLC(udid, 0, "print", "system/com.apple.searchd")
	h.mustLC(udid, 113, "print", "system/com.apple.chronod")
	h.must("shutdown", udid)
	h.waitState(udid, "Shutdown")
	if r := h.launchctl(udid, "print-disabled", "system"); r.code == 0 {
		t.Fatal("launchctl ran in a shut-down simulator")
	}
	h.must("boot", udid)
	h.waitState(udid, "Booted")
	h.mustLC(udid, 113, "print", "system/com.apple.searchd")
	h.mustLC(udid, 0, "print", "system/com.apple.chronod")
	h.must("shutdown", udid)
	h.waitState(udid, "Shutdown")
	h.must("erase", udid)
	h.must("boot", udid)
	h.waitState(udid, "Booted")
	if r := h.mustLC(udid, 0, "print-disabled", "system"); r.stdout != "disabled services = {\n}\n" {
		t.Fatalf("overrides survived an erase: %q", r.stdout)
	}
	h.mustLC(udid, 0, "print", "system/com.apple.searchd")
}

// Each runtime ships its own jobs: iOS 17.5 has no Live Activities job,
// iOS 26 no Tips job.
func TestLaunchctlPerRuntimeCatalogue(t *testing.T) {
	h := newHarness(t)
	old := h.bootedIOS("iOS 17.5")
	h.mustLC(old, 113, "print", "system/com.apple.activitykitd")
	h.mustLC(old, 0, "print", "system/com.apple.tipsd")
	h.mustLC(old, 3, "bootout", "system/com.apple.activitykitd")
	cur := h.bootedIOS("iOS 26.3")
	h.mustLC(cur, 0, "print", "system/com.apple.activitykitd")
	h.mustLC(cur, 113, "print", "system/com.apple.tipsd")
}

func TestLaunchctlFaults(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		h := newHarness(t, EnvFaults, faultLaunchctlMissing+"=com.apple.searchd")
		udid := h.bootedIOS("iOS 18.0")
		h.mustLC(udid, 113, "print", "system/com.apple.searchd")
		h.mustLC(udid, 0, "print", "system/com.apple.chronod")
	})
	t.Run("write-noop", func(t *testing.T) {
		h := newHarness(t, EnvFaults, faultLaunchctlWriteNoop)
		udid := h.bootedIOS("iOS 18.0")
		h.mustLC(udid, 0, "disable", "system/com.apple.chronod")
		h.mustLC(udid, 0, "bootout", "system/com.apple.chronod")
		if r := h.mustLC(udid, 0, "print-disabled", "system"); r.stdout != "disabled services = {\n}\n" {
			t.Fatalf("an ignored write stuck: %q", r.stdout)
		}
		h.mustLC(udid, 0, "print", "system/com.apple.chronod")
	})
	t.Run("slow", func(t *testing.T) {
		// The delay is stretched by the machine's slowdown so that an
		// unslowed write, which does the same work as a read but for the
		// delay, stays below it on a loaded machine too; a slowed one
		// cannot, however fast the machine.
		delay := testhost.Scale(300 * time.Millisecond).Round(time.Millisecond)
		h := newHarness(t, EnvFaults, faultLaunchctlSlow+"="+strconv.FormatInt(delay.Milliseconds(), 10))
		udid := h.bootedIOS("iOS 18.0")
		start := time.Now()
		h.mustLC(udid, 0, "print-disabled", "system")
		if d := time.Since(start); d < delay {
			t.Fatalf("a slow probe answered in %s, under its %s delay", d, delay)
		}
		start = time.Now()
		h.mustLC(udid, 0, "disable", "system/com.apple.chronod")
		if d := time.Since(start); d >= delay {
			t.Fatalf("a write was slowed too (%s, delay %s)", d, delay)
		}
	})
	for _, bad := range []string{faultLaunchctlSlow, faultLaunchctlSlow + "=soon", faultLaunchctlMissing, faultLaunchctlWriteNoop + "=1"} {
		if _, err := parseFaults(bad); err == nil {
			t.Errorf("fault %q accepted", bad)
		}
	}
}

// Footprint falls as jobs are unloaded, by what each job costs.
func TestIOSFootprintFallsWithUnloadedJobs(t *testing.T) {
	h := newHarness(t)
	udid := h.bootedIOS("iOS 18.0")
	ds := deviceSet{dir: h.home + "/devices"}
	read := func() (int, int) {
		t.Helper()
		d, err := ds.load(udid)
		if err != nil {
			t.Fatal(err)
		}
		st, err := loadLaunchd(ds, d)
		if err != nil {
			t.Fatal(err)
		}
		s := &sdk{}
		return iosFootprint(s.jobsOf(d), st)
	}
	if mb, p := read(); mb != stockFootprintMB || p != stockProcesses {
		t.Fatalf("stock %d MB %d processes", mb, p)
	}
	h.mustLC(udid, 0, "disable", "system/com.apple.searchd")
	if mb, _ := read(); mb != stockFootprintMB {
		t.Fatalf("a disabled but loaded job already saved memory: %d", mb)
	}
	h.mustLC(udid, 0, "bootout", "system/com.apple.searchd")
	if mb, p := read(); mb != stockFootprintMB-380 || p != stockProcesses-22 {
		t.Fatalf("after bootout %d MB %d processes", mb, p)
	}
}
