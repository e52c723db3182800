package requirements

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/osversion"
)

// Plan is what the operator's defaults make of a requirement before the
// catalog is read: the model to look for, the archetype it must be
// classified as, and the OS selection. Everything a refusal at this stage
// says (an unmapped archetype above all) holds whatever is installed, so
// it is decided first and costs no catalog read.
type Plan struct {
	Platform      string
	PolicyVersion string
	// Archetype is the archetype asked for (by the requirement or the
	// policy's omitted default); empty for a model type or model request.
	Archetype string
	// ModelType is the model type the hardware went through (iOS).
	ModelType *contract.ModelTypeRef
	// Model is the model to find in the catalog.
	Model contract.ModelIdentity
	// Classified says the catalog entry must carry a classification: true
	// for archetype and model type requests, whose meaning is a class of
	// hardware; an exact model request names its hardware itself.
	Classified bool
	// FromPolicy says the model came from the operator's mapping (it
	// changes whose mistake a missing model is).
	FromPolicy bool
	MemoryMB   int
	os         selector
	osText     string
	// canPass says a simlock-model the catalog does not list goes to the
	// lease as given (with passOS), for the driver's own resolution to
	// answer, as a lease request's model would: the form simlock's
	// session tests and older callers use. Only when the OS needs no
	// catalog either: exact, or omitted with no policy.
	canPass bool
	passOS  string

	classes map[string]string
}

// Resolve resolves req through policy and cat: PlanFor, then Bind.
func Resolve(policy config.Sessions, cat Catalog, req contract.DeviceRequirement) (contract.SessionProfile, error) {
	p, err := PlanFor(policy, req)
	if err != nil {
		return contract.SessionProfile{}, err
	}
	return p.Bind(cat)
}

// PlanFor validates req and maps it through the platform's defaults.
func PlanFor(policy config.Sessions, req contract.DeviceRequirement) (Plan, error) {
	if err := Validate(req); err != nil {
		return Plan{}, err
	}
	def, ok := policy.Defaults[req.Platform]
	if !ok {
		// Without the platform's defaults nothing coarse can be mapped;
		// an exact model needs no mapping, and its omitted OS is the
		// newest installed.
		if req.Hardware == nil || req.Hardware.Kind != contract.HardwareModel {
			return Plan{}, refuse(contract.CodeUnsupportedHardware,
				fmt.Sprintf("ask for an exact model, or have the operator add sessions.defaults.%s (configured: %s)", req.Platform, strings.Join(platformsOf(policy), ", ")),
				"this daemon's sessions configuration has no defaults for %s, so it maps no %s hardware", req.Platform, req.Platform)
		}
		def.OS.Selector.Kind = contract.OSLatest
	}
	p := Plan{Platform: req.Platform, PolicyVersion: def.PolicyVersion}
	if req.Platform == PlatformIOS {
		p.classes = policy.IOSClassifications
	} else {
		p.classes = policy.AndroidProfileArchetypes
	}

	h := contract.HardwareRequirement{Kind: contract.HardwareArchetype, Archetype: def.Hardware.Omitted}
	if req.Hardware != nil {
		h = *req.Hardware
	}
	if err := p.mapHardware(def.Hardware, h); err != nil {
		return Plan{}, err
	}

	sel, text, err := selectorFor(def.OS, req.OS)
	if err != nil {
		return Plan{}, err
	}
	p.os, p.osText = sel, text
	if p.Model.Namespace == NamespaceSimlockModel {
		switch {
		case req.OS != nil && req.OS.Kind == contract.OSExact:
			p.passOS, p.canPass = req.OS.Version, true
		case (req.OS == nil || req.OS.Kind == contract.OSOmitted) && !ok:
			p.canPass = true
		}
	}
	return p, nil
}

