package resources

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// wireKeys lists the keys a value of type t always carries on the wire:
// every field without omitempty, pointers included (they encode as null).
func wireKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, omitempty, ok := contract.WireName(t.Field(i))
		if ok && !omitempty {
			out = append(out, name)
		}
	}
	return out
}

func encode(t *testing.T, d contract.Device) map[string]any {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// requireKeys fails for every key of t missing from m (present as null is
// fine: that is the point).
func requireKeys(t *testing.T, where string, m map[string]any, typ reflect.Type) {
	t.Helper()
	for _, k := range wireKeys(typ) {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: key %q is missing (an unknown fact must be null, not absent)", where, k)
		}
	}
}

func requireNull(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("%q = %v (present %v), want null", k, v, ok)
		}
	}
}

func TestDescribeIOSDeviceStatesEveryKey(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := core.DeviceRecord{ID: "dev_1", Platform: "ios", Handle: "8C1F5A6E-0000-4000-8000-000000000001", Name: "simlock-1",
		Spec:  core.Spec{Platform: "ios", Model: "iPhone 16", ModelID: "com.apple.CoreSimulator.SimDeviceType.iPhone-16", OSVersion: "18.2", RuntimeID: "com.apple.CoreSimulator.SimRuntime.iOS-18-2"},
		Attrs: map[string]string{core.AttrUDID: "8C1F5A6E-0000-4000-8000-000000000001", "fact:modelIdentifier": "iPhone17,3", "fact:formFactor": "phone"},
		State: core.StateReady, StateSince: at, CreatedAt: at}
	m := encode(t, Describe(r, "", nil))
	requireKeys(t, "device", m, reflect.TypeFor[contract.Device]())
	rt, _ := m["runtime"].(map[string]any)
	requireKeys(t, "runtime", rt, reflect.TypeFor[contract.DeviceRuntime]())
	requireNull(t, m, "display", "image")
	requireNull(t, rt, "readiness", "lease", "locked", "orientation")
	if m["modelIdentifier"] != "iPhone17,3" || m["formFactor"] != "phone" || m["runtimeId"] != r.Spec.RuntimeID || m["platform"] != "ios" {
		t.Errorf("facts: %v", m)
	}
	if rt["lifecycle"] != "ready" {
		t.Errorf("runtime.lifecycle = %v", rt["lifecycle"])
	}
	if m["udid"] != r.Handle {
		t.Errorf("the existing fields changed: %v", m)
	}
	// Device resources: live state is grouped under runtime, and the
	// legacy aliases are gone. No top-level state or leaseId duplicates
	// runtime.lifecycle and runtime.lease.
	for _, alias := range []string{"state", "leaseId"} {
		if _, ok := m[alias]; ok {
			t.Errorf("top-level %q duplicates the runtime: %v", alias, m)
		}
	}

	// Observed and leased: the live state says so.
	run := core.RunRunning
	m = encode(t, Describe(r, "lease_1", &Observation{Run: run}))
	rt = m["runtime"].(map[string]any)
	if rt["readiness"] != "running" || rt["lease"] != "lease_1" {
		t.Errorf("runtime: %v", rt)
	}
	if _, ok := m["leaseId"]; ok {
		t.Errorf("a leased device carries a top-level leaseId: %v", m)
	}

	// A device whose driver stated nothing: null facts, unknown form factor.
	r.Attrs = map[string]string{core.AttrUDID: r.Handle}
	m = encode(t, Describe(r, "", nil))
	requireNull(t, m, "modelIdentifier", "display", "image")
	if m["formFactor"] != "unknown" {
		t.Errorf("formFactor = %v, want unknown", m["formFactor"])
	}
}

func TestDescribeAndroidDeviceStatesEveryKey(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := core.DeviceRecord{ID: "dev_2", Platform: "android", Handle: "simlock_ab12", Name: "simlock_ab12",
		Spec: core.Spec{Platform: "android", Model: "Pixel Fold", ModelID: "pixel_fold", OSVersion: "15", RuntimeID: "system-images;android-35;google_apis;x86_64"},
		Attrs: map[string]string{core.AttrSerial: "emulator-5554", "fact:modelIdentifier": "pixel_fold", "fact:formFactor": "foldable",
			"fact:display.widthPx": "2208", "fact:display.heightPx": "1840", "fact:display.density": "420",
			"fact:image.path": "system-images/android-35/google_apis/x86_64/", "fact:image.target": "android-35"},
		State: core.StateLeased, StateSince: at, CreatedAt: at}
	m := encode(t, Describe(r, "lease_9", nil))
	requireKeys(t, "device", m, reflect.TypeFor[contract.Device]())
	rt := m["runtime"].(map[string]any)
	requireKeys(t, "runtime", rt, reflect.TypeFor[contract.DeviceRuntime]())
	disp := m["display"].(map[string]any)
	requireKeys(t, "display", disp, reflect.TypeFor[contract.DeviceDisplay]())
	img := m["image"].(map[string]any)
	requireKeys(t, "image", img, reflect.TypeFor[contract.AndroidImage]())
	if disp["widthPx"] != 2208.0 || disp["heightPx"] != 1840.0 || disp["density"] != 420.0 {
		t.Errorf("display: %v", disp)
	}
	requireNull(t, disp, "scale")
	if img["path"] != "system-images/android-35/google_apis/x86_64/" || img["target"] != "android-35" {
		t.Errorf("image: %v", img)
	}
	requireNull(t, img, "basedOn")
	if m["formFactor"] != "foldable" || m["serial"] != "emulator-5554" || rt["lease"] != "lease_9" || rt["lifecycle"] != "leased" {
		t.Errorf("device: %v", m)
	}

	// A form factor outside the closed set is not repeated: unknown.
	r.Attrs["fact:formFactor"] = "watch"
	if m := encode(t, Describe(r, "", nil)); m["formFactor"] != "unknown" {
		t.Errorf("formFactor = %v, want unknown", m["formFactor"])
	}
	// An Android device with no stated image keeps the object, all null.
	r.Attrs = map[string]string{}
	m = encode(t, Describe(r, "", nil))
	img = m["image"].(map[string]any)
	requireNull(t, img, "path", "target", "basedOn")
	requireNull(t, m, "display")
}

// The live facts a listing read are the description's runtime.locked and
// runtime.orientation; an orientation outside the contract's two values
// is not repeated, and without an observation both stay null.
func TestDescribeStatesTheObservedLiveFacts(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := core.DeviceRecord{ID: "dev_3", Platform: "android", Handle: "simlock_cd34", State: core.StateLeased, StateSince: at, CreatedAt: at}
	unlocked := false
	obs := &Observation{Run: core.RunRunning, Live: core.LiveState{Locked: &unlocked, Orientation: contract.OrientationPortrait}}
	rt := encode(t, Describe(r, "lease_3", obs))["runtime"].(map[string]any)
	if rt["locked"] != false || rt["orientation"] != "portrait" {
		t.Errorf("runtime %v", rt)
	}
	obs.Live.Orientation = "sideways"
	rt = encode(t, Describe(r, "lease_3", obs))["runtime"].(map[string]any)
	requireNull(t, rt, "orientation")
	rt = encode(t, Describe(r, "lease_3", &Observation{Run: core.RunRunning}))["runtime"].(map[string]any)
	requireNull(t, rt, "locked", "orientation")
	rt = encode(t, Describe(r, "lease_3", nil))["runtime"].(map[string]any)
	requireNull(t, rt, "readiness", "locked", "orientation")
}
