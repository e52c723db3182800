package simsdk

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// An AVD is "<name>.ini" in the AVD home, pointing at "<name>.avd", whose
// config.ini describes the device. avdmanager writes both as "key=value"
// (like the Android Studio capture); the emulator rewrites config.ini in
// its own "key = value" form on the first boot (like the emulator-rewritten
// capture), which is why a config hash is only stable after one boot.

const (
	avdConfigName     = "config.ini"
	avdUserdataName   = "userdata"
	avdSnapshotsName  = "snapshots"
	avdInstanceLock   = "multiinstance.lock"
	avdDataLockName   = ".simsdk-data.lock"
	quickbootSnapshot = "default_boot"
)

// iniFile is a parsed key=value file.
type iniFile map[string]string

func parseINIFile(b []byte) iniFile {
	f := iniFile{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r")
		t := strings.TrimSpace(l)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		f[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return f
}

func readINI(path string) (iniFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseINIFile(b), nil
}

// format renders the file with keys sorted: sep is "=" for avdmanager's
// style and " = " for the emulator's (which leaves "key = " for an empty
// value, trailing space included, as captured).
func (f iniFile) format(sep string) []byte {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + sep + f[k] + "\n")
	}
	return []byte(b.String())
}

// avd is one AVD found in the AVD home.
type avd struct {
	Name    string
	IniPath string
	Dir     string // the .avd directory
	Target  string // "android-35", from <name>.ini
	Config  iniFile
	// Err is why the AVD cannot be loaded ("could not be loaded" section);
	// empty for a good one.
	Err string
}

func (a avd) configPath() string  { return filepath.Join(a.Dir, avdConfigName) }
func (a avd) userdataDir() string { return filepath.Join(a.Dir, avdUserdataName) }

// imagePackage is the system image package the AVD runs.
func (a avd) imagePackage() string { return imagePackageFromSysdir(a.Config["image.sysdir.1"]) }

func validAVDName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		ok := r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// loadAVD reads the AVD name in the AVD home; ok is false when there is no
// <name>.ini at all. An AVD whose files are damaged or whose system image is
// missing comes back with Err set, as avdmanager reports it.
func (s *sdk) loadAVD(name string) (avd, bool) {
	home := s.avdHome()
	a := avd{Name: name, IniPath: filepath.Join(home, name+".ini")}
	ini, err := readINI(a.IniPath)
	if err != nil {
		return a, false
	}
	a.Target = ini["target"]
	a.Dir = ini["path"]
	if a.Dir == "" && ini["path.rel"] != "" {
		a.Dir = filepath.Join(filepath.Dir(home), filepath.FromSlash(ini["path.rel"]))
	}
	if a.Dir == "" {
		a.Dir = filepath.Join(home, name+".avd")
	}
	if st, err := os.Stat(a.Dir); err != nil || !st.IsDir() {
		a.Err = "Missing AVD folder " + a.Dir + "."
		return a, true
	}
	cfg, err := readINI(a.configPath())
	if err != nil {
		a.Err = "Missing config.ini file in " + a.Dir + "."
		return a, true
	}
	a.Config = cfg
	pkg := a.imagePackage()
	if ok, _ := s.packageInstalled(pkg); !ok {
		// Modelled on avdmanager's text for this case ("Missing system
		// image for Google Play arm64-v8a Medium Phone API 36.").
		a.Err = fmt.Sprintf("Missing system image for %s %s %s.", tagDisplay(cfg["tag.id"]), cfg["abi.type"], cfg["avd.ini.displayname"])
	}
	return a, true
}

