package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// readmeBlock is the first sh block after heading in README.md.
func readmeBlock(t *testing.T, readme, heading string) string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q section", heading)
	}
	s = s[i:]
	start := strings.Index(s, "\n```sh\n")
	if start < 0 {
		t.Fatalf("README.md's %q section has no sh block", heading)
	}
	s = s[start+len("\n```sh\n"):]
	end := strings.Index(s, "\n```")
	if end < 0 {
		t.Fatalf("README.md's %q sh block is not closed", heading)
	}
	return s[:end+1]
}

// The README's "Try it by hand" block runs as a reader would run it: the
// text itself, in bash from the repository root, with only the binary's
// path /tmp/sl replaced by one in a temporary directory. HOME is a fresh
// directory too, so a block that forgot to isolate itself would leave
// ~/.simlock or ~/.simlock-host there. Every command must succeed, and
// each `release --all` must release what this person's earlier, separate
// `simlock lease` processes hold (ADR 0097).
func TestReadmeTryItByHandRunsAsWritten(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	block := readmeBlock(t, filepath.Join(root, "README.md"), "## Try it by hand")
	dir := t.TempDir()
	sl := filepath.Join(dir, "sl")
	binRef := regexp.MustCompile(`/tmp/sl(\s)`)
	if n := len(binRef.FindAllString(block, -1)); n < 10 {
		t.Fatalf("found /tmp/sl %d times in the block; the substitution below no longer fits it:\n%s", n, block)
	}
	script := binRef.ReplaceAllString(block, sl+"$1")
	if !strings.Contains(script, "go build -o "+sl+" ") {
		t.Fatalf("the block no longer builds the binary it runs:\n%s", block)
	}

	// The block makes its own directories; the trap (the harness's, not
	// the README's) records them, so a failed run can still be cleaned up.
	state := filepath.Join(dir, "state.env")
	script = "trap 'env | grep ^SIMLOCK_ > " + state + "' EXIT\n" + script
	t.Cleanup(func() { cleanupTryIt(t, sl, state) })

	home := t.TempDir()
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = root
	cmd.Env = tryItEnv(t, home)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A hang guard only; the block takes seconds on the simulated SDK.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := startAndWait(ctx, cmd); err != nil {
		t.Fatalf("the block failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()

	var iphone string
	var released [][]string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var l struct {
			LeaseID  string
			Device   struct{ Platform string }
			Released *[]string
		}
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch {
		case l.Released != nil:
			released = append(released, *l.Released)
		case l.LeaseID != "" && l.Device.Platform == "ios":
			iphone = l.LeaseID
		}
	}
	if iphone == "" {
		t.Fatalf("no iOS lease line on stdout:\n%s", out)
	}
	if len(released) != 2 {
		t.Fatalf("want two release --all answers, got %d:\n%s", len(released), out)
	}
	// The iPhone is free before the Android request is made, so that
	// request never waits behind a held iPhone.
	if !slices.Equal(released[0], []string{iphone}) {
		t.Errorf("the first release --all released %v, want the iPhone's lease %s", released[0], iphone)
	}
	if len(released[1]) != 1 || released[1][0] == iphone {
		t.Errorf("the second release --all released %v, want the Android lease alone", released[1])
	}
	// The events the block prints: every lease granted was released.
	granted := regexp.MustCompile(`lease\.granted\s+lease=(lse_[0-9a-f]+)`).FindAllStringSubmatch(out, -1)
	if len(granted) != 2 || granted[0][1] != iphone || granted[1][1] != released[1][0] {
		t.Errorf("events show grants %v, want the iPhone's %s then the released Android lease", granted, iphone)
	}
	if strings.Contains(out+stderr.String(), "warning:") {
		t.Errorf("the block printed a warning:\nstdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
	for _, leaked := range []string{".simlock", ".simlock-host"} {
		if _, err := os.Stat(filepath.Join(home, leaked)); err == nil {
			t.Errorf("the block wrote ~/%s", leaked)
		}
	}
	// It cleans up after itself: the directories it made are gone.
	for _, kv := range readState(t, state) {
		k, v, _ := strings.Cut(kv, "=")
		if k == "SIMLOCK_HOME" || k == "SIMLOCK_HOST_DIR" || k == "SIMLOCK_SIMSDK_HOME" {
			if _, err := os.Stat(v); err == nil {
				t.Errorf("%s (%s) is left behind", k, v)
			}
		}
	}
}

// startAndWait runs cmd, killing it when ctx ends first.
func startAndWait(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return ctx.Err()
	}
}

// tryItEnv is a reader's shell: this environment without simlock's
// variables, HOME replaced by home, and Go's caches named explicitly so the
// block's build reuses them instead of starting from an empty one.
func tryItEnv(t *testing.T, home string) []string {
	t.Helper()
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	vals := strings.Split(strings.TrimSpace(string(goEnv)), "\n")
	if len(vals) != 3 {
		t.Fatalf("go env printed %q", goEnv)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SIMLOCK_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "GOCACHE="+vals[0], "GOMODCACHE="+vals[1], "GOPATH="+vals[2])
}

func readState(t *testing.T, state string) []string {
	t.Helper()
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatalf("the block's directories are unknown: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// cleanupTryIt stops a daemon a failed run left and removes its
// directories; after a passing run there is nothing left to do.
func cleanupTryIt(t *testing.T, sl, state string) {
	b, err := os.ReadFile(state)
	if err != nil {
		return
	}
	env := append(os.Environ(), strings.Split(strings.TrimSpace(string(b)), "\n")...)
	var dirs []string
	for _, kv := range env[len(os.Environ()):] {
		k, v, _ := strings.Cut(kv, "=")
		if k == "SIMLOCK_HOME" || k == "SIMLOCK_HOST_DIR" || k == "SIMLOCK_SIMSDK_HOME" {
			dirs = append(dirs, v)
		}
	}
	if len(dirs) == 0 {
		return
	}
	if _, err := os.Stat(sl); err == nil {
		for _, args := range [][]string{{"daemon", "stop", "--clean"}, {"simsdk", "reset"}} {
			c := exec.Command(sl, args...)
			c.Env = env
			if out, err := c.CombinedOutput(); err != nil {
				t.Logf("cleanup %v: %v: %s", args, err, out)
			}
		}
	}
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}
