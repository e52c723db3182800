package android

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fixture reads a capture copied into testdata (see testdata/PROVENANCE.md).
func fixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseADBDevices(t *testing.T) {
	tests := []struct {
		file    string
		want    []adbDevice
		wantErr error
	}{
		{file: "adb/connect-failed-auth-and-devices-unauthorized-2019.txt",
			want: []adbDevice{{Serial: "localhost:5555", State: "unauthorized"}}},
		{file: "adb/devices-daemon-start-empty-2021.txt", want: nil},
		{file: "adb/devices-emulator-2021.txt",
			want: []adbDevice{{Serial: "emulator-5554", State: "device"}}},
		{file: "adb/devices-l-android-n-features.txt",
			want: []adbDevice{{Serial: "ZX1G22JJWR", State: "device", Props: map[string]string{
				"usb": "3-3", "product": "shamu", "model": "Nexus_6", "device": "shamu", "features": "cmd,shell_v2"}}}},
		{file: "adb/devices-l-nexus7-2016.txt",
			want: []adbDevice{{Serial: "05a02bac", State: "device", Props: map[string]string{
				"usb": "336592896X", "product": "razor", "model": "Nexus_7", "device": "flo"}}}},
		{file: "adb/devices-l-physical-transport-id-2024.txt",
			want: []adbDevice{{Serial: "UYT5T18414003349", State: "device", Props: map[string]string{
				"usb": "1114112X", "product": "ALP-AL00", "model": "ALP_AL00", "device": "HWALP", "transport_id": "23"}}}},
		{file: "adb/devices-l-tcp-usb-emulator-host-state.txt",
			want: []adbDevice{
				{Serial: "localhost:36790", State: "device"},
				{Serial: "0149947A0D01500C", State: "device", Props: map[string]string{"usb": "340787200X"}},
				{Serial: "emulator-5612", State: "host", Props: map[string]string{"features": "shell_2"}},
			}},
		{file: "adb/devices-offline-platform-tools-36.txt",
			want: []adbDevice{{Serial: "emulator-5554", State: "offline"}}},
		{file: "adb/devices-unauthorized-2017.txt",
			want: []adbDevice{
				{Serial: "emulator-5558", State: "device"},
				{Serial: "fc74d864", State: "device"},
				{Serial: "emulator-5556", State: "unauthorized"},
				{Serial: "emulator-5554", State: "device"},
			}},
		{file: "adb/error-platform-tools-not-installed-legacy.txt", wantErr: errNoDeviceList},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			got, err := parseADBDevices(fixture(t, tt.file))
			if err != tt.wantErr {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseADBDevicesTrailingSpaceHeader(t *testing.T) {
	// Older adb printed the header with a trailing space (noted in the
	// fixture INDEX; no standalone capture exists).
	got, err := parseADBDevices([]byte("List of devices attached \nemulator-5700\tdevice\n\n"))
	if err != nil || len(got) != 1 || got[0].Serial != "emulator-5700" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestParseGetprop(t *testing.T) {
	tests := []struct {
		file  string
		count int
		want  map[string]string
		unset []string
		ready bool
	}{
		{file: "adb/getprop-excerpt-crcrlf-emulator-api23-2019.txt", count: 23,
			want: map[string]string{
				"ro.build.version.release":  "6.0",
				"ro.build.version.sdk":      "23",
				"ro.build.version.base_os":  "",
				"ro.build.date":             "Thu May  2 18:24:44 UTC 2019",
				"ro.build.characteristics":  "emulator",
				"ro.build.version.codename": "REL",
			}},
		{file: "adb/getprop-full-emulator-api23-booting.txt", count: 155,
			want: map[string]string{
				"init.svc.bootanim":         "running",
				"service.bootanim.exit":     "0",
				"dalvik.vm.isa.x86.variant": "dalvik.vm.isa.x86.features=default",
				"gsm.operator.alpha":        "",
			},
			unset: []string{"sys.boot_completed", "dev.bootcomplete"}},
		{file: "adb/getprop-full-physical-motorola-android13.txt", count: 863, ready: true,
			want: map[string]string{
				"sys.boot_completed":                "1",
				"init.svc.bootanim":                 "stopped",
				"ro.build.version.release":          "13",
				"ro.build.version.sdk":              "33",
				"persist.sys.boot.reason":           "",
				"persist.sys.boot.reason.history":   "reboot,hardware_reset,1728776411\nreboot,1727208771\nreboot,1726002861\nreboot,1724940786",
				"persist.sys.bootupvolume":          "0",
				"persist.sys.dalvik.vm.lib.2":       "libart.so",
				"persist.rild.nitz_short_ons_3":     "",
				"bluetooth.profile.gatt.enabled":    "true",
				"sys.bootstat.first_boot_completed": "1",
			}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			got := parseGetprop(fixture(t, tt.file))
			if len(got) != tt.count {
				t.Errorf("parsed %d properties, want %d", len(got), tt.count)
			}
			for k, v := range tt.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %q (present %v), want %q", k, g, ok, v)
				}
			}
			for _, k := range tt.unset {
				if _, ok := got[k]; ok {
					t.Errorf("%s unexpectedly set", k)
				}
			}
			if r := bootCompleted(got); r != tt.ready {
				t.Errorf("bootCompleted = %v, want %v", r, tt.ready)
			}
		})
	}
}

func TestBootCompleted(t *testing.T) {
	tests := []struct {
		props map[string]string
		want  bool
	}{
		{map[string]string{"sys.boot_completed": "1"}, true}, // -no-boot-anim: never set
		{map[string]string{"sys.boot_completed": "1", "init.svc.bootanim": ""}, true},
		{map[string]string{"sys.boot_completed": "1", "init.svc.bootanim": "stopped"}, true},
		{map[string]string{"sys.boot_completed": "1", "init.svc.bootanim": "running"}, false},
		{map[string]string{"sys.boot_completed": "0"}, false},
		{map[string]string{"init.svc.bootanim": "stopped"}, false},
	}
	for _, tt := range tests {
		if got := bootCompleted(tt.props); got != tt.want {
			t.Errorf("bootCompleted(%v) = %v, want %v", tt.props, got, tt.want)
		}
	}
}

func TestParseADBVersion(t *testing.T) {
	got := parseADBVersion(fixture(t, "adb/version-platform-tools-36.0.0-linux.txt"))
	want := adbVersion{Protocol: "1.0.41", Version: "36.0.0-13206524"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	sim := parseADBVersion([]byte("Android Debug Bridge version 1.0.41\nVersion 36.0.0-simlock (simulated SDK)\n"))
	if !sim.Simulated {
		t.Error("simulated SDK version text not detected")
	}
}

func TestParseConsoleReply(t *testing.T) {
	tests := []struct {
		file string
		want consoleReply
	}{
		{"emulator/adb-emu-avd-name-Pixel_9.bin", consoleReply{Lines: []string{"Pixel_9"}, OK: true}},
		{"emulator/console-banner-auth-required-2024.bin", consoleReply{Lines: []string{
			"Android Console: Authentication required",
			"Android Console: type 'auth <auth_token>' to authenticate",
			"Android Console: you can find your <auth_token> in",
			"'/home/pcxlk/.emulator_console_auth_token'",
		}, OK: true}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			if got := parseConsoleReply(fixture(t, tt.file)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	ko := parseConsoleReply([]byte("KO: snapshot 'simlock-baseline' not found\r\n"))
	if ko.OK || ko.Err != "snapshot 'simlock-baseline' not found" {
		t.Errorf("KO reply: %+v", ko)
	}
}

func TestParseDeviceList(t *testing.T) {
	got := parseDeviceList(fixture(t, "avdmanager/list-device-excerpt-2025.txt"))
	want := []deviceProfile{
		{Index: 22, ID: "Nexus 9", Name: "Nexus 9", OEM: "Google"},
		{Index: 23, ID: "Nexus One", Name: "Nexus One", OEM: "Google"},
		{Index: 24, ID: "Nexus S", Name: "Nexus S", OEM: "Google"},
		{Index: 25, ID: "pixel", Name: "Pixel", OEM: "Google"},
		{Index: 26, ID: "pixel_2", Name: "Pixel 2", OEM: "Google"},
		{Index: 27, ID: "pixel_2_xl", Name: "Pixel 2 XL", OEM: "Google"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseAVDList(t *testing.T) {
	tests := []struct {
		file   string
		loaded []avdEntry
		broken []avdEntry
	}{
		{file: "avdmanager/android-list-avd-legacy-could-not-be-loaded-2017.txt",
			loaded: []avdEntry{
				{Name: "Nexus_S_API_16", Device: "Nexus S", DeviceOEM: "Google", Path: "/Users/efung/.android/avd/Nexus_S_API_16.avd",
					Target: "Android 4.1.2 (API level 16)", Tag: "default", ABI: "x86", Skin: "nexus_s", Sdcard: "1G", APILevel: 16},
				{Name: "shift-21", Device: "Nexus S", DeviceOEM: "Google", Path: "/Users/efung/.android/avd/shift-21.avd",
					Target: "Android 5.0.1 (API level 21)", Tag: "default", ABI: "x86_64", Skin: "480x800", Sdcard: "500M", APILevel: 21},
			},
			broken: []avdEntry{
				{Name: "Nex_6_API_24_Google_APIs", Path: "/Users/efung/.android/avd/Nex_6_API_24_Google_APIs.avd", Error: "Uknown error"},
				{Name: "Nexus_5_API_19", Path: "/Users/efung/.android/avd/Nexus_5_API_19.avd", Error: "Uknown error"},
			}},
		{file: "avdmanager/list-avd-api33-windows-2023.txt",
			loaded: []avdEntry{
				{Name: "Pixel_4_API_33", Device: "pixel_4", DeviceOEM: "Google", Path: `D:\AppData\.android\avd\Pixel_4_API_33.avd`,
					Target: "Google APIs (Google Inc.)", BasedOn: "Android 13.0 (Tiramisu)", Tag: "google_apis", ABI: "x86_64",
					Skin: "pixel_4", Sdcard: "512M", APILevel: 33},
				{Name: "Pixel_6_API_33", Device: "pixel_6", DeviceOEM: "Google", Path: `D:\AppData\.android\avd\Pixel_6_API_33.avd`,
					Target: "Google APIs (Google Inc.)", BasedOn: "Android 13.0 (Tiramisu)", Tag: "google_apis", ABI: "x86_64",
					Skin: "pixel_6", Sdcard: "512M", APILevel: 33},
			}},
		{file: "avdmanager/list-avd-api34-35-36-linux-2026.txt",
			loaded: []avdEntry{
				{Name: "emulator", Device: "pixel_4", DeviceOEM: "Google", Path: "/home/builder/.config/.android/avd/emulator.avd",
					Target: "Google Play (Google Inc.)", BasedOn: `Android 14.0 ("UpsideDownCake")`, Tag: "google_apis_playstore", ABI: "x86_64",
					Skin: "pixel_4", Sdcard: "512M", APILevel: 34},
				{Name: "emulator-35", Device: "pixel_4", DeviceOEM: "Google", Path: "/home/builder/.config/.android/avd/emulator-35.avd",
					Target: "Google Play (Google Inc.)", BasedOn: "Android API 35", Tag: "google_apis_playstore", ABI: "x86_64",
					Skin: "pixel_4", Sdcard: "512M", APILevel: 35},
				{Name: "emulator-36", Device: "pixel_6a", DeviceOEM: "Google", Path: "/home/builder/.config/.android/avd/emulator-36.avd",
					Target: "Google Play (Google Inc.)", BasedOn: "Android API 36", Tag: "google_apis_playstore", ABI: "x86_64",
					Skin: "pixel_6a", Sdcard: "512M", APILevel: 36},
			}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			loaded, broken := parseAVDList(fixture(t, tt.file))
			if !reflect.DeepEqual(loaded, tt.loaded) {
				t.Errorf("loaded:\n got %+v\nwant %+v", loaded, tt.loaded)
			}
			if !reflect.DeepEqual(broken, tt.broken) {
				t.Errorf("broken:\n got %+v\nwant %+v", broken, tt.broken)
			}
		})
	}
}

func TestAVDManagerError(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"avdmanager/create-avd-invalid-tag-error-2025.txt",
			"Invalid --tag google_apis_ps16k for the selected package. Valid tags are:"},
		{"avdmanager/create-avd-prompt-stdin-closed-exception-2018.txt",
			`Exception in thread "main" java.lang.StringIndexOutOfBoundsException: String index out of range: -1`},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			if got := avdmanagerError(fixture(t, tt.file)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseListAVDs(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"emulator/list-avds-2021.txt", []string{"Android_TV_720p_API_28", "Pixel_2_API_30"}},
		{"emulator/list-avds-windows-2023.txt", []string{"Pixel_4_API_33", "Pixel_6_API_33"}},
		{"emulator/list-avds-with-info-crashdata-line-2024.txt", []string{"Pixel_3a_API_34_extension_level_7_arm64-v8a"}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			if got := parseListAVDs(fixture(t, tt.file)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEmulatorUnknownAVD(t *testing.T) {
	if !emulatorUnknownAVD(fixture(t, "emulator/error-unknown-avd-name-2019.txt")) {
		t.Error("unknown-AVD error not recognised")
	}
	if emulatorUnknownAVD(fixture(t, "emulator/list-avds-2021.txt")) {
		t.Error("AVD list taken for an error")
	}
}

func TestParseEmulatorVersion(t *testing.T) {
	// Layout of `emulator -version` (no capture in the collection): the
	// version line, then a copyright banner; newer builds add INFO lines.
	out := "INFO    | Android emulator version 36.1.9.0 (build_id 13823996) (CL:N/A)\n" +
		"INFO    | Storing crashdata in: /tmp/android-u/emu-crash-36.1.9.db, detection is enabled for process: 4242\n" +
		"Android emulator version 36.1.9.0 (build_id 13823996) (CL:N/A)\nCopyright (C) 2006-2024 The Android Open Source Project\n"
	if got := parseEmulatorVersion([]byte(out)); got != "36.1.9.0" {
		t.Errorf("got %q", got)
	}
}

func TestParseINI(t *testing.T) {
	tests := []struct {
		file  string
		count int
		want  map[string]string
	}{
		{file: "avd/config.ini-android-studio-api34-x86_64-windows.ini", count: 51, want: map[string]string{
			"AvdId":                       "S22",
			"abi.type":                    "x86_64",
			"image.sysdir.1":              `system-images\android-34\google_apis\x86_64\`,
			"fastboot.chosenSnapshotFile": "",
			"hw.device.hash2":             "MD5:356712b397b4991ca66f822943e7dd16",
			"sdcard.size":                 "512 MB",
			"tag.id":                      "google_apis",
		}},
		{file: "avd/config.ini-emulator-rewritten-api33-arm64-macos.ini", count: 48, want: map[string]string{
			"AvdId":                       "Pixel_6_Android_13_",
			"avd.ini.displayname":         "Pixel 6(Android 13)",
			"PlayStore.enabled":           "true",
			"abi.type":                    "arm64-v8a",
			"fastboot.chosenSnapshotFile": "",
			"hw.device.name":              "pixel_6",
			"image.sysdir.1":              "system-images/android-33/google_apis_playstore/arm64-v8a/",
			"tag.id":                      "google_apis",
		}},
		{file: "avd/hardware-qemu.ini-api34-x86_64-windows.ini", want: map[string]string{
			"hw.cpu.arch":              "x86_64",
			"hw.ramSize":               "2048",
			"hw.sdCard.path":           `C:\Users\k23005450\.android\avd\S22.avd\sdcard.img`,
			"disk.cachePartition.size": "66m",
			"hw.gpu.mode":              "host",
		}},
		{file: "avd/quickbootChoice.ini", count: 1, want: map[string]string{"saveOnExit": "true"}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			got := parseINI(fixture(t, tt.file))
			if tt.count != 0 && len(got) != tt.count {
				t.Errorf("parsed %d keys, want %d", len(got), tt.count)
			}
			for k, v := range tt.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %q (present %v), want %q", k, g, ok, v)
				}
			}
			for k, v := range got {
				if len(v) > 0 && v[len(v)-1] == '\r' {
					t.Errorf("%s keeps a carriage return", k)
				}
			}
		})
	}
}

func TestParseSDKList(t *testing.T) {
	t.Run("list-installed-linux-2026.txt", func(t *testing.T) {
		got := parseSDKList(fixture(t, "sdkmanager/list-installed-linux-2026.txt"))
		if len(got.Installed) != 56 || len(got.Available) != 0 || len(got.Updates) != 0 {
			t.Fatalf("sections: %d installed, %d available, %d updates", len(got.Installed), len(got.Available), len(got.Updates))
		}
		if p := got.Installed[0]; p != (sdkPackage{Path: "build-tools;27.0.0", Version: "27.0.0", Description: "Android SDK Build-Tools 27", Location: "build-tools/27.0.0"}) {
			t.Errorf("first row %+v", p)
		}
		if p := got.Installed[26]; p.Path != "ndk;29.0.13113456" || p.Version != "29.0.13113456 rc1" {
			t.Errorf("ndk row %+v", p)
		}
		var imgs []string
		for _, img := range imagesIn(got.Installed) {
			imgs = append(imgs, img.Package)
		}
		want := []string{
			"system-images;android-34;google_apis_playstore;x86_64",
			"system-images;android-35;google_apis_playstore;x86_64",
			"system-images;android-36;google_apis;x86_64",
			"system-images;android-36;google_apis_playstore;x86_64",
		}
		if !reflect.DeepEqual(imgs, want) {
			t.Errorf("images %q", imgs)
		}
	})
	t.Run("list-installed-windows-2026.txt", func(t *testing.T) {
		got := parseSDKList(fixture(t, "sdkmanager/list-installed-windows-2026.txt"))
		if len(got.Installed) != 25 {
			t.Fatalf("%d installed", len(got.Installed))
		}
		last := got.Installed[24]
		if last.Path != "sources;android-33" || last.Location != `sources\android-33` {
			t.Errorf("last row %+v", last)
		}
		// The extraction stops before the system image row the INDEX
		// mentions, so no image is listed.
		if imgs := imagesIn(got.Installed); len(imgs) != 0 {
			t.Errorf("images %+v", imgs)
		}
	})
	t.Run("list-installed-windows-progress-noise.txt", func(t *testing.T) {
		got := parseSDKList(fixture(t, "sdkmanager/list-installed-windows-progress-noise.txt"))
		if len(got.Installed)+len(got.Available)+len(got.Updates) != 0 {
			t.Errorf("progress lines parsed as rows: %+v", got)
		}
	})
	t.Run("list-full-windows-cmdline-tools-19-2026.txt", func(t *testing.T) {
		b := fixture(t, "sdkmanager/list-full-windows-cmdline-tools-19-2026.txt")
		if b[0] != 0xEF {
			t.Fatal("fixture lost its BOM")
		}
		got := parseSDKList(b)
		if len(got.Installed) != 19 {
			t.Errorf("%d installed", len(got.Installed))
		}
		if p := got.Installed[18]; p != (sdkPackage{Path: "system-images;android-35;default;x86_64", Version: "2",
			Description: "Intel x86_64 Atom System Image", Location: `system-images\android-35\default\x86_64`}) {
			t.Errorf("installed image row %+v", p)
		}
		if p := got.Available[0]; p != (sdkPackage{Path: "add-ons;addon-google_apis-google-15", Version: "3", Description: "Google APIs"}) {
			t.Errorf("first available %+v", p)
		}
		wantUpd := []sdkUpdate{
			{ID: "cmdline-tools;latest", Installed: "19.0", Available: "20.0"},
			{ID: "emulator", Installed: "36.2.12", Available: "36.5.11"},
			{ID: "platform-tools", Installed: "36.0.0", Available: "37.0.0"},
		}
		if !reflect.DeepEqual(got.Updates, wantUpd) {
			t.Errorf("updates %+v", got.Updates)
		}
		avail := map[string]systemImage{}
		for _, img := range imagesIn(got.Available) {
			avail[img.Package] = img
		}
		for pkg, want := range map[string]systemImage{
			"system-images;android-35;google_apis;x86_64":                          {APILevel: 35, Tag: "google_apis", ABI: "x86_64"},
			"system-images;android-35-ext15;google_apis;arm64-v8a":                 {APILevel: 35, Ext: 15, Tag: "google_apis", ABI: "arm64-v8a"},
			"system-images;android-36.1;google_apis_ps16k;x86_64":                  {APILevel: 36, Minor: 1, Tag: "google_apis_ps16k", ABI: "x86_64"},
			"system-images;android-36.0-Baklava;google_apis;x86_64":                {APILevel: 36, Codename: "Baklava", Tag: "google_apis", ABI: "x86_64"},
			"system-images;android-CANARY;google_apis;x86_64":                      {Codename: "CANARY", Tag: "google_apis", ABI: "x86_64"},
			"system-images;android-CinnamonBun;google_apis_playstore_ps16k;x86_64": {Codename: "CinnamonBun", Tag: "google_apis_playstore_ps16k", ABI: "x86_64"},
		} {
			want.Package = pkg
			if got, ok := avail[pkg]; !ok || got != want {
				t.Errorf("%s: got %+v (listed %v), want %+v", pkg, got, ok, want)
			}
		}
	})
	t.Run("tty overwrite artifact", func(t *testing.T) {
		// The INDEX describes this terminal artifact; no file captures it.
		out := "Installed packages:=====================] 100% Computing updates...\n" +
			"  Path                                        | Version | Description                    | Location\n" +
			"  -------                                     | ------- | -------                        | -------\n" +
			"  system-images;android-35;google_apis;x86_64 | 9       | Google APIs Intel x86_64 Atom System Image | system-images/android-35/google_apis/x86_64/\n"
		got := parseSDKList([]byte(out))
		if len(got.Installed) != 1 || got.Installed[0].Path != "system-images;android-35;google_apis;x86_64" ||
			got.Installed[0].Location != "system-images/android-35/google_apis/x86_64/" {
			t.Errorf("got %+v", got)
		}
	})
}

func TestParseImagePackage(t *testing.T) {
	for _, bad := range []string{"platforms;android-35", "system-images;android-;google_apis;x86_64",
		"system-images;android-35;;x86_64", "system-images;ios-17;google_apis;x86_64", "system-images;android-35-extX;google_apis;x86_64"} {
		if _, ok := parseImagePackage(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestOSRequest(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"15", 35}, {"16", 36}, {"10", 29}, {"14", 34}, {"15.0", 35}, {"Android 15", 35},
		{"API 35", 35}, {"api35", 35}, {"android-34", 34}, {"API level 33", 33},
		{"7.1.1", 25}, {"12L", 32}, {"6", 23},
	}
	for _, tt := range tests {
		got, err := parseOSRequest(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseOSRequest(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "banana", "API", "99", "API 0", "API x"} {
		if _, err := parseOSRequest(bad); err == nil {
			t.Errorf("parseOSRequest(%q) accepted", bad)
		}
	}
	if releaseForAPI(35) != "15" || releaseForAPI(37) != "API 37" {
		t.Error("releaseForAPI")
	}
}
