package resources

import (
	"strconv"
	"strings"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Describe is the one projection of a registry record onto the
// canonical description (docs/adr/0039): every frontend's devices, lease
// grants included, come from here. Static facts are what the driver
// stated under core.AttrFactPrefix when it made the device; readiness and
// the live facts (locked, orientation; docs/adr/0090) are the driver
// listing's observation when one is known (nil: not known).
func Describe(r core.DeviceRecord, leaseID string, obs *Observation) contract.Device {
	out := contract.Device{ID: r.ID, Platform: r.Platform, Model: r.Spec.Model, OSVersion: r.Spec.OSVersion,
		Name: r.Name, Simulated: r.Simulated,
		StateSince: r.StateSince.UTC(), CreatedAt: r.CreatedAt.UTC(), FormFactor: contract.FormFactorUnknown,
		OwnerSystem: r.OwnerSystem}
	if !r.LastLeasedAt.IsZero() {
		t := r.LastLeasedAt.UTC()
		out.LastLeasedAt = &t
	}
	facts := map[string]string{}
	for k, v := range r.Attrs {
		switch {
		case k == core.AttrUDID:
			out.UDID = v
		case k == core.AttrSerial:
			out.Serial = v
		case k == core.AttrDeviceSet:
			out.DeviceSet = v
		case strings.HasPrefix(k, core.AttrEnvPrefix):
			if out.Env == nil {
				out.Env = map[string]string{}
			}
			out.Env[strings.TrimPrefix(k, core.AttrEnvPrefix)] = v
		case strings.HasPrefix(k, core.AttrFactPrefix):
			facts[strings.TrimPrefix(k, core.AttrFactPrefix)] = v
		}
	}
	out.ModelIdentifier = str(facts[core.FactModelIdentifier])
	out.RuntimeID = str(r.Spec.RuntimeID)
	switch ff := facts[core.FactFormFactor]; ff {
	case contract.FormFactorPhone, contract.FormFactorTablet, contract.FormFactorFoldable:
		out.FormFactor = ff
	}
	disp := contract.DeviceDisplay{WidthPx: num(facts[core.FactDisplayWidthPx]), HeightPx: num(facts[core.FactDisplayHeightPx]),
		Density: num(facts[core.FactDisplayDensity])}
	if f, err := strconv.ParseFloat(facts[core.FactDisplayScale], 64); err == nil && f > 0 {
		disp.Scale = &f
	}
	if disp.WidthPx != nil || disp.HeightPx != nil || disp.Density != nil || disp.Scale != nil {
		out.Display = &disp
	}
	// Image provenance is an Android fact: an iOS device has none (null),
	// an Android one always has the object, with nulls for what is unknown.
	if r.Platform == "android" {
		out.Image = &contract.AndroidImage{Path: str(facts[core.FactImagePath]), Target: str(facts[core.FactImageTarget]),
			BasedOn: str(facts[core.FactImageBasedOn])}
	}
	out.Runtime = contract.DeviceRuntime{Lifecycle: string(r.State), Lease: str(leaseID)}
	if obs != nil {
		out.Runtime.Readiness = str(string(obs.Run))
		if obs.Live.Locked != nil {
			locked := *obs.Live.Locked
			out.Runtime.Locked = &locked
		}
		switch o := obs.Live.Orientation; o {
		case contract.OrientationPortrait, contract.OrientationLandscape:
			out.Runtime.Orientation = &o
		}
	}
	return out
}

// Observation is one device as its platform's shared listing saw
// it: the run state and, for a running device whose driver can read them
// (core.LiveObserver), its live facts.
type Observation struct {
	Run  core.RunState
	Live core.LiveState
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func num(s string) *int {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return nil
	}
	return &n
}
