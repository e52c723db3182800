package claims

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// One running device per home, and an idle device kept running (and so
// claimed) for the whole test: the tests below watch claims, so nothing may
// shut a device down behind their back. Clone provisioning off: a golden's
// boot would be one more claim.
const quietConfig = `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3}},
 "drivers":{"ios":{"clone":{"enabled":false}}},
 "cleanup":{"intervalMs":600000,"idleShutdownMs":600000,"idleDestroyMs":6000000}}`

// sharedRootConfig points the iOS driver at one device set that two homes
// share; an idle device is shut down after half a second, so a home lets
// go of its claim soon after its lease ends.
func sharedRootConfig(root string) string {
	return fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "drivers":{"ios":{"root":%q,"clone":{"enabled":false}}},
 "cleanup":{"intervalMs":200,"idleShutdownMs":500,"idleDestroyMs":6000000}}`, root)
}

// claim is one claim of `device status --json`.
type claim struct {
	DeviceKey       string   `json:"deviceKey"`
	Platform        string   `json:"platform"`
	OwnerHome       string   `json:"ownerHome"`
	OwnerPID        int      `json:"ownerPid"`
	OwnerStartTime  string   `json:"ownerStartTime"`
	LeaseID         string   `json:"leaseId"`
	Kind            string   `json:"kind"`
	Command         string   `json:"command"`
	State           string   `json:"state"`
	Classification  string   `json:"classification"`
	Liveness        string   `json:"liveness"`
	Detail          string   `json:"detail"`
	FailedSteps     []string `json:"failedSteps"`
	RecoveryCommand string   `json:"recoveryCommand"`
}

type deviceStatus struct {
	HostDir string  `json:"hostDir"`
	Claims  []claim `json:"claims"`
}

// claims is `device status --json` with the selectors given.
func claims(w *harness.World, selectors ...string) []claim {
	w.T.Helper()
	var st deviceStatus
	w.JSON(&st, append(append([]string{"device", "status"}, selectors...), "--json")...)
	return st.Claims
}

// claimOf is the claim of key as `device status` shows it.
func claimOf(w *harness.World, key string) (claim, bool) {
	w.T.Helper()
	for _, c := range claims(w, key) {
		if c.DeviceKey == key {
			return c, true
		}
	}
	return claim{}, false
}

type lease struct {
	LeaseID string `json:"leaseId"`
	Device  struct {
		ID, UDID, Serial, AVDName string
	} `json:"device"`
}

type daemonStatus struct {
	Daemon struct{ PID int }
}

func daemonPID(w *harness.World) int {
	w.T.Helper()
	var st daemonStatus
	w.JSON(&st, "status", "--json")
	return st.Daemon.PID
}

// leaseIOS leases an iOS simulator and waits until its claim names the
// lease (the lease id reaches the record from a background writer).
func leaseIOS(w *harness.World, requester string) (lease, string) {
	w.T.Helper()
	var l lease
	w.JSON(&l, "lease", "--platform", "ios", "--detach", "--ttl", "10m", "--requester", requester)
	key := "ios:udid:" + strings.ToUpper(l.Device.UDID)
	harness.Eventually(w.T, "the claim of "+key+" to name lease "+l.LeaseID, 20*time.Second, func() bool {
		c, ok := claimOf(w, key)
		return ok && c.LeaseID == l.LeaseID
	})
	return l, key
}

// kill ends a daemon outright and waits until it is gone.
func kill(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the killed daemon to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
}

// registryFiles hashes every file of a host registry directory but
// SQLite's -shm (a shared-memory index whose read marks change on every
// read; it holds no data). Equal maps mean nothing was written.
func registryFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "-shm") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = hex.EncodeToString(sum[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(a, b map[string]string) string {
	var diff []string
	for k, v := range a {
		if b[k] != v {
			diff = append(diff, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diff = append(diff, k+" (new)")
		}
	}
	sort.Strings(diff)
	return strings.Join(diff, ", ")
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}
