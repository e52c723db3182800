package ports

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// memInfo reads total and available memory from /proc/meminfo.
func memInfo() (total, free uint64) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 8 << 30, 4 << 30
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "MemTotal:":
			total = v * 1024
		case "MemAvailable:":
			free = v * 1024
		}
	}
	return total, free
}
