package sessions

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
)

// Stats bounds (session.stats).
const (
	DefaultStatsWindow = 24 * time.Hour
	MaxStatsWindow     = 30 * 24 * time.Hour
	DefaultStatsLimit  = 5000
	MaxStatsLimit      = 10000
)

// StatsBounds resolves a stats request's window and sample cap, refusing
// values beyond the maxima rather than quietly shrinking them.
func StatsBounds(in contract.SessionStatsIn) (time.Duration, int, error) {
	w, n := time.Duration(in.WindowMs)*time.Millisecond, in.Limit
	if in.WindowMs < 0 || w > MaxStatsWindow {
		return 0, 0, contract.Errorf(contract.CodeBadRequest, "windowMs must be 1 to %d", MaxStatsWindow.Milliseconds())
	}
	if n < 0 || n > MaxStatsLimit {
		return 0, 0, contract.Errorf(contract.CodeBadRequest, "limit must be 1 to %d", MaxStatsLimit)
	}
	if w == 0 {
		w = DefaultStatsWindow
	}
	if n == 0 {
		n = DefaultStatsLimit
	}
	return w, n, nil
}

// ProfileKey names a resolved profile in the statistics.
func ProfileKey(p *contract.SessionProfile) string {
	if p == nil {
		return ""
	}
	return p.Model + "@" + p.OSVersion
}

// Percentile is the p-quantile (0..1) of sorted values by linear
// interpolation between the closest ranks; no values give 0.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := p * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(rank-float64(lo))
}

func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// Compute groups sampled receipts by platform and resolved profile. Only
// completed records count; acquisition counts, phases and the reuse hit
// rate come from ready acquisitions only. The caller passes receipts
// already limited to the window and the cap, and whether the cap cut them.
func Compute(receipts []contract.SessionReceipt, since, until time.Time, limit int, truncated bool) contract.SessionStatsOut {
	type acc struct {
		g      contract.SessionStatsGroup
		reuse  int
		fallbk int
		phases map[string][]float64
	}
	groups := map[string]*acc{}
	get := func(r contract.SessionReceipt) *acc {
		key := r.Profile.Platform + "\x00" + ProfileKey(r.Profile)
		a, ok := groups[key]
		if !ok {
			a = &acc{g: contract.SessionStatsGroup{Platform: r.Profile.Platform, Profile: ProfileKey(r.Profile)}, phases: map[string][]float64{}}
			groups[key] = a
		}
		return a
	}
	for _, r := range receipts {
		if r.Profile == nil || r.Timing == nil {
			continue
		}
		if q := r.Timing.Acquisition; q != nil && q.CompletedAtMs != nil && q.Outcome == contract.SessionReady {
			a := get(r)
			a.g.Acquisitions++
			if q.Admission == contract.AdmissionReuse {
				a.reuse++
			}
			for name, v := range map[string]*int64{"queueMs": q.QueueMs, "admissionWaitMs": q.AdmissionWaitMs,
				"createMs": q.CreateMs, "bootMs": q.BootMs, "readyMs": q.ReadyMs, "totalMs": q.TotalMs} {
				if v != nil {
					a.phases[name] = append(a.phases[name], float64(*v))
				}
			}
		}
		if s := r.Timing.Reset; s != nil && s.CompletedAtMs != nil && s.Outcome != contract.ResetOutcomePending {
			a := get(r)
			a.g.Resets++
			if strings.HasPrefix(s.Outcome, contract.ResetOutcomeFallbackPrefix) {
				a.fallbk++
			}
			if s.Outcome == contract.ResetOutcomeDestroyed {
				a.g.Retirements++
			}
			if s.TotalMs != nil {
				a.phases["reset.totalMs"] = append(a.phases["reset.totalMs"], float64(*s.TotalMs))
			}
			for name, v := range s.Phases {
				a.phases["reset."+name] = append(a.phases["reset."+name], float64(v))
			}
		}
	}
	out := contract.SessionStatsOut{SinceMs: since.UnixMilli(), UntilMs: until.UnixMilli(), Limit: limit, Truncated: truncated,
		Groups: []contract.SessionStatsGroup{}}
	for _, a := range groups {
		a.g.ReuseHitRate = ratio(a.reuse, a.g.Acquisitions)
		a.g.FallbackRate = ratio(a.fallbk, a.g.Resets)
		a.g.Phases = map[string]contract.PhaseStats{}
		for name, vs := range a.phases {
			sort.Float64s(vs)
			a.g.Phases[name] = contract.PhaseStats{Count: len(vs), P50: Percentile(vs, 0.5), P90: Percentile(vs, 0.9)}
		}
		out.Groups = append(out.Groups, a.g)
	}
	sort.Slice(out.Groups, func(i, j int) bool {
		if out.Groups[i].Platform != out.Groups[j].Platform {
			return out.Groups[i].Platform < out.Groups[j].Platform
		}
		return out.Groups[i].Profile < out.Groups[j].Profile
	})
	return out
}
