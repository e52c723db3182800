package cli

import (
	"fmt"
	"time"

	"github.com/simlock/simlock/contract"
)

// hostWaiterLines are the status lines under "host": every home's requests
// waiting for host room (ADR 0061), then what this home gave up for them.
func hostWaiterLines(h contract.HostCapacity) []string {
	var out []string
	for _, w := range h.Waiters {
		who := w.Home
		if w.Self {
			who += " (this home)"
		}
		age := (time.Duration(w.AgeMs) * time.Millisecond).Round(time.Second)
		out = append(out, fmt.Sprintf("  waiting  %s: %d %s for %s (%s)", who, w.Count, w.Platform, age, w.Limit))
	}
	if h.Yielded > 0 {
		out = append(out, fmt.Sprintf("  yielded  %d idle warm device(s) shut down for other homes' waiters", h.Yielded))
	}
	return out
}
