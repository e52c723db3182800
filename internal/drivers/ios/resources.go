package ios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

// Resource groups on a simulator are launchd jobs inside it (ADR 0036):
// each group is a fixed list of labels, preflighted against the booted
// runtime, changed through `simctl spawn <udid> launchctl`, and proven by
// re-reading both the override database and the job table.

var _ core.ResourceController = (*Driver)(nil)

// resourceLabel is one launchd job of a group, with the idle memory its
// job and helpers cost on a stock runtime (what slim mode saves).
type resourceLabel struct {
	Label  string
	SaveMB int
}

// stockFootprintMB is a stock simulator's idle memory on the scale the
// labels' savings are given in (about 4 GB; slimmed to about 0.9 GB).
const stockFootprintMB = 4096

// resourceCatalog maps every controllable iOS group to its labels. Groups
// share no label, so enabling one never restores another. Each group holds
// only the jobs of its own function; jobs other services share (accounts,
// CloudKit, StoreKit payments, push, media transport, share sheets,
// identity, model and language services) belong to no group (ADR 0089).
var resourceCatalog = map[string][]resourceLabel{
	"animations":           {{"com.apple.UIKit.transitiond", 90}, {"com.apple.CoreMotion.parallaxd", 60}},
	"searchIndexing":       {{"com.apple.searchd", 380}, {"com.apple.spotlightknowledged", 220}},
	"wallpaperRendering":   {{"com.apple.wallpaperservicesd", 180}, {"com.apple.PosterBoard.renderer", 160}},
	"widgets":              {{"com.apple.chronod", 240}},
	"liveActivities":       {{"com.apple.activitykitd", 110}},
	"photoAnalysis":        {{"com.apple.photoanalysisd", 330}},
	"healthServices":       {{"com.apple.healthd", 150}, {"com.apple.healthrecordsd", 70}},
	"homeServices":         {{"com.apple.homed", 140}},
	"fitnessServices":      {{"com.apple.fitnesscoachingd", 60}, {"com.apple.activityawardsd", 40}},
	"familyServices":       {{"com.apple.familycircled", 20}, {"com.apple.askpermissiond", 10}},
	"screenTime":           {{"com.apple.ScreenTimeAgent", 30}, {"com.apple.UsageTrackingAgent", 20}},
	"newsServices":         {{"com.apple.newsd", 90}},
	"weatherServices":      {{"com.apple.weatherd", 80}},
	"tipsServices":         {{"com.apple.tipsd", 50}},
	"gameServices":         {{"com.apple.gamed", 110}},
	"mapsSync":             {{"com.apple.navd", 120}, {"com.apple.Maps.mapssyncd", 60}},
	"advertising":          {{"com.apple.ap.promotedcontentd", 25}},
	"diagnosticReporting":  {{"com.apple.analyticsd", 120}, {"com.apple.osanalytics.osanalyticshelper", 70}},
	"assistantSuggestions": {{"com.apple.suggestd", 200}, {"com.apple.proactiveeventtrackerd", 90}},
	"appleIntelligence":    {{"com.apple.intelligenceplatformd", 45}, {"com.apple.generativeexperiencesd", 30}},
	"appStoreServices":     {{"com.apple.appstored", 35}},
	"appleMediaSync":       {{"com.apple.itunescloudd", 30}, {"com.apple.storebookkeeperd", 10}},
	"mailServices":         {{"com.apple.email.maild", 35}},
	"calendarServices":     {{"com.apple.calaccessd", 20}},
	"reminderServices":     {{"com.apple.remindd", 20}},
	"personalDataSync":     {{"com.apple.dataaccess.dataaccessd", 30}},
	"safariSync":           {{"com.apple.SafariBookmarksSyncAgent", 15}},
	"icloudSettingsSync":   {{"com.apple.syncdefaultsd", 15}},
	"messagingMaintenance": {{"com.apple.imautomatichistorydeletionagent", 10}, {"com.apple.imtransferagent", 20}, {"com.apple.facetimemessagestored", 10}},
	"watchConnectivity":    {{"com.apple.wcd", 15}, {"com.apple.companionappd", 15}},
	"carPlay":              {{"com.apple.carkitd", 20}},
	"tvRemote":             {{"com.apple.tvremoted", 15}},
	"findMy":               {{"com.apple.icloud.searchpartyd", 25}, {"com.apple.icloud.findmydeviced", 20}},
	"continuity":           {{"com.apple.rapportd", 20}},
	"walletServices":       {{"com.apple.passd", 40}, {"com.apple.coreidvd", 15}},
	"businessServices":     {{"com.apple.businessservicesd", 10}},
}

