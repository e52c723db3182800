package requirements

import (
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/osversion"
)

// version is the shared OS version (internal/osversion): one parser for
// the requirements and the operator's config.
type version = osversion.Version

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
		return v.Compare(s.version) == 0
	case contract.OSAtLeast:
		return v.Compare(s.version) >= 0
	default: // latest
		return true
	}
}
