package simsdk

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// simctl device states, spelled as simctl prints them.
const (
	stateShutdown     = "Shutdown"
	stateBooting      = "Booting"
	stateBooted       = "Booted"
	stateShuttingDown = "Shutting Down"
	stateCreating     = "Creating"
)

// Plausible sizes for list's dataPathSize: a never-booted device (the
// capture's value for one) and one that has booted once.
const (
	freshDataSize  = 18337792
	bootedDataSize = 1349976064
)

const deviceFile = "device.json"

// iosDevice is one simulated simulator, stored as <set>/<UDID>/device.json.
// Its state is not stored but derived (see deviceSet.state), so a device
// whose process died reads as Shutdown without anyone writing that down.
type iosDevice struct {
	UDID         string     `json:"udid"`
	Name         string     `json:"name"`
	DeviceType   string     `json:"deviceTypeIdentifier"`
	Runtime      string     `json:"runtimeIdentifier"`
	CreatedAt    time.Time  `json:"createdAt"`
	Creating     bool       `json:"creating,omitempty"`
	LastBootedAt *time.Time `json:"lastBootedAt,omitempty"`
	DataPathSize int64      `json:"dataPathSize"`
	Apps         []iosApp   `json:"apps,omitempty"`
	// OpenedURLs are what simctl openurl delivered, oldest first.
	OpenedURLs []string `json:"openedURLs,omitempty"`

	// The running device process, if any (PID 0: none).
	PID           int        `json:"pid,omitempty"`
	BootStartedAt *time.Time `json:"bootStartedAt,omitempty"`
	// BootReadyAt is when Booting turns into Booted; nil with boot-hang.
	BootReadyAt       *time.Time `json:"bootReadyAt,omitempty"`
	ShutdownStartedAt *time.Time `json:"shutdownStartedAt,omitempty"`
}

type iosApp struct {
	BundleID string `json:"bundleId"`
	Path     string `json:"path"`
	// Running is set by launch and cleared by terminate (and a shutdown).
	Running bool `json:"running,omitempty"`
}

// clearProcess forgets the device process (after it stopped or died).
func (d *iosDevice) clearProcess() {
	d.PID = 0
	d.BootStartedAt = nil
	d.BootReadyAt = nil
	d.ShutdownStartedAt = nil
	for i := range d.Apps {
		d.Apps[i].Running = false // nothing runs on a device that stopped
	}
}

// deviceSet is a directory of devices: the --set directory, or the default
// set under the SDK home.
type deviceSet struct{ dir string }

func (s *sdk) openSet(flag string) (deviceSet, error) {
	dir := flag
	if dir == "" {
		dir = filepath.Join(s.home, "devices")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return deviceSet{}, err
	}
	// simctl creates a missing --set directory rather than failing.
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return deviceSet{}, err
	}
	return deviceSet{dir: dir}, nil
}

func (ds deviceSet) lock() (*fileLock, error) { return lockFile(filepath.Join(ds.dir, setLockName)) }

func (ds deviceSet) deviceDir(udid string) string { return filepath.Join(ds.dir, udid) }
func (ds deviceSet) dataPath(udid string) string  { return filepath.Join(ds.dir, udid, "data") }
func (ds deviceSet) logPath(udid string) string   { return filepath.Join(ds.dir, udid, logDirName) }

func (ds deviceSet) load(udid string) (*iosDevice, error) {
	var d iosDevice
	if err := readJSON(filepath.Join(ds.deviceDir(udid), deviceFile), &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (ds deviceSet) save(d *iosDevice) error {
	return writeJSONAtomic(filepath.Join(ds.deviceDir(d.UDID), deviceFile), d)
}

// loadAll reads every device of the set. Directories without a readable
// device record (half-deleted, foreign) are skipped.
func (ds deviceSet) loadAll() ([]*iosDevice, error) {
	entries, err := os.ReadDir(ds.dir)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []*iosDevice
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		d, err := ds.load(e.Name())
		if err != nil {
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ia, ib := deviceTypeIndex(a.DeviceType), deviceTypeIndex(b.DeviceType); ia != ib {
			return ia < ib
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.UDID < b.UDID
	})
	return out, nil
}

// alive reports whether the device's process is running.
func (ds deviceSet) alive(d *iosDevice) bool {
	return d.PID != 0 && lockHeld(procLockPath(ds.deviceDir(d.UDID)))
}

// state derives the simctl state of d at now.
func (ds deviceSet) state(d *iosDevice, now time.Time) string {
	switch {
	case d.Creating:
		return stateCreating
	case !ds.alive(d):
		return stateShutdown
	case d.ShutdownStartedAt != nil:
		return stateShuttingDown
	case d.BootReadyAt == nil || now.Before(*d.BootReadyAt):
		return stateBooting
	}
	return stateBooted
}

// newUDID makes an uppercase random (version 4) UUID, as simctl prints.
func newUDID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// resolveDevice finds the device a command line names: a UDID (any case),
// "booted" (the booted device), or a device name that is unique in the set.
func (s *sdk) resolveDevice(ds deviceSet, ref string) (*iosDevice, error) {
	all, err := ds.loadAll()
	if err != nil {
		return nil, err
	}
	now := s.now()
	if strings.EqualFold(ref, "booted") {
		for _, d := range all {
			if st := ds.state(d, now); st == stateBooted || st == stateBooting {
				return d, nil
			}
		}
		return nil, errNoBooted()
	}
	for _, d := range all {
		if strings.EqualFold(d.UDID, ref) {
			return d, nil
		}
	}
	var byName []*iosDevice
	for _, d := range all {
		if d.Name == ref {
			byName = append(byName, d)
		}
	}
	if len(byName) == 1 {
		return byName[0], nil
	}
	return nil, errInvalidDevice(ref)
}

// dirSize is the disk usage of the files under dir, in 4 KiB blocks as du
// would count them; 0 when there is nothing.
func dirSize(dir string) int64 {
	var total int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			total += (fi.Size() + 4095) / 4096 * 4096
		}
		return nil
	})
	return total
}
