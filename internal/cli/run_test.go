package cli

import (
	"errors"
	"os/exec"
	"slices"
	"testing"

	"github.com/simlock/simlock/contract"
)

func iosLease() contract.Lease {
	return contract.Lease{LeaseID: "lse_1", DeviceID: "dev_1", Platform: "ios",
		Device: &contract.Device{UDID: "U-1", DeviceSet: "/set"}}
}

func TestRunSubstitutesThePlaceholders(t *testing.T) {
	got, err := contract.ExpandPlaceholders([]string{"id={udid}", "{deviceSet}/x", "{leaseId}", "{other}", "{udid}{udid}"}, contract.LeaseValues(iosLease()))
	want := []string{"id=U-1", "/set/x", "lse_1", "{other}", "U-1U-1"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q (%v), want %q", got, err, want)
	}
	// The shared expansion refuses what run's early check refuses.
	if _, err := contract.ExpandPlaceholders([]string{"{serial}"}, contract.LeaseValues(iosLease())); contract.AsError(err).Code != contract.CodeBadRequest {
		t.Fatalf("{serial} on iOS: %v", err)
	}
}

func TestRunRefusesAPlaceholderThePlatformLacks(t *testing.T) {
	for _, tc := range []struct {
		platform string
		args     []string
		ok       bool
	}{
		{"ios", []string{"-destination", "id={udid}"}, true},
		{"ios", []string{"{leaseId}"}, true},
		{"ios", []string{"adb", "-s", "{serial}"}, false},
		{"android", []string{"-s", "{serial}"}, true},
		{"android", []string{"--set", "{deviceSet}"}, false},
		{"android", []string{"{udid}"}, false},
	} {
		err := checkPlaceholders(tc.platform, tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%s %q: %v", tc.platform, tc.args, err)
		}
		if err != nil && contract.AsError(err).Code != contract.CodeBadRequest {
			t.Errorf("%s %q: code %v", tc.platform, tc.args, err)
		}
	}
}

// The child's environment names the device; the device's own env comes
// last, so it wins over what this process inherited.
func TestRunEnvironment(t *testing.T) {
	a := &app{env: Env{Environ: []string{"PATH=/bin", "ANDROID_SERIAL=stale"}, Getenv: func(string) string { return "" }}, home: "/h"}
	l := contract.Lease{LeaseID: "lse_2", DeviceID: "dev_2", Platform: "android",
		Device: &contract.Device{Serial: "emulator-5700", Env: map[string]string{"ANDROID_ADB_SERVER_PORT": "5137", "ANDROID_SERIAL": "emulator-5700"}}}
	env := a.runEnv(l)
	last := map[string]string{}
	for _, kv := range env {
		k, v, _ := cutEnv(kv)
		last[k] = v
	}
	for k, v := range map[string]string{"PATH": "/bin", "SIMLOCK_HOME": "/h", "SIMLOCK_LEASE_ID": "lse_2",
		"SIMLOCK_DEVICE_ID": "dev_2", "ANDROID_SERIAL": "emulator-5700", "ANDROID_ADB_SERVER_PORT": "5137"} {
		if last[k] != v {
			t.Errorf("%s=%q, want %q", k, last[k], v)
		}
	}
	if _, ok := last["SIMLOCK_UDID"]; ok {
		t.Error("an Android lease sets SIMLOCK_UDID")
	}
	// The child derives its principal itself; pinning one would also
	// make it the child's requester, one lease at a time.
	if p, ok := last["SIMLOCK_PRINCIPAL"]; ok {
		t.Errorf("the child is given SIMLOCK_PRINCIPAL=%s", p)
	}
}

func cutEnv(kv string) (string, string, bool) {
	for i := range kv {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

func TestRunExitsAsTheChildDid(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	} {
		err := childExit(exec.Command("sh", "-c", tc.script).Run())
		var ee exitError
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%q: %v", tc.script, err)
		case tc.code != 0 && (!errors.As(err, &ee) || ee.code != tc.code):
			t.Errorf("%q: %v, want exit %d", tc.script, err, tc.code)
		}
	}
}