// listAVDs returns the AVDs of the AVD home sorted by name, the way
// avdmanager and `emulator -list-avds` order them.
func (s *sdk) listAVDs() ([]avd, error) {
	ents, err := os.ReadDir(s.avdHome())
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []avd
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".ini")
		if !ok || e.IsDir() || name == "" || strings.HasPrefix(name, ".") {
			continue
		}
		if a, ok := s.loadAVD(name); ok {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		li, lj := strings.ToLower(out[i].Name), strings.ToLower(out[j].Name)
		if li != lj {
			return li < lj
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// newAVDConfig is the config.ini avdmanager writes for an image and a
// hardware profile. The keys are those of the Android Studio capture
// (avd/config.ini-android-studio-api34-x86_64-windows.ini); the values come
// from the profile and the image.
func newAVDConfig(name string, img sdkPackage, prof deviceProfile, sdcard string) iniFile {
	cpu := img.ABI
	if cpu == "arm64-v8a" {
		cpu = "arm64"
	}
	playStore := "false"
	if strings.HasPrefix(img.Tag, "google_apis_playstore") {
		playStore = "true"
	}
	sum := md5.Sum([]byte(prof.ID))
	orientation := "portrait"
	if prof.Width > prof.Height {
		orientation = "landscape"
	}
	return iniFile{
		"AvdId":                            name,
		"PlayStore.enabled":                playStore,
		"abi.type":                         img.ABI,
		"avd.ini.displayname":              name,
		"avd.ini.encoding":                 "UTF-8",
		"disk.dataPartition.size":          "6G",
		"fastboot.chosenSnapshotFile":      "",
		"fastboot.forceChosenSnapshotBoot": "no",
		"fastboot.forceColdBoot":           "no",
		"fastboot.forceFastBoot":           "yes",
		"hw.accelerometer":                 "yes",
		"hw.arc":                           "false",
		"hw.audioInput":                    "yes",
		"hw.battery":                       "yes",
		"hw.camera.back":                   "virtualscene",
		"hw.camera.front":                  "emulated",
		"hw.cpu.arch":                      cpu,
		"hw.cpu.ncore":                     "4",
		"hw.dPad":                          "no",
		"hw.device.hash2":                  "MD5:" + hex.EncodeToString(sum[:]),
		"hw.device.manufacturer":           prof.OEM,
		"hw.device.name":                   prof.ID,
		"hw.gps":                           "yes",
		"hw.gpu.enabled":                   "yes",
		"hw.gpu.mode":                      "auto",
		"hw.initialOrientation":            orientation,
		"hw.keyboard":                      "yes",
		"hw.lcd.density":                   strconv.Itoa(prof.Density),
		"hw.lcd.height":                    strconv.Itoa(prof.Height),
		"hw.lcd.width":                     strconv.Itoa(prof.Width),
		"hw.mainKeys":                      "no",
		"hw.ramSize":                       strconv.Itoa(prof.RAM),
		"hw.sdCard":                        "yes",
		"hw.sensors.orientation":           "yes",
		"hw.sensors.proximity":             "yes",
		"hw.trackBall":                     "no",
		"image.sysdir.1":                   sysdirFor(img),
		"runtime.network.latency":          "none",
		"runtime.network.speed":            "full",
		"sdcard.size":                      sdcard,
		"showDeviceFrame":                  "no",
		"skin.dynamic":                     "yes",
		"skin.name":                        prof.ID,
		"skin.path":                        "_no_skin",
		"skin.path.backup":                 "_no_skin",
		"tag.display":                      tagDisplay(img.Tag),
		"tag.displaynames":                 tagDisplay(img.Tag),
		"tag.id":                           img.Tag,
		"tag.ids":                          strings.Join(img.TagIDs, ","),
		"vm.heapSize":                      "256",
	}
}

// normalizeConfig is what the emulator does to config.ini when it boots an
// AVD: sizes become byte counts and orientation is capitalised (compare the
// two config.ini captures), written back in "key = value" form. It is
// idempotent, so only the first boot changes the file.
func normalizeConfig(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	cfg := parseINIFile(b)
	if v, ok := cfg["disk.dataPartition.size"]; ok {
		if n, ok := parseSize(v); ok {
			cfg["disk.dataPartition.size"] = strconv.FormatInt(n, 10)
		}
	}
	if v := cfg["hw.initialOrientation"]; v != "" {
		cfg["hw.initialOrientation"] = strings.ToUpper(v[:1]) + v[1:]
	}
	out := cfg.format(" = ")
	if string(out) == string(b) {
		return nil
	}
	return writeFileAtomic(path, out)
}

// parseSize reads "6G", "800M", "512 MB" or a plain byte count.
func parseSize(v string) (int64, bool) {
	t := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(v), " ", ""))
	t = strings.TrimSuffix(t, "B")
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, strings.TrimSuffix(t, "K")
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, strings.TrimSuffix(t, "M")
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, strings.TrimSuffix(t, "G")
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n * mult, true
}

// dataLock serializes changes to an AVD's data partition and snapshots
// (shell writes, snapshot save and load, wipes) across tool processes.
func dataLock(avdDir string) (*fileLock, error) {
	return lockFile(filepath.Join(avdDir, avdDataLockName))
}

// freshUserdata empties a data partition and lays out the directories a
// new Android device has.
func freshUserdata(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for _, sub := range []string{"local/tmp", "app", "media/0"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(sub)), dirMode); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the regular files and directories under src to dst,
// which must not exist.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(target, dirMode)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, fileMode)
		}
		return nil
	})
}

// replaceTree makes dst a copy of src, swapping it in with renames so a
// reader sees the old tree or the new one.
func replaceTree(src, dst string) error {
	tmp := dst + ".new"
	old := dst + ".old"
	_ = os.RemoveAll(tmp)
	_ = os.RemoveAll(old)
	if err := copyTree(src, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(dst, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return os.RemoveAll(old)
}
