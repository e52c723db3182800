package android

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Resource groups on an Android emulator (core.ResourceController). Each
// group is a fixed catalogue of native services: settings (animation
// scales, dream activation), the Backup Manager switch, or optional system
// packages disabled for the current user. Callers name groups only; the
// native names stay here.
//
// Every answer is evidence from a read made after the writes, never the
// request echoed back. A write that changed something is recorded in a
// restore receipt bound to the serial, the guest's boot id, the user and
// the driver's incarnation of the device (ADR 0037): a snapshot restore
// brings the guest's old boot id back, so the incarnation is what tells a
// restored device from the one that issued a receipt.

var _ core.ResourceController = (*Driver)(nil)

const (
	// resourceCommandTimeout bounds every native command.
	resourceCommandTimeout = 30 * time.Second
	// bootIDPath is the guest kernel's per-boot random id.
	bootIDPath = "/proc/sys/kernel/random/boot_id"
)

// readBackoff is the wait before each retry of an idempotent read; writes
// are never retried (the re-read after them reconciles).
func readBackoff() []time.Duration {
	return []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}
}

// settingService is one setting and its value in each group state.
type settingService struct {
	ns, key, on, off string
}

// resourceGroup is the native make-up of one Android group.
type resourceGroup struct {
	settings []settingService
	backup   bool
	packages []string
}

// androidResourceCatalogue is the fixed catalogue of controllable groups.
// Optional-app groups list only optional apps: providers, SystemUI, the
// launcher, keyboards, credentials and networking never appear, and role
// holders, the selected keyboard and enabled accessibility services are
// protected at write time besides. Each package group names the app under
// its Google and its AOSP package ids, whichever the image ships. Mainline
// modules appear only as the APK the module carries, never as the APEX
// container itself: a group disables the app for the user and removes
// nothing (ADR 0089).
func androidResourceCatalogue() map[string]resourceGroup {
	scale := func(key string) settingService { return settingService{"global", key, "1", "0"} }
	dream := func(key string) settingService { return settingService{"secure", key, "1", "0"} }
	pkgs := func(p ...string) resourceGroup { return resourceGroup{packages: p} }
	return map[string]resourceGroup{
		"animations":   {settings: []settingService{scale("window_animation_scale"), scale("transition_animation_scale"), scale("animator_duration_scale")}},
		"screensavers": {settings: []settingService{dream("screensaver_enabled"), dream("screensaver_activate_on_dock"), dream("screensaver_activate_on_sleep")}},
		"backup":       {backup: true},

		"mailApp":           pkgs("com.google.android.gm", "com.android.email"),
		"calendarApp":       pkgs("com.google.android.calendar", "com.android.calendar"),
		"contactsApp":       pkgs("com.google.android.contacts", "com.android.contacts"),
		"mapsApp":           pkgs("com.google.android.apps.maps"),
		"videoApp":          pkgs("com.google.android.youtube", "com.google.android.videos"),
		"musicApp":          pkgs("com.google.android.apps.youtube.music", "com.android.music"),
		"photosApp":         pkgs("com.google.android.apps.photos", "com.android.gallery3d"),
		"assistantApp":      pkgs("com.google.android.googlequicksearchbox", "com.google.android.apps.googleassistant"),
		"digitalWellbeing":  pkgs("com.google.android.apps.wellbeing"),
		"printing":          pkgs("com.android.printspooler", "com.android.bips", "com.google.android.printservice.recommendation"),
		"accessibilityApps": pkgs("com.google.android.marvin.talkback"),
		"textToSpeech":      pkgs("com.google.android.tts", "com.svox.pico"),
		"wallpaperApps":     pkgs("com.google.android.apps.wallpaper", "com.android.wallpaper", "com.android.wallpaper.livepicker"),

		"healthConnect":           pkgs("com.google.android.apps.healthdata", "com.google.android.healthconnect.controller", "com.android.healthconnect.controller"),
		"adServices":              pkgs("com.google.android.adservices.api", "com.android.adservices.api"),
		"onDevicePersonalization": pkgs("com.google.android.ondevicepersonalization.services", "com.android.ondevicepersonalization.services"),
		"storeApp":                pkgs("com.android.vending"),
		"dialerApp":               pkgs("com.google.android.dialer", "com.android.dialer"),
		"messagesApp":             pkgs("com.google.android.apps.messaging", "com.android.messaging"),
		"googlePlayServices":      pkgs("com.google.android.gms"),
		"googleServicesFramework": pkgs("com.google.android.gsf"),
	}
}

