package cli

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/simlock/simlock/contract"
)

func TestDeviceSpecFlagsMakeAGroupRequest(t *testing.T) {
	var lf leaseFlags
	fs := pflag.NewFlagSet("lease", pflag.ContinueOnError)
	lf.register(fs)
	if err := fs.Parse([]string{"--device-spec", `platform=ios,model="iPhone 16",os=18.2`, "--device-spec", "platform=android"}); err != nil {
		t.Fatal(err)
	}
	in, err := lf.request()
	if err != nil {
		t.Fatal(err)
	}
	want := []contract.DeviceSpec{{Platform: "ios", Model: "iPhone 16", OSVersion: "18.2"}, {Platform: "android"}}
	if in.Platform != "" || len(in.Devices) != 2 || in.Devices[0] != want[0] || in.Devices[1] != want[1] {
		t.Fatalf("request %+v", in)
	}
}

func TestDeviceSpecRefusesSingleDeviceFlagsAndBadPairs(t *testing.T) {
	for _, args := range [][]string{
		{"--device-spec", "platform=ios", "--platform", "android"},
		{"--device-spec", "platform=ios", "--model", "iPhone 16"},
		{"--device-spec", "model=iPhone 16"},
		{"--device-spec", "platform=ios,colour=red"},
		{"--device-spec", "platform"},
		{"--device-spec", "platform=windows"},
	} {
		var lf leaseFlags
		fs := pflag.NewFlagSet("lease", pflag.ContinueOnError)
		lf.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if _, err := lf.request(); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
}
