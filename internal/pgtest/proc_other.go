//go:build !linux

package pgtest

import (
	"os"
	"os/exec"
)

// runAs is the test's own user: running the server as another user is
// only supported on Linux, where CI runs as root.
type runAs struct{}

func serverUser() (runAs, error)  { return runAs{}, nil }
func (runAs) own(string) error    { return nil }
func (runAs) env() []string       { return append(os.Environ(), "LC_ALL=C") }
func (runAs) apply(cmd *exec.Cmd) {}
