package claims

import (
	"reflect"
	"testing"

	"github.com/simlock/simlock/internal/hostreg"
)

// The processes of a deleted root's devices are found by what their
// arguments name, and nothing else is: another set's device of the same
// UDID prefix, another AVD whose name extends this one's, and the grep a
// user runs for the UDID are left alone.
func TestDeviceProcsFindsOnlyTheDevicesOfTheGoneRoot(t *testing.T) {
	procs := []hostProc{
		{1, "/Library/Developer/CoreSimulator/Profiles/Runtimes/iOS.simruntime/launchd_sim /gone/devices/ios/ABCD-1/data/var/run/launchd_bootstrap.plist"},
		{2, "simlock __simsdk-device platform=ios id=ABCD-1 name=x dir=/gone/devices/ios/ABCD-1 boot-ms=0"},
		{3, "launchd_sim /other/devices/ios/ABCD-1/data/var/run/launchd_bootstrap.plist"},
		{4, "launchd_sim /gone/devices/ios/ABCD-12/data/var/run/launchd_bootstrap.plist"},
		{5, "grep ABCD-1"},
		{6, "emulator -avd simlock-aa -port 5554 -no-window"},
		{7, "qemu-system-aarch64 -avd simlock-aab -port 5556"},
		{8, "emulator -avd slot-1 -port 5560 -no-window"},
		{9, "emulator -avd slot-1 -port 5562 -no-window"}, // another home's slot of the same name
	}
	if got := deviceProcs(procs, "/gone/devices/ios", hostreg.Key("ios:udid:ABCD-1"), 0); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("iOS: %v, want [1 2]", got)
	}
	if got := deviceProcs(procs, "/gone/devices/android", hostreg.Key("android:avd:simlock-aa:/gone/devices/android"), 0); !reflect.DeepEqual(got, []int{6}) {
		t.Fatalf("Android: %v, want [6]", got)
	}
	// With the console port the host registry leased, an AVD name two
	// homes share names only the owner's emulator.
	if got := deviceProcs(procs, "/gone/devices/android", hostreg.Key("android:avd:slot-1:/gone/devices/android"), 5562); !reflect.DeepEqual(got, []int{9}) {
		t.Fatalf("Android slot with its console port: %v, want [9]", got)
	}
}