func (p *Plan) mapHardware(hw config.SessionHardwareDefaults, h contract.HardwareRequirement) error {
	switch h.Kind {
	case contract.HardwareModel:
		p.Model = *h.Model
		return nil
	case contract.HardwareArchetype:
		if !IsArchetype(h.Archetype) {
			// Only an omitted hardware gets here with a bad archetype: the
			// operator's default, which config validation already refuses.
			return refuse(contract.CodeUnsupportedHardware, "",
				"sessions.defaults.%s.hardware.omitted names no archetype", p.Platform)
		}
		p.Archetype, p.Classified = h.Archetype, true
	case contract.HardwareModelType:
		p.Classified = true
	}

	if p.Platform == PlatformAndroid {
		if h.Kind == contract.HardwareModelType {
			return refuse(contract.CodeUnsupportedHardware,
				"ask for an Android archetype (phone, tablet, foldable) or an exact avd-profile model",
				"Android session defaults map archetypes to AVD profiles; model type %s is not mapped", describe(*h.ModelType))
		}
		i := slices.IndexFunc(hw.Profiles, func(e config.SessionAndroidProfile) bool { return e.Archetype == p.Archetype })
		if i < 0 {
			return unmapped(p.Platform, p.Archetype, "profiles")
		}
		e := hw.Profiles[i]
		p.Model = contract.ModelIdentity{Namespace: NamespaceAVDProfile, Value: e.ProfileID}
		p.MemoryMB, p.FromPolicy = e.MemoryMB, true
		return nil
	}

	mt := h.ModelType
	if h.Kind == contract.HardwareArchetype {
		i := slices.IndexFunc(hw.Archetypes, func(e config.SessionArchetypeMap) bool { return e.Archetype == p.Archetype })
		if i < 0 {
			return unmapped(p.Platform, p.Archetype, "archetypes")
		}
		mt = &contract.ModelTypeRef{Family: hw.Archetypes[i].ModelType.Family, Variant: hw.Archetypes[i].ModelType.Variant}
	}
	i := slices.IndexFunc(hw.ModelTypes, func(e config.SessionModelTypeMap) bool {
		return strings.EqualFold(e.ModelType.Family, mt.Family) && strings.EqualFold(e.ModelType.Variant, mt.Variant)
	})
	if i < 0 {
		return refuse(contract.CodeUnsupportedHardware,
			"ask for a model type the operator mapped in sessions.defaults.ios.hardware.modelTypes, or have the operator map it",
			"no installed model is mapped to iOS model type %s in sessions.defaults.ios.hardware.modelTypes; it is never served by other hardware", describe(*mt))
	}
	e := hw.ModelTypes[i]
	p.ModelType = &contract.ModelTypeRef{Family: e.ModelType.Family, Variant: e.ModelType.Variant}
	p.Model = contract.ModelIdentity{Namespace: e.Model.Namespace, Value: e.Model.Value}
	p.FromPolicy = true
	return nil
}

func unmapped(platform, archetype, key string) error {
	return refuse(contract.CodeUnsupportedHardware, "",
		"no %s hardware is mapped to archetype %s in sessions.defaults.%s.hardware.%s; it is never served by other hardware",
		platform, archetype, platform, key)
}

// selectorFor is the requirement's own OS selection, or the policy's when
// the requirement leaves the OS out. The preferred version applies only to
// the policy's selection: a caller who chose a selector gets what it says.
func selectorFor(def config.SessionOSDefaults, os *contract.OSRequirement) (selector, string, error) {
	kind, ver, pref := def.Selector.Kind, def.Selector.Version, def.PreferredVersion
	if os != nil && os.Kind != contract.OSOmitted {
		kind, ver, pref = os.Kind, os.Version, ""
	}
	s := selector{kind: kind}
	switch kind {
	case contract.OSExact, contract.OSAtLeast:
		v, ok := osversion.Parse(ver)
		if !ok {
			return s, "", invalid("os.version: %q is not a version", ver)
		}
		s.version = v
	case contract.OSLatest:
	default:
		return s, "", invalid("os.selector.kind: %q is not exact, atLeast or latest", kind)
	}
	if pref != "" {
		if v, ok := osversion.Parse(pref); ok {
			s.preferred = &v
		}
	}
	text := kind
	if ver != "" {
		text += " " + ver
	}
	return s, text, nil
}