// unsupportedGroups are iOS groups with no narrow set of jobs to switch:
// their daemons are shared with services other groups or the OS need.
var unsupportedGroups = map[string]string{
	"backgroundSync": "background app refresh shares its scheduler with the system; no job controls it alone",
	"icloudSync":     "iCloud sync shares its daemons with account and CloudKit services",
}

// slimDefault is slim mode's default set: the groups slim mode has always
// turned off, whose savings make the published slim figures. The groups
// added later for the reference's full list (ADR 0089) trade features
// away (restrictions, payments, companion devices, ...) for little memory,
// so slim mode turns them off only when drivers.ios.slim.groups names them.
var slimDefault = []string{"animations", "searchIndexing", "wallpaperRendering", "widgets", "liveActivities",
	"photoAnalysis", "healthServices", "homeServices", "fitnessServices", "newsServices", "weatherServices",
	"tipsServices", "gameServices", "mapsSync", "diagnosticReporting", "assistantSuggestions"}

// ResourceLabels lists the launchd labels of an iOS group, for tests that
// check the simulated SDK ships the same catalogue.
func ResourceLabels(group string) []string {
	var out []string
	for _, l := range resourceCatalog[group] {
		out = append(out, l.Label)
	}
	return out
}

// ControlledGroups lists every group the driver has labels for, in
// catalogue order.
func ControlledGroups() []string {
	var out []string
	for _, g := range contract.ResourceGroupsFor(Platform) {
		if _, ok := resourceCatalog[g]; ok {
			out = append(out, g)
		}
	}
	return out
}

// SlimGroups is slim mode's default set (slimDefault), in catalogue order.
func SlimGroups() []string {
	var out []string
	for _, g := range ControlledGroups() {
		if slices.Contains(slimDefault, g) {
			out = append(out, g)
		}
	}
	return out
}

// Bounds of every launchctl command, and the backoff of read retries.
const (
	resourceCommandTimeout = 30 * time.Second
	resourceRecordFile     = ".simlock-resources.json"
)

var readBackoff = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}

// labelState is what one label was read to be.
type labelState struct {
	// Installed: the runtime has the job: it is loaded, or launchd holds
	// an override for it. A job neither loaded nor overridden is missing
	// from this runtime, or one it would not load by default: either way
	// not one simlock may control.
	Installed bool
	Disabled  bool // the override says disabled
	Loaded    bool
	Err       error
}

func (s labelState) observed() contract.ResourceState {
	switch {
	case s.Err != nil:
		return contract.ResourceUnknown
	case !s.Installed:
		return contract.ResourceUnsupported
	case s.Disabled && !s.Loaded:
		return contract.ResourceDisabled
	case !s.Disabled && s.Loaded:
		return contract.ResourceEnabled
	}
	return contract.ResourceUnknown // override and job disagree
}

func (s labelState) detail() string {
	switch {
	case s.Err != nil:
		return "read failed: " + s.Err.Error()
	case !s.Installed:
		return "not installed on the booted runtime"
	}
	return fmt.Sprintf("override %s, job %s", map[bool]string{true: "disabled", false: "enabled"}[s.Disabled],
		map[bool]string{true: "loaded", false: "not loaded"}[s.Loaded])
}

// incarnation is one simulator incarnation: a recreated simulator or a
// replaced runtime is another one, with no record.
type incarnation struct {
	UDID, Runtime, DeviceType string
	runtimeRoot               string
	runtimeName               string
}

func (i incarnation) key() string { return i.UDID + "|" + i.Runtime + "|" + i.DeviceType }

// session is one resource call on one device: runtime discovery and the
// override read are shared within it.
type session struct {
	d   *Driver
	inc incarnation
	// overrides is the last print-disabled read (label -> disabled).
	overrides map[string]bool
	ovErr     error
}

