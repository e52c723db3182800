package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// ResourceState is what a resource group was observed (or asked) to be.
// A request may only ask for enabled or disabled; the other two are
// observations: unsupported (the device cannot provide or control the
// group) and unknown (the evidence is missing, mixed or failed).
type ResourceState string

const (
	ResourceEnabled     ResourceState = "enabled"
	ResourceDisabled    ResourceState = "disabled"
	ResourceUnsupported ResourceState = "unsupported"
	ResourceUnknown     ResourceState = "unknown"
)

// ResourceGroup describes one logical resource group a caller may name.
// Native service names (launchd labels, packages, settings) never appear
// on the wire as inputs: they stay inside the drivers.
type ResourceGroup struct {
	Name string `json:"name"`
	// Platforms lists where the group exists ("ios", "android").
	Platforms []string `json:"platforms"`
	Doc       string   `json:"doc"`
}

// ResourceGroups is the closed catalogue of groups, in a fixed order: the
// six common groups, then the iOS groups, then the Android ones. Within a
// platform the groups of the reference's group table come first and the
// rest follow the reference's list of that platform's controls (ADR 0089).
func ResourceGroups() []ResourceGroup {
	both := []string{"ios", "android"}
	ios := []string{"ios"}
	android := []string{"android"}
	return []ResourceGroup{
		{"backgroundSync", both, "OS-scheduled background refresh and sync of apps (not the platform's cloud or account services)"},
		{"searchIndexing", both, "the system's search indexes (not an app's own index)"},
		{"animations", both, "system UI transition animations (not animation an app draws itself)"},
		{"wallpaperRendering", both, "system wallpaper rendering"},
		{"widgets", both, "app and system widget refresh"},
		{"liveActivities", both, "Live Activities and Dynamic Island updates"},

		{"icloudSync", ios, "iCloud data synchronization, photo sync included"},
		{"photoAnalysis", ios, "background analysis of the photo library"},
		{"healthServices", ios, "HealthKit background services"},
		{"homeServices", ios, "HomeKit background services"},
		{"fitnessServices", ios, "Fitness background services"},
		{"familyServices", ios, "Family Sharing and its approval requests (Ask to Buy)"},
		{"screenTime", ios, "Screen Time and the usage tracking behind it"},
		{"newsServices", ios, "Apple News content services"},
		{"weatherServices", ios, "Weather content services"},
		{"tipsServices", ios, "Tips content services"},
		{"gameServices", ios, "Game Center and game save sync"},
		{"mapsSync", ios, "Maps synchronization and suggested destinations"},
		{"advertising", ios, "Apple's promoted content (not ad privacy settings)"},
		{"diagnosticReporting", ios, "selected diagnostic reporting"},
		{"assistantSuggestions", ios, "Siri suggestion background services"},
		{"appleIntelligence", ios, "selected Apple Intelligence background services (not shared model or language services)"},
		{"appStoreServices", ios, "App Store installs and updates (not StoreKit payments)"},
		{"appleMediaSync", ios, "the Apple media library and its subscriptions"},
		{"mailServices", ios, "the local Mail service"},
		{"calendarServices", ios, "the local Calendar service"},
		{"reminderServices", ios, "the local Reminders service"},
		{"personalDataSync", ios, "Exchange, CalDAV and CardDAV account sync"},
		{"safariSync", ios, "Safari history and bookmark sync"},
		{"icloudSettingsSync", ios, "sync of selected system settings through iCloud"},
		{"messagingMaintenance", ios, "clean-up of old Messages history, transfers of Messages attachments, and the store of FaceTime messages"},
		{"watchConnectivity", ios, "the connection to a paired Apple Watch"},
		{"carPlay", ios, "CarPlay"},
		{"tvRemote", ios, "the Apple TV remote"},
		{"findMy", ios, "Find My"},
		{"continuity", ios, "cross-device Continuity (not share sheets, stickers or avatars)"},
		{"walletServices", ios, "Wallet, payments and digital identity (StoreKit payment sheets may depend on it)"},
		{"businessServices", ios, "Apple business messaging"},

		{"googlePlayServices", android, "Google Play services background infrastructure (account sync, push)"},
		{"screensavers", android, "dream (screensaver) activation"},
		{"backup", android, "Backup Manager for the current user"},
		{"mailApp", android, "the optional system mail app"},
		{"calendarApp", android, "the optional system calendar app"},
		{"contactsApp", android, "the optional system contacts app (not the contacts provider)"},
		{"mapsApp", android, "the optional system maps app"},
		{"videoApp", android, "the optional system video app"},
		{"musicApp", android, "the optional system music app"},
		{"photosApp", android, "the optional system photos app"},
		{"assistantApp", android, "the optional assistant app"},
		{"digitalWellbeing", android, "the Digital Wellbeing app"},
		{"printing", android, "the optional print services"},
		{"accessibilityApps", android, "the optional accessibility suite (enabled services stay on)"},
		{"textToSpeech", android, "the optional text-to-speech engines"},
		{"wallpaperApps", android, "the optional wallpaper pickers (not wallpaper rendering)"},
		{"healthConnect", android, "Health Connect"},
		{"adServices", android, "the ad services (Privacy Sandbox) app"},
		{"onDevicePersonalization", android, "the on-device personalization services app"},
		{"storeApp", android, "the Play Store app"},
		{"dialerApp", android, "the optional dialer app (the default dialer stays on)"},
		{"messagesApp", android, "the optional messaging app (the default SMS app stays on)"},
		{"googleServicesFramework", android, "the Google Services Framework (device check-in, older push)"},
	}
}

