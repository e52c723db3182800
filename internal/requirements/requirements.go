// Package requirements turns a session's device requirement into the one
// profile this host serves it with: the operator's `sessions` defaults map
// coarse hardware (an archetype, a model type) to an installed model and an
// omitted OS to a version, and the host's catalog says what is installed.
//
// It is pure: no clock, no processes, no files. The daemon builds the
// catalog view from its drivers' catalogs and calls Resolve; the answer is
// the same for the same inputs, every time.
package requirements

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/osversion"
)

// Platforms a requirement may name.
const (
	PlatformIOS     = "ios"
	PlatformAndroid = "android"
)

// Model namespaces of the `model` hardware kind.
const (
	// NamespaceProductModel is Apple's hardware model identifier
	// (iPhone17,1), as simctl's device types report it.
	NamespaceProductModel = "product-model"
	// NamespaceDeviceType is a simctl device type identifier
	// (com.apple.CoreSimulator.SimDeviceType.iPhone-16-Pro).
	NamespaceDeviceType = "device-type"
	// NamespaceAVDProfile is an avdmanager hardware profile id (pixel_9).
	NamespaceAVDProfile = "avd-profile"
	// NamespaceSimlockModel is the catalog model name simlock's own lease
	// requests take (an iOS device type name, an AVD profile id or name),
	// on either platform.
	NamespaceSimlockModel = "simlock-model"
)

// Android system image tags a session may resolve to, best first at one
// release: Google APIs before the Play Store image before plain AOSP.
var androidTags = []string{"google_apis", "google_apis_playstore", "default"}

// Catalog is the part of the host's catalog resolution reads.
type Catalog struct {
	IOS     IOSCatalog
	Android AndroidCatalog
}

// IOSCatalog is the installed simulator device types and runtimes.
type IOSCatalog struct {
	DeviceTypes []IOSDeviceType
	Runtimes    []IOSRuntime
}

// IOSDeviceType is one `simctl list devicetypes` entry.
type IOSDeviceType struct {
	Name       string
	Identifier string
	// ProductFamily is iPhone, iPad, ... (empty before Xcode 11).
	ProductFamily string
	// ProductModel is the hardware model identifier (iPhone17,1), empty
	// before Xcode 14.
	ProductModel string
	// MinOS and MaxOS bound the runtimes the type runs, when the listing
	// says (empty before Xcode 11; MaxOS empty when unbounded).
	MinOS, MaxOS string
}

// IOSRuntime is one `simctl list runtimes` entry.
type IOSRuntime struct {
	Version    string
	Identifier string
	Available  bool
	// SupportedTypes lists the device type identifiers the runtime runs;
	// empty when the listing does not say (then it runs any).
	SupportedTypes []string
}

// AndroidCatalog is the AVD hardware profiles and system images.
type AndroidCatalog struct {
	Profiles []AndroidProfile
	Images   []AndroidImage
}

// AndroidProfile is one `avdmanager list device` profile.
type AndroidProfile struct {
	ID   string
	Name string
}

// AndroidImage is one system image: its Android release version ("16",
// never the API level), tag, ABI and package path. Installed is false for
// an image sdkmanager could only download.
type AndroidImage struct {
	Release   string
	APILevel  int
	Tag       string
	ABI       string
	Package   string
	Installed bool
}

// Decode reads a requirement strictly (unknown keys, trailing data and a
// wrong shape are refused) and validates it. Every refusal is
// SESSION_CONFIG_INVALID naming the field at fault.
func Decode(data []byte) (contract.DeviceRequirement, error) {
	var req contract.DeviceRequirement
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return contract.DeviceRequirement{}, invalid("device: %v", err)
	}
	if dec.More() {
		return contract.DeviceRequirement{}, invalid("device: trailing data after the requirement")
	}
	if err := Validate(req); err != nil {
		return contract.DeviceRequirement{}, err
	}
	return req, nil
}

