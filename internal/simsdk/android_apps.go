package simsdk

import "io"

// The app and screen commands third-party clients send: am, screencap and
// input. Issue 14 builds them out.

func (sh *devShell) am(args []string, stdout, stderr io.Writer) int {
	return sh.amCommand(args, stdout, stderr)
}
func (sh *devShell) screencap(args []string, _, stderr io.Writer) int {
	return notSimulated("screencap", stderr)
}

// input taps and types (android_input.go checks the arguments).
func (sh *devShell) input(args []string, stdout, stderr io.Writer) int {
	return inputCommand(args, stdout, stderr)
}
