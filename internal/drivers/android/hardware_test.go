package android

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// Hardware makes the spec differ (data and price) and only when set.
func TestWithHardwareDistinguishesAndPricesTheSpec(t *testing.T) {
	base := core.Spec{Platform: Platform, ModelID: "pixel_7", Data: json.RawMessage(`{"apiLevel":35,"tag":"google_apis","abi":"x86_64"}`)}
	same, err := withHardware(base, &contract.AndroidHardware{})
	if err != nil || string(same.Data) != string(base.Data) || same.RAMBytes != 0 {
		t.Errorf("empty hardware changed the spec: %s %d %v", same.Data, same.RAMBytes, err)
	}
	a, err := withHardware(base, &contract.AndroidHardware{MemoryMB: 4096})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := withHardware(base, &contract.AndroidHardware{MemoryMB: 4096, GPUMode: "host"})
	if string(a.Data) == string(b.Data) || string(a.Data) == string(base.Data) {
		t.Errorf("different hardware, same data: %s / %s", a.Data, b.Data)
	}
	if a.RAMBytes != 4096<<20+emulatorOverhead {
		t.Errorf("RAM %d", a.RAMBytes)
	}
	if hw := specHardware(a); hw == nil || hw.MemoryMB != 4096 {
		t.Errorf("hardware not carried: %+v", hw)
	}
	var sd specData
	_ = json.Unmarshal(a.Data, &sd)
	if sd.APILevel != 35 || sd.HardwareFingerprint == "" {
		t.Errorf("spec data %+v", sd)
	}
	if _, err := withHardware(base, &contract.AndroidHardware{GPUMode: "warp"}); err == nil {
		t.Error("an unknown GPU mode was accepted")
	}
}

// config.ini keeps every other line, each in its own form; missing keys
// are appended.
func TestWriteHardwareKeepsTheRestOfConfigINI(t *testing.T) {
	h := newHarness(t)
	dir := h.d.avdDir("simlock-x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in := "avd.ini.encoding=UTF-8\nhw.ramSize = 2048\nhw.gpu.mode=auto\nhw.keyboard=yes\n"
	if err := os.WriteFile(filepath.Join(dir, "config.ini"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	off := false
	if err := h.d.writeHardware("simlock-x", contract.AndroidHardware{MemoryMB: 3072, GPUMode: "software", AudioInput: &off, CameraBack: "none"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "config.ini"))
	want := "avd.ini.encoding=UTF-8\nhw.ramSize = 3072\nhw.gpu.mode=guest\nhw.keyboard=yes\n" +
		"hw.audioInput=no\nhw.camera.back=none\nhw.gpu.enabled=yes\n"
	if string(b) != want {
		t.Errorf("config.ini:\n%s\nwant:\n%s", b, want)
	}
	if got := h.d.avdFootprint("simlock-x"); got != 3072<<20+emulatorOverhead {
		t.Errorf("footprint %d does not follow memoryMb", got)
	}
}

// Group state needs evidence covering the whole group.
func TestGroupStateNeedsTheWholeGroup(t *testing.T) {
	ev := func(states ...contract.ResourceState) []contract.ServiceEvidence {
		var out []contract.ServiceEvidence
		for i, s := range states {
			out = append(out, contract.ServiceEvidence{Service: strings.Repeat("s", i+1), Observed: s})
		}
		return out
	}
	cases := []struct {
		in   []contract.ServiceEvidence
		want contract.ResourceState
	}{
		{ev("disabled", "disabled"), "disabled"},
		{ev("disabled", "unsupported"), "disabled"},
		{ev("enabled", "disabled"), "unknown"},
		{ev("disabled", "unknown"), "unknown"},
		{ev("unsupported"), "unsupported"},
		{nil, "unsupported"},
	}
	for _, c := range cases {
		if got := groupState(c.in).State; got != c.want {
			t.Errorf("%+v: %s, want %s", c.in, got, c.want)
		}
	}
	if s, _ := settingState(settingService{"global", "k", "1", "0"}, "1.0", false); s != contract.ResourceEnabled {
		t.Errorf("1.0 is the enabled scale, got %s", s)
	}
	if s, _ := settingState(settingService{"global", "k", "1", "0"}, "", true); s != contract.ResourceUnknown {
		t.Errorf("an absent setting is not evidence, got %s", s)
	}
}
