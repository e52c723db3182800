package ios

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is an OS version as simctl reports it: "18.0", "17.0.1",
// "65535.255.255". Missing components are zero.
type Version struct {
	Major, Minor, Patch int
}

// unboundedMajor is what simctl prints as the maximum of a device type that
// has no upper runtime limit (65535.255.255, or 0xFFFFFFFF packed).
const unboundedMajor = 65535

// ParseVersion reads a dotted version of one to three numeric components.
func ParseVersion(s string) (Version, error) {
	p, err := parsePrefix(s)
	if err != nil {
		return Version{}, err
	}
	return p.v, nil
}

// versionFromPacked decodes the integer form Xcode 11–13 use for a device
// type's runtime range: major<<16 | minor<<8 | patch.
func versionFromPacked(u uint64) Version {
	return Version{Major: int(u >> 16 & 0xFFFF), Minor: int(u >> 8 & 0xFF), Patch: int(u & 0xFF)}
}

func (v Version) String() string {
	if v.Patch != 0 {
		return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	}
	return fmt.Sprintf("%d.%d", v.Major, v.Minor)
}

// IsZero reports an unset version.
func (v Version) IsZero() bool { return v == Version{} }

// Compare returns -1, 0 or +1.
func (v Version) Compare(o Version) int {
	for _, d := range [3]int{v.Major - o.Major, v.Minor - o.Minor, v.Patch - o.Patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	return 0
}

// versionPrefix is a requested OS version that may name fewer than three
// components: "18" means any 18.x.y.
type versionPrefix struct {
	v Version
	n int // components given, 1..3
}

func parsePrefix(s string) (versionPrefix, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ".")
	if s == "" || len(parts) > 3 {
		return versionPrefix{}, fmt.Errorf("invalid version %q", s)
	}
	var c [3]int
	for i, p := range parts {
		// Atoi would accept "+1" and "-1"; simctl versions are bare digits.
		if p == "" || len(p) > 9 || strings.TrimLeft(p, "0123456789") != "" {
			return versionPrefix{}, fmt.Errorf("invalid version %q", s)
		}
		c[i], _ = strconv.Atoi(p)
	}
	return versionPrefix{v: Version{c[0], c[1], c[2]}, n: len(parts)}, nil
}

// matches reports whether v starts with the requested components.
func (p versionPrefix) matches(v Version) bool {
	c := [3]int{v.Major, v.Minor, v.Patch}
	w := [3]int{p.v.Major, p.v.Minor, p.v.Patch}
	for i := 0; i < p.n; i++ {
		if c[i] != w[i] {
			return false
		}
	}
	return true
}

// low and high are the smallest and largest versions the prefix covers, so a
// range check can fail a request only when no version it names could fit.
func (p versionPrefix) low() Version { return p.v }

func (p versionPrefix) high() Version {
	h := p.v
	if p.n < 2 {
		h.Minor = 1 << 30
	}
	if p.n < 3 {
		h.Patch = 1 << 30
	}
	return h
}

func (p versionPrefix) String() string {
	c := []int{p.v.Major, p.v.Minor, p.v.Patch}[:p.n]
	s := make([]string, len(c))
	for i, x := range c {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ".")
}
