package android

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// A lease request's emulator hardware (contract.AndroidHardware) travels in
// the resolved spec's driver data, so two requests for different hardware
// resolve to different specs, and Provision writes it into the new AVD's
// config.ini before the first boot: the baseline snapshot and its tag are
// then taken with the hardware in place.

// gpuConfigModes maps the contract's GPU modes to the hw.gpu.mode values the
// emulator understands.
func gpuConfigModes() map[string]string {
	return map[string]string{
		"auto":        "auto",
		"host":        "host",
		"software":    "guest",
		"swiftshader": "swiftshader_indirect",
		"lavapipe":    "lavapipe",
		"swangle":     "swangle",
	}
}

// withHardware folds hw into spec: its data (hardware and fingerprint) and
// the RAM the capacity ledger prices a device of the spec at.
func withHardware(spec core.Spec, hw *contract.AndroidHardware) (core.Spec, error) {
	if hw == nil || hw.Fingerprint() == "" {
		return spec, nil
	}
	if err := hw.Validate(); err != nil {
		return core.Spec{}, err
	}
	var sd specData
	if len(spec.Data) > 0 {
		if err := json.Unmarshal(spec.Data, &sd); err != nil {
			return core.Spec{}, fmt.Errorf("android driver: spec data: %w", err)
		}
	}
	h := *hw
	sd.Hardware, sd.HardwareFingerprint = &h, hw.Fingerprint()
	data, err := json.Marshal(sd)
	if err != nil {
		return core.Spec{}, err
	}
	spec.Data = data
	if hw.MemoryMB > 0 {
		spec.RAMBytes = uint64(hw.MemoryMB)<<20 + emulatorOverhead
	}
	return spec, nil
}

// specHardware reads the hardware back out of a spec (nil: none asked).
func specHardware(spec core.Spec) *contract.AndroidHardware {
	var sd specData
	if len(spec.Data) == 0 || json.Unmarshal(spec.Data, &sd) != nil {
		return nil
	}
	return sd.Hardware
}

// hardwareConfig is the config.ini keys hw sets.
func hardwareConfig(hw contract.AndroidHardware) map[string]string {
	out := map[string]string{}
	num := func(key string, v int) {
		if v > 0 {
			out[key] = strconv.Itoa(v)
		}
	}
	yesNo := func(key string, v *bool) {
		if v != nil {
			out[key] = map[bool]string{true: "yes", false: "no"}[*v]
		}
	}
	num("hw.ramSize", hw.MemoryMB)
	num("hw.cpu.ncore", hw.CPUCores)
	num("hw.lcd.width", hw.ScreenWidth)
	num("hw.lcd.height", hw.ScreenHeight)
	num("hw.lcd.density", hw.ScreenDensity)
	if m, ok := gpuConfigModes()[hw.GPUMode]; ok {
		out["hw.gpu.enabled"] = "yes"
		out["hw.gpu.mode"] = m
	}
	if hw.CameraFront != "" {
		out["hw.camera.front"] = hw.CameraFront
	}
	if hw.CameraBack != "" {
		out["hw.camera.back"] = hw.CameraBack
	}
	yesNo("hw.audioInput", hw.AudioInput)
	yesNo("hw.audioOutput", hw.AudioOutput)
	return out
}

// writeHardware sets the hardware keys in the AVD's config.ini, keeping
// every other line (and each line's own "k=v" or "k = v" form) as it was.
func (d *Driver) writeHardware(name string, hw contract.AndroidHardware) error {
	set := hardwareConfig(hw)
	if len(set) == 0 {
		return nil
	}
	path := filepath.Join(d.avdDir(name), "config.ini")
	b, err := d.fs.ReadFile(path)
	if err != nil {
		return fmt.Errorf("android driver: read %s: %w", path, err)
	}
	var out bytes.Buffer
	done := map[string]bool{}
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		k, _, ok := strings.Cut(line, "=")
		key := strings.TrimSpace(k)
		if v, want := set[key]; ok && want {
			sep := "="
			if strings.HasSuffix(k, " ") {
				sep = " = "
			}
			fmt.Fprintf(&out, "%s%s%s\n", key, sep, v)
			done[key] = true
			continue
		}
		out.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteString("\n")
		}
	}
	var missing []string
	for k := range set {
		if !done[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		fmt.Fprintf(&out, "%s=%s\n", k, set[k])
	}
	if err := d.fs.WriteFileAtomic(path, out.Bytes()); err != nil {
		return fmt.Errorf("android driver: write %s: %w", path, err)
	}
	return nil
}
