package claims

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/hostreg"
	"github.com/simlock/simlock/internal/ports"
)

// A home deleted with devices running leaves them running: a simulator's
// launchd_sim and an emulator go on without their directories, and no
// platform tool reaches them through the deleted root (simctl knows no
// device in a set it has to re-create, and avdmanager no AVD). What still
// names them is their process: launchd_sim's arguments hold the device's
// directory inside its set (<set>/<UDID>/data/...), an emulator's hold
// `-avd <name>`. A reclaim of such an orphan looks for them there and ends
// them, so the claim is cleared only once nothing runs (ADR 0078). A
// missing root used to count as proof that nothing ran, and the multi-home
// drill found the devices still running, unclaimed, over the host limit.

// rootGoneError is errRootGone with the root that is gone.
type rootGoneError struct{ root string }

func (e rootGoneError) Error() string { return fmt.Sprintf("%s: %s", errRootGone, e.root) }
func (e rootGoneError) Unwrap() error { return errRootGone }

// hostProc is one process of the host: its pid and its arguments, joined.
type hostProc struct {
	pid  int
	args string
}

// listHostProcs reads the host's processes with ps, whose BSD form
// (`ps axww -o pid=,args=`) means the same on macOS and Linux.
func listHostProcs(ctx context.Context, r ports.ProcessRunner) ([]hostProc, error) {
	res, err := r.Run(ctx, ports.Command{Name: "ps", Args: []string{"axww", "-o", "pid=,args="}})
	if err != nil {
		return nil, fmt.Errorf("list the host's processes: %w", err)
	}
	var out []hostProc
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		pidText, args, ok := strings.Cut(strings.TrimSpace(line), " ")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		out = append(out, hostProc{pid: pid, args: strings.TrimSpace(args)})
	}
	return out, nil
}

// deviceProcs picks the processes that run the device key names from
// root (for an emulator, by its AVD name: AVD names are random per root).
// A console port other than 0 narrows an emulator to the one launched on
// it: AVD names are random, but a managed slot's AVD is named after the
// slot, so two homes can run AVDs of one name, while console ports are
// leased host-wide.
func deviceProcs(procs []hostProc, root string, key hostreg.Key, console int) []int {
	var pids []int
	switch {
	case strings.HasPrefix(string(key), "ios:udid:"):
		needle := strings.ToUpper(filepath.Join(root, strings.TrimPrefix(string(key), "ios:udid:")))
		for _, p := range procs {
			if containsPath(strings.ToUpper(p.args), needle) {
				pids = append(pids, p.pid)
			}
		}
	case strings.HasPrefix(string(key), "android:avd:"):
		name, _, _ := strings.Cut(strings.TrimPrefix(string(key), "android:avd:"), ":")
		for _, p := range procs {
			f := strings.Fields(p.args)
			named, onPort := false, console == 0
			for i := 0; i+1 < len(f); i++ {
				named = named || (f[i] == "-avd" && f[i+1] == name)
				onPort = onPort || (f[i] == "-port" && f[i+1] == strconv.Itoa(console))
			}
			if named && onPort {
				pids = append(pids, p.pid)
			}
		}
	}
	return pids
}

// containsPath reports whether s holds the path needle as a whole path:
// followed by a separator, a space or the end, never by more of a name.
func containsPath(s, needle string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], needle)
		if j < 0 || needle == "" {
			return false
		}
		end := i + j + len(needle)
		if end == len(s) || s[end] == '/' || s[end] == ' ' {
			return true
		}
		i = end
	}
}

// observeDeviceProcs says whether a process still runs the device key
// names from root (a root that is gone, or one its tools cannot see into).
func observeDeviceProcs(ctx context.Context, r ports.ProcessRunner, root string, key hostreg.Key, console int) (hostreg.DeviceRun, error) {
	procs, err := listHostProcs(ctx, r)
	if err != nil {
		return hostreg.DeviceUnknown, err
	}
	if len(deviceProcs(procs, root, key, console)) > 0 {
		return hostreg.DeviceRunning, nil
	}
	return hostreg.DeviceAbsent, nil
}

// endDeviceProcs ends the processes that run the device key names from
// root: SIGTERM, then SIGKILL for whatever is still there after a grace,
// and it returns once nothing of it runs. found is false when nothing ran.
func endDeviceProcs(ctx context.Context, r ports.ProcessRunner, root string, key hostreg.Key, console int) (found bool, err error) {
	procs, err := listHostProcs(ctx, r)
	if err != nil {
		return false, err
	}
	pids := deviceProcs(procs, root, key, console)
	if len(pids) == 0 {
		return false, nil
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		for _, pid := range pids {
			if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				return true, fmt.Errorf("end %s's process %d: %w", key, pid, err)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			procs, err := listHostProcs(ctx, r)
			if err != nil {
				return true, err
			}
			if pids = deviceProcs(procs, root, key, console); len(pids) == 0 {
				return true, nil
			}
			select {
			case <-ctx.Done():
				return true, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return true, fmt.Errorf("%s still runs after SIGKILL (pids %v)", key, pids)
}

// consolePortOf is the console port the host registry leases to ownerHome
// for the emulator key names, or 0 when none is leased (not an emulator,
// or its lease is gone: then the AVD name alone must do).
func consolePortOf(ctx context.Context, getenv func(string) string, ownerHome string, key hostreg.Key) int {
	rest, ok := strings.CutPrefix(string(key), "android:avd:")
	if !ok {
		return 0
	}
	name, _, _ := strings.Cut(rest, ":")
	if getenv == nil {
		getenv = os.Getenv
	}
	host, err := hostreg.Open(ctx, config.HostDir(getenv))
	if err != nil {
		return 0
	}
	defer host.Close()
	all, err := host.Ports(ctx)
	if err != nil {
		return 0
	}
	for _, st := range all {
		if l := st.Lease; l.Purpose == hostreg.PortConsole && l.Serves == name && l.Owner.Home == ownerHome {
			return l.Port
		}
	}
	return 0
}
