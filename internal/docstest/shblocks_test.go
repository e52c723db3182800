package docstest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// shBlock is one ```sh block of README.md or docs/*.md.
type shBlock struct {
	file string // relative to the module root
	line int    // of the fence
	code string
}

// key names a block by its file and its first line, which survives edits
// elsewhere in the file better than a line number.
func (b shBlock) key() string {
	first, _, _ := strings.Cut(b.code, "\n")
	return b.file + ": " + first
}

func (b shBlock) where() string { return b.file + ":" + strconv.Itoa(b.line) }

func moduleRoot(t *testing.T) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..")
}

// shBlocks reads every block fenced exactly as ```sh (not the recipes'
// ```sh recipe, which TestRecipesRun runs) in document order.
func shBlocks(t *testing.T) []shBlock {
	t.Helper()
	root := moduleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	fence := regexp.MustCompile("(?ms)^```sh\n(.*?)^```\n")
	var out []shBlock
	for _, f := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range fence.FindAllSubmatchIndex(b, -1) {
			out = append(out, shBlock{file: rel, line: strings.Count(string(b[:m[0]]), "\n") + 1, code: string(b[m[2]:m[3]])})
		}
	}
	return out
}

// notRunHere are the blocks this test does not run, each with the reason.
// A block must be in here or in shRunners; an entry that names no block
// fails the test, so the list cannot go stale silently.
var notRunHere = map[string]string{
	"README.md: GOTOOLCHAIN=go1.27.3 go run ./cmd/simlock demo      # the main job, end to end, on the simulated SDK": "" +
		"its second line is the whole suite, this test included; the demo is TestDemoFinishesAndTellsTheStory (test/e2e)",
	"README.md: GOTOOLCHAIN=go1.27.3 go build -o /tmp/sl ./cmd/simlock": "" +
		"Try it by hand has a test of its own (issue 26), which runs it from a fresh shell with nothing set",
	"docs/gateway.md: simlock --url http://gateway.example:7420 --token \"$AGENT_TOKEN\" lease --platform ios --detach": "" +
		"needs the network: a gateway at gateway.example and the reader's token; the local walkthrough block runs the same lease through a real gateway",
	"docs/gateway.md: simlock worker list                 # state (connected / disconnected / incompatible), drain, devices, leases": "" +
		"a command summary with <workerId> placeholders; the walkthrough block runs worker list, and the gateway e2e tests drive drain, undrain and remove",
	"docs/user-guide.md: simlock exec \"$LEASE\" --url \"$SIMLOCK_URL\" --upload build/app.apk -- adb install {upload:app.apk}": "" +
		"$LEASE, $SIMLOCK_URL and build/app.apk are the reader's (a remote lease and a built app); TestHTTPDocSketchesRun and test/e2e/upload_test.go run the same upload",
	"docs/http-api.md: resp=$(curl -s -D hdr -X POST \"$URL/v1/leases\" -H \"Authorization: Bearer $T\" -H 'Prefer: wait=60' \\": "" +
		"TestHTTPDocSketchesRun (test/e2e) runs every sketch of http-api.md, in order, with the tokens and address the page assumes",
	"docs/testing.md: export GOTOOLCHAIN=go1.27.3": "" +
		"runs the suite, this test included; the README command and .ci/run run it",
	"docs/testing.md: go run ./internal/tools/conformance                  # rewrite docs/conformance.md, print the counts": "" +
		"rewrites a committed doc and runs the conformance suites, which the README command runs; TestConformanceTableIsCurrent checks the table",
	"docs/testing.md: SIMLOCK_CHAOS_LONG=1 GOTOOLCHAIN=go1.27.3 go test -run TestChaosDrill -timeout 40m -v ./test/e2e/": "" +
		"the chaos drill's long mode: about ten minutes of two cores, on purpose behind its variable",
	"docs/testing.md: SIMLOCK_CHAOS_HOMES_LONG=1 GOTOOLCHAIN=go1.27.3 go test -run TestChaosHomesDrill -timeout 90m -v ./test/e2e/": "" +
		"the multi-home drill's long mode: up to 75 minutes, on purpose behind its variable",
}

