package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/hostreg"
)

const (
	udidLive    = "AAAAAAAA-0000-0000-0000-000000000001"
	udidOrphan  = "AAAAAAAA-0000-0000-0000-000000000002"
	udidCorrupt = "AAAAAAAA-0000-0000-0000-000000000003"
)

// hostWithClaims writes three claims straight into a host registry, as
// daemons would: one owned by this (live) test process, one by a pid that
// cannot exist (orphaned), and a record no simlock writes (inconsistent).
// The registry is closed again: no daemon runs.
func hostWithClaims(t *testing.T) (hostDir, liveHome, deadHome string) {
	t.Helper()
	ctx := context.Background()
	hostDir, liveHome, deadHome = t.TempDir(), t.TempDir(), t.TempDir()
	// The dead owner's device set is still there: a device root that is
	// gone proves its devices gone too (ADR 0059), which would let --stale
	// clear the orphan without the shutdown this fixture cannot run.
	if err := os.MkdirAll(filepath.Join(deadHome, "devices", "ios"), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := hostreg.Open(ctx, hostDir)
	if err != nil {
		t.Fatal(err)
	}
	self, err := hostreg.Self(liveHome)
	if err != nil {
		t.Skipf("this system cannot prove process start times: %v", err)
	}
	at := time.UnixMilli(1_780_000_000_000).UTC()
	for _, c := range []hostreg.Claim{
		{Key: "ios:udid:" + udidLive, Kind: hostreg.KindLease, LeaseID: "lse_live", Owner: self, ClaimedAt: at},
		{Key: "ios:udid:" + udidOrphan, Kind: hostreg.KindLease, LeaseID: "lse_dead",
			Owner: hostreg.Owner{Home: deadHome, PID: 1<<31 - 2, Start: "gone"}, ClaimedAt: at},
	} {
		if err := db.Claim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	raw, err := sql.Open("sqlite", filepath.Join(hostDir, hostreg.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO claims (device_key, record_version, kind, command, owner_home, owner_pid, owner_start, lease_id, claimed_at, state)
		VALUES (?, 1, 'lease', '', ?, 1, 's', 'lse_x', 5, 'exploded')`, "ios:udid:"+udidCorrupt, deadHome); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	return hostDir, liveHome, deadHome
}

func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

type statusJSON struct {
	Claims []claimView `json:"claims"`
}

// `device status` works with every daemon stopped, writes nothing (the
// host database and its -wal are byte-identical, no file appears), and
// shows each claim's owner, classification and a recovery command that
// names the right mode.
func TestDeviceStatusReadsTheRegistryAndChangesNothing(t *testing.T) {
	hostDir, liveHome, deadHome := hostWithClaims(t)
	env := map[string]string{"SIMLOCK_HOST_DIR": hostDir, "SIMLOCK_HOME": t.TempDir()}
	before := snapshotDir(t, hostDir)
	r := runCLI(t, env, false, "device", "status", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	after := snapshotDir(t, hostDir)
	if len(before) != len(after) {
		t.Fatalf("files: %d before, %d after", len(before), len(after))
	}
	for name, b := range before {
		if !bytes.Equal(b, after[name]) {
			t.Fatalf("%s changed", name)
		}
	}
	var out statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err, r.stdout)
	}
	got := map[string]claimView{}
	for _, v := range out.Claims {
		got[v.DeviceKey] = v
	}
	live, dead, bad := got["ios:udid:"+udidLive], got["ios:udid:"+udidOrphan], got["ios:udid:"+udidCorrupt]
	if live.Classification != "live-owner" || live.OwnerHome != liveHome || live.LeaseID != "lse_live" ||
		live.RecoveryCommand != "simlock --home "+liveHome+" device release ios:udid:"+udidLive {
		t.Errorf("live: %+v", live)
	}
	if dead.Classification != "orphaned" || dead.Liveness != "dead" || dead.OwnerHome != deadHome ||
		dead.RecoveryCommand != "simlock device release --stale ios:udid:"+udidOrphan {
		t.Errorf("orphaned: %+v", dead)
	}
	if bad.Classification != "inconsistent" || bad.RecoveryCommand != "simlock device release --force ios:udid:"+udidCorrupt {
		t.Errorf("inconsistent: %+v", bad)
	}
	// Selectors: the owner home (global --home) and a UDID.
	r = runCLI(t, env, false, "--home", deadHome, "device", "status", "--json")
	out = statusJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Claims) != 2 {
		t.Fatalf("--home %s: %v %s", deadHome, err, r.stdout)
	}
	r = runCLI(t, env, false, "device", "status", "--udid", strings.ToLower(udidLive), "--json")
	out = statusJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Claims) != 1 || out.Claims[0].DeviceKey != "ios:udid:"+udidLive {
		t.Fatalf("--udid: %v %s", err, r.stdout)
	}
	if r := runCLI(t, env, false, "device", "status", "--serial", "emulator-5554"); r.code == 0 {
		t.Fatal("a transport serial was accepted as a selector")
	}
}

func claimed(t *testing.T, hostDir, key string) bool {
	t.Helper()
	sts, err := hostreg.Inspect(context.Background(), hostDir, hostreg.SystemProber{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if string(st.Key) == key {
			return true
		}
	}
	return false
}

// --stale refuses a live owner with a non-retryable DEVICE_IN_USE carrying
// the recovery; it never frees a corrupt record, which only --force clears;
// and an orphan whose device cannot be shut down (no platform tools here)
// keeps its claim.
func TestDeviceReleaseStaleNeedsProofAndCleanup(t *testing.T) {
	hostDir, liveHome, _ := hostWithClaims(t)
	env := map[string]string{"SIMLOCK_HOST_DIR": hostDir, "SIMLOCK_HOME": t.TempDir(), "PATH": t.TempDir()}
	t.Setenv("PATH", env["PATH"]) // no xcrun: the orphan's device cannot be shut down
	r := runCLI(t, env, false, "device", "release", "--stale", "--json", "ios:udid:"+udidLive)
	var e struct {
		Error struct {
			Code      string         `json:"code"`
			Retryable bool           `json:"retryable"`
			Details   map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil {
		t.Fatal(err, r.stderr)
	}
	rec, _ := e.Error.Details["recovery"].(map[string]any)
	if r.code == 0 || e.Error.Code != "DEVICE_IN_USE" || e.Error.Retryable || e.Error.Details["classification"] != "live-owner" ||
		rec["command"] != "simlock --home "+liveHome+" device release ios:udid:"+udidLive {
		t.Fatalf("live owner: exit %d %s", r.code, r.stderr)
	}
	if !claimed(t, hostDir, "ios:udid:"+udidLive) {
		t.Fatal("--stale freed a live owner's claim")
	}

	if r := runCLI(t, env, false, "device", "release", "--stale", "ios:udid:"+udidCorrupt); r.code == 0 || !strings.Contains(r.stderr, "DEVICE_IN_USE") {
		t.Fatalf("corrupt record under --stale: exit %d %s", r.code, r.stderr)
	}
	if !claimed(t, hostDir, "ios:udid:"+udidCorrupt) {
		t.Fatal("--stale freed a corrupt record")
	}

	if r := runCLI(t, env, false, "device", "release", "--stale", "ios:udid:"+udidOrphan); r.code == 0 || !strings.Contains(r.stderr, "could not be shut down") {
		t.Fatalf("orphan without cleanup: exit %d %s", r.code, r.stderr)
	}
	if !claimed(t, hostDir, "ios:udid:"+udidOrphan) {
		t.Fatal("an orphan's claim was cleared without its device being shut down")
	}

	r = runCLI(t, env, false, "device", "release", "--force", "ios:udid:"+udidCorrupt)
	if r.code != 0 || claimed(t, hostDir, "ios:udid:"+udidCorrupt) || !strings.Contains(r.stdout, "not proven shut down") {
		t.Fatalf("--force on a corrupt record: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	// Without a flag, an orphan is refused with the --stale recovery.
	if r := runCLI(t, env, false, "device", "release", "ios:udid:"+udidOrphan); r.code == 0 || !strings.Contains(r.stderr, "--stale") {
		t.Fatalf("plain release of an orphan: exit %d %s", r.code, r.stderr)
	}
}

// Every recovery command the registry prints parses, word for word, as a
// `device release` of that key with the right flags: copied into a shell it
// runs the command it names.
func TestRecoveryCommandsParseAsDeviceRelease(t *testing.T) {
	key := hostreg.Key("android:avd:pixel_1:/Users/me/wt/a/.simlock/devices/android")
	owner := hostreg.Owner{Home: "/Users/me/wt/a/.simlock", PID: 4242, Start: "s"}
	for _, tc := range []struct {
		class       hostreg.Class
		flag, home  string
		wantCommand string
	}{
		{hostreg.ClassClaimed, "", owner.Home, "simlock --home /Users/me/wt/a/.simlock device release " + string(key)},
		{hostreg.ClassReleaseFailed, "", owner.Home, ""},
		{hostreg.ClassOrphaned, "stale", "", "simlock device release --stale " + string(key)},
		{hostreg.ClassInconsistent, "force", "", "simlock device release --force " + string(key)},
	} {
		st := hostreg.Status{Key: key, Class: tc.class, Claim: hostreg.Claim{Key: key, Owner: owner}}
		line := hostreg.RecoveryCommand(st)
		if tc.wantCommand != "" && line != tc.wantCommand {
			t.Errorf("%s: %q, want %q", tc.class, line, tc.wantCommand)
		}
		words := strings.Fields(line)
		if len(words) == 0 || words[0] != "simlock" {
			t.Fatalf("%s: %q", tc.class, line)
		}
		a := &app{env: OSEnv()}
		root := a.rootCmd()
		cmd, rest, err := root.Find(words[1:])
		if err != nil || cmd.CommandPath() != "simlock device release" {
			t.Fatalf("%s: %q finds %v (%v)", tc.class, line, cmd.CommandPath(), err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatalf("%s: %q: %v", tc.class, line, err)
		}
		if args := cmd.Flags().Args(); len(args) != 1 || args[0] != string(key) {
			t.Errorf("%s: positional %v", tc.class, args)
		}
		for _, f := range []string{"stale", "force"} {
			if got := cmd.Flags().Lookup(f).Changed; got != (f == tc.flag) {
				t.Errorf("%s: --%s set=%v", tc.class, f, got)
			}
		}
		if h := cmd.Flags().Lookup("home"); h.Changed != (tc.home != "") || h.Changed && h.Value.String() != tc.home {
			t.Errorf("%s: --home %q changed=%v", tc.class, h.Value.String(), h.Changed)
		}
	}
}
