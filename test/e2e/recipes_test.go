package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testnpm"
)

// recipeBlock is one shell block of docs/recipes marked `sh recipe`.
type recipeBlock struct {
	file, script string
	line         int
}

// recipeBlocks reads every ```sh recipe block of docs/recipes/*.md.
func recipeBlocks(t *testing.T) []recipeBlock {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "recipes", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recipes found: %v", err)
	}
	fence := regexp.MustCompile("(?ms)^```sh recipe\n(.*?)^```\n")
	var out []recipeBlock
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllSubmatchIndex(b, -1) {
			out = append(out, recipeBlock{file: filepath.Base(f), script: string(b[m[2]:m[3]]),
				line: strings.Count(string(b[:m[0]]), "\n") + 1})
		}
	}
	return out
}

// Stand-ins for the tools that cannot run on a Linux CI machine. Each checks
// the one thing simlock is responsible for, that the device it was handed
// is reachable the way the real tool would reach it, and fails loudly
// otherwise; none of them pretends to run tests.
var recipeStandIns = map[string]string{
	"maestro": `#!/bin/sh
dev=""; flow=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device|--udid) dev=$2; shift 2 ;;
    test) flow=$2; shift 2 ;;
    *) shift ;;
  esac
done
[ -n "$dev" ] || { echo "maestro stand-in: no --device" >&2; exit 2; }
[ -f "$flow" ] || { echo "maestro stand-in: no flow file $flow" >&2; exit 2; }
case "$dev" in
  *:*) [ "$(adb -P 5037 -s "$dev" get-state 2>&1)" = device ] || { echo "maestro stand-in: $dev is not on the default adb server" >&2; exit 3; } ;;
  *) xcrun simctl list devices | grep "$dev" | grep -q Booted || { echo "maestro stand-in: $dev is not booted in the default device set" >&2; exit 3; } ;;
esac
echo "maestro stand-in: $flow on $dev"
`,
	"detox": `#!/bin/sh
[ "$1" = test ] || { echo "detox stand-in: only 'detox test'" >&2; exit 2; }
[ -n "$SIMLOCK_UDID" ] || { echo "detox stand-in: SIMLOCK_UDID is not set" >&2; exit 2; }
xcrun simctl list devices | grep "$SIMLOCK_UDID" | grep -q Booted || { echo "detox stand-in: $SIMLOCK_UDID is not booted in the default device set" >&2; exit 3; }
echo "detox stand-in: attached to $SIMLOCK_UDID"
`,
	"appium-session": `#!/bin/sh
caps=$(cat "$1") || exit 2
udid=$(printf '%s' "$caps" | sed -n 's/.*"appium:udid":"\([^"]*\)".*/\1/p')
port=$(printf '%s' "$caps" | sed -n 's/.*"appium:adbPort":\([0-9]*\).*/\1/p')
[ -n "$udid" ] && [ -n "$port" ] || { echo "appium stand-in: caps lack udid or adbPort: $caps" >&2; exit 2; }
[ "$(adb -P "$port" -s "$udid" get-state 2>&1)" = device ] || { echo "appium stand-in: $udid is not on adb server $port" >&2; exit 3; }
echo "appium stand-in: session on $udid via adb server $port"
`,
}

// TestRecipesRun runs every `sh recipe` block of docs/recipes against the
// real binary and the simulated SDK, in default-set mode, with stand-ins
// for the tools CI cannot run. A recipe that drifts from the CLI fails here.
func TestRecipesRun(t *testing.T) {
	blocks := recipeBlocks(t)
	if len(blocks) < 6 {
		t.Fatalf("found only %d recipe blocks", len(blocks))
	}
	w := newWorld(t, `{"drivers":{"ios":{"deviceSet":"default"}},"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":4}}}`)
	w.mustRun("daemon", "start")
	stand := t.TempDir()
	for name, script := range recipeStandIns {
		if err := os.WriteFile(filepath.Join(stand, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// agent-device is the real npm package (shared with test/thirdparty);
	// it keeps its own daemon and state under HOME, so HOME is the test's.
	agentHome := t.TempDir()
	var agentBin string
	if testnpm.Required() || hasNPM() {
		agentBin = filepath.Dir(testnpm.AgentDevice(t))
		t.Cleanup(func() {
			c := exec.Command(filepath.Join(agentBin, "agent-device"), "daemon", "stop")
			c.Env = append(os.Environ(), "HOME="+agentHome)
			_ = c.Run()
		})
	}
	work := t.TempDir()
	for _, f := range []string{"App.xcodeproj/project.pbxproj", "App.xctestrun", "flow.yaml"} {
		p := filepath.Join(work, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("# recipe fixture\n"), 0o644)
	}
	path := filepath.Dir(bin) + ":" + stand + ":" + w.sdk + ":" + os.Getenv("PATH")
	if agentBin != "" {
		path = agentBin + ":" + path
	}
	for _, b := range blocks {
		t.Run(strings.TrimSuffix(b.file, ".md")+"-line"+strconv.Itoa(b.line), func(t *testing.T) {
			if strings.Contains(b.script, "agent-device") && agentBin == "" {
				t.Skip("npm is not installed here, so agent-device is not (CI sets SIMLOCK_NPM_TESTS=require)")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c := exec.CommandContext(ctx, "sh", "-ec", b.script)
			c.Dir = work
			c.Env = append(append([]string{}, w.env...), "PATH="+path, "HOME="+agentHome,
				"AGENT_DEVICE_NO_UPDATE_CHECK=1", "NO_COLOR=1")
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("%s:%d failed: %v\n%s\n--- script ---\n%s", b.file, b.line, err, out, b.script)
			}
			t.Logf("%s:%d:\n%s", b.file, b.line, out)
		})
	}
	// Every recipe released its lease when its command exited.
	eventually(t, "every recipe lease to be released", 30*time.Second, func() bool { return len(w.status().Leases) == 0 })
}

func hasNPM() bool {
	_, err := exec.LookPath("npm")
	return err == nil
}
