package sessions

import (
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
)

// releasePolicyFor is the core release policy a session's lease on
// platform carries, from the operator's `sessions.reset` choices: destroy
// (zero pooling) unless the platform's reset says otherwise. The Android
// keys apply only to the Android modes (core.ReleasePolicy.Validate
// refuses anything else at admission).
func releasePolicyFor(platform string, s *config.Sessions) core.ReleasePolicy {
	destroy := core.ReleasePolicy{Mode: contract.ResetDestroy}
	if s == nil {
		return destroy
	}
	r := s.Reset
	switch platform {
	case "ios":
		if r.IOS == contract.ResetErase {
			return core.ReleasePolicy{Mode: contract.ResetErase}
		}
	case "android":
		timeout := time.Duration(r.AndroidResetTimeoutMs) * time.Millisecond
		switch r.Android {
		case contract.ResetKeepBooted:
			return core.ReleasePolicy{Mode: contract.ResetKeepBooted, Fallback: r.AndroidKeepBootedFallback,
				MaxUses: r.AndroidKeepBootedMaxUses, Timeout: timeout}
		case contract.ResetSnapshot:
			return core.ReleasePolicy{Mode: contract.ResetSnapshot, Timeout: timeout}
		}
	}
	return destroy
}