// ResourcePackages lists the packages of an Android group, for tests that
// check the simulated images ship them.
func ResourcePackages(group string) []string {
	return slices.Clone(androidResourceCatalogue()[group].packages)
}

// protectedRoles are the roles whose holders are never disabled.
func protectedRoles() []string {
	return []string{"android.app.role.HOME", "android.app.role.DIALER", "android.app.role.SMS",
		"android.app.role.BROWSER", "android.app.role.ASSISTANT", "android.app.role.EMERGENCY",
		"android.app.role.CALL_SCREENING"}
}

// resDevice is one resource call's view of the device: where it is and
// which incarnation, boot and user the call sees.
type resDevice struct {
	name        string
	serial      string
	user        int
	bootID      string
	incarnation string
}

// shellRead runs an idempotent shell read, bounded, retried at most twice.
func (d *Driver) shellRead(ctx context.Context, serial string, args ...string) (string, error) {
	var err error
	backoff := readBackoff()
	for attempt := 0; ; attempt++ {
		var out string
		if out, err = d.shellOnce(ctx, serial, args...); err == nil {
			return out, nil
		}
		if attempt >= len(backoff) || ctx.Err() != nil {
			return "", err
		}
		if serr := d.sleep(ctx, backoff[attempt], nil); serr != nil {
			return "", err
		}
	}
}

// shellOnce runs one bounded shell command; a failure carries its output.
func (d *Driver) shellOnce(ctx context.Context, serial string, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, resourceCommandTimeout)
	defer cancel()
	res, err := d.adbOn(cctx, serial, append([]string{"shell"}, args...)...)
	if err != nil {
		msg := strings.TrimSpace(string(res.Stderr) + " " + string(res.Stdout))
		return "", fmt.Errorf("adb shell %s: %w (%s)", strings.Join(args, " "), err, msg)
	}
	return string(res.Stdout), nil
}

// resDeviceFor resolves dev and reads its current user and boot id. A
// device without an incarnation yet (created before incarnations) gets one.
func (d *Driver) resDeviceFor(ctx context.Context, dev core.DeviceRef) (resDevice, error) {
	name, port, st, err := d.device(ctx, dev)
	if err != nil {
		return resDevice{}, err
	}
	rd := resDevice{name: name, serial: serialFor(port), incarnation: st.Incarnation}
	if rd.incarnation == "" {
		if rd.incarnation, err = d.newIncarnation(name); err != nil {
			return resDevice{}, err
		}
	}
	out, err := d.shellRead(ctx, rd.serial, "cmd", "activity", "get-current-user")
	if err != nil {
		return resDevice{}, fmt.Errorf("android driver: read the current user: %w", err)
	}
	if rd.user, err = strconv.Atoi(strings.TrimSpace(out)); err != nil {
		return resDevice{}, fmt.Errorf("android driver: current user %q is not a number", strings.TrimSpace(out))
	}
	out, err = d.shellRead(ctx, rd.serial, "cat", bootIDPath)
	if err != nil {
		return resDevice{}, fmt.Errorf("android driver: read the boot id: %w", err)
	}
	if rd.bootID = strings.TrimSpace(out); rd.bootID == "" {
		return resDevice{}, errors.New("android driver: the boot id is empty")
	}
	return rd, nil
}

