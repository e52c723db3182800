package backbone

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/test/harness"
)

// Operational logging: the log rotates to one older generation, and
// `simlock daemon logs` prints that older generation before the current
// file, so the lines read in the order they were written.
func TestBackboneDaemonLogsPrintTheRotatedGenerationFirst(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/37.3")
	w := harness.NewWorld(t, "")
	log := filepath.Join(w.Home, "daemon.log")
	if err := os.WriteFile(log+".1", []byte(`{"msg":"older generation"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte(`{"msg":"current file"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := w.MustRun("daemon", "logs")
	older, current := strings.Index(out, "older generation"), strings.Index(out, "current file")
	if older < 0 || current < 0 || older > current {
		t.Fatalf("daemon logs printed:\n%s", out)
	}
}

// A component simlock installed for a request is in daemon.log, naming the
// requester that asked for it, so it stays attributable after the event
// ring is gone.
func TestBackboneAComponentInstallIsLoggedWithItsRequester(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/37.4")
	w := harness.NewWorld(t, quiet)
	w.MustRun("lease", "--platform", "ios", "--model", "iPhone 16", "--os", "26.5", "--allow-download", "--requester", "needs-26-5", "--detach", "--json")
	b, err := os.ReadFile(filepath.Join(w.Home, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `component.installed`) && strings.Contains(line, `needs-26-5`) {
			return
		}
	}
	t.Fatalf("no component.installed line naming the requester in daemon.log:\n%s", b)
}
