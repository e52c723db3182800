package ios

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/listcache"
	"github.com/simlock/simlock/internal/ports"
)

// Diagnostic types this driver emits around a runtime install.
const (
	DiagInstallStarted = "component.install-started"
	DiagInstalled      = "component.installed"
	DiagInstallFailed  = "component.install-failed"
)

// resolution is the outcome of matching a request against a listing.
type resolution struct {
	model   DeviceType
	runtime Runtime
	// missing is set when the model and requested OS are valid but no
	// installed runtime serves them: the one case a download can fix.
	missing bool
}

func (r resolution) spec() core.Spec {
	return core.Spec{
		Platform:  Platform,
		Model:     r.model.Name,
		ModelID:   r.model.Identifier,
		OSVersion: r.runtime.Version,
		RuntimeID: r.runtime.Identifier,
	}
}

// listingTTL bounds how long a listing serves resolutions before one is
// re-read. It only limits how late a change made outside simlock is seen by
// a request the old listing could serve (a newer default runtime): a
// request the listing cannot serve re-reads at once (ADR 0026).
const listingTTL = 2 * time.Minute

// newListingCache caches `simctl list -j` for ResolveSpec. A listing without
// any device type is answered but never kept: CoreSimulator lists its
// device types even on a fresh Xcode, so an empty list is a read that went
// wrong.
func (d *Driver) newListingCache() *listcache.Cache[*List] {
	return listcache.New(listcache.Options[*List]{
		TTL:   listingTTL,
		Clock: d.clock,
		Read: func(ctx context.Context) (*List, error) {
			lctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl list")
			defer cancel()
			return d.listAll(lctx)
		},
		Keep: func(l *List) bool { return len(l.DeviceTypes) > 0 },
		// A runtime or an Xcode installed or removed behind simlock's back
		// moves these directories' mtimes; seen without starting simctl.
		Stamp: listcache.DirStamp(
			"/Library/Developer/CoreSimulator/Profiles/Runtimes",
			"/Library/Developer/CoreSimulator/Volumes",
			"/Applications",
			os.Getenv("DEVELOPER_DIR")),
	})
}

// ResolveSpec picks a device type and an installed runtime for req. It
// installs a missing runtime only when req.AllowDownload is set, and never
// for an OS outside the model's range, which no download could fix.
//
// It resolves from the cached listing, so a warm grant starts no process;
// a request the cached listing cannot serve is resolved again against a
// listing read after the request arrived before it is refused, so a runtime
// installed a moment ago is never refused.
func (d *Driver) ResolveSpec(ctx context.Context, req core.SpecRequest) (core.Spec, error) {
	if req.Platform != "" && !strings.EqualFold(req.Platform, Platform) {
		return core.Spec{}, core.NewSpecError(core.ErrUnsupportedPlatform,
			fmt.Sprintf("ios driver cannot serve platform %q", req.Platform), "platform", req.Platform)
	}
	arrived := d.listing.Now()
	l, cached, err := d.listing.Get(ctx)
	if err != nil {
		return core.Spec{}, err
	}
	res, err := resolve(l, req.Model, req.OSVersion)
	if err != nil && cached {
		if l, err = d.listing.Fetch(ctx, arrived); err != nil {
			return core.Spec{}, err
		}
		res, err = resolve(l, req.Model, req.OSVersion)
	}
	if err == nil {
		return res.spec(), nil
	}
	if !res.missing || !req.AllowDownload {
		return core.Spec{}, err
	}
	return d.installRuntime(ctx, req, res)
}