// newIncarnation starts a new incarnation of the AVD's device. It is
// called before anything that replaces the guest's state wholesale (a
// boot, a snapshot load), so receipts of the old one stop matching before
// the old state is gone, and whatever is read afterwards is read afresh.
func (d *Driver) newIncarnation(name string) (string, error) {
	id, err := d.nextIncarnation(name)
	if err != nil {
		return "", err
	}
	if err := d.updateState(name, func(s *avdState) { s.Incarnation = id }); err != nil {
		return "", fmt.Errorf("android driver: record the device incarnation: %w", err)
	}
	return id, nil
}

// nextIncarnation mints the token of name's next incarnation, for the
// caller to record: every boot and snapshot load makes one, and no
// keep-booted baseline of the old incarnation may survive it.
func (d *Driver) nextIncarnation(name string) (string, error) {
	if err := d.kbForget(name); err != nil {
		return "", err
	}
	return "inc-" + randomID() + randomID(), nil
}

// readSetting returns a setting's value; absent is true for "null".
func (d *Driver) readSetting(ctx context.Context, rd resDevice, ns, key string) (value string, absent bool, err error) {
	out, err := d.shellRead(ctx, rd.serial, "settings", "--user", strconv.Itoa(rd.user), "get", ns, key)
	if err != nil {
		return "", false, err
	}
	v := strings.TrimSpace(out)
	return v, v == "null", nil
}

// settingState is what one setting's value says about its service.
func settingState(s settingService, value string, absent bool) (contract.ResourceState, string) {
	if absent {
		return contract.ResourceUnknown, "not set: the runtime default is not inferred"
	}
	same := func(a, b string) bool {
		fa, ea := strconv.ParseFloat(a, 64)
		fb, eb := strconv.ParseFloat(b, 64)
		if ea == nil && eb == nil {
			return fa == fb
		}
		return a == b
	}
	switch {
	case same(value, s.off):
		return contract.ResourceDisabled, s.key + "=" + value
	case same(value, s.on):
		return contract.ResourceEnabled, s.key + "=" + value
	}
	return contract.ResourceUnknown, s.key + "=" + value + " is neither " + s.on + " nor " + s.off
}

// readBackup reads the Backup Manager switch for the user.
func (d *Driver) readBackup(ctx context.Context, rd resDevice) (contract.ResourceState, string, error) {
	out, err := d.shellRead(ctx, rd.serial, "bmgr", "--user", strconv.Itoa(rd.user), "enabled")
	if err != nil {
		return contract.ResourceUnknown, "", err
	}
	line := strings.TrimSpace(out)
	switch {
	case strings.HasSuffix(line, "currently enabled"):
		return contract.ResourceEnabled, line, nil
	case strings.HasSuffix(line, "currently disabled"):
		return contract.ResourceDisabled, line, nil
	}
	return contract.ResourceUnknown, "unrecognised bmgr answer " + strconv.Quote(line), nil
}

// packageView is the user's installed and disabled packages.
type packageView struct {
	installed map[string]bool
	disabled  map[string]bool
	err       error
}

func (d *Driver) readPackages(ctx context.Context, rd resDevice) packageView {
	list := func(flags ...string) (map[string]bool, error) {
		args := append([]string{"pm", "list", "packages"}, flags...)
		out, err := d.shellRead(ctx, rd.serial, append(args, "--user", strconv.Itoa(rd.user))...)
		if err != nil {
			return nil, err
		}
		m := map[string]bool{}
		for _, l := range lines([]byte(out)) {
			if p, ok := strings.CutPrefix(strings.TrimSpace(l), "package:"); ok {
				m[p] = true
			}
		}
		return m, nil
	}
	var v packageView
	if v.installed, v.err = list(); v.err == nil {
		v.disabled, v.err = list("-d")
	}
	return v
}

