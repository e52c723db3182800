package android

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/drivers/listcache"
)

// defaultModel is the profile an empty model request gets when the SDK
// offers it; otherwise the first phone profile listed.
const defaultModel = "pixel_6"

// specData is the driver-private part of a resolved spec.
type specData struct {
	APILevel int    `json:"apiLevel"`
	Tag      string `json:"tag"`
	ABI      string `json:"abi"`
	// Hardware is the request's emulator hardware (hardware.go) and its
	// fingerprint, which tells specs for different hardware apart.
	Hardware            *contract.AndroidHardware `json:"hardware,omitempty"`
	HardwareFingerprint string                    `json:"hardwareFingerprint,omitempty"`
}

// ResolveSpec implements core.Driver. The model is an avdmanager device
// profile (id or display name), the OS an Android release or API level, and
// the runtime the best installed system image for the host's ABI.
func (d *Driver) ResolveSpec(ctx context.Context, req core.SpecRequest) (core.Spec, error) {
	if req.Platform != "" && req.Platform != Platform {
		return core.Spec{}, core.NewSpecError(core.ErrUnsupportedPlatform,
			fmt.Sprintf("the android driver cannot serve platform %q", req.Platform), "platform", req.Platform)
	}
	hw, ok := req.Hardware.(*contract.AndroidHardware)
	if req.Hardware != nil && !ok {
		return core.Spec{}, fmt.Errorf("%w: the android driver reads only Android hardware, not %T", core.ErrBadRequest, req.Hardware)
	}
	if hw != nil {
		// Refused before any listing: a bad request costs no tool run.
		if err := hw.Validate(); err != nil {
			return core.Spec{}, err
		}
	}
	arrived := d.installed.Now()
	profiles, cached, err := d.cachedProfiles(ctx)
	if err != nil {
		return core.Spec{}, err
	}
	prof, ok := pickProfile(profiles, req.Model)
	if !ok && cached {
		// A profile the cached list lacks may have come with a
		// cmdline-tools update: look again before refusing.
		if profiles, err = d.deviceProfiles(ctx, true); err != nil {
			return core.Spec{}, err
		}
		prof, ok = pickProfile(profiles, req.Model)
	}
	if !ok {
		return core.Spec{}, core.NewSpecError(core.ErrUnknownModel,
			fmt.Sprintf("no Android device profile %q (see `avdmanager list device`)", req.Model),
			"model", req.Model, "known", profileIDs(profiles))
	}
	api := 0
	if req.OSVersion != "" {
		if api, err = parseOSRequest(req.OSVersion); err != nil {
			lo, hi := releaseAPI[0].release, releaseAPI[len(releaseAPI)-1].release
			se := core.NewSpecError(core.ErrOSOutOfRange, err.Error(),
				"model", prof.ID, "osVersion", req.OSVersion, "min", lo, "max", hi)
			se.Next = fmt.Sprintf("ask for an Android release from %s to %s, or an API level (\"API 35\")", lo, hi)
			return core.Spec{}, se
		}
	}
	list, cached, err := d.installed.Get(ctx)
	if err != nil {
		return core.Spec{}, err
	}
	img, ok := pickImage(list.images, prof, api, d.abi)
	if !ok && cached {
		// The image may have been installed since the list was read.
		if list, err = d.installed.Fetch(ctx, arrived); err != nil {
			return core.Spec{}, err
		}
		img, ok = pickImage(list.images, prof, api, d.abi)
	}
	if ok {
		return withHardware(d.specFor(prof, img), hw)
	}

	want := wantedPackage(prof, api, d.abi)
	if !req.AllowDownload {
		return core.Spec{}, core.NewSpecError(core.ErrRuntimeMissing,
			fmt.Sprintf("system image %s is not installed", want),
			"model", prof.ID, "osVersion", req.OSVersion, "package", want, "abi", d.abi)
	}
	img, err = d.install(ctx, want, req.RequesterID, func(imgs []systemImage) (systemImage, bool) {
		return pickImage(imgs, prof, api, d.abi)
	})
	if err != nil {
		return core.Spec{}, err
	}
	return withHardware(d.specFor(prof, img), hw)
}

func (d *Driver) specFor(prof deviceProfile, img systemImage) core.Spec {
	data, _ := json.Marshal(specData{APILevel: img.APILevel, Tag: img.Tag, ABI: img.ABI})
	name := prof.Name
	if name == "" {
		name = prof.ID
	}
	return core.Spec{
		Platform:  Platform,
		Model:     name,
		ModelID:   prof.ID,
		OSVersion: releaseForAPI(img.APILevel),
		RuntimeID: img.Package,
		Data:      data,
	}
}

// deviceProfiles lists `avdmanager list device`. Profiles change only with a
// cmdline-tools update, and avdmanager is a JVM start per call, so the list
// is cached for a while; fresh forces a re-read.
func (d *Driver) deviceProfiles(ctx context.Context, fresh bool) ([]deviceProfile, error) {
	if !fresh {
		p, _, err := d.cachedProfiles(ctx)
		return p, err
	}
	res, err := d.runner.Run(ctx, d.command(d.tools.AVDManager, "list", "device"))
	if err != nil {
		return nil, fmt.Errorf("android driver: list device profiles: %w", err)
	}
	profs := parseDeviceList(res.Stdout)
	if len(profs) == 0 {
		return nil, fmt.Errorf("android driver: `avdmanager list device` listed no device profiles")
	}
	d.cacheMu.Lock()
	d.profiles, d.profilesAt = profs, d.clock.Now()
	d.cacheMu.Unlock()
	return profs, nil
}