func (d *Driver) resourceSession(ctx context.Context, dev core.DeviceRef) (*session, error) {
	udid, err := handle(dev)
	if err != nil {
		return nil, err
	}
	var l *List
	err = d.retryRead(ctx, func(ctx context.Context) error {
		var err error
		l, err = d.listAll(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ios: resources %s: %w", udid, err)
	}
	for _, dv := range l.Devices {
		if dv.UDID != udid {
			continue
		}
		if dv.State != StateBooted {
			return nil, fmt.Errorf("ios: resources %s: the simulator is %s, not booted: %w", udid, dv.State, core.ErrDeviceBusy)
		}
		inc := incarnation{UDID: udid, Runtime: dv.RuntimeKey, DeviceType: dv.DeviceTypeIdentifier}
		for _, r := range l.Runtimes {
			if r.Identifier == dv.RuntimeKey || r.Name == dv.RuntimeKey {
				inc.Runtime, inc.runtimeRoot, inc.runtimeName = r.Identifier, r.RuntimeRoot, r.Name
			}
		}
		return &session{d: d, inc: inc}, nil
	}
	return nil, fmt.Errorf("ios: resources %s: %w", udid, core.ErrDeviceNotFound)
}

// launchctl runs launchctl inside the booted simulator, bounded by the
// command timeout and ctx. A non-zero exit is returned as the result, not
// an error: the caller decides what the exit means.
func (s *session) launchctl(ctx context.Context, args ...string) (ports.Result, error) {
	cctx, cancel := s.d.withTimeout(ctx, resourceCommandTimeout, "launchctl "+args[0])
	defer cancel()
	full := append([]string{"simctl", "--set", s.d.root, "spawn", s.inc.UDID, "launchctl"}, args...)
	res, err := s.d.runner.Run(cctx, ports.Command{Name: s.d.xcrun, Args: full})
	var ee *ports.ExitError
	if err != nil && !errors.As(err, &ee) {
		if cctx.Err() != nil {
			return res, fmt.Errorf("launchctl %s: %w", args[0], context.Cause(cctx))
		}
		return res, fmt.Errorf("launchctl %s: %w", args[0], err)
	}
	return res, nil
}

// retryRead runs an idempotent read, retrying a failure at most twice
// (100 ms, then 400 ms) while ctx allows. Writes never come here.
func (d *Driver) retryRead(ctx context.Context, read func(context.Context) error) error {
	err := read(ctx)
	for _, wait := range readBackoff {
		if err == nil || ctx.Err() != nil {
			return err
		}
		if dl, ok := ctx.Deadline(); ok && dl.Sub(d.clock.Now()) < wait {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-d.clock.After(wait):
		}
		err = read(ctx)
	}
	return err
}

// readOverrides reads the override database (print-disabled system).
func (s *session) readOverrides(ctx context.Context) {
	s.overrides, s.ovErr = nil, nil
	s.ovErr = s.d.retryRead(ctx, func(ctx context.Context) error {
		res, err := s.launchctl(ctx, "print-disabled", "system")
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("launchctl print-disabled: exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
		}
		ov, err := ParsePrintDisabled(res.Stdout)
		if err != nil {
			return err
		}
		s.overrides = ov
		return nil
	})
}

// ParsePrintDisabled reads `launchctl print-disabled <domain>`: the
// "disabled services = { "label" => disabled|enabled ... }" block (older
// launchctl prints true/false for disabled/enabled).
func ParsePrintDisabled(out []byte) (map[string]bool, error) {
	text := string(out)
	i := strings.Index(text, "disabled services = {")
	if i < 0 {
		return nil, fmt.Errorf("launchctl print-disabled: no \"disabled services\" block in %q", truncate(text, 200))
	}
	ov := map[string]bool{}
	for _, line := range strings.Split(text[i:], "\n")[1:] {
		line = strings.TrimSpace(line)
		if line == "}" {
			return ov, nil
		}
		if line == "" {
			continue
		}
		name, val, ok := strings.Cut(line, "=>")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || len(name) < 2 || name[0] != '"' || name[len(name)-1] != '"' {
			return nil, fmt.Errorf("launchctl print-disabled: unreadable line %q", line)
		}
		switch val {
		case "disabled", "true":
			ov[name[1:len(name)-1]] = true
		case "enabled", "false":
			ov[name[1:len(name)-1]] = false
		default:
			return nil, fmt.Errorf("launchctl print-disabled: unreadable value in %q", line)
		}
	}
	return nil, errors.New("launchctl print-disabled: unterminated block")
}

// readJob reports whether the job is loaded: print's exit 0 is loaded,
// "Could not find service" (113) is not; anything else is a failed read.
func (s *session) readJob(ctx context.Context, label string) (bool, error) {
	var loaded bool
	err := s.d.retryRead(ctx, func(ctx context.Context) error {
		res, err := s.launchctl(ctx, "print", "system/"+label)
		if err != nil {
			return err
		}
		switch {
		case res.ExitCode == 0 && bytes.Contains(res.Stdout, []byte(label+" = {")):
			loaded = true
		case res.ExitCode == 113 || bytes.Contains(res.Stderr, []byte("Could not find service")):
			loaded = false
		default:
			return fmt.Errorf("launchctl print %s: exit %d: %s", label, res.ExitCode, bytes.TrimSpace(res.Stderr))
		}
		return nil
	})
	return loaded, err
}

// readLabel combines the last override read with a fresh job read.
func (s *session) readLabel(ctx context.Context, label string) labelState {
	if s.ovErr != nil {
		return labelState{Err: s.ovErr}
	}
	loaded, err := s.readJob(ctx, label)
	if err != nil {
		return labelState{Err: err}
	}
	disabled, overridden := s.overrides[label]
	return labelState{Installed: loaded || overridden, Disabled: disabled, Loaded: loaded}
}

// groupObs is one group's evidence.
type groupObs struct {
	obs      contract.ResourceObservation
	services []contract.ServiceEvidence
	labels   map[string]labelState
}

// observeGroup reads every label of a group and derives its state: enabled
// or disabled only when every installed label says so.
func (s *session) observeGroup(ctx context.Context, group string) groupObs {
	g := groupObs{labels: map[string]labelState{}}
	labels, ok := resourceCatalog[group]
	if !ok {
		reason := unsupportedGroups[group]
		if reason == "" {
			reason = "not an iOS resource group"
		}
		g.obs = contract.ResourceObservation{State: contract.ResourceUnsupported, Reason: reason}
		return g
	}
	states := map[contract.ResourceState]int{}
	for _, l := range labels {
		st := s.readLabel(ctx, l.Label)
		g.labels[l.Label] = st
		o := st.observed()
		g.services = append(g.services, contract.ServiceEvidence{Group: group, Service: l.Label, Observed: o, Detail: st.detail()})
		if o != contract.ResourceUnsupported {
			states[o]++
		}
	}
	switch {
	case len(states) == 0:
		g.obs = contract.ResourceObservation{State: contract.ResourceUnsupported,
			Reason: "none of the group's services is installed on " + s.runtimeLabel()}
	case states[contract.ResourceUnknown] > 0:
		g.obs = contract.ResourceObservation{State: contract.ResourceUnknown, Reason: "a service's evidence is missing or inconsistent"}
	case len(states) > 1:
		g.obs = contract.ResourceObservation{State: contract.ResourceUnknown, Reason: "the group's services are in mixed states"}
	case states[contract.ResourceEnabled] > 0:
		g.obs = contract.ResourceObservation{State: contract.ResourceEnabled}
	default:
		g.obs = contract.ResourceObservation{State: contract.ResourceDisabled}
	}
	return g
}

func (s *session) runtimeLabel() string {
	if s.inc.runtimeName != "" {
		return s.inc.runtimeName
	}
	return s.inc.Runtime
}

// snapshot observes every iOS group without writing.
func (s *session) snapshot(ctx context.Context) (map[string]groupObs, error) {
	s.readOverrides(ctx)
	out := map[string]groupObs{}
	for _, g := range contract.ResourceGroupsFor(Platform) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[g] = s.observeGroup(ctx, g)
	}
	return out, nil
}

func (s *session) result(dev core.DeviceRef, groups map[string]groupObs, names []string) contract.ResourceResult {
	r := contract.ResourceResult{DeviceID: dev.ID, Platform: Platform, Resources: map[string]contract.ResourceObservation{},
		Services: []contract.ServiceEvidence{}, Changed: []string{}, Verification: contract.ResourceVerificationCurrentBoot}
	for _, n := range names {
		g := groups[n]
		r.Resources[n] = g.obs
		r.Services = append(r.Services, g.services...)
	}
	return r
}

// ObserveResources reads every iOS group of a booted simulator.
func (d *Driver) ObserveResources(ctx context.Context, dev core.DeviceRef) (contract.ResourceResult, error) {
	s, err := d.resourceSession(ctx, dev)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	groups, err := s.snapshot(ctx)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	r := s.result(dev, groups, contract.ResourceGroupsFor(Platform))
	r.Success = true
	for _, o := range r.Resources {
		if o.State == contract.ResourceUnknown {
			r.Success = false
		}
	}
	return r, nil
}

// ApplyResources writes the requested groups and proves them by re-reading.
func (d *Driver) ApplyResources(ctx context.Context, dev core.DeviceRef, change core.ResourceChange) (contract.ResourceResult, error) {
	if change.Restore != nil {
		return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest,
			"resources.restore: restore receipts are Android only; on iOS set the groups back to enabled")
	}
	if err := contract.ValidateResourceRequest(Platform, change.Resources); err != nil {
		return contract.ResourceResult{}, err
	}
	s, err := d.resourceSession(ctx, dev)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	r, err := s.apply(ctx, dev, change.Resources)
	if err != nil {
		return r, err
	}
	// The independent snapshot after the write, unrequested groups too.
	groups, err := s.snapshot(ctx)
	if err != nil {
		return r, err
	}
	r.Observed = map[string]contract.ResourceObservation{}
	for n, g := range groups {
		r.Observed[n] = g.obs
		if want, ok := change.Resources[n]; ok && isOpposite(want, g.obs.State) {
			r.ObservationContradictions = append(r.ObservationContradictions, n)
			r.Success = false
		}
	}
	sort.Strings(r.ObservationContradictions)
	return r, nil
}