// packageStateOf reads a package's explicit enabled state for the user
// from `dumpsys package`: default, enabled, disabled or disabled-user.
func (d *Driver) packageStateOf(ctx context.Context, rd resDevice, pkg string) (string, error) {
	out, err := d.shellRead(ctx, rd.serial, "dumpsys", "package", pkg)
	if err != nil {
		return "", err
	}
	prefix := "User " + strconv.Itoa(rd.user) + ":"
	for _, l := range lines([]byte(out)) {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "enabled="); ok {
				if s, ok := map[string]string{"0": "default", "1": "enabled", "2": "disabled", "3": "disabled-user"}[v]; ok {
					return s, nil
				}
			}
		}
	}
	return "", fmt.Errorf("dumpsys package %s: no enabled state for user %d", pkg, rd.user)
}

// groupObservation reads one group; it issues no writes.
func (d *Driver) groupObservation(ctx context.Context, rd resDevice, name string, g resourceGroup, pv *packageView) (contract.ResourceObservation, []contract.ServiceEvidence) {
	var ev []contract.ServiceEvidence
	for _, s := range g.settings {
		e := contract.ServiceEvidence{Group: name, Service: s.ns + "/" + s.key}
		v, absent, err := d.readSetting(ctx, rd, s.ns, s.key)
		if err != nil {
			e.Observed, e.Detail = contract.ResourceUnknown, "read failed: "+err.Error()
		} else {
			e.Observed, e.Detail = settingState(s, v, absent)
		}
		ev = append(ev, e)
	}
	if g.backup {
		e := contract.ServiceEvidence{Group: name, Service: "backupmanager/user-" + strconv.Itoa(rd.user)}
		st, detail, err := d.readBackup(ctx, rd)
		if err != nil {
			detail = "read failed: " + err.Error()
		}
		e.Observed, e.Detail = st, detail
		ev = append(ev, e)
	}
	for _, p := range g.packages {
		e := contract.ServiceEvidence{Group: name, Service: p}
		switch {
		case pv.err != nil:
			e.Observed, e.Detail = contract.ResourceUnknown, "package list failed: "+pv.err.Error()
		case !pv.installed[p]:
			e.Observed, e.Detail = contract.ResourceUnsupported, "not installed on this image"
		case pv.disabled[p]:
			e.Observed, e.Detail = contract.ResourceDisabled, "disabled for user "+strconv.Itoa(rd.user)
		default:
			e.Observed, e.Detail = contract.ResourceEnabled, "enabled for user "+strconv.Itoa(rd.user)
		}
		ev = append(ev, e)
	}
	return groupState(ev), ev
}

// groupState derives a group's state from its services' evidence: enabled
// or disabled only when every present service agrees; a group none of
// whose services exist here is unsupported.
func groupState(ev []contract.ServiceEvidence) contract.ResourceObservation {
	var present []contract.ServiceEvidence
	for _, e := range ev {
		if e.Observed != contract.ResourceUnsupported {
			present = append(present, e)
		}
	}
	if len(present) == 0 {
		return contract.ResourceObservation{State: contract.ResourceUnsupported, Reason: "none of the group's services is installed on this image"}
	}
	first := present[0].Observed
	for _, e := range present {
		if e.Observed == contract.ResourceUnknown {
			return contract.ResourceObservation{State: contract.ResourceUnknown, Reason: e.Service + ": " + e.Detail}
		}
		if e.Observed != first {
			return contract.ResourceObservation{State: contract.ResourceUnknown, Reason: "mixed: some services are enabled and some disabled"}
		}
	}
	return contract.ResourceObservation{State: first}
}

// observeAll reads every Android group, fresh.
func (d *Driver) observeAll(ctx context.Context, rd resDevice) (map[string]contract.ResourceObservation, []contract.ServiceEvidence) {
	cat := androidResourceCatalogue()
	pv := d.readPackages(ctx, rd)
	obs := map[string]contract.ResourceObservation{}
	var ev []contract.ServiceEvidence
	for _, name := range contract.ResourceGroupsFor(Platform) {
		g, ok := cat[name]
		if !ok {
			obs[name] = contract.ResourceObservation{State: contract.ResourceUnsupported,
				Reason: "simlock has no Android control for this group"}
			continue
		}
		o, e := d.groupObservation(ctx, rd, name, g, &pv)
		obs[name] = o
		ev = append(ev, e...)
	}
	return obs, ev
}

