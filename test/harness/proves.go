package harness

import (
	"strings"
	"testing"
)

// Proves marks the reference statements a conformance test proves, by the
// ids of its contract's statement registry (for example "claims/8.2").
// The registry's check reads these calls from the source (they must be
// string literals), so a test that names an unknown statement fails the
// check, and a statement no test names and no ADR decides is open. At run
// time it only logs, so a failing test's output says what it was proving.
func Proves(t testing.TB, ids ...string) {
	t.Helper()
	if len(ids) == 0 {
		t.Fatal("harness.Proves needs at least one statement id")
	}
	t.Logf("proves %s", strings.Join(ids, ", "))
}
