package ios

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/simlock/simlock/internal/core"
)

// This file is the default device-set mode (drivers.ios.deviceSet
// "default", ADR 0033). The devices then live in the user's own
// CoreSimulator set, next to simulators simlock did not create, so set
// membership proves nothing. A device is simlock's only when both hold:
//
//   - its UDID is in the created-devices record the driver keeps in its
//     root (written only after `simctl create` printed that UDID), and
//   - its data directory carries a provenance mark naming that UDID and
//     this root's marker ID (written right after the create).
//
// Names never count: a user may name a simulator "simlock-1234".

// ProvenanceFile is the mark's file name inside a device's data directory.
const ProvenanceFile = ".simlock-provenance.json"

// createdFile is the created-devices record, inside the root.
const createdFile = "default-set-devices.json"

// ErrNotOwned marks a device of the default set that simlock cannot prove
// it created. It matches core.ErrDeviceNotFound: to simlock such a device
// does not exist, so no verb ever reaches it.
var ErrNotOwned = fmt.Errorf("not a simulator simlock created: %w", core.ErrDeviceNotFound)

// provenance is the mark's content.
type provenance struct {
	Tool      string    `json:"tool"` // "simlock"
	UDID      string    `json:"udid"`
	RootID    string    `json:"rootId"`
	CreatedAt time.Time `json:"createdAt"`
}

type createdRecord struct {
	Devices map[string]createdDevice `json:"devices"`
}

type createdDevice struct {
	CreatedAt time.Time `json:"createdAt"`
	DataPath  string    `json:"dataPath"`
}

// DefaultSet reports whether the driver keeps its devices in the default
// device set.
func (d *Driver) DefaultSet() bool { return d.defaultSet }

// setArgs is the device-set selector every simctl call carries: the
// private root, or none for the default set.
func (d *Driver) setArgs() []string {
	if d.defaultSet {
		return nil
	}
	return []string{"--set", d.root}
}

// deviceSetDir is the directory of the set a device lives in: the root,
// or in default mode the set directory its data path sits in
// (<set>/<UDID>/data), which `simctl --set` accepts as well.
func (d *Driver) deviceSetDir(dataPath string) string {
	if !d.defaultSet || dataPath == "" {
		return d.root
	}
	return filepath.Dir(filepath.Dir(dataPath))
}

func (d *Driver) createdPath() string { return filepath.Join(d.root, createdFile) }

// readCreated reads the record; a missing one is empty.
func (d *Driver) readCreated() (createdRecord, error) {
	rec := createdRecord{Devices: map[string]createdDevice{}}
	if err := readRecordFile(d.fs, d.createdPath(), &rec); err != nil {
		return createdRecord{Devices: map[string]createdDevice{}}, err
	}
	if rec.Devices == nil {
		rec.Devices = map[string]createdDevice{}
	}
	return rec, nil
}

// updateCreated changes the record under the driver's lock.
func (d *Driver) updateCreated(fn func(*createdRecord)) error {
	d.createdMu.Lock()
	defer d.createdMu.Unlock()
	rec, err := d.readCreated()
	if err != nil {
		return err
	}
	fn(&rec)
	return writeRecordFile(d.fs, d.createdPath(), rec)
}

// markDevice writes the provenance mark into the device's data directory
// and returns that directory. Called right after create, and after each
// erase (which empties the directory).
func (d *Driver) markDevice(ctx context.Context, udid string) (string, error) {
	l, err := d.listDevices(ctx)
	if err != nil {
		return "", err
	}
	dev, ok := l.Device(udid)
	if !ok {
		return "", fmt.Errorf("ios: device %s: %w", udid, core.ErrDeviceNotFound)
	}
	if dev.DataPath == "" {
		return "", fmt.Errorf("ios: simctl lists no data path for %s; default device-set mode needs Xcode 11 or later", udid)
	}
	m := provenance{Tool: "simlock", UDID: udid, RootID: d.devRoot.ID(), CreatedAt: d.clock.Now().UTC()}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if err := d.fs.MkdirAll(dev.DataPath); err != nil {
		return "", fmt.Errorf("ios: mark %s: %w", udid, err)
	}
	if err := d.fs.WriteFileAtomic(filepath.Join(dev.DataPath, ProvenanceFile), b); err != nil {
		return "", fmt.Errorf("ios: mark %s: %w", udid, err)
	}
	return dev.DataPath, nil
}

// markOK reads dev's provenance mark.
func (d *Driver) markOK(dev Device) bool {
	if dev.DataPath == "" {
		return false
	}
	b, err := d.fs.ReadFile(filepath.Join(dev.DataPath, ProvenanceFile))
	if err != nil {
		return false
	}
	var m provenance
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	return m.Tool == "simlock" && m.UDID == dev.UDID && m.RootID == d.devRoot.ID()
}

// provenDevices filters a default-set listing down to the devices simlock
// can prove it created. A device this driver is erasing right now counts:
// erase empties the data directory and the mark is written again after it.
func (d *Driver) provenDevices(l *List) ([]Device, error) {
	if !d.defaultSet {
		return l.Devices, nil
	}
	rec, err := d.readCreated()
	if err != nil {
		return nil, err
	}
	d.createdMu.Lock()
	erasing := make(map[string]bool, len(d.erasing))
	for k := range d.erasing {
		erasing[k] = true
	}
	d.createdMu.Unlock()
	var out []Device
	for _, dev := range l.Devices {
		if _, ok := rec.Devices[dev.UDID]; !ok {
			continue
		}
		if erasing[dev.UDID] || d.markOK(dev) {
			out = append(out, dev)
		}
	}
	return out, nil
}

// requireOwned refuses, in default mode, a UDID simlock cannot prove it
// created, before any verb is run on it. In owned mode the set is the
// proof and nothing is checked.
func (d *Driver) requireOwned(ctx context.Context, udid string) error {
	if !d.defaultSet {
		return nil
	}
	lctx, cancel := d.withTimeout(ctx, d.timeouts.Command, "simctl list devices")
	defer cancel()
	l, err := d.listDevices(lctx)
	if err != nil {
		return err
	}
	proven, err := d.provenDevices(l)
	if err != nil {
		return err
	}
	for _, dev := range proven {
		if dev.UDID == udid {
			return nil
		}
	}
	if _, ok := l.Device(udid); !ok {
		return fmt.Errorf("ios: device %s: %w", udid, core.ErrDeviceNotFound)
	}
	return fmt.Errorf("ios: device %s of the default device set: %w", udid, ErrNotOwned)
}

// recorded reports whether udid is in the created-devices record; the
// passthrough, which runs no command of its own, checks only this.
func (d *Driver) recorded(udid string) bool {
	rec, err := d.readCreated()
	if err != nil {
		return false
	}
	_, ok := rec.Devices[udid]
	return ok
}

// CreatedDevices lists the UDIDs of the created-devices record, sorted
// (default mode; empty otherwise).
func (d *Driver) CreatedDevices() ([]string, error) {
	rec, err := d.readCreated()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rec.Devices))
	for u := range rec.Devices {
		out = append(out, u)
	}
	sort.Strings(out)
	return out, nil
}
