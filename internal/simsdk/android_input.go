package simsdk

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// `input [<source>] [-d DISPLAY] <command> [args]` injects events. The
// simulated screen has nothing to act on, so a well-formed command
// succeeds and does nothing, except the power, sleep, wakeup and menu
// keys, which act on the screen and its lock (android_window.go); what is
// checked is the argument forms, because a client that sends a malformed
// one must fail here as it would on a device.
// The texts follow AOSP's InputShellCommand as publicly reported (no
// capture): an unknown command is refused with a usage text, a wrong
// argument count or a non-number escapes as a Java exception (exit 255).

var inputSources = []string{"dpad", "keyboard", "mouse", "touchpad", "gamepad", "touchnavigation",
	"joystick", "touchscreen", "stylus", "trackball", "rotaryencoder"}

const inputUsage = `Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]
commands: text <string> | keyevent [--longpress|--doubletap|--async] <key>... |
  tap <x> <y> | swipe <x1> <y1> <x2> <y2> [ms] | draganddrop <x1> <y1> <x2> <y2> [ms] |
  press | roll <dx> <dy> | motionevent <DOWN|UP|MOVE|CANCEL> <x> <y> |
  keycombination [-t ms] <key>... | scroll [<x> <y>] [--axis <AXIS>,<value>]
(simlock simulated SDK: accepted and checked, no effect)
`

func inputCommand(args []string, _, stderr io.Writer) int {
	if len(args) > 0 && slices.Contains(inputSources, args[0]) {
		args = args[1:]
	}
	if len(args) >= 2 && args[0] == "-d" {
		if _, err := strconv.Atoi(args[1]); err != nil {
			return inputException(stderr, "java.lang.NumberFormatException: For input string: \""+args[1]+"\"")
		}
		args = args[2:]
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, inputUsage)
		return 1
	}
	cmd, rest := args[0], args[1:]
	invalid := func() int {
		return inputException(stderr, "java.lang.IllegalArgumentException: Error: Invalid arguments for command: "+cmd)
	}
	switch cmd {
	case "text":
		if len(rest) == 0 {
			return invalid()
		}
		return 0
	case "keyevent", "keycombination":
		keys := 0
		for i := 0; i < len(rest); i++ {
			switch a := rest[i]; {
			case a == "--longpress" || a == "--doubletap" || a == "--async":
			case a == "--duration" || a == "--delay" || (cmd == "keycombination" && a == "-t"):
				if i+1 >= len(rest) || !isNumber(rest[i+1]) {
					return invalid()
				}
				i++
			case strings.HasPrefix(a, "-"):
				return invalid()
			case !validKeyCode(a):
				return inputException(stderr, "java.lang.IllegalArgumentException: Unknown keycode: "+a)
			default:
				keys++
			}
		}
		if keys == 0 {
			return invalid()
		}
		return 0
	case "tap":
		return inputNumbers(stderr, cmd, rest, 2, 2)
	case "swipe", "draganddrop":
		return inputNumbers(stderr, cmd, rest, 4, 5)
	case "roll":
		return inputNumbers(stderr, cmd, rest, 2, 2)
	case "press":
		return inputNumbers(stderr, cmd, rest, 0, 0)
	case "motionevent":
		if len(rest) != 3 || !slices.Contains([]string{"DOWN", "UP", "MOVE", "CANCEL"}, strings.ToUpper(rest[0])) {
			return invalid()
		}
		return inputNumbers(stderr, cmd, rest[1:], 2, 2)
	case "scroll":
		var nums []string
		for i := 0; i < len(rest); i++ {
			if rest[i] == "--axis" {
				if i+1 >= len(rest) || !strings.Contains(rest[i+1], ",") {
					return invalid()
				}
				i++
				continue
			}
			nums = append(nums, rest[i])
		}
		return inputNumbers(stderr, cmd, nums, 0, 3)
	}
	fmt.Fprintf(stderr, "Error: Unknown command: %s\n%s", cmd, inputUsage)
	return 1
}

func inputException(stderr io.Writer, exc string) int {
	fmt.Fprintf(stderr, "Exception occurred while executing 'input':\n%s\n", exc)
	return 255
}

// inputNumbers checks that args are min..max numbers.
func inputNumbers(stderr io.Writer, cmd string, args []string, min, max int) int {
	if len(args) < min || len(args) > max {
		return inputException(stderr, "java.lang.IllegalArgumentException: Error: Invalid arguments for command: "+cmd)
	}
	for _, a := range args {
		if !isNumber(a) {
			return inputException(stderr, "java.lang.NumberFormatException: For input string: \""+a+"\"")
		}
	}
	return 0
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// validKeyCode accepts a key code number or a KeyEvent name, with or
// without its KEYCODE_ prefix (upper case letters, digits and _).
func validKeyCode(k string) bool {
	if n, err := strconv.Atoi(k); err == nil {
		return n >= 0 && n < 400
	}
	name := strings.TrimPrefix(k, "KEYCODE_")
	if name == "" {
		return false
	}
	for _, c := range name {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
