package simsdk

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// avdmanager [global options] <verb> <object> [options]:
//
//	list avd [-c]          list device [-c]
//	create avd -n NAME -k PACKAGE [-d DEVICE] [-f] [-c SDCARD] [-b [TAG/]ABI] [-g TAG] [-p PATH]
//	delete avd -n NAME
//
// Progress lines go to stdout and "Error: ..." lines to stderr, each error
// followed by a line "null", as the real tool prints them.
//
// Where the texts come from: the progress lines, the invalid-tag error, the
// prompt and the closed-stdin exception are captures; "already exists",
// "No device found matching --device" and "Package path is not valid" are
// quoted from public transcripts of current avdmanager (not in the capture
// library); the delete output, the name check and the refusals for a
// running AVD or a custom hardware profile are modelled, not captured.
func (s *sdk) avdmanager(ctx context.Context, args []string) int {
	var pos []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-s", "--silent", "-v", "--verbose", "--clear-cache":
		case "-h", "--help":
			fmt.Fprint(s.stdout, avdmanagerUsage)
			return 0
		default:
			pos = args[i:]
			i = len(args)
		}
	}
	if len(pos) < 2 {
		fmt.Fprint(s.stderr, avdmanagerUsage)
		return 1
	}
	verb, object, rest := pos[0], pos[1], pos[2:]
	var err error
	switch verb + " " + object {
	case "list avd", "list avds":
		err = s.avdmanagerListAVD(rest)
	case "list device", "list devices":
		err = s.avdmanagerListDevice(rest)
	case "create avd":
		err = s.avdmanagerCreate(ctx, rest)
	case "delete avd":
		err = s.avdmanagerDelete(rest)
	default:
		err = avdError(fmt.Sprintf("Unknown verb/object combination '%s %s' (simlock simulated SDK: list avd, list device, create avd, delete avd).", verb, object))
	}
	return s.androidReport("avdmanager", err)
}

const avdmanagerUsage = `Usage:
      avdmanager [global options] [action] [action options]
      Global options:
  -s --silent     : Silent mode, shows errors only.
  -v --verbose    : Verbose mode, shows errors, warnings and all messages.
     --clear-cache: Clear the SDK Manager repository manifest cache.
  -h --help       : Help on a specific command.

Valid actions are composed of a verb and an optional direct object:
-   list              : Lists existing targets or virtual devices.
-   list avd          : Lists existing Android Virtual Devices.
-   list device       : Lists existing devices.
- create avd          : Creates a new Android Virtual Device.
- delete avd          : Deletes an Android Virtual Device.
(simlock simulated SDK)
`

// avdError is avdmanager's failure: the message, then "null", exit 1.
func avdError(msg string) *toolError {
	return &toolError{text: "Error: " + msg + "\nnull\n", exit: 1}
}

// parseFlags reads avdmanager-style options; valued names which take an
// argument. It returns the values by long name.
func parseAVDFlags(args []string, valued map[string]string, boolean map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		if long, ok := valued[name]; ok {
			if !hasVal {
				if i+1 >= len(args) {
					return nil, avdError(fmt.Sprintf("Missing argument for flag %s.", name))
				}
				i++
				val = args[i]
			}
			out[long] = val
			continue
		}
		if long, ok := boolean[a]; ok {
			out[long] = "true"
			continue
		}
		return nil, avdError(fmt.Sprintf("Flag '%s' is not valid for this action.", a))
	}
	return out, nil
}