// ObserveResources implements core.ResourceController.
func (d *Driver) ObserveResources(ctx context.Context, dev core.DeviceRef) (contract.ResourceResult, error) {
	rd, err := d.resDeviceFor(ctx, dev)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	obs, ev := d.observeAll(ctx, rd)
	return contract.ResourceResult{DeviceID: dev.ID, Platform: Platform, Resources: obs, Services: nonNil(ev),
		Changed: []string{}, Verification: contract.ResourceVerificationCurrentBoot, Success: true}, nil
}

// protection is what package disablement must leave alone.
type protection struct {
	why map[string]string // package → reason
	err error             // set: protections unknown, disable nothing
}

func (d *Driver) readProtection(ctx context.Context, rd resDevice) protection {
	p := protection{why: map[string]string{}}
	user := strconv.Itoa(rd.user)
	for _, role := range protectedRoles() {
		out, err := d.shellRead(ctx, rd.serial, "cmd", "role", "get-role-holders", "--user", user, role)
		if err != nil {
			p.err = fmt.Errorf("role holders cannot be read (%w): package disablement fails closed", err)
			return p
		}
		for _, l := range lines([]byte(out)) {
			if pkg := strings.TrimSpace(l); pkg != "" {
				p.why[pkg] = "holds " + role
			}
		}
	}
	ime, absent, err := d.readSetting(ctx, rd, "secure", "default_input_method")
	if err != nil {
		p.err = fmt.Errorf("the selected keyboard cannot be read (%w): package disablement fails closed", err)
		return p
	}
	if !absent {
		pkg, _, _ := strings.Cut(ime, "/")
		p.why[pkg] = "the selected keyboard"
	}
	a11y, absent, err := d.readSetting(ctx, rd, "secure", "enabled_accessibility_services")
	if err != nil {
		p.err = fmt.Errorf("accessibility services cannot be read (%w): package disablement fails closed", err)
		return p
	}
	if !absent {
		for _, comp := range strings.Split(a11y, ":") {
			if pkg, _, _ := strings.Cut(strings.TrimSpace(comp), "/"); pkg != "" {
				p.why[pkg] = "an enabled accessibility service"
			}
		}
	}
	return p
}

// ApplyResources implements core.ResourceController.
func (d *Driver) ApplyResources(ctx context.Context, dev core.DeviceRef, change core.ResourceChange) (contract.ResourceResult, error) {
	if change.Restore != nil {
		if len(change.Resources) > 0 {
			return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest, "pass either resources or restore, not both")
		}
		return d.restore(ctx, dev, *change.Restore)
	}
	if err := contract.ValidateResourceRequest(Platform, change.Resources); err != nil {
		return contract.ResourceResult{}, err
	}
	rd, err := d.resDeviceFor(ctx, dev)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	return d.apply(ctx, dev, rd, change.Resources)
}

