package contract

import (
	"slices"
	"testing"
)

// One expansion serves simlock run and device.exec: the lease's values
// replace their placeholders, a placeholder of the other platform is
// refused, and a partial expansion (a gateway's) leaves the rest alone.
func TestExpandPlaceholders(t *testing.T) {
	ios := LeaseValues(Lease{LeaseID: "lse_1", Platform: "ios", Device: &Device{UDID: "U-1", DeviceSet: "/set"}})
	got, err := ExpandPlaceholders([]string{"id={udid}", "{deviceSet}/x", "{leaseId}", "{other}", "{udid}{udid}", "{upload:a.apk}"}, ios)
	if want := []string{"id=U-1", "/set/x", "lse_1", "{other}", "U-1U-1", "{upload:a.apk}"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q (%v), want %q", got, err, want)
	}
	if _, err := ExpandPlaceholders([]string{"-s", "{serial}"}, ios); AsError(err) == nil || AsError(err).Code != CodeBadRequest {
		t.Fatalf("{serial} on iOS: %v", err)
	}
	android := LeaseValues(Lease{LeaseID: "lse_2", Device: &Device{Platform: "android", Serial: "emulator-5554"}})
	if got, err := ExpandPlaceholders([]string{"-s", "{serial}"}, android); err != nil || got[1] != "emulator-5554" {
		t.Fatalf("android: %q %v", got, err)
	}
	if _, err := ExpandPlaceholders([]string{"{udid}"}, android); err == nil {
		t.Fatal("{udid} on Android was accepted")
	}
	// A gateway names only the fleet lease id.
	got, err = ExpandPlaceholders([]string{"{leaseId}", "{udid}", "{serial}"}, PlaceholderValues{LeaseID: "w1.lse_3"})
	if want := []string{"w1.lse_3", "{udid}", "{serial}"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("partial: %q %v", got, err)
	}
	if got, err := ExpandPlaceholders(nil, ios); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("no args: %#v %v", got, err)
	}
}
