package android

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/core"
)

func TestResolvePassthrough(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		tool     string
		args     string
		terminal bool
		pin      string // the leased device's serial (device.exec); empty: local passthrough
		wantArgs string // empty: refused
		wantErr  error
		reason   string
	}{
		{tool: "adb", args: "-s emulator-5700 shell getprop sys.boot_completed", wantArgs: "-P 5137 -s emulator-5700 shell getprop sys.boot_completed"},
		{tool: "adb", args: "devices -l", wantArgs: "-P 5137 devices -l"},
		{tool: "adb", args: "-s emulator-5700 install app.apk", wantArgs: "-P 5137 -s emulator-5700 install app.apk"},
		{tool: "adb", args: "root", wantArgs: "-P 5137 root"},
		{tool: "adb", args: "unroot", wantArgs: "-P 5137 unroot"},
		{tool: "adb", args: "-s emulator-5700 emu avd name", wantArgs: "-P 5137 -s emulator-5700 emu avd name"},
		{tool: "adb", args: "shell", terminal: true, wantArgs: "-P 5137 shell"},
		{tool: "adb", args: "-s emulator-5700 shell -t", terminal: true, wantArgs: "-P 5137 -s emulator-5700 shell -t"},
		{tool: "adb", args: "-s emulator-5700 shell ls /sdcard", wantArgs: "-P 5137 -s emulator-5700 shell ls /sdcard"},
		{tool: "adb", args: "kill-server", wantErr: ErrPassthroughRefused, reason: "kill-server"},
		{tool: "adb", args: "-s emulator-5700 emu kill", wantErr: ErrPassthroughRefused, reason: "emu kill"},
		{tool: "adb", args: "-s emulator-5700 emu avd stop", wantErr: ErrPassthroughRefused, reason: "avd stop"},
		{tool: "adb", args: "-s emulator-5700 emu avd snapshot delete simlock-baseline", wantErr: ErrPassthroughRefused, reason: "simlock-baseline"},
		{tool: "adb", args: "-s emulator-5700 emu avd snapshot save mine", wantArgs: "-P 5137 -s emulator-5700 emu avd snapshot save mine"},
		{tool: "adb", args: "reboot", wantErr: ErrPassthroughRefused, reason: "reboot"},
		{tool: "adb", args: "-s emulator-5700 reboot bootloader", wantErr: ErrPassthroughRefused, reason: "reboot"},
		{tool: "adb", args: "-P 5037 devices", wantErr: ErrPassthroughRefused, reason: "private adb server"},
		{tool: "adb", args: "-H otherhost devices", wantErr: ErrPassthroughRefused, reason: "private adb server"},
		{tool: "adb", args: "shell", wantErr: ErrPassthroughRefused, reason: "needs a terminal"},
		{tool: "adb", args: "-s emulator-5700 shell", wantErr: ErrPassthroughRefused, reason: "needs a terminal"},
		{tool: "adb", args: "-s emulator-5700 shell -T -x", wantErr: ErrPassthroughRefused, reason: "needs a terminal"},
		{tool: "emulator", args: "-list-avds", wantArgs: "-list-avds"},
		{tool: "emulator", args: "-version", wantArgs: "-version"},
		{tool: "emulator", args: "-avd simlock-a -no-window", wantErr: ErrPassthroughRefused, reason: "lease a device"},
		{tool: "emulator", args: "@simlock-a", wantErr: ErrPassthroughRefused, reason: "lease a device"},
		{tool: "avdmanager", args: "list avd", wantArgs: "list avd"},
		{tool: "avdmanager", args: "-s create avd -n x -k y", wantErr: ErrPassthroughRefused, reason: "create"},
		{tool: "avdmanager", args: "delete avd -n simlock-a", wantErr: ErrPassthroughRefused, reason: "delete"},
		{tool: "avdmanager", args: "move avd -n simlock-a -r b", wantErr: ErrPassthroughRefused, reason: "move"},
		{tool: "adb", args: "-P5037 devices", wantErr: ErrPassthroughRefused, reason: "private adb server"},
		{tool: "adb", args: "-Hotherhost devices", wantErr: ErrPassthroughRefused, reason: "private adb server"},
		{tool: "adb", args: "-L tcp:localhost:5037 devices", wantErr: ErrPassthroughRefused, reason: "private adb server"},
		{tool: "adb", args: "connect 10.0.0.2:5555", wantErr: ErrPassthroughRefused, reason: "connect"},
		{tool: "adb", args: "-s emulator-5700 disconnect", wantErr: ErrPassthroughRefused, reason: "disconnect"},
		{tool: "adb", args: "pair 10.0.0.2:37000 123456", wantErr: ErrPassthroughRefused, reason: "pair"},
		// Pinned to a lease (device.exec): the lease's serial is added, and
		// any selector naming another device is refused.
		{tool: "adb", args: "shell id", pin: "emulator-5700", wantArgs: "-P 5137 -s emulator-5700 shell id"},
		{tool: "adb", args: "-s emulator-5700 shell id", pin: "emulator-5700", wantArgs: "-P 5137 -s emulator-5700 -s emulator-5700 shell id"},
		{tool: "adb", args: "devices", pin: "emulator-5700", wantArgs: "-P 5137 -s emulator-5700 devices"},
		{tool: "adb", args: "-s emulator-5702 shell id", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "-s emulator-5702 names another device"},
		{tool: "adb", args: "-s5702 shell id", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "-s 5702 names another device"},
		{tool: "adb", args: "-s emulator-5700 -s emulator-5702 shell id", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "emulator-5702"},
		{tool: "adb", args: "-t 3 shell id", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "transport id"},
		{tool: "adb", args: "-t3 shell id", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "transport id"},
		{tool: "adb", args: "-e shell id", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "-e picks a device"},
		{tool: "adb", args: "-d shell id", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "-d picks a device"},
		{tool: "adb", args: "--one-device emulator-5702 start-server", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "--one-device"},
		{tool: "adb", args: "connect 127.0.0.1:5557", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "connect"},
		{tool: "adb", args: "shell", pin: "emulator-5700", wantErr: ErrPassthroughRefused, reason: "needs a terminal"},
		// A shell's own -t (allocate a tty) is not adb's -t.
		{tool: "adb", args: "shell -t -T id", pin: "emulator-5700", wantArgs: "-P 5137 -s emulator-5700 shell -t -T id"},
		{tool: "sdkmanager", args: "--list", wantErr: ErrUnknownTool},
		{tool: "simctl", args: "list", wantErr: ErrUnknownTool},
	}
	for _, tt := range tests {
		name := tt.tool + " " + tt.args
		if tt.terminal {
			name += " (terminal)"
		}
		if tt.pin != "" {
			name += " (pinned to " + tt.pin + ")"
		}
		t.Run(name, func(t *testing.T) {
			args := strings.Fields(tt.args)
			before := slices.Clone(args)
			scope := core.PassthroughScope{Terminal: tt.terminal}
			if tt.pin != "" {
				scope.Pin = &core.DeviceRef{ID: "dev_1", Handle: "simlock-a", Attrs: map[string]string{core.AttrSerial: tt.pin}}
			}
			cmd, err := h.d.ResolvePassthrough(tt.tool, args, scope)
			if !reflect.DeepEqual(args, before) {
				t.Errorf("caller's args modified: %q", args)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.reason) {
					t.Fatalf("err = %v, want %v mentioning %q", err, tt.wantErr, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cmd.Name != tt.tool || strings.Join(cmd.Args, " ") != tt.wantArgs {
				t.Errorf("command %s %q, want %s", cmd.Name, cmd.Args, tt.wantArgs)
			}
			for _, want := range []string{"ANDROID_AVD_HOME=" + h.root, "ANDROID_ADB_SERVER_PORT=5137"} {
				if !slices.Contains(cmd.Env, want) {
					t.Errorf("env %q lacks %s", cmd.Env, want)
				}
			}
			if tt.pin != "" && !slices.Contains(cmd.Env, "ANDROID_SERIAL="+tt.pin) {
				t.Errorf("pinned env %q lacks ANDROID_SERIAL", cmd.Env)
			}
		})
	}
}

func FuzzResolvePassthrough(f *testing.F) {
	for _, s := range []string{"kill-server", "-s emulator-5700 emu kill", "shell", "-s x shell ls", "-P", "-s", "emu avd snapshot load simlock-baseline",
		"-s emulator-5702 shell id", "-s5702 shell id", "-t 1 shell id", "-t1 shell", "-e shell id", "-d shell id", "connect 1.2.3.4",
		"-s emulator-5700 -s emulator-5702 shell id", "-P5037 devices", "-Hh devices", "--one-device x start-server", "-a -s emulator-5700 shell id"} {
		f.Add(s, false, false)
		f.Add(s, false, true)
	}
	d, err := New(Options{Root: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close(context.Background()) })
	const pin = "emulator-5700"
	f.Fuzz(func(t *testing.T, args string, terminal, pinned bool) {
		user := strings.Fields(args)
		scope := core.PassthroughScope{Terminal: terminal}
		if pinned {
			scope.Pin = &core.DeviceRef{ID: "dev_1", Attrs: map[string]string{core.AttrSerial: pin}}
		}
		cmd, err := d.ResolvePassthrough("adb", user, scope)
		if err != nil {
			if !errors.Is(err, ErrPassthroughRefused) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// Whatever passes still talks to the private server only...
		if len(cmd.Args) < 2 || cmd.Args[0] != "-P" || cmd.Args[1] != "5137" {
			t.Fatalf("args %q", cmd.Args)
		}
		g := adbGlobals(user)
		if g.server {
			t.Fatalf("%q passed with a server option", user)
		}
		// ...pinned, it names only the leased device...
		if pinned {
			if len(cmd.Args) < 4 || cmd.Args[2] != "-s" || cmd.Args[3] != pin {
				t.Fatalf("pinned args %q lack -s %s", cmd.Args, pin)
			}
			if g.otherSelector {
				t.Fatalf("%q passed pinned with a device selector", user)
			}
			for _, s := range g.serials {
				if s != pin {
					t.Fatalf("%q passed pinned to %s naming %s", user, pin, s)
				}
			}
		}
		// ...and its verb is none of the refused ones.
		if len(g.rest) == 0 {
			return
		}
		v, rest := g.rest[0], g.rest[1:]
		switch {
		case v == "kill-server", v == "reboot", strings.HasPrefix(v, "reboot-"), v == "connect", v == "disconnect", v == "pair":
			t.Fatalf("%q passed", user)
		case v == "emu" && len(rest) > 0 && strings.EqualFold(rest[0], "kill"):
			t.Fatalf("%q passed", user)
		case v == "shell" && !terminal && len(rest) == 0:
			t.Fatalf("%q passed without a terminal", user)
		}
	})
}

// globals is what adb itself would make of the options before the verb,
// parsed here independently of the checker, the way adb's command line
// parser does: -s and -t take the next word, or an attached value that
// starts with a digit; -H and -P take an attached value or the next word.
type globals struct {
	serials       []string
	otherSelector bool // -t, -d, -e, --one-device
	server        bool // -H, -P, -L
	rest          []string
}

func adbGlobals(args []string) globals {
	var g globals
	digit := func(a string) bool { return len(a) > 2 && a[2] >= '0' && a[2] <= '9' }
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" {
		a := args[i]
		i++
		next := func() string {
			if i < len(args) {
				i++
				return args[i-1]
			}
			return ""
		}
		switch {
		case a == "-s":
			g.serials = append(g.serials, next())
		case strings.HasPrefix(a, "-s") && digit(a):
			g.serials = append(g.serials, a[2:])
		case a == "-t" || a == "--one-device":
			next()
			g.otherSelector = true
		case strings.HasPrefix(a, "-t") && digit(a), a == "-d", a == "-e":
			g.otherSelector = true
		case a == "-H" || a == "-P" || a == "-L":
			next()
			g.server = true
		case strings.HasPrefix(a, "-H") || strings.HasPrefix(a, "-P"):
			g.server = true
		case a == "-p":
			next()
		}
	}
	g.rest = args[i:]
	return g
}