// cachedProfiles is deviceProfiles from the cache when it is fresh; cached
// says no read started for this call.
func (d *Driver) cachedProfiles(ctx context.Context) ([]deviceProfile, bool, error) {
	d.cacheMu.Lock()
	if d.profiles != nil && d.clock.Now().Sub(d.profilesAt) < defaultProfileCacheTTL {
		p := d.profiles
		d.cacheMu.Unlock()
		return p, true, nil
	}
	d.cacheMu.Unlock()
	p, err := d.deviceProfiles(ctx, true)
	return p, false, err
}

func pickProfile(profs []deviceProfile, model string) (deviceProfile, bool) {
	if model == "" {
		for _, p := range profs {
			if p.ID == defaultModel {
				return p, true
			}
		}
		for _, p := range profs {
			if imageFamily(p.Tag) == "phone" {
				return p, true
			}
		}
		return deviceProfile{}, false
	}
	// Ids first, exactly then ignoring case, then display names: "Nexus 9"
	// is both an id and a name, "Pixel 2" only a name.
	for _, p := range profs {
		if p.ID == model {
			return p, true
		}
	}
	for _, p := range profs {
		if strings.EqualFold(p.ID, model) {
			return p, true
		}
	}
	for _, p := range profs {
		if strings.EqualFold(p.Name, model) {
			return p, true
		}
	}
	return deviceProfile{}, false
}

func profileIDs(profs []deviceProfile) []string {
	ids := make([]string, len(profs))
	for i, p := range profs {
		ids[i] = p.ID
	}
	return ids
}

// installedTTL bounds how long the installed-image list serves
// resolutions before it is re-read. It only limits how late an image
// installed or removed outside simlock changes a request the old list could
// serve: a request it cannot serve re-reads at once (ADR 0026).
const installedTTL = 2 * time.Minute

// installedList is one `sdkmanager --list_installed` read. complete is
// false when the output lacked its "Installed packages:" section (a
// warning or a half-written answer), which is answered but never kept.
type installedList struct {
	images   []systemImage
	complete bool
}

func (d *Driver) newInstalledCache() *listcache.Cache[installedList] {
	return listcache.New(listcache.Options[installedList]{
		TTL:   installedTTL,
		Clock: d.clock,
		Read: func(ctx context.Context) (installedList, error) {
			res, err := d.sdkmanager(ctx, "--list_installed")
			if err != nil {
				return installedList{}, fmt.Errorf("android driver: list installed SDK packages: %w", err)
			}
			return installedList{
				images:   imagesIn(parseSDKList(res.Stdout).Installed),
				complete: bytes.Contains(res.Stdout, []byte("Installed packages:")),
			}, nil
		},
		Keep: func(l installedList) bool { return l.complete },
		// A system image installed or removed behind simlock's back moves
		// these directories' mtimes; seen without starting sdkmanager.
		Stamp: d.sdkStamp(),
	})
}

// installedImages lists the installed system images from a read that
// started now: the install path's proof, never a cached answer.
func (d *Driver) installedImages(ctx context.Context) ([]systemImage, error) {
	l, err := d.installed.Fetch(ctx, d.installed.Now())
	return l.images, err
}

func imagesIn(pkgs []sdkPackage) []systemImage {
	var imgs []systemImage
	for _, p := range pkgs {
		if img, ok := parseImagePackage(p.Path); ok {
			imgs = append(imgs, img)
		}
	}
	return imgs
}

// imageFamily groups image tags and profile tags by the kind of device they
// serve, so a TV profile never gets a phone image or the other way round.
func imageFamily(tag string) string {
	switch {
	case strings.Contains(tag, "tv"):
		return "tv"
	case strings.Contains(tag, "wear"):
		return "wear"
	case strings.Contains(tag, "automotive"):
		return "automotive"
	case strings.Contains(tag, "desktop"):
		return "desktop"
	case strings.Contains(tag, "xr"):
		return "xr"
	default:
		return "phone"
	}
}

// tagRank orders the image variants for one family: Google APIs first (it
// allows root and carries Play services' APIs without the Play Store's
// restrictions), then the Play Store image, then plain AOSP; test-only and
// pre-release page-size variants last.
func tagRank(tag string) int {
	switch tag {
	case "google_apis":
		return 0
	case "google_apis_playstore":
		return 1
	case "default":
		return 2
	}
	switch {
	case strings.Contains(tag, "ps16k"):
		return 5
	case strings.Contains(tag, "atd"):
		return 4
	default:
		return 3
	}
}

