package simsdk

import (
	"context"
	"fmt"
)

// android answers for the Android tools until their simulation lands (in
// android*.go files that replace this one).
func (s *sdk) android(_ context.Context, tool string, _ []string) int {
	fmt.Fprintf(s.stderr, "%s: not simulated yet (simlock simulated SDK)\n", tool)
	return 1
}
