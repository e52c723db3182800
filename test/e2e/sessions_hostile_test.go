package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/testhost"
)

// A session keeper (`simlock mcp --session-config`) killed with SIGKILL
// while its device is still booting: the preparation runs to its end, no
// one heartbeats, and the receipt ends typed (SESSION_OWNER_EXITED) with
// its device deleted; the simulated SDK runs no device process and doctor
// finds nothing, so nothing leaked.
func TestSessionKeeperKilledMidPrepareEndsTypedAndLeaksNothing(t *testing.T) {
	cfg := strings.Replace(sessionsConfig("", ""), `"heartbeatTtlMs":600000`, `"heartbeatTtlMs":2000`, 1)
	w := newWorld(t, cfg)
	logPath := w.simHome + "-cmds.log"
	// Slow enough (a first boot of about 3 s) to be caught mid-boot.
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath, "SIMLOCK_SIMSDK_SPEED=0.1")
	w.mustRun("daemon", "start")
	keeper := w.cmd("mcp", "--session-config", sessionJSON("kept"))
	keeper.Env = append(keeper.Env, "SIMLOCK_SESSION_OWNER_TOKEN=o")
	stdin, err := keeper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := keeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer keeper.Process.Kill()
	_, _ = stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}` + "\n"))
	eventually(t, "the keeper's device to start booting", 20*time.Second, func() bool {
		// Not any "boot": the daemon's startup runs `simctl list
		// devices booted`, which is no boot.
		return booting(w.commandLog(logPath))
	})
	if st := w.sessionStatus("kept", "o"); st.Status != "pending" {
		t.Fatalf("before the kill the session is %+v, want pending (mid-prepare)", st)
	}
	if err := keeper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = keeper.Wait()

	var st sessionReceipt
	eventually(t, "the orphaned session to end and be torn down", 40*time.Second, func() bool {
		st = w.sessionStatus("kept", "o")
		return st.Status == "failed" && !st.CleanupPending
	})
	if st.Failure == nil || st.Failure.Code != "SESSION_OWNER_EXITED" || st.Device == nil {
		t.Fatalf("after the keeper's SIGKILL %+v", st)
	}
	if len(matching(w.commandLog(logPath), "simctl", "delete", st.Device.UDID)) == 0 {
		t.Fatalf("the orphaned session's simulator %s was never deleted", st.Device.UDID)
	}
	var procs []struct {
		ID string `json:"id"`
	}
	w.goldensSettled(t)
	w.json(&procs, "simsdk", "ps", "--json")
	if len(procs) != 0 {
		t.Fatalf("device processes still running after the teardown: %+v", procs)
	}
	if s := w.status(); len(s.Devices) != 0 || len(s.Leases) != 0 {
		t.Fatalf("status after the teardown: %d devices, %d leases", len(s.Devices), len(s.Leases))
	}
	var doc struct {
		Healthy  bool
		Findings []map[string]any
	}
	w.json(&doc, "doctor", "--json")
	if !doc.Healthy {
		t.Fatalf("doctor after the teardown: %+v", doc.Findings)
	}
}

// Against the real daemon: a flood of prepares with distinct request ids
// past sessionCap is refused (CAPACITY_EXHAUSTED) and creates nothing,
// while another client's `simlock status` and `simlock lease` answer
// promptly.
func TestSessionPrepareFloodLeavesOthersPrompt(t *testing.T) {
	w := newWorld(t, sessionsConfig("", `"sessionCap":1`))
	logPath := w.simHome + "-cmds.log"
	w.env = append(w.env, "SIMLOCK_SIMSDK_COMMAND_LOG="+logPath)
	w.mustRun("daemon", "start")
	if r := w.prepare("held", "o"); r.Status != "ready" {
		t.Fatalf("prepare %+v", r)
	}
	const conns, each = 4, 30
	var wg, started sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	// The flood is under way before the timed calls start (every
	// connection has had an answer) and goes on until they are done.
	stop := make(chan struct{})
	flooding := func(i int) bool {
		select {
		case <-stop:
			return i < each
		default:
			return true
		}
	}
	for c := 0; c < conns; c++ {
		cl := w.dial(t, fmt.Sprintf("mallory-%d", c))
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; flooding(i); i++ {
				if i == 1 {
					started.Done()
				}
				var cfg contract.SessionConfig
				_ = json.Unmarshal([]byte(sessionJSON(fmt.Sprintf("flood-%d-%d", c, i))), &cfg)
				r, err := client.Do(context.Background(), cl, contract.SessionPrepare, contract.SessionPrepareIn{Config: cfg, OwnerToken: "m"})
				mu.Lock()
				switch {
				case err != nil:
					codes["error:"+err.Error()]++
				case r.Failure != nil:
					codes[string(r.Failure.Code)]++
				default:
					codes["granted"]++
				}
				mu.Unlock()
			}
		}()
	}
	started.Wait()
	start := time.Now()
	st := w.status()
	var l lease
	w.json(&l, "lease", "--platform", "ios", "--detach")
	took := time.Since(start)
	close(stop)
	wg.Wait()
	t.Logf("status and a plain lease during the flood: %s", took)
	// Two CLI launches against a daemon under a flood take a few seconds on
	// a loaded machine; a call held behind the flood would never answer,
	// so 10 s tells the two apart with room for a 2-3 s stall.
	if took > testhost.Scale(10*time.Second) || l.LeaseID == "" || st.Daemon.PID == 0 {
		t.Fatalf("during the flood: status %+v, lease %+v, %s", st.Daemon, l, took)
	}
	if codes["CAPACITY_EXHAUSTED"] < conns*each || len(codes) != 1 {
		t.Fatalf("flood answers %v", codes)
	}
	if c := len(matching(w.commandLog(logPath), "simctl", "create")); c > 2 {
		t.Fatalf("%d simulators created: a refused prepare made one", c)
	}
}