// A shRunner runs blocks in one world. Worlds are shared where the blocks
// allow it (one daemon for several blocks keeps the test short) and
// separate where a block needs a config of its own or clears the host.
type shRunner struct {
	name   string
	config string // the world's config.json
	// setup runs before the first block, in the world's work directory.
	setup func(t *testing.T, w *harness.World, work string)
	// blocks in the order they run; a block's key.
	blocks []string
}

// defaultSet is the config the xcodebuild blocks tell the reader to set.
const defaultSet = `{"drivers":{"ios":{"deviceSet":"default"}},"capacity":{"strategy":"fixed","fixed":{"maxRunning":4,"maxManaged":6}}}`

var shRunners = []shRunner{
	{
		name:   "default-set",
		config: defaultSet,
		setup: func(t *testing.T, w *harness.World, work string) {
			// What an Xcode project directory has, as far as the simulated
			// xcodebuild looks.
			mkfile(t, filepath.Join(work, "App.xcodeproj", "project.pbxproj"))
		},
		blocks: []string{
			"docs/gateway.md: simlock daemon start\n", // a worker's start: here, without a gateway to join
			"README.md: simlock run --platform ios --model \"iPhone 16\" -- \\",
			"docs/user-guide.md: grant=$(simlock lease --platform ios --model \"iPhone 16\" --detach --json)",
			"docs/user-guide.md: simlock lease --device-spec platform=ios,model=\"iPhone 16\" --device-spec platform=android --detach",
		},
	},
	{
		name:   "gateway",
		config: `{"mode":"gateway","http":{"enabled":true,"listen":"127.0.0.1:0"}}`,
		blocks: []string{"docs/gateway.md: simlock daemon start\nsimlock token create"},
	},
	{
		// The quarantine example: the config its text gives, and the
		// lease its comment says was held.
		name: "erase-fault",
		config: `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "warmPool":{"quarantine":{"retries":3,"backoffMs":2000,"multiplier":2,"capMs":600000}}}`,
		setup: func(t *testing.T, w *harness.World, work string) {
			w.MustRun("lease", "--platform", "ios", "--detach")
		},
		blocks: []string{"docs/user-guide.md: simlock daemon stop"},
	},
	{
		// simsdk reset clears the simulated state: a world of its own.
		name:   "simsdk",
		blocks: []string{"docs/user-guide.md: simlock simsdk install DIR      # links xcrun, xcodebuild, adb, emulator, avdmanager, sdkmanager -> simlock"},
	},
	{
		// Self-contained: it builds its own binary and makes its own
		// homes, so it runs from the module root with only the host
		// registry and the simulated SDK state pointed at the world's.
		name:   "gateway-walkthrough",
		blocks: []string{"docs/gateway.md: go build -o /tmp/sl ./cmd/simlock"},
	},
}

