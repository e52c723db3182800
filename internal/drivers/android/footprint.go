package android

import (
	"path/filepath"
	"strconv"
	"strings"
)

// RAMPerDevice is what one running emulator costs, for the resource
// strategy, until the AVD exists and its own hw.ramSize is known.
func (d *Driver) RAMPerDevice() uint64 { return 4 << 30 }

// emulatorOverhead is what the emulator process needs beside the guest's
// RAM (QEMU, the GPU emulation, the snapshot machinery).
const emulatorOverhead = 1 << 30

// avdFootprint is one AVD's own running footprint: the guest RAM its
// config.ini asks for plus the emulator's overhead; 0 when the file or the
// key cannot be read (the platform figure then stays in force).
func (d *Driver) avdFootprint(name string) uint64 {
	b, err := d.fs.ReadFile(filepath.Join(d.avdDir(name), "config.ini"))
	if err != nil {
		return 0
	}
	mib := parseRAMSize(parseINI(b)["hw.ramSize"])
	if mib == 0 {
		return 0
	}
	return mib<<20 + emulatorOverhead
}

// parseRAMSize reads hw.ramSize, in MiB: Android Studio writes a bare
// number ("2048"), older tools a unit ("2048M", "2G").
func parseRAMSize(v string) uint64 {
	v = strings.ToUpper(strings.TrimSpace(v))
	mult := uint64(1)
	switch {
	case strings.HasSuffix(v, "MB"):
		v = strings.TrimSuffix(v, "MB")
	case strings.HasSuffix(v, "M"):
		v = strings.TrimSuffix(v, "M")
	case strings.HasSuffix(v, "GB"):
		v, mult = strings.TrimSuffix(v, "GB"), 1024
	case strings.HasSuffix(v, "G"):
		v, mult = strings.TrimSuffix(v, "G"), 1024
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil || n == 0 || n > 1<<20 {
		return 0
	}
	return n * mult
}
