package simsdk

import "io"

// The app and screen commands third-party clients send: am, screencap and
// input. Issue 14 builds them out.

func (sh *devShell) am(args []string, _, stderr io.Writer) int { return notSimulated("am", stderr) }
func (sh *devShell) screencap(args []string, _, stderr io.Writer) int {
	return notSimulated("screencap", stderr)
}

// input taps and types; the simulated screen has nothing to act on, so it
// succeeds silently like the real one on a booted device.
func (sh *devShell) input(args []string, _, _ io.Writer) int { return 0 }
