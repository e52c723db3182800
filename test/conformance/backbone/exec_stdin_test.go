package backbone

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/testhost"
	"github.com/simlock/simlock/test/harness"
)

// standIn replaces the world's simulated tool name with a shell script
// whose body runs in place of it; "$real" in the body names the simulated
// tool itself, so the script can hand on whatever it does not handle.
// Call it before the daemon starts, which finds its tools on PATH.
func standIn(t *testing.T, w *harness.World, name, body string) {
	t.Helper()
	link := filepath.Join(w.SDK, name)
	realDir := filepath.Join(w.Root, "real")
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The simulated SDK picks the tool by its file name, so the real link
	// keeps its name in another directory.
	real := filepath.Join(realDir, name)
	if err := os.Rename(link, real); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nreal='" + real + "'\n" + body
	if err := os.WriteFile(link, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// catStandIn plays `simctl spawn DEVICE /bin/cat`, which a real simulator
// runs with the caller's stdin and which the simulated SDK does not
// simulate: it first says, on stderr, whether each of its standard
// descriptors is a terminal, then copies its stdin to stdout. Every other
// xcrun call (the driver's own) goes to the simulated SDK untouched.
const catStandIn = `spawn=; last=
for a do
	[ "$a" = spawn ] && spawn=1
	last=$a
done
if [ -n "$spawn" ] && [ "$last" = /bin/cat ]; then
	for fd in 0 1 2; do
		if [ -t $fd ]; then echo "fd $fd: a terminal" >&2; else echo "fd $fd: no terminal" >&2; fi
	done
	exec cat
fi
exec "$real" "$@"
`

// device.exec stdin: the string `simlock exec --stdin` reads is sent with
// the request and reaches the command as its standard input, whole and
// unchanged; the command runs on pipes, with no terminal on any of its
// standard descriptors; and an exec that sends no stdin gives the command
// an empty one, so a command that reads it ends instead of waiting for a
// person to type.
func TestBackboneExecStdinIsOneStringOverPipesWithNoTerminal(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "backbone/15.5")
	w := harness.NewWorld(t, quiet)
	standIn(t, w, "xcrun", catStandIn)
	w.MustRun("daemon", "start")
	var l struct {
		LeaseID string `json:"leaseId"`
	}
	w.JSON(&l, "lease", "--platform", "ios", "--detach", "--json")

	// Several lines, multi-byte text and no final newline: any reframing
	// on the way (line by line, re-encoded, newline added) shows.
	payload := "first line\nsecond line, ünïcødé ✓\n\n\tlast line without a newline"
	stdin := filepath.Join(w.Root, "stdin.txt")
	if err := os.WriteFile(stdin, []byte(payload), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		args      []string
		own, want string // own: the CLI's own standard input
	}{
		{"a file", []string{"--stdin", stdin}, "", payload},
		{"--stdin -", []string{"--stdin", "-"}, payload + "\n", payload + "\n"},
		// The CLI's own input goes nowhere unless --stdin - asks for it.
		{"no --stdin", nil, "unasked input", ""},
	} {
		args := append(append([]string{"exec", l.LeaseID}, c.args...), "--", "simctl", "spawn", "{udid}", "/bin/cat")
		r := runWithin(t, w, 60*time.Second, c.own, args...)
		if r.Code != 0 || r.Stdout != c.want {
			t.Fatalf("exec with %s: exit %d, stdout %q (want %q)\nstderr: %s", c.name, r.Code, r.Stdout, c.want, r.Stderr)
		}
		for _, fd := range []string{"0", "1", "2"} {
			if !strings.Contains(r.Stderr, "fd "+fd+": no terminal") {
				t.Fatalf("exec with %s: the command's fd %s is not reported free of a terminal:\n%s", c.name, fd, r.Stderr)
			}
		}
	}
}

// runWithin runs one command of the world with stdin as its standard
// input and fails the test if it has not ended within d: a command left
// waiting on a stdin nobody writes to would otherwise hang the test until
// go test's own timeout.
func runWithin(t *testing.T, w *harness.World, d time.Duration, stdin string, args ...string) harness.Result {
	t.Helper()
	c := w.Cmd(args...)
	c.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(testhost.Scale(d)):
		c.Process.Kill()
		<-done
		t.Fatalf("simlock %s did not end within %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), d, o.String(), e.String())
	}
	return harness.Result{Stdout: o.String(), Stderr: e.String(), Code: c.ProcessState.ExitCode()}
}
