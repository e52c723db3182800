package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/simsdk"
	"github.com/simlock/simlock/internal/testhost"
)

// The test binary doubles as simlock: a daemon the CLI auto-starts is
// this binary run with SIMLOCK_CLI_TEST_MAIN=1.
func TestMain(m *testing.M) {
	if os.Getenv("SIMLOCK_CLI_TEST_MAIN") == "1" {
		os.Exit(Run(context.Background(), append([]string{"simlock"}, os.Args[1:]...), OSEnv()))
	}
	os.Exit(testhost.RunIsolated(m))
}

type run struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, env map[string]string, stdinTTY bool, args ...string) run {
	t.Helper()
	var out, errb bytes.Buffer
	environ := append(os.Environ(), "SIMLOCK_CLI_TEST_MAIN=1", "SIMLOCK_ADMIN_TOKEN=")
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	e := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Environ: environ,
		Getenv:        func(k string) string { return env[k] },
		StdinTerminal: func() bool { return stdinTTY }}
	code := Run(context.Background(), append([]string{"simlock"}, args...), e)
	return run{code, out.String(), errb.String()}
}

// An auto-started daemon that cannot start (its HTTP port is taken) is
// reported at once with its own reason, and leaves no files behind.
func TestAutoStartReportsTheDaemonsOwnReasonAtOnce(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	home := t.TempDir()
	cfg := `{"http":{"enabled":true,"listen":"` + taken.Addr().String() + `"}}`
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "--home", home, "catalog")
	took := time.Since(start)
	if r.code != contract.ErrorTable[contract.CodeDaemonStartupFailed].ExitCode {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "address already in use") || !strings.Contains(r.stderr, "exited during startup") {
		t.Fatalf("stderr does not give the daemon's reason:\n%s", r.stderr)
	}
	if took > testhost.Scale(10*time.Second) {
		t.Fatalf("took %s to notice the daemon had exited", took)
	}
	for _, name := range []string{"admin.token", "daemon.pid", "simlock.sock"} {
		if _, err := os.Stat(filepath.Join(home, name)); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", name, err)
		}
	}
	t.Logf("failed auto-start reported in %s", took)
}

// --everyone without a terminal to confirm on, and without --yes, is
// refused before anything is sent; so are contradictory flags.
func TestReleaseEveryoneNeedsConfirmation(t *testing.T) {
	home := t.TempDir()
	r := runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "--home", home, "release", "--everyone")
	if r.code != 2 || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "daemon.pid")); !os.IsNotExist(err) {
		t.Fatal("the refusal started a daemon")
	}
	r = runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "--home", home, "release", "--everyone", "--yes", "--requester", "x")
	if r.code != 2 {
		t.Fatalf("--everyone with --requester: exit %d, %s", r.code, r.stderr)
	}
	r = runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "--home", home, "release", "lse_1", "--requester", "x")
	if r.code != 2 {
		t.Fatalf("a lease id with --requester: exit %d, %s", r.code, r.stderr)
	}
}

// The line `simlock lease` prints has exactly the contract lease's keys
// plus role, worker included.
func TestLeaseLineIsTheContractLeasePlusRole(t *testing.T) {
	l := contract.Lease{LeaseID: "w1.lse_1", RequesterID: "r", OwnerID: "o", DeviceID: "d", Platform: "ios",
		Worker: &contract.WorkerRef{ID: "w1", Label: "mac"}, TTLMs: 1000, Device: &contract.Device{ID: "d"}}
	got := keys(t, leaseLine{Lease: l, Role: contract.RoleAgent})
	want := append(keys(t, l), "role")
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lease line keys %v, want %v", got, want)
	}
}

func TestSimsdkPsJSONIsCamelCase(t *testing.T) {
	got := keys(t, simsdk.Proc{Platform: "ios", ID: "U", PID: 1, Name: "n"})
	if want := []string{"id", "name", "pid", "platform"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ps --json keys %v, want %v", got, want)
	}
	r := runCLI(t, map[string]string{"SIMLOCK_SIMSDK_HOME": t.TempDir()}, false, "simsdk", "ps", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("empty ps --json: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

func keys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