// apply writes the requested groups, then observes every group afresh.
func (d *Driver) apply(ctx context.Context, dev core.DeviceRef, rd resDevice, req map[string]contract.ResourceState) (contract.ResourceResult, error) {
	cat := androidResourceCatalogue()
	receipt := contract.RestoreReceipt{Serial: rd.serial, BootID: rd.bootID, User: rd.user, Incarnation: rd.incarnation}
	user := strconv.Itoa(rd.user)
	written := map[string]bool{}    // service → a write was issued
	notes := map[string]string{}    // service → why it was left alone or failed
	refusals := map[string]string{} // group → why it was not written at all
	changed := map[string]bool{}
	var prot *protection
	var pv *packageView

	write := func(group, service string, args ...string) bool {
		changed[group], written[service] = true, true
		if _, err := d.shellOnce(ctx, rd.serial, args...); err != nil {
			notes[service] = "write failed: " + err.Error()
			return false
		}
		return true
	}
	for _, name := range sortedGroupNames(req) {
		g, ok := cat[name]
		if !ok {
			continue // unsupported: the observation says so
		}
		want := req[name]
		for _, s := range g.settings {
			svc := s.ns + "/" + s.key
			v, absent, err := d.readSetting(ctx, rd, s.ns, s.key)
			if err != nil {
				notes[svc] = "not written: the prior value cannot be read: " + err.Error()
				continue
			}
			target := map[contract.ResourceState]string{contract.ResourceEnabled: s.on, contract.ResourceDisabled: s.off}[want]
			if st, _ := settingState(s, v, absent); st == want {
				continue
			}
			receipt.Entries = append(receipt.Entries, contract.RestoreEntry{Kind: "setting", Namespace: s.ns, Key: s.key, Value: valueUnlessAbsent(v, absent), Absent: absent})
			write(name, svc, "settings", "--user", user, "put", s.ns, s.key, target)
		}
		if g.backup {
			svc := "backupmanager/user-" + user
			st, _, err := d.readBackup(ctx, rd)
			switch {
			case err != nil:
				notes[svc] = "not written: the prior state cannot be read: " + err.Error()
			case st != want:
				if st == contract.ResourceUnknown {
					notes[svc] = "not written: the prior state is not recognised"
					break
				}
				prior := st == contract.ResourceEnabled
				receipt.Entries = append(receipt.Entries, contract.RestoreEntry{Kind: "backup", Key: "user-" + user, Enabled: &prior})
				write(name, svc, "bmgr", "--user", user, "enable", strconv.FormatBool(want == contract.ResourceEnabled))
			}
		}
		if len(g.packages) == 0 {
			continue
		}
		if pv == nil {
			v := d.readPackages(ctx, rd)
			pv = &v
		}
		if pv.err != nil {
			refusals[name] = "not written: the package list cannot be read: " + pv.err.Error()
			continue
		}
		if want == contract.ResourceDisabled && prot == nil {
			p := d.readProtection(ctx, rd)
			prot = &p
		}
		if want == contract.ResourceDisabled && prot.err != nil {
			refusals[name] = prot.err.Error()
			continue
		}
		for _, p := range g.packages {
			if !pv.installed[p] || pv.disabled[p] == (want == contract.ResourceDisabled) {
				continue
			}
			if why, ok := prot.whyFor(p); want == contract.ResourceDisabled && ok {
				notes[p] = "protected: " + why
				continue
			}
			prior, err := d.packageStateOf(ctx, rd, p)
			if err != nil {
				notes[p] = "not written: the prior state cannot be read: " + err.Error()
				continue
			}
			receipt.Entries = append(receipt.Entries, contract.RestoreEntry{Kind: "package", Key: p, Value: prior, Enabled: ptrTo(!pv.disabled[p])})
			verb := "enable"
			if want == contract.ResourceDisabled {
				verb = "disable-user"
			}
			write(name, p, "pm", verb, "--user", user, p)
		}
	}

	// The independent re-read: every group, nothing reused from above.
	observed, ev := d.observeAll(ctx, rd)
	res := contract.ResourceResult{DeviceID: dev.ID, Platform: Platform, Requested: req,
		Fingerprint: contract.ResourceFingerprint(req), Resources: map[string]contract.ResourceObservation{},
		Observed: observed, Changed: []string{}, Verification: contract.ResourceVerificationCurrentBoot, Success: true}
	for _, name := range sortedGroupNames(req) {
		o := observed[name]
		if why, ok := refusals[name]; ok && o.State != req[name] {
			o.Reason = why
		}
		res.Resources[name] = o
		if o.State != req[name] {
			res.Success = false
		}
		if opposite(o.State, req[name]) {
			res.ObservationContradictions = append(res.ObservationContradictions, name)
		}
		if changed[name] {
			res.Changed = append(res.Changed, name)
		}
	}
	for _, e := range ev {
		if _, asked := req[e.Group]; !asked {
			continue
		}
		e.Written = written[e.Service]
		if n, ok := notes[e.Service]; ok {
			e.Detail = n + "; observed " + e.Detail
		}
		res.Services = append(res.Services, e)
	}
	res.Services = nonNil(res.Services)
	if len(receipt.Entries) > 0 {
		slices.Reverse(receipt.Entries) // undo in the opposite order
		res.Restore = &receipt
	}
	return res, nil
}