// LookupResourceGroup finds a group by name.
func LookupResourceGroup(name string) (ResourceGroup, bool) {
	for _, g := range ResourceGroups() {
		if g.Name == name {
			return g, true
		}
	}
	return ResourceGroup{}, false
}

// ResourceGroupsFor lists the names of platform's groups, in catalogue order.
func ResourceGroupsFor(platform string) []string {
	var out []string
	for _, g := range ResourceGroups() {
		if slices.Contains(g.Platforms, platform) {
			out = append(out, g.Name)
		}
	}
	return out
}

// ValidateResourceRequest checks a requested resource map for platform
// ("" accepts a group of either platform): it must be non-empty, name only
// catalogued groups and ask only enabled or disabled. A raw service name or
// a profile name is an unknown key, so it is refused the same way.
func ValidateResourceRequest(platform string, req map[string]ResourceState) error {
	if len(req) == 0 {
		return Errorf(CodeBadRequest, "resources is empty; name at least one group").
			WithNext("pass a map such as {\"animations\": \"disabled\"}; `simlock resources groups` lists the groups")
	}
	for _, name := range sortedKeys(req) {
		g, ok := LookupResourceGroup(name)
		if !ok {
			return Errorf(CodeBadRequest, "resources: %q is not a resource group", name).
				WithDetails("field", "resources."+name).
				WithNext("use a group name from `simlock resources groups`; raw service names and profile names are not accepted")
		}
		if platform != "" && !slices.Contains(g.Platforms, platform) {
			return Errorf(CodeBadRequest, "resources: %q is not a %s group", name, platform).
				WithDetails("field", "resources."+name, "platforms", g.Platforms)
		}
		if s := req[name]; s != ResourceEnabled && s != ResourceDisabled {
			return Errorf(CodeBadRequest, "resources.%s: %q is not enabled or disabled", name, s).
				WithDetails("field", "resources."+name)
		}
	}
	return nil
}

