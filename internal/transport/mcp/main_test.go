package mcp

import (
	"os"
	"testing"

	"github.com/simlock/simlock/internal/testhost"
)

// Every daemon these tests start uses a host registry of their own.
func TestMain(m *testing.M) { os.Exit(testhost.RunIsolated(m)) }
