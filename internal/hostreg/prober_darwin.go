//go:build darwin

package hostreg

import (
	"fmt"

	"golang.org/x/sys/unix"
)

const szomb = 5 // p_stat of a process that exited and awaits its parent

// processStart asks the kernel for the process's kinfo_proc. The slice
// variant is used because it reports an absent pid as an empty answer,
// whereas the single-record call turns that into an ambiguous EIO.
// p_starttime is wall-clock time, so no boot id is needed.
func processStart(pid int) (string, bool, error) {
	ps, err := unix.SysctlKinfoProcSlice("kern.proc.pid", pid)
	if err != nil {
		return "", false, err
	}
	if len(ps) == 0 || ps[0].Proc.P_stat == szomb {
		return "", false, nil
	}
	t := ps[0].Proc.P_starttime
	return fmt.Sprintf("darwin:%d.%06d", t.Sec, t.Usec), true, nil
}
