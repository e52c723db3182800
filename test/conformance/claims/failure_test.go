package claims

import (
	"testing"

	"github.com/simlock/simlock/test/harness"
)

// Reference §11 (local open): a failure after the claim was taken cleans
// up and gives the claim back. simlock splits the case (ADR 0022): a
// device whose creation failed never got a key, and leaves no claim; a
// device that exists but failed to boot is in an unknown state, so its
// claim is kept (fail closed) while it sits in quarantine, until a later
// shutdown or destroy settles it. Either way no device is left free and
// half-made.
func TestClaimsAFailedOpenLeavesNoHalfMadeDeviceFree(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/11.2")
	t.Run("create", func(t *testing.T) {
		t.Parallel()
		w := harness.NewWorld(t, quietConfig)
		w.Setenv("SIMLOCK_SIMSDK_FAULTS", "create-fail")
		if r := w.Run("lease", "--platform", "ios", "--no-wait", "--detach", "--json"); r.Code == 0 {
			t.Fatalf("a lease whose device cannot be created was granted: %s", r.Stdout)
		}
		if cs := claims(w); len(cs) != 0 {
			t.Fatalf("a device that was never created left claims: %+v", cs)
		}
	})
	t.Run("boot", func(t *testing.T) {
		t.Parallel()
		w := harness.NewWorld(t, quietConfig)
		w.Setenv("SIMLOCK_SIMSDK_FAULTS", "boot-fail")
		ref, _ := w.Refused("lease", "--platform", "ios", "--detach", "--timeout", "20s", "--json")
		if ref.Error.Code != "DEVICE_FAILED" {
			t.Fatalf("a lease whose device cannot boot: %+v", ref.Error)
		}
		var st struct {
			Devices []struct {
				UDID    string
				Runtime struct{ Lifecycle string }
			}
		}
		w.JSON(&st, "status", "--json")
		if len(st.Devices) != 1 || st.Devices[0].Runtime.Lifecycle != "quarantined" {
			t.Fatalf("the device that failed to boot: %+v", st.Devices)
		}
		cs := claims(w)
		if len(cs) != 1 || cs[0].DeviceKey != "ios:udid:"+st.Devices[0].UDID || cs[0].Kind != "transient" || cs[0].Classification != "live-owner" {
			t.Fatalf("the quarantined device's claim: %+v", cs)
		}
	})
}
