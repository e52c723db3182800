// Package osversion reads the dotted numeric OS versions that session
// requirements and the sessions config section are written in ("16",
// "26.5", "17.0.1"). It is a leaf: internal/config validates with it and
// internal/requirements resolves with it, and requirements imports config,
// so neither can hold the parser for the other.
package osversion

import "strconv"

// MaxParts is how many dotted parts a version may have.
const MaxParts = 3

// maxPartDigits bounds each part so a parse never overflows an int and a
// hostile string cannot pass as a huge version.
const maxPartDigits = 6

// Version is a parsed version padded with zeros, so "26.5" and "26.5.0"
// are equal.
type Version [MaxParts]int

// Parse reads a version of one to three numeric parts. Anything else (an
// empty string, "API 36", "16-beta", "1.2.3.4", "1..2") is not a version.
func Parse(s string) (Version, bool) {
	var v Version
	if s == "" {
		return v, false
	}
	part, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if s[i] < '0' || s[i] > '9' {
				return Version{}, false
			}
			continue
		}
		p := s[start:i]
		if p == "" || len(p) > maxPartDigits || part == MaxParts {
			return Version{}, false
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, false
		}
		v[part] = n
		part, start = part+1, i+1
	}
	return v, true
}

// Compare orders two versions: -1, 0 or 1.
func (v Version) Compare(w Version) int {
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

// Major is the first part ("16" of "16.1").
func (v Version) Major() int { return v[0] }
