package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// status prints one line per warm target with its reason and what is ready,
// says whether targets follow demand, and prints nothing for a daemon with
// neither targets nor demand (so the plain status stays as it was).
func TestStatusExplainsEveryWarmTarget(t *testing.T) {
	var out bytes.Buffer
	a := &app{env: Env{Stdout: &out}}
	a.printWarmPool(&contract.WarmPool{Demand: true, WindowMs: 3_600_000, Targets: []contract.WarmTarget{
		{Spec: "iPhone 16 / iOS 26.3", Count: 2, Reason: "demand", Explanation: "2 warm because p90 concurrency 2 over 1 h", Ready: 1},
		{Spec: "Pixel 8 / Android 15", Count: 1, Reason: "configured", Explanation: "1 warm: configured floor 1", Ready: 1},
		{Spec: "iPhone 15 / iOS 26.3", Count: 1, Reason: "spare", Explanation: "1 warm: spare beside 1 leased", Ready: 0},
	}})
	want := []string{
		"warm     following demand over 1 h",
		"  iPhone 16 / iOS 26.3: 2 warm because p90 concurrency 2 over 1 h (1 ready now)",
		"  Pixel 8 / Android 15: 1 warm: configured floor 1 (1 ready now)",
		"  iPhone 15 / iOS 26.3: 1 warm: spare beside 1 leased (0 ready now)",
	}
	if got := strings.TrimRight(out.String(), "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("status warm block:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	out.Reset()
	a.printWarmPool(&contract.WarmPool{Targets: []contract.WarmTarget{}})
	a.printWarmPool(nil)
	if out.Len() != 0 {
		t.Fatalf("printed %q with no targets and demand off", out.String())
	}
}