// Bind finds the planned model and an OS for it in the catalog.
func (p Plan) Bind(cat Catalog) (contract.SessionProfile, error) {
	if p.Platform == PlatformAndroid {
		return p.bindAndroid(cat.Android)
	}
	return p.bindIOS(cat.IOS)
}

func (p Plan) profile() contract.SessionProfile {
	return contract.SessionProfile{Platform: p.Platform, ModelType: p.ModelType, MemoryMB: p.MemoryMB, PolicyVersion: p.PolicyVersion}
}

// passThrough is the profile of a simlock-model the catalog does not
// list: the name and OS as given.
func (p Plan) passThrough() contract.SessionProfile {
	out := p.profile()
	out.Model = p.Model.Value
	out.ModelIdentifier = &contract.ModelIdentity{Namespace: p.Model.Namespace, Value: p.Model.Value}
	out.OSVersion = p.passOS
	return out
}

// classify checks the catalog entry's classification against the plan.
func (p Plan) classify(what string, keys ...string) (string, error) {
	class := ""
	for _, k := range keys {
		if c, ok := p.classes[k]; ok && k != "" {
			class = c
			break
		}
	}
	key := "sessions.iosClassifications"
	if p.Platform == PlatformAndroid {
		key = "sessions.androidProfileArchetypes"
	}
	switch {
	case class == "" && !p.Classified:
		return "", nil
	case class == "":
		return "", refuse(contract.CodeCatalogMetadataInvalid, "",
			"%s is not classified as phone, tablet or foldable in %s", what, key)
	case !IsArchetype(class):
		return "", refuse(contract.CodeCatalogMetadataInvalid, "",
			"%s is classified as %q in %s, which is not phone, tablet or foldable", what, class, key)
	case p.Archetype != "" && class != p.Archetype:
		return "", refuse(contract.CodeCatalogMetadataInvalid, "",
			"%s is classified as %s in %s, but sessions.defaults.%s maps archetype %s to it", what, class, key, p.Platform, p.Archetype)
	}
	return class, nil
}

// missingModel is the refusal for a model the catalog lacks: the
// operator's mapping is stale, or the caller asked for something absent.
func (p Plan) missingModel(what string) error {
	next := fmt.Sprintf("ask for a model `simlock catalog --platform %s` lists", p.Platform)
	if p.FromPolicy {
		next = "install it, or have the operator map the requirement to an installed model in sessions.defaults." + p.Platform
	}
	return refuse(contract.CodeUnknownModel, next, "%s is not installed on this host", what)
}