// installRuntime downloads the runtime req needs through xcodebuild, then
// re-reads the listing and reports success only if the runtime the request
// needed is now there and pairs with the model.
func (d *Driver) installRuntime(ctx context.Context, req core.SpecRequest, want resolution) (core.Spec, error) {
	d.installMu.Lock()
	defer d.installMu.Unlock()

	// A concurrent request may have installed it while this one waited.
	l, err := d.listing.Fetch(ctx, d.listing.Now())
	if err != nil {
		return core.Spec{}, err
	}
	if res, err := resolve(l, req.Model, req.OSVersion); err == nil {
		return res.spec(), nil
	} else if !res.missing {
		return core.Spec{}, err
	}

	var wantV *versionPrefix
	osLabel := "latest"
	if p, ok := requestedVersion(req.OSVersion); ok {
		wantV, osLabel = &p, p.String()
	}
	// xcodebuild wants a build: "18" becomes the newest known 18.x build.
	buildArg, target, ok := downloadTarget(wantV)
	if !ok {
		return core.Spec{}, noSuchVersionError(*wantV, l.Runtimes)
	}

	// Reserve space before announcing anything: a preflight refusal is not
	// an install attempt and emits no component.install-* fact.
	if d.guard != nil {
		release, err := d.guard.Reserve(d.root, RuntimeDownloadBytes)
		if err != nil {
			return core.Spec{}, fmt.Errorf("ios: cannot download an iOS runtime: %w", err)
		}
		defer release()
	}

	args := []string{"-downloadPlatform", "iOS"}
	if buildArg != "" {
		args = append(args, "-buildVersion", buildArg)
	}
	data := func(kv ...any) map[string]any {
		m := map[string]any{"component": "ios-runtime", "platform": Platform, "osVersion": osLabel, "model": want.model.Name}
		if buildArg != "" {
			m["target"] = target
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	d.emit(core.Diagnostic{Type: DiagInstallStarted, RequesterID: req.RequesterID,
		Message: fmt.Sprintf("installing iOS %s runtime for %s", target, want.model.Name), Data: data()})
	fail := func(err error) (core.Spec, error) {
		d.emit(core.Diagnostic{Type: DiagInstallFailed, RequesterID: req.RequesterID,
			Message: fmt.Sprintf("iOS %s runtime install failed: %v", osLabel, err), Data: data("reason", err.Error())})
		return core.Spec{}, err
	}

	dctx, dcancel := d.withTimeout(ctx, d.timeouts.Download, "xcodebuild -downloadPlatform iOS")
	res, err := d.runner.Run(dctx, ports.Command{Name: d.xcodebuild, Args: args})
	// Whatever the installer did, even failing half way, the cached
	// listing may no longer describe the machine.
	d.listing.Invalidate()
	if err != nil {
		// Classify before cancelling: afterwards every context reads as cancelled.
		cause := d.commandError(dctx, "xcodebuild -downloadPlatform", res, err)
		dcancel()
		return fail(core.NewSpecError(core.ErrRuntimeMissing,
			fmt.Sprintf("installing the iOS %s runtime failed: %v", osLabel, cause), "osVersion", osLabel))
	}
	dcancel()

	// The installer exiting 0 only means it claims success; the listing is
	// the proof.
	l, err = d.listing.Fetch(ctx, d.listing.Now())
	if err != nil {
		return fail(err)
	}
	got, err := resolve(l, req.Model, req.OSVersion)
	if err != nil {
		if got.missing {
			err = core.NewSpecError(core.ErrRuntimeMissing,
				fmt.Sprintf("xcodebuild reported success but no installed iOS %s runtime runs %s: %v", osLabel, want.model.Name, err),
				"osVersion", osLabel, "model", want.model.Name)
		}
		return fail(err)
	}
	d.emit(core.Diagnostic{Type: DiagInstalled, RequesterID: req.RequesterID,
		Message: fmt.Sprintf("installed %s (%s)", got.runtime.Name, got.runtime.Build),
		Data:    data("runtimeId", got.runtime.Identifier, "version", got.runtime.Version, "build", got.runtime.Build)})
	d.log.Info("iOS runtime installed", "runtime", got.runtime.Identifier, "version", got.runtime.Version, "requesterId", req.RequesterID)
	return got.spec(), nil
}

func (d *Driver) emit(diag core.Diagnostic) { d.onDiag(diag) }

// resolve matches a model and OS request against a listing. On a
// runtime-missing failure the returned resolution names the chosen model and
// has missing set.
func resolve(l *List, model, osReq string) (resolution, error) {
	var want *versionPrefix
	if strings.TrimSpace(osReq) != "" {
		p, ok := requestedVersion(osReq)
		if !ok {
			return resolution{}, core.NewSpecError(core.ErrRuntimeMissing,
				fmt.Sprintf("%q is not an iOS version (expected e.g. \"18.0\" or \"18\")", osReq), "osVersion", osReq)
		}
		want = &p
	}
	types := iosTypes(l)
	if strings.TrimSpace(model) != "" {
		t, ok := findModel(types, model)
		if !ok {
			return resolution{}, core.NewSpecError(core.ErrUnknownModel,
				fmt.Sprintf("no iOS device type named %q is installed", model), "model", model)
		}
		return resolveFor(l, t, want)
	}
	cands := defaultModels(types)
	if len(cands) == 0 {
		return resolution{}, core.NewSpecError(core.ErrUnknownModel, "no iPhone device type is installed to use as the default model")
	}
	// The default is the newest iPhone that can run now; failing that, the
	// newest one a download could serve; failing that, the newest one's own
	// error (its range names what went wrong).
	var firstMissing *resolution
	var firstMissingErr, firstErr error
	for _, t := range cands {
		res, err := resolveFor(l, t, want)
		if err == nil {
			return res, nil
		}
		if res.missing && firstMissing == nil {
			firstMissing, firstMissingErr = &res, err
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstMissing != nil {
		return *firstMissing, firstMissingErr
	}
	return resolution{}, firstErr
}

// resolveFor picks the newest installed, available iOS runtime that matches
// want (any when nil), lies in t's range and lists t as supported.
func resolveFor(l *List, t DeviceType, want *versionPrefix) (resolution, error) {
	rangeText := func() string {
		switch {
		case t.HasMax():
			return fmt.Sprintf("iOS %s to %s", t.MinRuntime, shownMax(t.MaxRuntime))
		case t.MinRuntime.IsZero():
			return "no declared iOS range"
		default:
			return fmt.Sprintf("iOS %s and later", t.MinRuntime)
		}
	}
	rangeKV := func() []any {
		max := ""
		if t.HasMax() {
			max = t.MaxRuntime.String()
		}
		return []any{"model", t.Name, "min", t.MinRuntime.String(), "max", max}
	}
	if want != nil {
		outside := want.high().Compare(t.MinRuntime) < 0 || (t.HasMax() && want.low().Compare(t.MaxRuntime) > 0)
		if outside {
			se := core.NewSpecError(core.ErrOSOutOfRange,
				fmt.Sprintf("%s runs %s; iOS %s is outside that range", t.Name, rangeText(), want),
				append(rangeKV(), "osVersion", want.String())...)
			se.Next = "ask for an OS version in " + rangeText() + " (`simlock catalog` lists the installed runtimes)"
			return resolution{}, se
		}
	}
	var best *Runtime
	var bestV Version
	var unpaired []string
	for i := range l.Runtimes {
		r := l.Runtimes[i]
		if !isIOSRuntime(r) || !r.Available {
			continue
		}
		v, ok := runtimeVersion(r)
		if !ok {
			continue
		}
		if want != nil && !want.matches(v) && !want.matches(nameVersion(r)) {
			continue
		}
		if !t.Admits(v) {
			continue
		}
		if !r.Supports(t.Identifier) {
			unpaired = append(unpaired, r.Name)
			continue
		}
		if best == nil || v.Compare(bestV) > 0 {
			best, bestV = &r, v
		}
	}
	if best != nil {
		return resolution{model: t, runtime: *best}, nil
	}
	if want != nil && len(unpaired) > 0 {
		// The requested runtime is installed and simply does not run this
		// model (as iOS 26 dropped iPhone XS): downloading cannot help.
		return resolution{}, droppedError(l, t, *want, unpaired)
	}
	if want != nil && beyondKnown(*want, l.Runtimes) {
		// No download could serve it: name what exists rather than
		// suggesting --allow-download.
		return resolution{}, noSuchVersionError(*want, l.Runtimes)
	}
	osText, osDetail := "any iOS version it supports", ""
	if want != nil {
		osText, osDetail = "iOS "+want.String(), want.String()
	}
	return resolution{model: t, missing: true}, core.NewSpecError(core.ErrRuntimeMissing,
		fmt.Sprintf("no installed runtime runs %s on %s (%s); installing one needs download permission", t.Name, osText, rangeText()),
		append(rangeKV(), "osVersion", osDetail)...)
}

// droppedError refuses a requested runtime that is installed, lies in the
// model's declared range, and still does not list the model (a runtime that
// dropped it). The range named is the one the model really has here: from
// its device type's minimum to the newest installed runtime that runs it.
func droppedError(l *List, t DeviceType, want versionPrefix, unpaired []string) *core.SpecError {
	var newest Version
	for _, r := range l.Runtimes {
		v, ok := runtimeVersion(r)
		if !ok || !isIOSRuntime(r) || !r.Available || !t.Admits(v) || !r.Supports(t.Identifier) {
			continue
		}
		if v.Compare(newest) > 0 {
			newest = v
		}
	}
	dropped := strings.Join(unpaired, ", ")
	min := t.MinRuntime.String()
	if newest.IsZero() {
		// No installed runtime runs it: only the device type's floor and
		// the runtime that dropped it bound the range.
		se := core.NewSpecError(core.ErrOSOutOfRange,
			fmt.Sprintf("%s runs iOS %s and later by its device type, but the installed %s runtime dropped it and no installed runtime runs it; iOS %s is outside its range",
				t.Name, min, dropped, want),
			"model", t.Name, "min", min, "max", "", "osVersion", want.String(), "droppedBy", unpaired)
		se.Next = fmt.Sprintf("ask for an OS version from iOS %s up to one older than %s, with --allow-download to install it", min, dropped)
		return se
	}
	se := core.NewSpecError(core.ErrOSOutOfRange,
		fmt.Sprintf("%s runs iOS %s to %s here: the installed %s runtime dropped it; iOS %s is outside that range",
			t.Name, min, newest, dropped, want),
		"model", t.Name, "min", min, "max", newest.String(), "osVersion", want.String(), "droppedBy", unpaired)
	se.Next = fmt.Sprintf("ask for an OS version in iOS %s to %s (the newest installed: --os %s)", min, newest, newest)
	return se
}

// shownMax is a device type's maximum runtime for a person: simctl writes
// "any 15" as 15.255.255.
func shownMax(v Version) string {
	switch {
	case v.Minor == 255:
		return fmt.Sprintf("%d.x", v.Major)
	case v.Patch == 255:
		return fmt.Sprintf("%d.%d.x", v.Major, v.Minor)
	}
	return v.String()
}

// requestedVersion reads an OS request: "18", "18.0", "iOS 18.0", or a
// runtime identifier "com.apple.CoreSimulator.SimRuntime.iOS-18-0".
func requestedVersion(s string) (versionPrefix, bool) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "com.apple.CoreSimulator.SimRuntime.iOS-"); ok {
		s = strings.ReplaceAll(rest, "-", ".")
	}
	if len(s) >= 3 && strings.EqualFold(s[:3], "ios") {
		s = strings.TrimSpace(s[3:])
	}
	p, err := parsePrefix(s)
	return p, err == nil
}

// runtimeVersion is the runtime's full version, falling back to its name
// when the version field is missing or odd.
func runtimeVersion(r Runtime) (Version, bool) {
	if v, err := ParseVersion(r.Version); err == nil {
		return v, true
	}
	v := nameVersion(r)
	return v, !v.IsZero()
}

// nameVersion is the version in the runtime's display name: "iOS 17.0" for a
// runtime whose version is 17.0.1. A request may name either.
func nameVersion(r Runtime) Version {
	f := strings.Fields(r.Name)
	if len(f) == 0 {
		return Version{}
	}
	v, _ := ParseVersion(f[len(f)-1])
	return v
}

func isIOSRuntime(r Runtime) bool { return strings.EqualFold(r.Platform, "iOS") }

// isIOSType keeps iPhones, iPads and iPods; listings before Xcode 11 carry no
// product family, so names decide there.
func isIOSType(t DeviceType) bool {
	switch t.ProductFamily {
	case "iPhone", "iPad", "iPod":
		return true
	case "":
		for _, s := range []string{"iPhone", "iPad", "iPod"} {
			if strings.Contains(t.Name, s) || strings.Contains(t.Identifier, "SimDeviceType."+s) {
				return true
			}
		}
	}
	return false
}

func iosTypes(l *List) []DeviceType {
	var out []DeviceType
	for _, t := range l.DeviceTypes {
		if isIOSType(t) {
			out = append(out, t)
		}
	}
	return out
}

// normName folds case and the small-capital R Apple uses in "iPhone Xʀ", so a
// request for "iPhone XR" finds it.
func normName(s string) string {
	s = strings.ReplaceAll(s, "ʀ", "r")
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

func findModel(types []DeviceType, model string) (DeviceType, bool) {
	want := normName(model)
	for _, t := range types {
		if t.Identifier == strings.TrimSpace(model) || normName(t.Name) == want {
			return t, true
		}
	}
	return DeviceType{}, false
}

var plainIPhone = regexp.MustCompile(`^iPhone (\d{1,4})$`)

// defaultModels are the plain "iPhone NN" types, newest first: the base
// model of each generation is the most representative device to default to.
func defaultModels(types []DeviceType) []DeviceType {
	type cand struct {
		t DeviceType
		n int
	}
	var cs []cand
	for _, t := range types {
		if m := plainIPhone.FindStringSubmatch(t.Name); m != nil {
			n, _ := strconv.Atoi(m[1])
			cs = append(cs, cand{t, n})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].n > cs[j].n })
	out := make([]DeviceType, len(cs))
	for i, c := range cs {
		out[i] = c.t
	}
	return out
}

func noSuchVersionError(want versionPrefix, installed []Runtime) error {
	have, dl := existingVersions(installed)
	se := core.NewSpecError(core.ErrRuntimeMissing, noSuchVersion(want, installed),
		"osVersion", want.String(), "installed", have, "downloadable", dl)
	se.Next = "request one of the versions that exist, e.g. --os " + suggestVersion(have, dl)
	return se
}

func suggestVersion(have, dl []string) string {
	switch {
	case len(have) > 0:
		return have[len(have)-1]
	case len(dl) > 0:
		return dl[len(dl)-1] + " --allow-download"
	}
	return "<version>"
}