func isOpposite(want, got contract.ResourceState) bool {
	return (want == contract.ResourceEnabled && got == contract.ResourceDisabled) ||
		(want == contract.ResourceDisabled && got == contract.ResourceEnabled)
}

// apply is the write-then-verify core of ApplyResources and of a repair.
func (s *session) apply(ctx context.Context, dev core.DeviceRef, req map[string]contract.ResourceState) (contract.ResourceResult, error) {
	names := make([]string, 0, len(req))
	for n := range req {
		names = append(names, n)
	}
	sort.Strings(names)
	s.readOverrides(ctx)
	type pending struct {
		group, label string
		want         contract.ResourceState
		before       labelState
	}
	var written []pending
	writeFailed := map[string]string{} // label -> why
	changed := map[string]bool{}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return contract.ResourceResult{}, err
		}
		pre := s.observeGroup(ctx, n)
		// Preflight: an unsupported group (no installed service) and a
		// group whose evidence cannot be read get no write at all.
		if pre.obs.State == contract.ResourceUnsupported || s.ovErr != nil {
			continue
		}
		if anyErr(pre.labels) {
			continue
		}
		for _, l := range resourceCatalog[n] {
			st := pre.labels[l.Label]
			if !st.Installed || st.observed() == req[n] {
				continue
			}
			if err := s.write(ctx, l.Label, req[n], st); err != nil {
				writeFailed[l.Label] = err.Error()
				s.d.log.Warn("resource write failed", "udid", s.inc.UDID, "group", n, "label", l.Label, "err", err)
			}
			written = append(written, pending{n, l.Label, req[n], st})
			changed[n] = true
		}
	}
	// Verify: re-read the override database and every job.
	s.readOverrides(ctx)
	groups := map[string]groupObs{}
	for _, n := range names {
		groups[n] = s.observeGroup(ctx, n)
	}
	r := s.result(dev, groups, names)
	r.Requested = req
	r.Fingerprint = contract.ResourceFingerprint(req)
	wrote := map[string]bool{}
	for _, p := range written {
		wrote[p.label] = true
	}
	var owned, released []string
	for i := range r.Services {
		ev := &r.Services[i]
		if !wrote[ev.Service] {
			continue
		}
		ev.Written = true
		want := req[ev.Group]
		switch {
		case writeFailed[ev.Service] != "":
			ev.Observed, ev.Detail = contract.ResourceUnknown, "write failed: "+writeFailed[ev.Service]
		case ev.Observed != want:
			// launchctl acknowledged the write but the re-read disagrees:
			// the change did not stick, and this read is no proof of
			// anything the device will do next.
			ev.Detail = fmt.Sprintf("write acknowledged but not in effect (re-read: %s, %s)", ev.Observed, ev.Detail)
			ev.Observed = contract.ResourceUnknown
		case want == contract.ResourceDisabled:
			owned = append(owned, ev.Service)
		default:
			released = append(released, ev.Service)
		}
	}
	// A group with an unproven write is unknown whatever the rest says.
	for _, ev := range r.Services {
		if ev.Written && ev.Observed == contract.ResourceUnknown {
			r.Resources[ev.Group] = contract.ResourceObservation{State: contract.ResourceUnknown, Reason: ev.Detail}
		}
	}
	for n := range changed {
		r.Changed = append(r.Changed, n)
	}
	sort.Strings(r.Changed)
	r.Success = true
	for _, n := range names {
		if r.Resources[n].State != req[n] {
			r.Success = false
		}
	}
	if len(owned)+len(released) > 0 {
		if err := s.d.updateRecord(s.inc, func(rec map[string]string) {
			for _, l := range owned {
				rec[l] = groupOf(l)
			}
			for _, l := range released {
				delete(rec, l)
			}
		}); err != nil {
			// Best effort: the record never changes the result.
			s.d.log.Warn("resource record not written", "udid", s.inc.UDID, "err", err)
		}
	}
	return r, nil
}

