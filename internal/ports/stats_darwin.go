package ports

import "golang.org/x/sys/unix"

// memInfo reads total memory from sysctl. macOS has no cheap "available"
// figure; half of total is the conservative estimate capacity planning uses.
func memInfo() (total, free uint64) {
	t, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 8 << 30, 4 << 30
	}
	return t, t / 2
}