// list avd [-c]: the format of the captures (list-avd-api34-35-36-linux-2026
// and the legacy "could not be loaded" section).
func (s *sdk) avdmanagerListAVD(args []string) error {
	flags, err := parseAVDFlags(args, nil, map[string]string{"-c": "compact", "--compact": "compact"})
	if err != nil {
		return err
	}
	avds, err := s.listAVDs()
	if err != nil {
		return err
	}
	if flags["compact"] != "" {
		for _, a := range avds {
			fmt.Fprintln(s.stdout, a.Name)
		}
		return nil
	}
	var good, bad []avd
	for _, a := range avds {
		if a.Err == "" {
			good = append(good, a)
		} else {
			bad = append(bad, a)
		}
	}
	var b strings.Builder
	b.WriteString("Available Android Virtual Devices:\n")
	for i, a := range good {
		if i > 0 {
			b.WriteString("---------\n")
		}
		writeAVDEntry(&b, a)
	}
	if len(bad) > 0 {
		b.WriteString("\nThe following Android Virtual Devices could not be loaded:\n")
		for i, a := range bad {
			if i > 0 {
				b.WriteString("---------\n")
			}
			fmt.Fprintf(&b, "    Name: %s\n    Path: %s\n   Error: %s\n", a.Name, a.Dir, a.Err)
		}
	}
	_, err = io.WriteString(s.stdout, b.String())
	return err
}

func writeAVDEntry(b *strings.Builder, a avd) {
	cfg := a.Config
	fmt.Fprintf(b, "    Name: %s\n", a.Name)
	if dev := cfg["hw.device.name"]; dev != "" {
		fmt.Fprintf(b, "  Device: %s (%s)\n", dev, cfg["hw.device.manufacturer"])
	}
	fmt.Fprintf(b, "    Path: %s\n", a.Dir)
	img, _ := findPackage(a.imagePackage())
	fmt.Fprintf(b, "  Target: %s (Google Inc.)\n", tagDisplay(cfg["tag.id"]))
	basedOn := fmt.Sprintf("Android API %d", img.API)
	if api, ok := androidAPIs[img.API]; ok {
		basedOn = api.BasedOn
	}
	fmt.Fprintf(b, "          Based on: %s Tag/ABI: %s/%s\n", basedOn, cfg["tag.id"], cfg["abi.type"])
	if skin := cfg["skin.name"]; skin != "" {
		fmt.Fprintf(b, "    Skin: %s\n", skin)
	}
	if sd := cfg["sdcard.size"]; sd != "" {
		fmt.Fprintf(b, "  Sdcard: %s\n", sd)
	}
}

// list device [-c]: "Available devices definitions:" and one block per
// profile in the layout of the captured excerpt.
func (s *sdk) avdmanagerListDevice(args []string) error {
	flags, err := parseAVDFlags(args, nil, map[string]string{"-c": "compact", "--compact": "compact"})
	if err != nil {
		return err
	}
	var b strings.Builder
	if flags["compact"] != "" {
		for _, p := range androidProfiles {
			b.WriteString(p.ID + "\n")
		}
	} else {
		b.WriteString("Available devices definitions:\n")
		for i, p := range androidProfiles {
			if i > 0 {
				b.WriteString("---------\n")
			}
			fmt.Fprintf(&b, "id: %d or \"%s\"\n    Name: %s\n    OEM : %s\n", i, p.ID, p.Name, p.OEM)
			if p.Tag != "" {
				fmt.Fprintf(&b, "    Tag : %s\n", p.Tag)
			}
		}
	}
	_, err = io.WriteString(s.stdout, b.String())
	return err
}

const hardwarePrompt = "Do you wish to create a custom hardware profile? [no] "

