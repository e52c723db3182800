package daemon

import (
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
)

// warmPoolOut is status.get's account of the warm targets.
func warmPoolOut(w core.WarmPoolStatus) *contract.WarmPool {
	out := &contract.WarmPool{Demand: w.Demand, Targets: []contract.WarmTarget{}}
	if w.Demand {
		out.WindowMs = w.Window.Milliseconds()
	}
	for _, t := range w.Targets {
		out.Targets = append(out.Targets, contract.WarmTarget{Spec: specName(t.Spec), Platform: t.Spec.Platform, Model: t.Spec.Model,
			OSVersion: t.Spec.OSVersion, Count: t.Count, Reason: t.Reason, Explanation: warmWhy(t, w.Window),
			Configured: t.Configured, DemandP90: t.DemandP90, Leased: t.Leased, Waiting: t.Waiting, Ready: t.Ready})
	}
	return out
}

// specName is a spec as people say it: "iPhone 16 / iOS 26.3".
func specName(s core.Spec) string {
	os := map[string]string{"ios": "iOS", "android": "Android"}[s.Platform]
	if os == "" {
		os = s.Platform
	}
	model := s.Model
	if model == "" {
		model = s.ModelID
	}
	return fmt.Sprintf("%s / %s %s", model, os, s.OSVersion)
}

// warmWhy says why a target keeps what it keeps, naming every term that
// took part so an operator can check the arithmetic.
func warmWhy(t core.WarmTargetStatus, window time.Duration) string {
	var s string
	switch t.Reason {
	case core.WarmReasonDemand:
		s = fmt.Sprintf("%d warm because p90 concurrency %d over %s", t.Count, t.DemandP90, spell(window))
		if t.Leased+t.Waiting > 0 {
			s += fmt.Sprintf(", less %d leased and %d waiting", t.Leased, t.Waiting)
		}
		if t.Configured > 0 {
			s += fmt.Sprintf(" (configured floor %d)", t.Configured)
		}
	case core.WarmReasonSpare:
		s = fmt.Sprintf("1 warm: spare beside %d leased (leased within %s; p90 concurrency %d)", t.Leased, spell(window), t.DemandP90)
	default:
		s = fmt.Sprintf("%d warm: configured floor %d", t.Count, t.Configured)
	}
	return s
}

// spell writes a window the way the docs do: "1 h", "10 min", "30 s".
func spell(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	default:
		return fmt.Sprintf("%g s", d.Seconds())
	}
}
