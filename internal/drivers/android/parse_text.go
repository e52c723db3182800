package android

import (
	"bytes"
	"strings"
)

// utf8BOM is what PowerShell prepends when it redirects a tool's output to a
// file; captures taken that way start with it.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// lines splits tool output into lines with every trailing carriage return
// removed. Legacy adb ends shell output with CR CR LF and the emulator
// console with CR LF, so stripping a single CR is not enough.
func lines(b []byte) []string {
	b = bytes.TrimPrefix(b, utf8BOM)
	raw := strings.Split(string(b), "\n")
	out := make([]string, 0, len(raw))
	for _, l := range raw {
		out = append(out, strings.TrimRight(l, "\r"))
	}
	// A final newline leaves one empty element that is not a line.
	if n := len(out); n > 0 && out[n-1] == "" {
		out = out[:n-1]
	}
	return out
}

// isSeparator reports the "---------" rule avdmanager prints between entries.
func isSeparator(l string) bool {
	t := strings.TrimSpace(l)
	return len(t) >= 3 && strings.Trim(t, "-") == ""
}

// cutField splits "  Key: value" (or avdmanager's "OEM : value") into a
// trimmed key and value.
func cutField(l string) (key, value string, ok bool) {
	k, v, ok := strings.Cut(l, ":")
	if !ok {
		return "", "", false
	}
	return strings.TrimSpace(k), strings.TrimSpace(v), true
}
