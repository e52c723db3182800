package ports

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// SystemStats reports the machine's size and free resources.
type SystemStats interface {
	CPUCount() int
	TotalRAMBytes() uint64
	FreeRAMBytes() uint64
	// FreeDiskBytes reports the space available to simlock on the volume
	// holding path.
	FreeDiskBytes(path string) (uint64, error)
}

// HostStats is the real SystemStats.
type HostStats struct{}

func (HostStats) CPUCount() int { return runtime.NumCPU() }

func (HostStats) TotalRAMBytes() uint64 { t, _ := memInfo(); return t }

func (HostStats) FreeRAMBytes() uint64 { _, f := memInfo(); return f }

func (HostStats) FreeDiskBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// PretendMachine is SystemStats for a machine of a given size: it answers
// CPUs and RAM from its fields and everything else (free disk) from Base.
// It lets the capacity strategy be exercised, on the simulated SDK, as on a
// Mac of another size (SIMLOCK_SIMSDK_MACHINE, for benchmarks and demos).
type PretendMachine struct {
	Base SystemStats
	CPUs int
	RAM  uint64
}

func (m PretendMachine) CPUCount() int         { return m.CPUs }
func (m PretendMachine) TotalRAMBytes() uint64 { return m.RAM }

// FreeRAMBytes is the whole pretended RAM: nothing else runs on a machine
// that does not exist.
func (m PretendMachine) FreeRAMBytes() uint64 { return m.RAM }
func (m PretendMachine) FreeDiskBytes(path string) (uint64, error) {
	return m.Base.FreeDiskBytes(path)
}
