// Package testhost keeps test daemons off the developer's own host registry.
package testhost

import (
	"os"
	"testing"
)

// RunIsolated runs a test binary's tests with SIMLOCK_HOST_DIR pointing at
// a fresh directory, so no test daemon (in-process or a child process)
// reads or writes the developer's own host registry, and test packages
// that `go test ./...` runs side by side never count each other's devices.
// Use it from TestMain: os.Exit(testhost.RunIsolated(m)).
func RunIsolated(m *testing.M) int {
	dir, err := os.MkdirTemp("", "simlock-hostreg-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Setenv("SIMLOCK_HOST_DIR", dir); err != nil {
		panic(err)
	}
	return m.Run()
}
