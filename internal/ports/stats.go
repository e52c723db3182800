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
