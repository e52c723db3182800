package simsdk

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// simctl spawn <device> <path> [args...] runs a program inside a booted
// simulator. Only the programs drivers and common tools run are simulated:
// launchctl (ios_launchctl.go), sw_vers, notifyutil -p, defaults read,
// log show and log stream. The program's own arguments are its business,
// so options are only read before the device.
func (s *sdk) simctlSpawn(ctx context.Context, ds deviceSet, args []string) int {
	const usage = "spawn [-w | --wait-for-debugger] [-s | --standalone] [-a <arch> | --arch=<arch>] <device> <path to executable> [<argv 1> <argv 2> ... <argv n>]"
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-a" {
			i++
		}
		i++
	}
	pos := args[min(i, len(args)):]
	if len(pos) < 2 {
		return s.report(usageErr(usage))
	}
	d, err := s.bootedDevice(ds, pos[0])
	if err != nil {
		return s.report(err)
	}
	prog, rest := pos[1], pos[2:]
	switch path.Base(prog) {
	case "launchctl":
		return s.spawnLaunchctl(ctx, ds, d, rest)
	case "sw_vers":
		rts, err := s.installedRuntimes()
		if err != nil {
			return s.report(err)
		}
		r, _ := runtimeByID(rts, d.Runtime)
		fmt.Fprintf(s.stdout, "ProductName:\t\t%s\nProductVersion:\t\t%s\nBuildVersion:\t\t%s\n", r.Platform, r.Version, r.Build)
		return 0
	case "notifyutil":
		if len(rest) == 2 && rest[0] == "-p" {
			return 0 // posted; nothing in the simulation listens
		}
	case "defaults":
		// The simulated apps keep no preferences: every domain is empty.
		if len(rest) == 2 && rest[0] == "read" {
			fmt.Fprintf(s.stderr, "\nDomain %s does not exist\n", rest[1])
			return 1
		}
		if len(rest) == 3 && rest[0] == "read" {
			fmt.Fprintf(s.stderr, "\nThe domain/default pair of (%s, %s) does not exist\n", rest[1], rest[2])
			return 1
		}
		if len(rest) >= 2 && (rest[0] == "write" || rest[0] == "delete") {
			return 0
		}
	case "log":
		if len(rest) > 0 && rest[0] == "show" {
			fmt.Fprintln(s.stdout, "Timestamp                       Thread     Type        Activity             PID    TTL  ")
			return 0
		}
		if len(rest) > 0 && rest[0] == "stream" {
			// Streams until stopped, like the real one; nothing is logged.
			fmt.Fprintln(s.stdout, "Filtering the log data using \"simlock simulated SDK\"")
			fmt.Fprintln(s.stdout, "Timestamp                       Thread     Type        Activity             PID    TTL  ")
			<-ctx.Done()
			return 0
		}
	default:
		fmt.Fprintf(s.stderr, "An error was encountered processing the command (domain=NSPOSIXErrorDomain, code=2):\nThe operation couldn’t be completed. No such file or directory\n(%s is not simulated by the simlock simulated SDK)\n", prog)
		return 2
	}
	fmt.Fprintf(s.stderr, "%s %s: these arguments are not simulated by the simlock simulated SDK\n", prog, strings.Join(rest, " "))
	return 64
}