func anyErr(m map[string]labelState) bool {
	for _, st := range m {
		if st.Err != nil {
			return true
		}
	}
	return false
}

func groupOf(label string) string {
	for g, ls := range resourceCatalog {
		for _, l := range ls {
			if l.Label == label {
				return g
			}
		}
	}
	return ""
}

// write changes one label, never retried: the verification re-read that
// follows is what tells whether it took. Disabling writes the override,
// then unloads the job; enabling clears the override, then loads the job
// from the runtime's definition.
func (s *session) write(ctx context.Context, label string, want contract.ResourceState, st labelState) error {
	run := func(args ...string) error {
		res, err := s.launchctl(ctx, args...)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("launchctl %s: exit %d: %s", args[0], res.ExitCode, bytes.TrimSpace(res.Stderr))
		}
		return nil
	}
	if want == contract.ResourceDisabled {
		if !st.Disabled {
			if err := run("disable", "system/"+label); err != nil {
				return err
			}
		}
		if st.Loaded {
			return run("bootout", "system/"+label)
		}
		return nil
	}
	if st.Disabled {
		if err := run("enable", "system/"+label); err != nil {
			return err
		}
	}
	if !st.Loaded {
		if s.inc.runtimeRoot == "" {
			return errors.New("the runtime's root is unknown, so the job's definition cannot be found")
		}
		return run("bootstrap", "system", filepath.Join(s.inc.runtimeRoot, "System/Library/LaunchDaemons", label+".plist"))
	}
	return nil
}

