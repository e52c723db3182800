package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/simlock/simlock/contract"
)

// A session's owner token is a credential: whoever holds it (and runs as
// the session's principal, ADR 0063) can heartbeat, release and abandon
// the session. A process's argument list is readable by every local user
// (ps, /proc/<pid>/cmdline), so the token is never taken from it: it comes
// from the environment, from a file only its owner can read, or from
// stdin.

// maxOwnerToken bounds what is read for a token (the daemon accepts 256).
const maxOwnerToken = 4096

// ownerTokenFromArgs is the refusal of --owner-token VALUE.
func ownerTokenFromArgs() error {
	return contract.Errorf(contract.CodeBadRequest, "--owner-token is no longer accepted: a token in the argument list is readable by every local user (ps)").
		WithNext("set " + ownerTokenEnv + ", or pass --owner-token-file PATH (a file of mode 0600) or --owner-token-file - to read it from stdin")
}

// readOwnerToken reads a token from path, or from stdin for "-" (one
// line, read a byte at a time so nothing after it is consumed: `session
// hold` goes on watching stdin for its end). A file that its group or
// others may read is refused, since the token in it is not secret.
func readOwnerToken(path string, stdin io.Reader) (string, error) {
	var raw []byte
	if path == "-" {
		b := make([]byte, 1)
		for len(raw) <= maxOwnerToken {
			n, err := stdin.Read(b)
			if n == 1 {
				if b[0] == '\n' {
					break
				}
				raw = append(raw, b[0])
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return "", fmt.Errorf("read the owner token from stdin: %w", err)
			}
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", contract.Errorf(contract.CodeBadRequest, "read the owner token file: %v", err).
				WithNext("pass the path of a file that holds the token, or set " + ownerTokenEnv)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return "", fmt.Errorf("stat the owner token file: %w", err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 || !fi.Mode().IsRegular() {
			return "", contract.Errorf(contract.CodeBadRequest, "the owner token file %s has mode %04o: others could read the token", path, perm).
				WithNext("chmod 600 " + path + " (it must be a regular file only its owner can read)")
		}
		raw, err = io.ReadAll(io.LimitReader(f, maxOwnerToken+1))
		if err != nil {
			return "", fmt.Errorf("read the owner token file: %w", err)
		}
	}
	t := strings.TrimSpace(string(raw))
	if t == "" || len(raw) > maxOwnerToken {
		return "", contract.Errorf(contract.CodeSessionConfigInvalid, "the owner token read from %s is empty or too long", path).
			WithNext("write the token (1 to 256 characters) on the first line")
	}
	return t, nil
}
