package simsdk

import (
	"fmt"
	"io"
)

// The device-state commands resource tuning reads and writes: settings,
// cmd (role, package), dumpsys and wm. Issue 13 builds them out.

func (sh *devShell) settings(args []string, _, stderr io.Writer) int {
	return notSimulated("settings", stderr)
}
func (sh *devShell) cmd(args []string, _, stderr io.Writer) int { return notSimulated("cmd", stderr) }
func (sh *devShell) dumpsys(args []string, _, stderr io.Writer) int {
	return notSimulated("dumpsys", stderr)
}
func (sh *devShell) wm(args []string, _, stderr io.Writer) int { return notSimulated("wm", stderr) }

func notSimulated(name string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: not simulated by the simlock simulated SDK\n", name)
	return 1
}