// The record of overrides simlock wrote, per incarnation, in the driver's
// root: incarnation key -> label -> group.
type resourceRecord struct {
	Incarnations map[string]map[string]string `json:"incarnations"`
}

func (d *Driver) recordPath() string { return filepath.Join(d.root, resourceRecordFile) }

func (d *Driver) readRecord() (resourceRecord, error) {
	rec := resourceRecord{Incarnations: map[string]map[string]string{}}
	if err := readRecordFile(d.fs, d.recordPath(), &rec); err != nil {
		return resourceRecord{Incarnations: map[string]map[string]string{}}, err
	}
	if rec.Incarnations == nil {
		rec.Incarnations = map[string]map[string]string{}
	}
	return rec, nil
}

// resourceState is the driver's resource-control state (one field of
// Driver, so driver.go stays the lifecycle's).
type resourceState struct {
	// recordMu serialises the record's read-modify-write across devices.
	recordMu sync.Mutex
	slim     Slim
}

func (d *Driver) updateRecord(inc incarnation, fn func(map[string]string)) error {
	d.res.recordMu.Lock()
	defer d.res.recordMu.Unlock()
	rec, err := d.readRecord()
	if err != nil {
		return err
	}
	m := rec.Incarnations[inc.key()]
	if m == nil {
		m = map[string]string{}
	}
	fn(m)
	if len(m) == 0 {
		delete(rec.Incarnations, inc.key())
	} else {
		rec.Incarnations[inc.key()] = m
	}
	return writeRecordFile(d.fs, d.recordPath(), rec)
}

// forgetResources drops every recorded incarnation of a deleted device:
// its UDID never comes back, so the entries could only accumulate.
func (d *Driver) forgetResources(udid string) {
	d.res.recordMu.Lock()
	defer d.res.recordMu.Unlock()
	rec, err := d.readRecord()
	if err != nil {
		d.log.Warn("resource record unreadable", "err", err)
		return
	}
	dropped := false
	for k := range rec.Incarnations {
		if strings.HasPrefix(k, udid+"|") {
			delete(rec.Incarnations, k)
			dropped = true
		}
	}
	if !dropped {
		return
	}
	if err := writeRecordFile(d.fs, d.recordPath(), rec); err != nil {
		d.log.Warn("resource record not pruned", "udid", udid, "err", err)
	}
}

