package simsdk

import (
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The property list of a simulated emulator starts from a real full
// `getprop` dump of an emulator captured mid-boot (catalog/PROVENANCE.md),
// with the values that name the build, the ABI and the AVD replaced by the
// running image's, and the boot-state properties following the simulated
// boot.

//go:embed catalog/getprop-emulator-api23-booting.txt
var getpropBase []byte

var baseProps = parseGetpropDump(getpropBase)

// parseGetpropDump reads "[key]: [value]" lines.
func parseGetpropDump(b []byte) map[string]string {
	props := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimRight(l, "\r"), "]: [")
		if !ok || !strings.HasPrefix(k, "[") || !strings.HasSuffix(v, "]") {
			continue
		}
		props[k[1:]] = v[:len(v)-1]
	}
	if len(props) == 0 {
		panic("simsdk: embedded getprop dump has no properties")
	}
	return props
}

type propList map[string]string

func (p propList) get(k string) string { return p[k] }

// format prints the list as getprop does: sorted by key, one
// "[key]: [value]" per line.
func (p propList) format() string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "[%s]: [%s]\n", k, p[k])
	}
	return b.String()
}

// deviceProps are the properties of the running emulator r at now.
func deviceProps(r *emuRun, now time.Time) propList {
	p := propList{}
	for k, v := range baseProps {
		p[k] = v
	}
	api, ok := androidAPIs[r.API]
	if !ok {
		api = androidAPI{Level: r.API, Release: strconv.Itoa(r.API), BuildID: "UNKNOWN", Incremental: "0", SecurityPatch: "2025-01-01"}
	}
	product, device := productNames(r.ABI)
	// Play Store images are release-keyed user builds; Google APIs images
	// are debuggable userdebug builds (which is why only they allow
	// `adb root`).
	buildType, tags, debuggable := "userdebug", "dev-keys", "1"
	if strings.HasPrefix(r.Tag, "google_apis_playstore") {
		buildType, tags, debuggable = "user", "release-keys", "0"
	}
	rel := api.Release
	fingerprint := fmt.Sprintf("google/%s/%s:%s/%s/%s:%s/%s", product, device, rel, api.BuildID, api.Incremental, buildType, tags)
	description := fmt.Sprintf("%s-%s %s %s %s %s", product, buildType, rel, api.BuildID, api.Incremental, tags)
	set := map[string]string{
		"ro.build.version.sdk":                 strconv.Itoa(r.API),
		"ro.build.version.release":             rel,
		"ro.build.version.release_or_codename": rel,
		"ro.build.version.incremental":         api.Incremental,
		"ro.build.version.security_patch":      api.SecurityPatch,
		"ro.build.id":                          api.BuildID,
		"ro.build.type":                        buildType,
		"ro.build.tags":                        tags,
		"ro.build.flavor":                      product + "-" + buildType,
		"ro.build.product":                     device,
		"ro.build.fingerprint":                 fingerprint,
		"ro.bootimage.build.fingerprint":       fingerprint,
		"ro.build.description":                 description,
		"ro.build.display.id":                  description,
		"ro.build.characteristics":             "emulator",
		"ro.debuggable":                        debuggable,
		"ro.product.brand":                     "google",
		"ro.product.manufacturer":              "Google",
		"ro.product.name":                      product,
		"ro.product.model":                     product,
		"ro.product.device":                    device,
		"ro.product.cpu.abi":                   r.ABI,
		"ro.zygote":                            "zygote64",
		"ro.boot.qemu.avd_name":                r.AVD,
		"ro.serialno":                          "EMULATOR" + strings.ReplaceAll(emulatorVersion, ".", "X"),
		"persist.sys.timezone":                 "Etc/UTC",
	}
	if r.ABI == "arm64-v8a" {
		set["ro.product.cpu.abilist"] = "arm64-v8a"
		set["ro.product.cpu.abilist64"] = "arm64-v8a"
		set["ro.product.cpu.abilist32"] = ""
		set["dalvik.vm.isa.arm64.variant"] = "generic"
		set["dalvik.vm.isa.arm64.features"] = "default"
		for k := range p {
			if strings.HasPrefix(k, "dalvik.vm.isa.x86") {
				delete(p, k)
			}
		}
	} else {
		// Current x86_64 images translate arm64 code, and have no 32-bit
		// zygote.
		set["ro.product.cpu.abilist"] = "x86_64,arm64-v8a"
		set["ro.product.cpu.abilist64"] = "x86_64,arm64-v8a"
		set["ro.product.cpu.abilist32"] = ""
	}
	if r.Density > 0 {
		set["qemu.sf.lcd_density"] = strconv.Itoa(r.Density)
	}
	for k, v := range set {
		p[k] = v
	}

	// The boot: the captured dump is mid-boot (boot animation running, no
	// sys.boot_completed). With -no-boot-anim the animation service never
	// starts, so its properties stay unset.
	delete(p, "sys.boot_completed")
	delete(p, "dev.bootcomplete")
	booted := r.booted(now)
	if r.BootAnim {
		p["init.svc.bootanim"] = "running"
		p["service.bootanim.exit"] = "0"
		if booted {
			p["init.svc.bootanim"] = "stopped"
			p["service.bootanim.exit"] = "1"
		}
	} else {
		delete(p, "init.svc.bootanim")
		delete(p, "service.bootanim.exit")
		p["debug.sf.nobootanimation"] = "1"
	}
	if booted {
		p["sys.boot_completed"] = "1"
		p["dev.bootcomplete"] = "1"
	}
	for k, v := range r.Props {
		p[k] = v
	}
	return p
}