func mkfile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("// docstest fixture\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// matches reports whether key names block b. A key is the block's file
// and first line; where blocks of one file share a first line, it is the
// block's first lines up to where they differ, or, ending in a newline,
// the whole block.
func (b shBlock) matches(key string) bool {
	file, head, ok := strings.Cut(key, ": ")
	switch {
	case !ok || file != b.file:
		return false
	case strings.HasSuffix(head, "\n"):
		return b.code == head
	case strings.Contains(head, "\n"):
		return strings.HasPrefix(b.code, head)
	}
	return b.key() == key
}

// TestEveryShBlockRuns runs every sh block of README.md and docs/*.md, as
// written, with bash -e, against a real daemon on the simulated SDK in a
// throwaway environment (harness.NewWorld: its own SIMLOCK_HOME,
// SIMLOCK_HOST_DIR and SIMLOCK_SIMSDK_HOME, SIMLOCK_SIMSDK_SPEED=0, the
// built binary on PATH as simlock, the simulated SDK installed). Blocks
// that cannot run here are in notRunHere with the reason. One rewrite is
// made: /tmp/sl, the path the walkthroughs build to, is a path of the
// test's, so two runs on one machine do not replace each other's binary.
func TestEveryShBlockRuns(t *testing.T) {
	blocks := shBlocks(t)
	if len(blocks) < 15 {
		t.Fatalf("found %d sh blocks; the reader is broken", len(blocks))
	}
	// Every block is run or excused, exactly once, and every entry of
	// either list names a block.
	claimed := map[int]string{}
	claim := func(key, by string) {
		n := 0
		for i, b := range blocks {
			if b.matches(key) {
				n++
				if prev, ok := claimed[i]; ok {
					t.Errorf("%s is claimed by %s and by %s", b.where(), prev, by)
				}
				claimed[i] = by
			}
		}
		if n != 1 {
			t.Errorf("%s names %d blocks, want 1: %q", by, n, key)
		}
	}
	for key := range notRunHere {
		claim(key, "notRunHere")
	}
	for _, r := range shRunners {
		for _, key := range r.blocks {
			claim(key, "runner "+r.name)
		}
	}
	for i, b := range blocks {
		if _, ok := claimed[i]; !ok {
			t.Errorf("%s is neither run nor excused; add it to a runner or to notRunHere with a reason:\n%s", b.where(), b.code)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	bin := harness.Bin(t)
	for _, r := range shRunners {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			w := harness.NewWorld(t, r.config)
			work := t.TempDir()
			if r.setup != nil {
				r.setup(t, w, work)
			}
			// The binary on PATH as simlock, ahead of everything else.
			binDir := t.TempDir()
			if err := os.Symlink(bin, filepath.Join(binDir, "simlock")); err != nil {
				t.Fatal(err)
			}
			// mktemp in a block makes its directories here, so whatever a
			// block leaves behind (a daemon of a home of its own, the
			// device processes of a simulated SDK state) is found and
			// stopped even when the block failed half way.
			tmp := t.TempDir()
			t.Cleanup(func() { stopLeftovers(t, bin, w, tmp) })
			env := append(append([]string{}, w.Env...), "PATH="+binDir+":"+w.SDK+":"+os.Getenv("PATH"), "TMPDIR="+tmp)
			slPath := filepath.Join(t.TempDir(), "sl")
			for _, key := range r.blocks {
				var b shBlock
				for _, c := range blocks {
					if c.matches(key) {
						b = c
					}
				}
				dir := work
				if strings.Contains(b.code, "go build ") {
					dir = moduleRoot(t) // ./cmd/simlock is relative to it
				}
				runBlock(t, b, strings.ReplaceAll(b.code, "/tmp/sl", slPath), dir, env)
			}
		})
	}
}

// runBlock runs one block with bash -e, failing the test on a non-zero
// exit. The bound is a hang guard only.
func runBlock(t *testing.T, b shBlock, code, dir string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testhost.Scale(3*time.Minute))
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-e", "-c", code)
	c.Dir = dir
	c.Env = env
	c.WaitDelay = 10 * time.Second // a daemon the block started keeps no pipe open past this
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s failed: %v\n--- block ---\n%s\n--- output ---\n%s", b.where(), err, b.code, out)
	}
	t.Logf("%s:\n%s", b.where(), out)
}

// stopLeftovers stops every daemon whose home is below dir (a daemon.pid
// in it) and clears every simulated SDK state there (a procs directory
// in it), three levels down at most.
func stopLeftovers(t *testing.T, bin string, w *harness.World, dir string) {
	t.Helper()
	var homes, sims []string
	for _, pat := range []string{"*", "*/*", "*/*/*"} {
		pids, _ := filepath.Glob(filepath.Join(dir, pat, "daemon.pid"))
		for _, p := range pids {
			homes = append(homes, filepath.Dir(p))
		}
		procs, _ := filepath.Glob(filepath.Join(dir, pat, "procs"))
		for _, p := range procs {
			sims = append(sims, filepath.Dir(p))
		}
	}
	for _, h := range homes {
		c := exec.Command(bin, "daemon", "stop")
		c.Env = append(append([]string{}, w.Env...), "SIMLOCK_HOME="+h)
		_ = c.Run()
	}
	for _, s := range sims {
		c := exec.Command(bin, "simsdk", "reset")
		c.Env = append(append([]string{}, w.Env...), "SIMLOCK_SIMSDK_HOME="+s)
		_ = c.Run()
	}
}
