package simsdk

import (
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The virtual hardware the simulated emulator honours: the guest RAM
// (reported in /proc/meminfo) and the GPU mode, which is checked against
// the modes the emulator knows; an unknown one stops the launch with an
// error, as the real emulator refuses it (the text is modelled).

// emulatorGPUModes are the -gpu / hw.gpu.mode values the emulator accepts.
var emulatorGPUModes = []string{"auto", "auto-no-window", "host", "swiftshader_indirect", "swiftshader",
	"angle_indirect", "guest", "lavapipe", "swangle", "off"}

// checkHardware refuses a launch whose GPU mode or RAM size the emulator
// would not accept; refused is false when the launch may go on.
func (s *sdk) checkHardware(a avd, o emulatorOpts) (code int, refused bool) {
	gpu := o.gpu
	if gpu == "" && a.Config != nil {
		gpu = a.Config["hw.gpu.mode"]
	}
	if gpu != "" && !slices.Contains(emulatorGPUModes, gpu) {
		s.emuLog("ERROR", "Invalid GPU mode '%s', use one of: %s", gpu, strings.Join(emulatorGPUModes, " "))
		return 1, true
	}
	if o.memory != "" {
		if n, err := strconv.Atoi(o.memory); err != nil || n < 128 {
			s.emuLog("ERROR", "option -memory must be followed by a size in megabytes. '%s' is not a valid input.", o.memory)
			return 1, true
		}
	}
	return 0, false
}

// guestRAM is the guest's RAM in MiB: -memory, else hw.ramSize (a bare
// number or with an M/G unit), else the emulator's 1536 MiB default.
func guestRAM(a avd, o emulatorOpts) int {
	if n, err := strconv.Atoi(o.memory); err == nil && n > 0 {
		return n
	}
	v := strings.ToUpper(strings.TrimSpace(a.Config["hw.ramSize"]))
	mult := 1
	for _, unit := range []struct {
		suffix string
		mult   int
	}{{"MB", 1}, {"M", 1}, {"GB", 1024}, {"G", 1024}} {
		if strings.HasSuffix(v, unit.suffix) {
			v, mult = strings.TrimSuffix(v, unit.suffix), unit.mult
			break
		}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
		return n * mult
	}
	return 1536
}

// newBootID is a fresh kernel boot id, in the kernel's UUID form.
func newBootID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// snapshotBootID is the boot id a snapshot load brings back; a snapshot
// from before boot ids were recorded gets a new one.
func snapshotBootID(m snapshotMeta) string {
	if m.BootID != "" {
		return m.BootID
	}
	return newBootID()
}