// pickImage chooses the image for prof: matching ABI and family, at level
// api (any level when 0), newest version first, then by tag preference.
// Codename-only previews are never picked.
func pickImage(imgs []systemImage, prof deviceProfile, api int, abi string) (systemImage, bool) {
	fam := imageFamily(prof.Tag)
	var cands []systemImage
	for _, img := range imgs {
		if img.ABI != abi || img.APILevel == 0 || img.Codename != "" || imageFamily(img.Tag) != fam {
			continue
		}
		if api != 0 && img.APILevel != api {
			continue
		}
		cands = append(cands, img)
	}
	if len(cands) == 0 {
		return systemImage{}, false
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.APILevel != b.APILevel {
			return a.APILevel > b.APILevel
		}
		if a.Minor != b.Minor {
			return a.Minor > b.Minor
		}
		if a.Ext != b.Ext {
			return a.Ext > b.Ext
		}
		if ra, rb := tagRank(a.Tag), tagRank(b.Tag); ra != rb {
			return ra < rb
		}
		return a.Package < b.Package
	})
	return cands[0], true
}

// wantedPackage names the image a download would install for a request
// nothing installed satisfies.
func wantedPackage(prof deviceProfile, api int, abi string) string {
	if api == 0 {
		api = newestKnownAPI
	}
	tag := "google_apis"
	if prof.Tag != "" {
		tag = prof.Tag
	}
	return fmt.Sprintf("system-images;android-%d;%s;%s", api, tag, abi)
}

// install downloads pkg with sdkmanager, then proves it arrived by
// re-scanning the installed images: the installer exiting 0 only says it
// thinks it finished. Exactly one terminal diagnostic follows the start.
func (d *Driver) install(ctx context.Context, pkg, requester string, found func([]systemImage) (systemImage, bool)) (systemImage, error) {
	d.installMu.Lock()
	defer d.installMu.Unlock()
	// Another request may have installed it while this one waited.
	if imgs, err := d.installedImages(ctx); err == nil {
		if img, ok := found(imgs); ok {
			return img, nil
		}
	}

	release, err := d.reserveDisk(pkg)
	if err != nil {
		return systemImage{}, err
	}
	defer release()

	info := map[string]any{"component": pkg, "platform": Platform, "kind": "system-image"}
	d.diag(core.Diagnostic{Type: "component.install-started", RequesterID: requester,
		Message: "installing " + pkg, Data: info})
	fail := func(reason string, err error) (systemImage, error) {
		data := map[string]any{"reason": reason}
		for k, v := range info {
			data[k] = v
		}
		d.diag(core.Diagnostic{Type: "component.install-failed", RequesterID: requester,
			Message: "installing " + pkg + " failed: " + reason, Data: data})
		return systemImage{}, err
	}

	d.log.Info("installing system image", "package", pkg, "requester", requester)
	_, err = d.sdkInstall(ctx, pkg)
	// Whatever the installer did, even failing half way, the cached list
	// may no longer describe the SDK.
	d.installed.Invalidate()
	if errors.Is(err, ErrLicenseNotAccepted) {
		return fail(err.Error(), err)
	}
	if err != nil {
		return fail(err.Error(), fmt.Errorf("android driver: sdkmanager --install %s: %w", pkg, err))
	}
	imgs, err := d.installedImages(ctx)
	if err != nil {
		return fail("re-scan after install failed: "+err.Error(), err)
	}
	img, ok := found(imgs)
	if !ok {
		reason := "sdkmanager reported success but " + pkg + " is not installed"
		return fail(reason, core.NewSpecError(core.ErrRuntimeMissing, reason, "package", pkg))
	}
	d.diag(core.Diagnostic{Type: "component.installed", RequesterID: requester,
		Message: "installed " + img.Package, Data: info})
	return img, nil
}

// reserveDisk holds the install's free-space estimate on the SDK's volume.
func (d *Driver) reserveDisk(pkg string) (func(), error) {
	if d.guard == nil {
		return func() {}, nil
	}
	path := d.sdkRoot
	if path == "" {
		path = d.root
	}
	release, err := d.guard.Reserve(path, imageInstallBytes)
	if err != nil {
		msg := fmt.Sprintf("installing %s needs about %d bytes free on %s: %v", pkg, imageInstallBytes, path, err)
		if errors.Is(err, core.ErrInsufficientDisk) {
			details := map[string]any{}
			// The guard knows what is available; keep what it reported.
			var se *core.SpecError
			if errors.As(err, &se) {
				for k, v := range se.Details {
					details[k] = v
				}
			}
			details["requiredBytes"], details["path"], details["package"] = imageInstallBytes, path, pkg
			return nil, &core.SpecError{Err: core.ErrInsufficientDisk, Msg: msg, Details: details}
		}
		return nil, fmt.Errorf("android driver: %s", msg)
	}
	if release == nil {
		release = func() {}
	}
	return release, nil
}

// sdkStamp watches the SDK root's package directories (none without a
// configured root: the stamp is then constant and only the TTL refreshes).
func (d *Driver) sdkStamp() func() string {
	if d.sdkRoot == "" {
		return nil
	}
	return listcache.DirStamp(filepath.Join(d.sdkRoot, "system-images"), filepath.Join(d.sdkRoot, "platforms"), d.sdkRoot)
}