func (p *protection) whyFor(pkg string) (string, bool) {
	if p == nil {
		return "", false
	}
	why, ok := p.why[pkg]
	return why, ok
}

// restore writes a receipt's prior states back on the device that issued
// it, then re-reads each one.
func (d *Driver) restore(ctx context.Context, dev core.DeviceRef, rc contract.RestoreReceipt) (contract.ResourceResult, error) {
	rd, err := d.resDeviceFor(ctx, dev)
	if err != nil {
		return contract.ResourceResult{}, err
	}
	switch {
	case rc.Serial != rd.serial:
		return contract.ResourceResult{}, fmt.Errorf("%w: it was issued on %s, this device is %s", core.ErrReceiptMismatch, rc.Serial, rd.serial)
	case rc.BootID != rd.bootID:
		return contract.ResourceResult{}, fmt.Errorf("%w: the device has rebooted since it was issued (boot %s, now %s)", core.ErrReceiptMismatch, rc.BootID, rd.bootID)
	case rc.User != rd.user:
		return contract.ResourceResult{}, fmt.Errorf("%w: it was issued for user %d, the current user is %d", core.ErrReceiptMismatch, rc.User, rd.user)
	case rc.Incarnation == "" || rc.Incarnation != rd.incarnation:
		return contract.ResourceResult{}, fmt.Errorf("%w: the device was restored from a snapshot since it was issued (incarnation %q, now %q)", core.ErrReceiptMismatch, rc.Incarnation, rd.incarnation)
	}
	groupOf := serviceGroups()
	user := strconv.Itoa(rd.user)
	res := contract.ResourceResult{DeviceID: dev.ID, Platform: Platform, Resources: map[string]contract.ResourceObservation{},
		Changed: []string{}, Verification: contract.ResourceVerificationCurrentBoot, Success: true}
	touched := map[string]bool{}
	var writeErrs []string
	for _, e := range rc.Entries {
		var args []string
		svc := e.Key
		switch e.Kind {
		case "setting":
			svc = e.Namespace + "/" + e.Key
			if !slices.Contains([]string{"global", "system", "secure"}, e.Namespace) || groupOf[svc] == "" {
				return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest, "restore: setting %s is not one simlock writes", svc)
			}
			args = []string{"settings", "--user", user, "put", e.Namespace, e.Key, shellQuote(e.Value)}
			if e.Absent {
				args = []string{"settings", "--user", user, "delete", e.Namespace, e.Key}
			}
		case "backup":
			svc = "backupmanager/" + e.Key
			if e.Enabled == nil || e.Key != "user-"+user {
				return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest, "restore: malformed backup entry")
			}
			args = []string{"bmgr", "--user", user, "enable", strconv.FormatBool(*e.Enabled)}
		case "package":
			verb := map[string]string{"default": "default-state", "enabled": "enable", "disabled": "disable-user", "disabled-user": "disable-user"}[e.Value]
			if verb == "" || groupOf[e.Key] == "" {
				return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest, "restore: package entry %s (%s) is not one simlock writes", e.Key, e.Value)
			}
			args = []string{"pm", verb, "--user", user, e.Key}
		default:
			return contract.ResourceResult{}, contract.Errorf(contract.CodeBadRequest, "restore: unknown entry kind %q", e.Kind)
		}
		group := groupOf[svc]
		touched[group] = true
		if _, err := d.shellOnce(ctx, rd.serial, args...); err != nil {
			writeErrs = append(writeErrs, svc+": "+err.Error())
		}
	}
	// Verify each entry by reading it back.
	for _, e := range rc.Entries {
		ev := contract.ServiceEvidence{Written: true}
		ok := false
		switch e.Kind {
		case "setting":
			ev.Service = e.Namespace + "/" + e.Key
			v, absent, err := d.readSetting(ctx, rd, e.Namespace, e.Key)
			ok = err == nil && absent == e.Absent && (absent || v == e.Value)
			ev.Detail = "restored " + map[bool]string{true: "absent", false: strconv.Quote(e.Value)}[e.Absent]
			if err == nil {
				ev.Observed, _ = settingState(settingFor(e.Namespace, e.Key), v, absent)
			}
		case "backup":
			ev.Service = "backupmanager/" + e.Key
			st, _, err := d.readBackup(ctx, rd)
			ok = err == nil && (st == contract.ResourceEnabled) == *e.Enabled && st != contract.ResourceUnknown
			ev.Observed, ev.Detail = st, "restored backup "+strconv.FormatBool(*e.Enabled)
		case "package":
			ev.Service = e.Key
			st, err := d.packageStateOf(ctx, rd, e.Key)
			ok = err == nil && (st == e.Value || (strings.HasPrefix(st, "disabled") && strings.HasPrefix(e.Value, "disabled")))
			ev.Observed = contract.ResourceEnabled
			if strings.HasPrefix(st, "disabled") {
				ev.Observed = contract.ResourceDisabled
			}
			if st == "default" || err != nil {
				// The default's effective state is the image's; it is not inferred.
				ev.Observed = contract.ResourceUnknown
			}
			ev.Detail = "restored state " + e.Value + ", now " + st
		}
		ev.Group = groupOf[ev.Service]
		if ev.Observed == "" {
			ev.Observed = contract.ResourceUnknown
		}
		if !ok {
			res.Success = false
			ev.Detail += " (not verified)"
		}
		res.Services = append(res.Services, ev)
	}
	if len(writeErrs) > 0 {
		res.Success = false
	}
	observed, _ := d.observeAll(ctx, rd)
	for g := range touched {
		res.Changed = append(res.Changed, g)
		res.Resources[g] = observed[g]
	}
	sort.Strings(res.Changed)
	res.Services = nonNil(res.Services)
	return res, nil
}

