package simsdk

import (
	"context"
	"fmt"
)

// simctl spawn <device> <path> [args...] runs a program inside a booted
// simulator. Only the programs drivers and common tools run are simulated;
// launchctl lives in ios_launchctl.go.
func (s *sdk) simctlSpawn(ctx context.Context, ds deviceSet, args []string) int {
	_, pos := splitFlags(args)
	if len(pos) < 2 {
		return s.report(usageErr("spawn [-w | --wait-for-debugger] [-s | --standalone] [-a <arch> | --arch=<arch>] <device> <path to executable> [<argv 1> <argv 2> ... <argv n>]"))
	}
	d, err := s.bootedDevice(ds, pos[0])
	if err != nil {
		return s.report(err)
	}
	switch prog, rest := pos[1], pos[2:]; prog {
	case "launchctl", "/bin/launchctl":
		return s.spawnLaunchctl(ctx, ds, d, rest)
	default:
		fmt.Fprintf(s.stderr, "An error was encountered processing the command (domain=NSPOSIXErrorDomain, code=2):\nThe operation couldn’t be completed. No such file or directory\n(%s is not simulated by the simlock simulated SDK)\n", prog)
		return 2
	}
}
