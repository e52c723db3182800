package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The owner token is read from a file only its owner can read, or from
// stdin's first line (and nothing after it); a file others can read is
// refused with the chmod that fixes it.
func TestOwnerTokenIsReadFromAPrivateFileOrStdin(t *testing.T) {
	dir := t.TempDir()
	priv, open := filepath.Join(dir, "tok"), filepath.Join(dir, "open")
	if err := os.WriteFile(priv, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	if got, err := readOwnerToken(priv, nil); err != nil || got != "s3cret" {
		t.Fatalf("a 0600 file: %q %v", got, err)
	}
	if _, err := readOwnerToken(open, nil); err == nil || !strings.Contains(err.Error(), "0644") {
		t.Fatalf("a 0644 file: %v", err)
	}
	stdin := strings.NewReader("from-stdin\nthe rest stays\n")
	if got, err := readOwnerToken("-", stdin); err != nil || got != "from-stdin" {
		t.Fatalf("stdin: %q %v", got, err)
	}
	if stdin.Len() != len("the rest stays\n") {
		t.Fatalf("reading the token consumed %d bytes past its line", len("the rest stays\n")-stdin.Len())
	}
	if _, err := readOwnerToken("-", strings.NewReader("\n")); err == nil {
		t.Fatal("an empty token was accepted")
	}
}

// --owner-token VALUE is refused before anything reaches a daemon, with
// the ways that keep the token out of the argument list.
func TestOwnerTokenOnTheCommandLineIsRefused(t *testing.T) {
	home := t.TempDir()
	r := runCLI(t, map[string]string{"SIMLOCK_HOME": home}, false, "--home", home, "session", "status", "req", "--owner-token", "s3cret")
	if r.code == 0 || !strings.Contains(r.stderr, "--owner-token is no longer accepted") || !strings.Contains(r.stderr, "SIMLOCK_SESSION_OWNER_TOKEN") ||
		!strings.Contains(r.stderr, "--owner-token-file") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "simlock.sock")); !os.IsNotExist(err) {
		t.Fatal("a refused command line started a daemon")
	}
}