// The Android driver is no core.ResourceReconciler: it records no
// overrides per device incarnation (its restore receipts are the caller's
// record), so resources.reconcile on an emulator is refused before any
// command runs, as the device-resources reference asks.

// serviceGroups maps every catalogued native service to its group.
func serviceGroups() map[string]string {
	out := map[string]string{}
	for name, g := range androidResourceCatalogue() {
		for _, s := range g.settings {
			out[s.ns+"/"+s.key] = name
		}
		if g.backup {
			// Any user's switch belongs to the group.
			for u := 0; u < 16; u++ {
				out["backupmanager/user-"+strconv.Itoa(u)] = name
			}
		}
		for _, p := range g.packages {
			out[p] = name
		}
	}
	return out
}

func settingFor(ns, key string) settingService {
	for _, g := range androidResourceCatalogue() {
		for _, s := range g.settings {
			if s.ns == ns && s.key == key {
				return s
			}
		}
	}
	return settingService{ns: ns, key: key}
}

func sortedGroupNames(m map[string]contract.ResourceState) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func opposite(a, b contract.ResourceState) bool {
	return (a == contract.ResourceEnabled && b == contract.ResourceDisabled) ||
		(a == contract.ResourceDisabled && b == contract.ResourceEnabled)
}

func valueUnlessAbsent(v string, absent bool) string {
	if absent {
		return ""
	}
	return v
}

func ptrTo(b bool) *bool { return &b }

func nonNil(ev []contract.ServiceEvidence) []contract.ServiceEvidence {
	if ev == nil {
		return []contract.ServiceEvidence{}
	}
	return ev
}
