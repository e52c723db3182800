package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/ports"
)

// SpecRequest is what a lease request asks a driver to resolve.
type SpecRequest struct {
	Platform  string
	Model     string // empty: the driver's default model
	OSVersion string // empty: the newest installed OS that can run Model
	// AllowDownload is true only for an explicit lease request whose
	// download permission the daemon's policy granted.
	AllowDownload bool
	RequesterID   string
	// Resources is the lease request's resource profile, applied after
	// boot and before the grant (ResourceController).
	Resources map[string]contract.ResourceState
	// Hardware is the device hardware the request asks for, handed to the
	// driver unread (HardwareProfile); nil asks for none.
	Hardware HardwareProfile
}

// HardwareProfile is a request's device hardware, opaque to the core: the
// core only fingerprints it into its spec's key (ProfileOf) and hands it
// to the driver, which alone reads it and refuses the spec when it cannot
// honour it.
type HardwareProfile interface {
	Fingerprint() string
}

// Spec is a concrete device specification a driver resolved. Two devices with
// the same Key are interchangeable for a lease.
type Spec struct {
	Platform  string `json:"platform"`
	Model     string `json:"model"`     // display name, e.g. "iPhone 16"
	ModelID   string `json:"modelId"`   // device type / profile identifier
	OSVersion string `json:"osVersion"` // e.g. "18.0", "15"
	RuntimeID string `json:"runtimeId"` // simctl runtime id / system image package
	// RAMBytes is what one running device of this spec costs, when the
	// driver knows it (an AVD's hw.ramSize); zero: the platform's figure.
	// It is not part of Key: it prices a device, it does not distinguish it.
	RAMBytes uint64          `json:"ramBytes,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	// Resources is the resource profile a lease request asked for: the core
	// applies it after every boot and before every grant of a device of
	// this spec, so a warm device keeps it across reclaims.
	Resources map[string]contract.ResourceState `json:"resources,omitempty"`
	// Profile fingerprints Resources and the Android hardware request
	// (ProfileOf). It is part of Key only when set, so a spec without a
	// profile keeps the key existing records were stored under.
	Profile string `json:"profile,omitempty"`
	// NameHint, when set, is the name a new device should get (a managed
	// slot's device, slotbook.go). It only labels the device for people;
	// never stored with the spec and not part of Key.
	NameHint string `json:"-"`
}

// Key identifies the interchangeability class of a spec.
func (s Spec) Key() string {
	k := s.Platform + "|" + s.ModelID + "|" + s.OSVersion
	if s.Profile != "" {
		k += "|" + s.Profile
	}
	return k
}

// Well-known Attrs keys a driver may set on a provisioned device. The core
// stores and forwards them without interpreting them.
const (
	AttrUDID      = "udid"
	AttrSerial    = "serial"
	AttrDeviceSet = "deviceSet"
	// AttrEnvPrefix marks environment variables a lease holder needs,
	// e.g. "env:ANDROID_ADB_SERVER_PORT".
	AttrEnvPrefix = "env:"
	// AttrFactPrefix marks a static fact the driver could state about the
	// device (docs/adr/0039): "fact:formFactor", "fact:display.widthPx".
	// A fact the driver could not state is absent, and reads as null.
	AttrFactPrefix = "fact:"
)

// Fact names a driver may state under AttrFactPrefix.
const (
	FactModelIdentifier = "modelIdentifier"
	FactFormFactor      = "formFactor"
	FactDisplayWidthPx  = "display.widthPx"
	FactDisplayHeightPx = "display.heightPx"
	FactDisplayDensity  = "display.density"
	FactDisplayScale    = "display.scale"
	FactImagePath       = "image.path"
	FactImageTarget     = "image.target"
	FactImageBasedOn    = "image.basedOn"
)

// Provisioned is what a driver reports about a device it created.
type Provisioned struct {
	Handle    string            // opaque platform id (UDID, AVD name)
	Name      string            // human-readable device name
	Attrs     map[string]string // forwarded to clients, see Attr* keys
	Simulated bool              // served by the simulated SDK
	Data      json.RawMessage   // driver-private, handed back unread
	// RAMBytes is the new device's own running footprint when the driver
	// learns it only once the device exists (an AVD's hw.ramSize); 0 keeps
	// the figure the resolved spec carried.
	RAMBytes uint64
}

// DeviceRef is how the core names a device to its driver.
type DeviceRef struct {
	ID     string
	Handle string
	Name   string
	Spec   Spec
	Attrs  map[string]string
	Data   json.RawMessage
}

// RunState is a three-valued observation of a device process.
type RunState string

const (
	RunRunning       RunState = "running"
	RunStopped       RunState = "stopped"
	RunTransitioning RunState = "transitioning" // booting or shutting down: never evidence of a crash
)

// Observed is one device found inside a driver's root.
type Observed struct {
	Handle string
	Name   string
	Run    RunState
	// MarkOK reports the provenance mark check when the driver could read it
	// (nil: not checked, e.g. device not running).
	MarkOK *bool
}

// DriverOp names a driver operation for Estimate.
type DriverOp string

const (
	OpProvision DriverOp = "provision"
	OpBoot      DriverOp = "boot"
	OpReclaim   DriverOp = "reclaim"
	OpShutdown  DriverOp = "shutdown"
	OpDestroy   DriverOp = "destroy"
)

// Catalog is what a driver can serve.
type Catalog struct {
	Models   []CatalogModel
	Runtimes []CatalogRuntime
}

type CatalogModel struct {
	Name       string
	Identifier string
	MinOS      string
	MaxOS      string
	// Family is the iOS product family (iPhone, iPad), when the SDK says.
	Family string
	// ProductModel is the iOS hardware model identifier (iPhone17,1), when
	// the SDK says.
	ProductModel string
}

type CatalogRuntime struct {
	Name            string
	Version         string
	Build           string
	Identifier      string
	Available       bool
	SupportedModels []string
	// Tag, ABI and APILevel describe an Android system image
	// (google_apis, x86_64, 36); empty on iOS.
	Tag      string
	ABI      string
	APILevel int
}

// Driver is the narrow boundary between the core and one platform. The core
// decides when to call a verb; the driver decides how. Every verb is scoped to
// the root directory the driver owns.
type Driver interface {
	Platform() string
	// Capabilities declares what the driver supports beyond the verbs; the
	// core branches on it, never on the platform's name.
	Capabilities() Capabilities
	// ResolveSpec turns a request into a concrete spec, or fails with one of
	// the spec errors below. It may install a missing runtime only when
	// req.AllowDownload is set.
	ResolveSpec(ctx context.Context, req SpecRequest) (Spec, error)
	// Provision creates a new, shut-down device for spec inside the root.
	Provision(ctx context.Context, spec Spec) (Provisioned, error)
	// MakeReady boots the device and waits until it is usable. It is
	// idempotent for a device that is already booted.
	MakeReady(ctx context.Context, dev DeviceRef) error
	// Reclaim returns a used device to a clean, booted state.
	Reclaim(ctx context.Context, dev DeviceRef) error
	// Shutdown stops the device and proves it stopped.
	Shutdown(ctx context.Context, dev DeviceRef) error
	// Destroy deletes the device from the root.
	Destroy(ctx context.Context, dev DeviceRef) error
	// ListManaged reports the devices that exist inside the root.
	ListManaged(ctx context.Context) ([]Observed, error)
	// Estimate is the expected duration of op, for progress reporting.
	Estimate(op DriverOp) time.Duration
	// Catalog lists the models and runtimes the platform can serve.
	Catalog(ctx context.Context) (Catalog, error)
	// RevalidateRoot re-proves that the root is simlock's own before a
	// destructive sweep.
	RevalidateRoot(ctx context.Context) error
}

// Capabilities is what a driver declares it can do, so that adding a
// driver needs no change in the core (Nomad's driver capabilities).
type Capabilities struct {
	// Devices names the driver's devices for people ("iOS simulators"),
	// in a refusal that points a request to the platform serving it.
	Devices string
	// ResetModes are the session reset modes the driver runs besides
	// destroy and none, which every driver runs (contract.ResetErase,
	// contract.ResetKeepBooted, contract.ResetSnapshot).
	ResetModes []string
	// StrictResources makes a lease request's resource step
	// all-or-nothing: a result that did not observe every requested group
	// as asked fails the request. Without it the lease is granted with the
	// result, its success false visible.
	StrictResources bool
}

// RunsReset reports whether the driver runs reset mode.
func (c Capabilities) RunsReset(mode string) bool {
	return slices.Contains(c.ResetModes, mode)
}

// Eraser is the optional driver ability to purge a device without booting
// it again: Erase leaves it clean and shut down, and MakeReady boots it.
// With it the core decides between the two steps whether anyone will use
// the device running (a device about to be evicted is never booted).
type Eraser interface {
	Erase(ctx context.Context, dev DeviceRef) error
}

// Diagnostic is a fact a driver observed that the daemon may turn into an
// event. Drivers never see the event bus; they report through a callback.
type Diagnostic struct {
	Type        string // e.g. "component.install-started"
	RequesterID string
	Message     string
	Data        map[string]any
}

// Sentinel errors drivers return (wrapped in *SpecError or with %w); the
// daemon maps them to contract codes in one place.
var (
	ErrUnsupportedPlatform = errors.New("no driver serves this platform")
	ErrUnknownModel        = errors.New("unknown device model")
	ErrOSOutOfRange        = errors.New("OS version outside the model's supported range")
	ErrRuntimeMissing      = errors.New("OS runtime not installed")
	ErrDownloadForbidden   = errors.New("downloads are forbidden by policy")
	ErrInsufficientDisk    = errors.New("insufficient disk space")
	ErrDeviceNotFound      = errors.New("device not found in the driver's root")
	ErrRootNotOwned        = errors.New("device root is not marked as simlock's")
)

// SpecError carries a sentinel plus a message and structured details.
type SpecError struct {
	Err     error
	Msg     string
	Details map[string]any
	Next    string // the next step to suggest, when the caller can fix it
}

func (e *SpecError) Error() string {
	if e.Msg == "" {
		return e.Err.Error()
	}
	return e.Msg
}

func (e *SpecError) Unwrap() error { return e.Err }

// NewSpecError builds a SpecError; kv are detail key/value pairs.
func NewSpecError(sentinel error, msg string, kv ...any) *SpecError {
	e := &SpecError{Err: sentinel, Msg: msg}
	if len(kv) > 0 {
		e.Details = map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			e.Details[fmt.Sprint(kv[i])] = kv[i+1]
		}
	}
	return e
}

// Passthrough sentinels, shared by every driver so the daemon maps them once.
var (
	// ErrPassthroughRefused: the command would change a device's lifecycle
	// behind the registry's back (or needs a terminal it will not have).
	ErrPassthroughRefused = errors.New("passthrough command refused")
	// ErrUnknownTool: no driver wraps this tool.
	ErrUnknownTool = errors.New("unknown passthrough tool")
)

// Passthrougher is the optional driver ability to hand a lease holder a
// root-scoped command for one of the platform's own tools. The daemon finds
// it by type assertion.
type Passthrougher interface {
	PassthroughTools() []string
	ResolvePassthrough(tool string, args []string, scope PassthroughScope) (ports.Command, error)
}

// PassthroughScope is what a passthrough resolution is told about the
// caller, so one refusal list serves both the local passthrough and
// device.exec.
type PassthroughScope struct {
	// Terminal says whether a terminal is attached to the process that will
	// run the command.
	Terminal bool
	// Pin, when set, is the only device the command may address (a lease's
	// device, for device.exec): the driver refuses every device selector
	// naming another device and adds the pinned device's own.
	Pin *DeviceRef
}
