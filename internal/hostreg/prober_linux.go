//go:build linux

package hostreg

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processStart reads the start time from /proc/<pid>/stat (field 22, clock
// ticks since boot) and prefixes the boot id, because tick counts restart
// at every boot and a pid after a reboot could match by chance.
func processStart(pid int) (string, bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	start, state, err := parseStat(b)
	if err != nil {
		return "", false, err
	}
	if state == 'Z' || state == 'X' { // exited, waiting to be reaped: not an owner
		return "", false, nil
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", false, fmt.Errorf("hostreg: boot id: %w", err)
	}
	return "linux:" + strings.TrimSpace(string(boot)) + ":" + start, true, nil
}

// parseStat takes the fields after the command name, which is in
// parentheses and may itself contain spaces and parentheses.
func parseStat(b []byte) (start string, state byte, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, errors.New("hostreg: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return "", 0, errors.New("hostreg: short /proc stat")
	}
	if _, err := strconv.ParseUint(f[19], 10, 64); err != nil {
		return "", 0, fmt.Errorf("hostreg: /proc stat start time: %w", err)
	}
	return f[19], f[0][0], nil
}