// Validate checks a requirement against the vocabulary, before any policy
// or catalog is read.
func Validate(req contract.DeviceRequirement) error {
	if req.SchemaVersion != 1 {
		return invalid("device.schemaVersion: %d is not 1", req.SchemaVersion)
	}
	switch req.Platform {
	case PlatformIOS, PlatformAndroid:
	default:
		return invalid("device.platform: %q is not ios or android", req.Platform)
	}
	if h := req.Hardware; h != nil {
		if err := validateHardware(req.Platform, *h); err != nil {
			return err
		}
	}
	if o := req.OS; o != nil {
		if err := validateOS("device.os", o.Kind, o.Version); err != nil {
			return err
		}
	}
	return nil
}

func validateHardware(platform string, h contract.HardwareRequirement) error {
	switch h.Kind {
	case contract.HardwareArchetype:
		if h.ModelType != nil || h.Model != nil {
			return invalid("device.hardware: kind archetype takes only archetype")
		}
		if !IsArchetype(h.Archetype) {
			return invalid("device.hardware.archetype: %q is not phone, tablet or foldable", h.Archetype)
		}
	case contract.HardwareModelType:
		if h.Archetype != "" || h.Model != nil {
			return invalid("device.hardware: kind modelType takes only modelType")
		}
		if h.ModelType == nil || strings.TrimSpace(h.ModelType.Family) == "" {
			return invalid("device.hardware.modelType.family is required")
		}
	case contract.HardwareModel:
		if h.Archetype != "" || h.ModelType != nil {
			return invalid("device.hardware: kind model takes only model")
		}
		if h.Model == nil || strings.TrimSpace(h.Model.Value) == "" {
			return invalid("device.hardware.model.value is required")
		}
		if !namespaceServes(h.Model.Namespace, platform) {
			return invalid("device.hardware.model.namespace: %q is not a %s namespace (%s)", h.Model.Namespace, platform, strings.Join(namespacesFor(platform), ", "))
		}
	default:
		return invalid("device.hardware.kind: %q is not archetype, modelType or model", h.Kind)
	}
	return nil
}

func validateOS(path, kind, version string) error {
	switch kind {
	case contract.OSOmitted, contract.OSLatest:
		if version != "" {
			return invalid("%s.version: kind %s takes no version", path, kind)
		}
	case contract.OSExact, contract.OSAtLeast:
		if _, ok := osversion.Parse(version); !ok {
			return invalid("%s.version: %q is not a version such as 26.5 or 16", path, version)
		}
	default:
		return invalid("%s.kind: %q is not omitted, exact, atLeast or latest", path, kind)
	}
	return nil
}

// IsArchetype reports whether a is phone, tablet or foldable.
func IsArchetype(a string) bool {
	switch a {
	case contract.ArchetypePhone, contract.ArchetypeTablet, contract.ArchetypeFoldable:
		return true
	}
	return false
}

func namespacesFor(platform string) []string {
	if platform == PlatformAndroid {
		return []string{NamespaceAVDProfile, NamespaceSimlockModel}
	}
	return []string{NamespaceProductModel, NamespaceDeviceType, NamespaceSimlockModel}
}

func namespaceServes(ns, platform string) bool {
	for _, n := range namespacesFor(platform) {
		if n == ns {
			return true
		}
	}
	return false
}

func invalid(format string, args ...any) *contract.Error {
	return contract.Errorf(contract.CodeSessionConfigInvalid, format, args...)
}

// refuse builds a resolution refusal with the advice for this case.
func refuse(code contract.Code, next, format string, args ...any) *contract.Error {
	e := contract.Errorf(code, format, args...)
	if next != "" {
		e = e.WithNext(next)
	}
	return e
}

// describe renders a model type for messages.
func describe(mt contract.ModelTypeRef) string {
	if mt.Variant == "" {
		return mt.Family
	}
	return fmt.Sprintf("%s/%s", mt.Family, mt.Variant)
}
