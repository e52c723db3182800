// Command simlock is the daemon, the CLI, the simulated SDK tools and
// (later) the MCP server and fleet gateway, in one binary.
package main

import (
	"context"
	"os"

	"github.com/simlock/simlock/internal/cli"
)

func main() {
	os.Exit(cli.Run(context.Background(), os.Args, cli.OSEnv()))
}