func (p Plan) bindIOS(cat IOSCatalog) (contract.SessionProfile, error) {
	m := p.Model
	i := slices.IndexFunc(cat.DeviceTypes, func(t IOSDeviceType) bool {
		switch m.Namespace {
		case NamespaceProductModel:
			return t.ProductModel == m.Value
		case NamespaceDeviceType:
			return t.Identifier == m.Value
		case NamespaceSimlockModel:
			return t.Name == m.Value || t.Identifier == m.Value
		}
		return false
	})
	if i < 0 && p.canPass {
		return p.passThrough(), nil
	}
	if i < 0 {
		return contract.SessionProfile{}, p.missingModel(fmt.Sprintf("no iOS device type with %s %s", m.Namespace, m.Value))
	}
	dt := cat.DeviceTypes[i]
	class, err := p.classify(fmt.Sprintf("iOS device type %q (%s)", dt.Name, dt.Identifier), dt.Name, dt.Identifier)
	if err != nil {
		return contract.SessionProfile{}, err
	}

	type cand struct {
		rt IOSRuntime
		v  version
	}
	var cands []cand
	var unsupported, unavailable []string
	for _, rt := range cat.Runtimes {
		v, ok := osversion.Parse(rt.Version)
		if !ok || !p.os.admits(v) {
			continue
		}
		switch {
		case !runs(rt, dt, v):
			unsupported = append(unsupported, rt.Version)
		case !rt.Available:
			unavailable = append(unavailable, rt.Version)
		default:
			cands = append(cands, cand{rt, v})
		}
	}
	if len(cands) == 0 {
		switch {
		case len(unsupported) > 0:
			lo, hi := typeRange(cat.Runtimes, dt)
			return contract.SessionProfile{}, refuse(contract.CodeOSOutOfRange,
				"ask for an OS version in "+hi+", or have the operator map another model",
				"iOS %s does not run on %s (installed: %s); it runs %s", p.osText, dt.Name, strings.Join(unsupported, ", "), hi).
				WithDetails("model", dt.Name, "min", lo, "max", typeMax(cat.Runtimes, dt), "osVersion", p.osText)
		case len(unavailable) > 0:
			return contract.SessionProfile{}, refuse(contract.CodeRuntimeMissing,
				"reinstall the runtime (`xcodebuild -downloadPlatform iOS`); simctl lists it as unavailable",
				"the iOS runtime for %s is installed but unavailable (%s)", p.osText, strings.Join(unavailable, ", "))
		}
		return contract.SessionProfile{}, refuse(contract.CodeRuntimeMissing,
			fmt.Sprintf("install an iOS runtime that satisfies %s, or ask for one this host has (%s)", p.osText, strings.Join(iosVersions(cat.Runtimes), ", ")),
			"no installed iOS runtime satisfies %s", p.osText)
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if c := b.v.Compare(a.v); c != 0 {
			return c
		}
		return strings.Compare(a.rt.Identifier, b.rt.Identifier)
	})
	pick := cands[0]
	if p.os.preferred != nil {
		if j := slices.IndexFunc(cands, func(c cand) bool { return c.v.Compare(*p.os.preferred) == 0 }); j >= 0 {
			pick = cands[j]
		}
	}

	out := p.profile()
	out.Archetype = class
	out.Model = dt.Name
	if dt.ProductModel != "" {
		out.ModelIdentifier = &contract.ModelIdentity{Namespace: NamespaceProductModel, Value: dt.ProductModel}
	} else {
		out.ModelIdentifier = &contract.ModelIdentity{Namespace: NamespaceDeviceType, Value: dt.Identifier}
	}
	out.OSVersion, out.RuntimeID = pick.rt.Version, pick.rt.Identifier
	return out, nil
}

// runs reports whether runtime rt (at version v) runs device type dt: the
// runtime's own list when it has one, else the type's version range.
func runs(rt IOSRuntime, dt IOSDeviceType, v version) bool {
	if len(rt.SupportedTypes) > 0 {
		return slices.Contains(rt.SupportedTypes, dt.Identifier)
	}
	if lo, ok := osversion.Parse(dt.MinOS); ok && v.Compare(lo) < 0 {
		return false
	}
	if hi, ok := osversion.Parse(dt.MaxOS); ok && v.Compare(hi) > 0 {
		return false
	}
	return true
}

// typeRange is the range a device type runs on this host, as a person
// reads it ("iOS 12.0 to 18.0"): from its declared minimum (else its oldest
// installed runtime) to the newest installed runtime that runs it (else its
// declared maximum). lo is the minimum alone.
func typeRange(rts []IOSRuntime, dt IOSDeviceType) (lo, text string) {
	var oldest, newest version
	for _, rt := range rts {
		if v, ok := osversion.Parse(rt.Version); ok && runs(rt, dt, v) {
			if oldest == (version{}) || v.Compare(oldest) < 0 {
				oldest = v
			}
			if v.Compare(newest) > 0 {
				newest = v
			}
		}
	}
	if v, ok := osversion.Parse(dt.MinOS); ok {
		lo = versionText(v)
	} else if oldest != (version{}) {
		lo = versionText(oldest)
	}
	hi := typeMax(rts, dt)
	switch {
	case lo == "" && hi == "":
		return "", "no declared iOS range"
	case hi == "":
		return lo, "iOS " + lo + " and later"
	case lo == "":
		return "", "iOS up to " + hi
	}
	return lo, "iOS " + lo + " to " + hi
}

// typeMax is the newest installed runtime that runs dt, else its declared
// maximum ("" when unbounded).
func typeMax(rts []IOSRuntime, dt IOSDeviceType) string {
	var newest version
	for _, rt := range rts {
		if v, ok := osversion.Parse(rt.Version); ok && runs(rt, dt, v) && v.Compare(newest) > 0 {
			newest = v
		}
	}
	if newest != (version{}) {
		return versionText(newest)
	}
	if v, ok := osversion.Parse(dt.MaxOS); ok && v.Major() < 65535 {
		return versionText(v)
	}
	return ""
}

