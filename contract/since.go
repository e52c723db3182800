package contract

import (
	"strconv"
	"strings"
	"time"
)

// ParseSinceTime reads events.subscribe's sinceTime: a duration back from
// now (Go syntax such as "90s" or "1h30m", plus whole days such as "7d") or
// an RFC 3339 instant. It is shared by the daemon and the CLI, so a typo is
// refused before any daemon is contacted, with the same words.
func ParseSinceTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseUint(days, 10, 16); err == nil {
			return now.Add(-time.Duration(n) * 24 * time.Hour).UTC(), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, Errorf(CodeBadRequest, "sinceTime %q is neither a duration (90s, 1h, 7d) nor an RFC 3339 time", s).
		WithDetails("field", "sinceTime").
		WithNext("pass a duration back from now such as 1h, or a time such as 2026-12-01T09:00:00Z")
}
