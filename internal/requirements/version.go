package requirements

import (
	"strconv"
	"strings"

	"github.com/simlock/simlock/contract"
)

// version is a dotted numeric version, at most three parts; missing parts
// are zero, so "26.5" and "26.5.0" are the same version.
type version [3]int

// parseVersion reads "16", "26.5" or "17.0.1". Anything else (an empty
// string, "API 36", "16-beta") is not a version.
func parseVersion(s string) (version, bool) {
	var v version
	parts := strings.Split(s, ".")
	if s == "" || len(parts) > 3 {
		return v, false
	}
	for i, p := range parts {
		if p == "" || len(p) > 6 {
			return v, false
		}
		for _, c := range p {
			if c < '0' || c > '9' {
				return v, false
			}
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func (v version) compare(w version) int {
	for i := range v {
		switch {
		case v[i] < w[i]:
			return -1
		case v[i] > w[i]:
			return 1
		}
	}
	return 0
}

// selector is an OS selection: exact, atLeast or latest, with an optional
// preferred version among several that match.
type selector struct {
	kind      string
	version   version
	preferred *version
}

func (s selector) admits(v version) bool {
	switch s.kind {
	case contract.OSExact:
		return v.compare(s.version) == 0
	case contract.OSAtLeast:
		return v.compare(s.version) >= 0
	default: // latest
		return true
	}
}