// versionText writes v with at least a minor part: "12.0", "17.0.1".
func versionText(v version) string {
	s := strconv.Itoa(v[0]) + "." + strconv.Itoa(v[1])
	if v[2] != 0 {
		s += "." + strconv.Itoa(v[2])
	}
	return s
}

func iosVersions(rts []IOSRuntime) []string {
	var out []string
	for _, rt := range rts {
		if rt.Available && !slices.Contains(out, rt.Version) {
			out = append(out, rt.Version)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

func (p Plan) bindAndroid(cat AndroidCatalog) (contract.SessionProfile, error) {
	m := p.Model
	i := slices.IndexFunc(cat.Profiles, func(pr AndroidProfile) bool { return pr.ID == m.Value })
	if i < 0 && m.Namespace == NamespaceSimlockModel {
		i = slices.IndexFunc(cat.Profiles, func(pr AndroidProfile) bool { return strings.EqualFold(pr.Name, m.Value) })
	}
	if i < 0 && p.canPass {
		return p.passThrough(), nil
	}
	if i < 0 {
		return contract.SessionProfile{}, p.missingModel(fmt.Sprintf("no AVD hardware profile %s", m.Value))
	}
	prof := cat.Profiles[i]
	class, err := p.classify(fmt.Sprintf("AVD hardware profile %s", prof.ID), prof.ID)
	if err != nil {
		return contract.SessionProfile{}, err
	}

	type cand struct {
		img  AndroidImage
		v    version
		rank int
	}
	var cands []cand
	var downloadable []string
	for _, img := range cat.Images {
		rank := slices.Index(androidTags, img.Tag)
		v, ok := osversion.Parse(img.Release)
		if rank < 0 || !ok || !p.os.admits(v) {
			continue
		}
		if !img.Installed {
			downloadable = append(downloadable, img.Package)
			continue
		}
		cands = append(cands, cand{img, v, rank})
	}
	if len(cands) == 0 {
		next := fmt.Sprintf("install a system image for Android %s, or ask for a release this host has (%s)", p.osText, strings.Join(androidReleases(cat.Images), ", "))
		if len(downloadable) > 0 {
			next = fmt.Sprintf("install %s (sdkmanager --install), or ask for a release this host has (%s)", downloadable[0], strings.Join(androidReleases(cat.Images), ", "))
		}
		if p.os.kind != contract.OSLatest && p.os.version.Major() > 20 {
			next += "; Android versions are release versions (16), not API levels (36)"
		}
		return contract.SessionProfile{}, refuse(contract.CodeRuntimeMissing, next,
			"no installed Android system image (%s) satisfies %s", strings.Join(androidTags, ", "), p.osText)
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if c := b.v.Compare(a.v); c != 0 {
			return c
		}
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		if a.img.APILevel != b.img.APILevel {
			return b.img.APILevel - a.img.APILevel
		}
		return strings.Compare(a.img.Package, b.img.Package)
	})
	pick := cands[0]
	if p.os.preferred != nil {
		if j := slices.IndexFunc(cands, func(c cand) bool { return c.v.Compare(*p.os.preferred) == 0 }); j >= 0 {
			pick = cands[j]
		}
	}

	out := p.profile()
	out.Archetype = class
	out.Model = prof.ID
	out.ModelIdentifier = &contract.ModelIdentity{Namespace: NamespaceAVDProfile, Value: prof.ID}
	out.OSVersion, out.RuntimeID = pick.img.Release, pick.img.Package
	return out, nil
}

func androidReleases(imgs []AndroidImage) []string {
	var out []string
	for _, img := range imgs {
		if img.Installed && slices.Contains(androidTags, img.Tag) && !slices.Contains(out, img.Release) {
			out = append(out, img.Release)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

func platformsOf(policy config.Sessions) []string {
	var out []string
	for p := range policy.Defaults {
		out = append(out, p)
	}
	slices.Sort(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}
