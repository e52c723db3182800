package simsdk

import (
	"context"
	"fmt"
)

// spawnLaunchctl simulates launchctl inside a booted simulator (issue 13
// builds it out: per-runtime label catalogues, overrides and job state).
func (s *sdk) spawnLaunchctl(_ context.Context, _ deviceSet, _ *iosDevice, args []string) int {
	fmt.Fprintf(s.stderr, "launchctl %v: not simulated yet\n", args)
	return 1
}