// avdmanagerCreate: create avd -n NAME -k PACKAGE [-d DEVICE] ...
func (s *sdk) avdmanagerCreate(ctx context.Context, args []string) error {
	flags, err := parseAVDFlags(args,
		map[string]string{"-n": "name", "--name": "name", "-k": "package", "--package": "package",
			"-d": "device", "--device": "device", "-c": "sdcard", "--sdcard": "sdcard",
			"-b": "abi", "--abi": "abi", "-g": "tag", "--tag": "tag", "-p": "path", "--path": "path",
			"--skin": "skin"},
		map[string]string{"-f": "force", "--force": "force", "-a": "snapshot", "--snapshot": "snapshot"})
	if err != nil {
		return err
	}
	for _, req := range []string{"name", "package"} {
		if flags[req] == "" {
			return avdError(fmt.Sprintf("The parameter --%s must be defined for action 'create avd'", req))
		}
	}
	name, pkgPath := flags["name"], flags["package"]
	// Reading the repository comes first, as in the captures.
	fmt.Fprint(s.stdout, repoLoadingLines())

	if !validAVDName(name) {
		return avdError(fmt.Sprintf("AVD name '%s' contains invalid characters.\nAllowed characters are: a-z A-Z 0-9 . _ -", name))
	}
	installed, err := s.installedPackages()
	if err != nil {
		return err
	}
	img, ok := findPackage(pkgPath)
	if !ok || !img.isImage() || !slices.ContainsFunc(installed, func(p sdkPackage) bool { return p.Path == pkgPath }) {
		var b strings.Builder
		b.WriteString("Package path is not valid. Valid system image paths are:")
		for _, p := range installed {
			if p.isImage() {
				b.WriteString("\n" + p.Path)
			}
		}
		return avdError(b.String())
	}
	if err := checkTagABI(img, flags["abi"], flags["tag"]); err != nil {
		return err
	}
	prof := deviceProfile{ID: "", Name: "", OEM: "Generic", Width: 1080, Height: 2400, Density: 420, RAM: 2048}
	if ref := flags["device"]; ref != "" {
		if prof, ok = findProfile(ref); !ok {
			return avdError(fmt.Sprintf("No device found matching --device %s.", ref))
		}
	}
	sdcard := flags["sdcard"]
	if sdcard == "" {
		sdcard = "512M"
	}
	iniPath := filepath.Join(s.avdHome(), name+".ini")
	dir := filepath.Join(s.avdHome(), name+".avd")
	if p := flags["path"]; p != "" {
		dir = absPath(p)
	}
	if _, err := os.Stat(iniPath); err == nil && flags["force"] == "" {
		return avdError(fmt.Sprintf("Android Virtual Device '%s' already exists.\nUse --force if you want to replace it.", name))
	}

	// The real avdmanager asks this even when --device names a profile, and
	// dies with a Java exception when stdin is closed (captured); scripts
	// therefore pipe "no" into it.
	fmt.Fprint(s.stdout, hardwarePrompt)
	answer, err := bufio.NewReader(s.stdin).ReadString('\n')
	if err != nil && answer == "" {
		return &toolError{text: stdinClosedException, exit: 1}
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "" && a != "no" && a != "n" {
		fmt.Fprintln(s.stdout)
		return avdError("custom hardware profiles are not simulated (simlock simulated SDK); answer \"no\" and choose a profile with --device.")
	}
	if _, fired, err := s.fire(faultCreateFail); err != nil {
		return err
	} else if fired {
		return avdError("Failed to create the AVD: No space left on device " + faultNote(faultCreateFail))
	}
	if err := sleepCtx(ctx, s.scaled(androidCreateTime)); err != nil {
		return err
	}
	l, err := lockFile(filepath.Join(s.androidDir(), ".avd.lock"))
	if err != nil {
		return err
	}
	defer l.Unlock()
	// Checked again under the lock: another avdmanager may have created
	// the name while this one waited for its answer.
	if _, err := os.Stat(iniPath); err == nil && flags["force"] == "" {
		return avdError(fmt.Sprintf("Android Virtual Device '%s' already exists.\nUse --force if you want to replace it.", name))
	}
	if flags["force"] != "" {
		if err := s.refuseRunning(dir); err != nil {
			return err
		}
		_ = os.RemoveAll(dir)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	cfg := newAVDConfig(name, img, prof, sdcard)
	if prof.ID == "" {
		for _, k := range []string{"hw.device.name", "hw.device.manufacturer", "hw.device.hash2", "skin.name"} {
			delete(cfg, k)
		}
	}
	if err := writeFileAtomic(filepath.Join(dir, avdConfigName), cfg.format("=")); err != nil {
		return err
	}
	if err := freshUserdata(filepath.Join(dir, avdUserdataName)); err != nil {
		return err
	}
	rel := "avd/" + name + ".avd"
	ini := iniFile{"avd.ini.encoding": "UTF-8", "path": dir, "path.rel": rel, "target": fmt.Sprintf("android-%d", img.API)}
	var b strings.Builder
	for _, k := range []string{"avd.ini.encoding", "path", "path.rel", "target"} {
		b.WriteString(k + "=" + ini[k] + "\n")
	}
	return writeFileAtomic(iniPath, []byte(b.String()))
}

// checkTagABI validates --abi ("x86_64" or "google_apis/x86_64") and --tag
// against the image, with the captured wording for a tag mismatch.
func checkTagABI(img sdkPackage, abiFlag, tagFlag string) error {
	tag, abi := tagFlag, abiFlag
	if t, a, ok := strings.Cut(abiFlag, "/"); ok {
		tag, abi = t, a
	}
	if tag != "" && !slices.Contains(img.TagIDs, tag) {
		return avdError(fmt.Sprintf("Invalid --tag %s for the selected package. Valid tags are:\n%s", tag, strings.Join(img.TagIDs, "\n")))
	}
	if abi != "" && abi != img.ABI {
		return avdError(fmt.Sprintf("Invalid --abi %s for the selected package. Valid ABIs are:\n%s", abi, img.ABI))
	}
	return nil
}

// stdinClosedException is the captured failure of an avdmanager whose
// hardware-profile prompt reads a closed stdin
// (avdmanager/create-avd-prompt-stdin-closed-exception-2018.txt).
const stdinClosedException = `Exception in thread "main" java.lang.StringIndexOutOfBoundsException: String index out of range: -1
	at java.lang.String.checkBounds(String.java:381)
	at java.lang.String.<init>(String.java:545)
	at com.android.sdklib.tool.AvdManagerCli.readLine(AvdManagerCli.java:1110)
	at com.android.sdklib.tool.AvdManagerCli.promptForHardware(AvdManagerCli.java:983)
	at com.android.sdklib.tool.AvdManagerCli.createAvd(AvdManagerCli.java:817)
	at com.android.sdklib.tool.AvdManagerCli.doAction(AvdManagerCli.java:369)
	at com.android.sdklib.tool.AvdManagerCli.run(AvdManagerCli.java:205)
	at com.android.sdklib.tool.AvdManagerCli.main(AvdManagerCli.java:195)
`

// refuseRunning fails when an emulator runs the AVD in dir: deleting or
// replacing its files under it would leave a device without a disk.
func (s *sdk) refuseRunning(dir string) error {
	if lockHeld(filepath.Join(dir, avdInstanceLock)) {
		return avdError("This AVD is currently running in the Android Emulator and cannot be changed; stop the emulator first.")
	}
	return nil
}

// delete avd -n NAME
func (s *sdk) avdmanagerDelete(args []string) error {
	flags, err := parseAVDFlags(args, map[string]string{"-n": "name", "--name": "name"}, nil)
	if err != nil {
		return err
	}
	name := flags["name"]
	if name == "" {
		return avdError("The parameter --name must be defined for action 'delete avd'")
	}
	a, ok := s.loadAVD(name)
	if !ok || !validAVDName(name) {
		return avdError(fmt.Sprintf("There is no Android Virtual Device named '%s'.", name))
	}
	l, err := lockFile(filepath.Join(s.androidDir(), ".avd.lock"))
	if err != nil {
		return err
	}
	defer l.Unlock()
	if err := s.refuseRunning(a.Dir); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "Deleting file %s\n", a.IniPath)
	if err := os.Remove(a.IniPath); err != nil && !isNotExist(err) {
		return err
	}
	fmt.Fprintf(s.stdout, "Deleting folder %s\n", a.Dir)
	if err := os.RemoveAll(a.Dir); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "\nAVD '%s' deleted.\n", name)
	return nil
}
