package android

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestResolvePassthrough(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		tool     string
		args     string
		terminal bool
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
		{tool: "sdkmanager", args: "--list", wantErr: ErrUnknownTool},
		{tool: "simctl", args: "list", wantErr: ErrUnknownTool},
	}
	for _, tt := range tests {
		name := tt.tool + " " + tt.args
		if tt.terminal {
			name += " (terminal)"
		}
		t.Run(name, func(t *testing.T) {
			args := strings.Fields(tt.args)
			before := slices.Clone(args)
			cmd, err := h.d.ResolvePassthrough(tt.tool, args, tt.terminal)
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
		})
	}
}

func FuzzResolvePassthrough(f *testing.F) {
	for _, s := range []string{"kill-server", "-s emulator-5700 emu kill", "shell", "-s x shell ls", "-P", "-s", "emu avd snapshot load simlock-baseline"} {
		f.Add(s, false)
	}
	d, err := New(Options{Root: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, args string, terminal bool) {
		user := strings.Fields(args)
		cmd, err := d.ResolvePassthrough("adb", user, terminal)
		if err != nil {
			if !errors.Is(err, ErrPassthroughRefused) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// Whatever passes still talks to the private server only...
		if len(cmd.Args) < 2 || cmd.Args[0] != "-P" || cmd.Args[1] != "5137" || slices.Contains(user, "-P") {
			t.Fatalf("args %q", cmd.Args)
		}
		// ...and its verb is none of the refused ones.
		i := verbIndex(user)
		if i >= len(user) {
			return
		}
		v, rest := user[i], user[i+1:]
		switch {
		case v == "kill-server", v == "reboot", strings.HasPrefix(v, "reboot-"):
			t.Fatalf("%q passed", user)
		case v == "emu" && len(rest) > 0 && strings.EqualFold(rest[0], "kill"):
			t.Fatalf("%q passed", user)
		case v == "shell" && !terminal && len(rest) == 0:
			t.Fatalf("%q passed without a terminal", user)
		}
	})
}

// verbIndex finds adb's verb after its global options.
func verbIndex(args []string) int {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if adbOptsWithValue[args[i]] {
			i++
		}
		i++
	}
	return i
}