// ResourceFingerprint is the content fingerprint of a requested resource
// map: a workload profile has no name, it is its map. Equal maps have equal
// fingerprints whatever their key order; an empty map has none ("").
func ResourceFingerprint(req map[string]ResourceState) string {
	if len(req) == 0 {
		return ""
	}
	h := sha256.New()
	for _, k := range sortedKeys(req) {
		fmt.Fprintf(h, "%s=%s\n", k, req[k])
	}
	return "res-" + hex.EncodeToString(h.Sum(nil))[:16]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ResourceObservation is one group's observed state, with why when it is
// not a verified enabled or disabled.
type ResourceObservation struct {
	State  ResourceState `json:"state"`
	Reason string        `json:"reason,omitempty"`
}

// ServiceEvidence is what one native service (a launchd label, a package, a
// setting) was observed to be; a group's state is derived from the
// evidence of every service in it.
type ServiceEvidence struct {
	Group string `json:"group"`
	// Service is the native name, reported for evidence only.
	Service  string        `json:"service"`
	Observed ResourceState `json:"observed"`
	// Written is true when simlock issued a native write for it in this call.
	Written bool   `json:"written,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// ResourceDrift is a requested map compared with an independent
// observation: each list names groups.
type ResourceDrift struct {
	// MissingRequested: the observed state contradicts the request.
	MissingRequested []string `json:"missingRequested"`
	// OwnedExtra: an override simlock wrote, outside the request, still in effect.
	OwnedExtra []string `json:"ownedExtra"`
	// Unsupported: the device cannot provide or control the group.
	Unsupported []string `json:"unsupported"`
	// CommandFailure: the evidence is unknown, mixed or missing.
	CommandFailure []string `json:"commandFailure"`
}

// Empty reports whether there is no drift at all.
func (d ResourceDrift) Empty() bool {
	return len(d.MissingRequested)+len(d.OwnedExtra)+len(d.Unsupported)+len(d.CommandFailure) == 0
}

// ResourceVerificationCurrentBoot: results prove state for the current boot
// only; overrides may or may not survive a reboot.
const ResourceVerificationCurrentBoot = "current_boot"

// ResourceResult is the answer of resources.get, resources.set and
// resources.reconcile, and of a lease request's resources step.
type ResourceResult struct {
	DeviceID string `json:"deviceId"`
	Platform string `json:"platform"`
	// Requested is the map the caller asked for (absent for a read).
	Requested map[string]ResourceState `json:"requested,omitempty"`
	// Fingerprint identifies Requested as a workload profile.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Resources is the observed state of every requested group (of every
	// platform group for a read). It is never copied from Requested.
	Resources map[string]ResourceObservation `json:"resources"`
	// Observed is the independent full-platform snapshot taken after a
	// write, unrequested groups included.
	Observed map[string]ResourceObservation `json:"observed,omitempty"`
	Services []ServiceEvidence              `json:"services"`
	// Changed lists the groups for which a native write was issued.
	Changed      []string `json:"changed"`
	Verification string   `json:"verification"`
	// Success is true only when every requested group was observed in the
	// requested state (for reconcile: and no owned extra remains).
	Success bool `json:"success"`
	// ObservationContradictions lists groups the after-write snapshot saw
	// in the opposite state to the one requested.
	ObservationContradictions []string `json:"observationContradictions,omitempty"`
	// Drift is set by resources.reconcile (before any repair, and after it
	// as FinalDrift).
	Drift      *ResourceDrift `json:"drift,omitempty"`
	FinalDrift *ResourceDrift `json:"finalDrift,omitempty"`
	// Restore (Android) undoes exactly what this call changed, on the same
	// serial, boot and user only.
	Restore *RestoreReceipt `json:"restore,omitempty"`
}

// RestoreReceipt is an Android restore receipt. Its entries are opaque to
// clients: pass the receipt back whole to resources.set {restore}.
type RestoreReceipt struct {
	Serial string `json:"serial"`
	BootID string `json:"bootId"`
	User   int    `json:"user"`
	// Incarnation names the device incarnation the receipt was issued in:
	// a snapshot restore brings the guest's old boot id back, so the boot
	// id alone cannot tell a restored device from the one that issued it.
	Incarnation string `json:"incarnation"`
	// Entries are the prior native states, in the order to restore them.
	Entries []RestoreEntry `json:"entries"`
}

// RestoreEntry is one prior native state: a setting's value (Absent when
// it had none), a package's enabled state (Value: default, enabled,
// disabled or disabled-user) or the Backup Manager switch (Enabled).
type RestoreEntry struct {
	Kind string `json:"kind"` // "setting", "package" or "backup"
	// Namespace is the settings namespace (global, system, secure).
	Namespace string `json:"namespace,omitempty"`
	Key       string `json:"key"`
	Value     string `json:"value,omitempty" contract:"freeform"`
	Absent    bool   `json:"absent,omitempty"`
	Enabled   *bool  `json:"enabled,omitempty"`
}

type ResourcesGetIn struct {
	LeaseID string `json:"leaseId"`
}

type ResourcesSetIn struct {
	LeaseID string `json:"leaseId"`
	// Resources is a partial map of group to enabled or disabled; omitted
	// groups are left untouched. Exactly one of Resources and Restore.
	Resources map[string]ResourceState `json:"resources,omitempty"`
	// Restore is a receipt from an earlier Android answer.
	Restore *RestoreReceipt `json:"restore,omitempty"`
	// TimeoutMs bounds the whole call (default 5 minutes).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

type ResourcesReconcileIn struct {
	LeaseID   string                   `json:"leaseId"`
	Resources map[string]ResourceState `json:"resources"`
	// Repair re-applies the drifted requested groups, then observes again.
	Repair bool `json:"repair,omitempty"`
	// ReleaseOwnedExtras also re-enables overrides simlock wrote outside
	// the requested map.
	ReleaseOwnedExtras bool  `json:"releaseOwnedExtras,omitempty"`
	TimeoutMs          int64 `json:"timeoutMs,omitempty"`
}

// AndroidHardware is the emulator hardware a lease request may ask for,
// written to the AVD's configuration before boot. Zero values are unset.
type AndroidHardware struct {
	MemoryMB      int    `json:"memoryMb,omitempty"`
	CPUCores      int    `json:"cpuCores,omitempty"`
	GPUMode       string `json:"gpuMode,omitempty"` // auto, host, software, swiftshader, lavapipe, swangle
	ScreenWidth   int    `json:"screenWidth,omitempty"`
	ScreenHeight  int    `json:"screenHeight,omitempty"`
	ScreenDensity int    `json:"screenDensity,omitempty"`
	CameraFront   string `json:"cameraFront,omitempty"` // none, emulated
	CameraBack    string `json:"cameraBack,omitempty"`
	AudioInput    *bool  `json:"audioInput,omitempty"`
	AudioOutput   *bool  `json:"audioOutput,omitempty"`
}

// GPUModes lists the accepted AndroidHardware.GPUMode values.
func GPUModes() []string {
	return []string{"auto", "host", "software", "swiftshader", "lavapipe", "swangle"}
}

// Validate checks the enumerations and bounds the JSON types cannot.
func (h AndroidHardware) Validate() error {
	if h.GPUMode != "" && !slices.Contains(GPUModes(), h.GPUMode) {
		return Errorf(CodeBadRequest, "hardware.gpuMode: %q is not one of %v", h.GPUMode, GPUModes()).WithDetails("field", "hardware.gpuMode")
	}
	for field, v := range map[string]string{"cameraFront": h.CameraFront, "cameraBack": h.CameraBack} {
		if v != "" && v != "none" && v != "emulated" {
			return Errorf(CodeBadRequest, "hardware.%s: %q is not none or emulated", field, v).WithDetails("field", "hardware."+field)
		}
	}
	for field, v := range map[string]int{"memoryMb": h.MemoryMB, "cpuCores": h.CPUCores, "screenWidth": h.ScreenWidth,
		"screenHeight": h.ScreenHeight, "screenDensity": h.ScreenDensity} {
		if v < 0 {
			return Errorf(CodeBadRequest, "hardware.%s must not be negative", field).WithDetails("field", "hardware."+field)
		}
	}
	if h.MemoryMB != 0 && h.MemoryMB < 1024 {
		return Errorf(CodeBadRequest, "hardware.memoryMb: %d is below 1024", h.MemoryMB).WithDetails("field", "hardware.memoryMb")
	}
	return nil
}

// Fingerprint identifies the hardware request as part of a spec ("" when
// nothing is set), so a warm device only serves a request for the same
// hardware.
func (h AndroidHardware) Fingerprint() string {
	b, _ := json.Marshal(h)
	if string(b) == "{}" {
		return ""
	}
	sum := sha256.Sum256(b)
	return "hw-" + hex.EncodeToString(sum[:])[:16]
}
