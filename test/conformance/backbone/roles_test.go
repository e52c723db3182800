package backbone

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/test/harness"
)

// Admin authority: with no credential to be found (no --token, no
// SIMLOCK_ADMIN_TOKEN, no readable admin.token) the CLI does not fail: it
// connects as an agent, says so once on stderr, and the lease line names
// the role it got. As an agent it may act only on what its own principal
// was granted: another agent principal cannot renew that lease, the
// principal that holds it can.
func TestBackboneWithoutACredentialTheCLIIsAnAgentAndSaysSo(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/7.5", "backbone/7.6")
	w := harness.NewWorld(t, quiet)
	w.MustRun("daemon", "start")
	if err := os.Remove(filepath.Join(w.Home, "admin.token")); err != nil {
		t.Fatal(err)
	}

	w.Setenv("SIMLOCK_PRINCIPAL", "agent-one")
	r := w.Run("lease", "--platform", "ios", "--detach", "--ttl", "5m", "--json")
	var l struct {
		LeaseID string `json:"leaseId"`
		Role    string `json:"role"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &l) != nil || l.Role != "agent" || l.LeaseID == "" {
		t.Fatalf("lease without a credential: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if lines := strings.Count(strings.ToLower(r.Stderr), "agent"); lines == 0 {
		t.Fatalf("the CLI did not say it fell back to an agent session:\n%s", r.Stderr)
	}

	w.Setenv("SIMLOCK_PRINCIPAL", "agent-two")
	if r := w.Run("lease", "renew", l.LeaseID, "--json"); r.Code == 0 || !strings.Contains(r.Stderr, "FORBIDDEN") {
		t.Fatalf("another agent renewed the lease: exit %d %s", r.Code, r.Stderr)
	}
	w.Setenv("SIMLOCK_PRINCIPAL", "agent-one")
	w.MustRun("lease", "renew", l.LeaseID)
	w.MustRun("release", l.LeaseID)
}
