package hostreg

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Key is a canonical device key: the platform plus an identity that stays
// the same for the device's whole life and names it the same way from every
// home. Transport names (emulator-5554, host:port) are not identities: the
// same emulator gets another one on every boot, and two homes may hand the
// same one to different devices. Build keys with the constructors below;
// ParseKey accepts exactly what they produce.
//
// Forms:
//
//	ios:udid:<UUID, upper case>                 an iOS Simulator
//	android:avd:<avd name>:<absolute AVD root>  an emulator, by AVD and root
//	android:usb:<serial>                        a USB-attached device
type Key string

// ErrNotCanonical is wrapped by every key constructor's refusal.
var ErrNotCanonical = errors.New("hostreg: not a canonical device key")

var (
	uuidRe       = regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$`)
	avdNameRe    = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	usbSerialRe  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	transientRe  = regexp.MustCompile(`^emulator-[0-9]+$`)
	errTransport = "is a transport serial, not a stable identity"
)

// IOSSimulatorKey keys a simulator by its UDID (case-insensitive input).
func IOSSimulatorKey(udid string) (Key, error) {
	u := strings.ToUpper(udid)
	if !uuidRe.MatchString(u) {
		return "", fmt.Errorf("%w: simulator UDID %q is not a UUID", ErrNotCanonical, udid)
	}
	return Key("ios:udid:" + u), nil
}

// AndroidAVDKey keys an emulator by its AVD name and the absolute AVD
// directory it lives in, so the same name under two roots are two devices.
func AndroidAVDKey(root, avd string) (Key, error) {
	if !avdNameRe.MatchString(avd) {
		return "", fmt.Errorf("%w: AVD name %q", ErrNotCanonical, avd)
	}
	if transientRe.MatchString(avd) {
		return "", fmt.Errorf("%w: %q %s", ErrNotCanonical, avd, errTransport)
	}
	if !filepath.IsAbs(root) || filepath.Clean(root) != root || strings.ContainsAny(root, "\x00\n") {
		return "", fmt.Errorf("%w: AVD root %q must be a clean absolute path", ErrNotCanonical, root)
	}
	return Key("android:avd:" + avd + ":" + root), nil
}

// AndroidUSBKey keys a USB device by its hardware serial. Emulator console
// serials and network (host:port) serials are refused: they name a
// connection, not a device.
func AndroidUSBKey(serial string) (Key, error) {
	if transientRe.MatchString(serial) {
		return "", fmt.Errorf("%w: %q %s", ErrNotCanonical, serial, errTransport)
	}
	if strings.Contains(serial, "._") { // adb-<serial>-<id>._adb-tls-connect._tcp
		return "", fmt.Errorf("%w: %q is an mDNS service name, a transport", ErrNotCanonical, serial)
	}
	if !usbSerialRe.MatchString(serial) {
		return "", fmt.Errorf("%w: USB serial %q (a host:port serial is a transport, not a device)", ErrNotCanonical, serial)
	}
	return Key("android:usb:" + serial), nil
}

// ParseKey validates s as a canonical key.
func ParseKey(s string) (Key, error) {
	platform, rest, _ := strings.Cut(s, ":")
	form, id, ok := strings.Cut(rest, ":")
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrNotCanonical, s)
	}
	var k Key
	var err error
	switch platform + ":" + form {
	case "ios:udid":
		k, err = IOSSimulatorKey(id)
	case "android:avd":
		name, root, _ := strings.Cut(id, ":")
		k, err = AndroidAVDKey(root, name)
	case "android:usb":
		k, err = AndroidUSBKey(id)
	default:
		return "", fmt.Errorf("%w: %q has no known platform form", ErrNotCanonical, s)
	}
	if err != nil {
		return "", err
	}
	if string(k) != s { // e.g. a lower-case UDID: one device, one spelling
		return "", fmt.Errorf("%w: %q (canonical: %q)", ErrNotCanonical, s, k)
	}
	return k, nil
}

// Platform is the key's platform: "ios" or "android".
func (k Key) Platform() string {
	p, _, _ := strings.Cut(string(k), ":")
	return p
}
