package hostreg

import (
	"errors"
	"testing"
)

func TestKeys(t *testing.T) {
	good := []struct {
		build func() (Key, error)
		want  Key
	}{
		{func() (Key, error) { return IOSSimulatorKey("abcdef01-2345-6789-abcd-ef0123456789") }, "ios:udid:ABCDEF01-2345-6789-ABCD-EF0123456789"},
		{func() (Key, error) { return AndroidAVDKey("/Users/me/.simlock/avd", "pixel_8.api-35") }, "android:avd:pixel_8.api-35:/Users/me/.simlock/avd"},
		{func() (Key, error) { return AndroidAVDKey("/roots/with:colon", "a") }, "android:avd:a:/roots/with:colon"},
		{func() (Key, error) { return AndroidUSBKey("R58M12ABCDE") }, "android:usb:R58M12ABCDE"},
	}
	for _, g := range good {
		k, err := g.build()
		if err != nil || k != g.want {
			t.Errorf("got %q, %v; want %q", k, err, g.want)
			continue
		}
		if back, err := ParseKey(string(k)); err != nil || back != k {
			t.Errorf("ParseKey(%q) = %q, %v", k, back, err)
		}
	}
	if p := Key("android:usb:X").Platform(); p != "android" {
		t.Errorf("platform %q", p)
	}

	bad := map[string]func() (Key, error){
		"emulator serial as USB":  func() (Key, error) { return AndroidUSBKey("emulator-5554") },
		"emulator serial as AVD":  func() (Key, error) { return AndroidAVDKey("/r", "emulator-5556") },
		"network serial":          func() (Key, error) { return AndroidUSBKey("192.168.1.20:5555") },
		"mdns serial":             func() (Key, error) { return AndroidUSBKey("adb-R58M._adb-tls-connect._tcp") },
		"empty serial":            func() (Key, error) { return AndroidUSBKey("") },
		"relative AVD root":       func() (Key, error) { return AndroidAVDKey("avd", "a") },
		"unclean AVD root":        func() (Key, error) { return AndroidAVDKey("/a/../b", "a") },
		"AVD name with colon":     func() (Key, error) { return AndroidAVDKey("/r", "a:b") },
		"UDID not a UUID":         func() (Key, error) { return IOSSimulatorKey("booted") },
		"parse: transport serial": func() (Key, error) { return ParseKey("emulator-5554") },
		"parse: lower-case UDID":  func() (Key, error) { return ParseKey("ios:udid:abcdef01-2345-6789-abcd-ef0123456789") },
		"parse: unknown platform": func() (Key, error) { return ParseKey("fake:dev1") },
		"parse: empty":            func() (Key, error) { return ParseKey("") },
	}
	for name, f := range bad {
		if k, err := f(); !errors.Is(err, ErrNotCanonical) {
			t.Errorf("%s: got %q, %v", name, k, err)
		}
	}
}