// ReconcileResources compares the request with an independent read and the
// record, and repairs when asked.
func (d *Driver) ReconcileResources(ctx context.Context, dev core.DeviceRef, rc core.ResourceReconcile) (contract.ResourceResult, error) {
	if err := contract.ValidateResourceRequest(Platform, rc.Resources); err != nil {
		return contract.ResourceResult{}, err
	}
	s, err := d.resourceSession(ctx, dev)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	groups, err := s.snapshot(ctx)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	drift, extras := s.drift(groups, rc.Resources)
	r := s.result(dev, groups, sortedNames(rc.Resources))
	r.Requested = rc.Resources
	r.Fingerprint = contract.ResourceFingerprint(rc.Resources)
	r.Drift = &drift
	repair := map[string]contract.ResourceState{}
	if rc.Repair {
		for _, n := range append(append([]string(nil), drift.MissingRequested...), drift.CommandFailure...) {
			repair[n] = rc.Resources[n]
		}
	}
	if rc.ReleaseOwnedExtras {
		for _, n := range extras {
			repair[n] = contract.ResourceEnabled
		}
	}
	if len(repair) == 0 {
		r.Success = drift.Empty()
		return r, nil
	}
	applied, err := s.apply(ctx, dev, repair)
	if err != nil {
		return r, err
	}
	r.Changed = applied.Changed
	groups, err = s.snapshot(ctx)
	if err != nil {
		return r, err
	}
	final, _ := s.drift(groups, rc.Resources)
	fr := s.result(dev, groups, sortedNames(rc.Resources))
	r.Resources, r.Services = fr.Resources, fr.Services
	// Keep the write evidence of the repair on the services it touched.
	for i := range r.Services {
		for _, ev := range applied.Services {
			if ev.Written && ev.Service == r.Services[i].Service {
				r.Services[i].Written = true
			}
		}
	}
	r.FinalDrift = &final
	r.Success = final.Empty()
	return r, nil
}

func sortedNames(m map[string]contract.ResourceState) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// drift compares a snapshot with the request and the record. It also
// forgets recorded labels now observed enabled (an erase removed them):
// they are neither extras nor simlock's any more. It returns the owned
// extra groups too.
func (s *session) drift(groups map[string]groupObs, req map[string]contract.ResourceState) (contract.ResourceDrift, []string) {
	dr := contract.ResourceDrift{MissingRequested: []string{}, OwnedExtra: []string{}, Unsupported: []string{}, CommandFailure: []string{}}
	for _, n := range sortedNames(req) {
		switch got := groups[n].obs.State; {
		case got == contract.ResourceUnsupported:
			dr.Unsupported = append(dr.Unsupported, n)
		case got == contract.ResourceUnknown:
			dr.CommandFailure = append(dr.CommandFailure, n)
		case got != req[n]:
			dr.MissingRequested = append(dr.MissingRequested, n)
		}
	}
	rec, err := s.d.readRecord()
	if err != nil {
		s.d.log.Warn("resource record unreadable; no owned extras reported", "err", err)
		return dr, nil
	}
	mine := rec.Incarnations[s.inc.key()]
	var gone []string
	extra := map[string]bool{}
	for label, group := range mine {
		st, ok := groups[group].labels[label]
		if !ok || st.Err != nil {
			continue
		}
		switch st.observed() {
		case contract.ResourceDisabled:
			if _, requested := req[group]; !requested {
				extra[group] = true
			}
		case contract.ResourceEnabled, contract.ResourceUnsupported:
			gone = append(gone, label)
		}
	}
	if len(gone) > 0 {
		if err := s.d.updateRecord(s.inc, func(m map[string]string) {
			for _, l := range gone {
				delete(m, l)
			}
		}); err != nil {
			s.d.log.Warn("resource record not pruned", "err", err)
		}
	}
	for g := range extra {
		dr.OwnedExtra = append(dr.OwnedExtra, g)
	}
	sort.Strings(dr.OwnedExtra)
	return dr, slices.Clone(dr.OwnedExtra)
}
