package android

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Keep-booted baselines on disk (ADR 0056). A daemon restart leaves the
// emulators running, so a baseline held only in memory would make the
// next release of a perfectly good warm device fall back or destroy it.
// Each AVD's newest baseline is therefore also written beside the AVD, in
// <root>/<name>.keepbooted.json, and a new driver reads it back when its
// memory has none.
//
// What the file says is trusted only while its binding matches the device
// as read now: the AVD, the adb serial, the incarnation token the driver
// renews before every boot and snapshot load, the guest's boot id and the
// current user. Anything else (a relaunch, a reboot, a restore, another
// emulator on the serial, a user switch) discards the file. A file that
// cannot be read, does not decode, fails its digest or its structural
// checks is discarded too, with the reason logged: the release then falls
// back exactly as it would without one.

// kbFileFormat names the layout; another value is not read.
const kbFileFormat = "simlock-keepbooted/1"

// kbFileMax bounds what is read back: a baseline is tens of kilobytes, so
// anything far larger is not one.
const kbFileMax = 16 << 20

// kbBinding is what ties a baseline to one running device.
type kbBinding struct {
	AVD         string `json:"avd"`
	Serial      string `json:"serial"`
	Incarnation string `json:"incarnation"`
	BootID      string `json:"bootId"`
	User        int    `json:"user"`
}

// kbEnvelope is the file: the body and its SHA-256, so a file a crash or
// the disk damaged is refused rather than half trusted (the rename in
// WriteFileAtomic already keeps a reader from seeing a partial write).
type kbEnvelope struct {
	Format string          `json:"format"`
	SHA256 string          `json:"sha256"`
	Body   json.RawMessage `json:"body"`
}

// kbBody is kbBaseline in a form encoding/json writes deterministically:
// sets become sorted lists.
type kbBody struct {
	Binding  kbBinding                            `json:"binding"`
	Users    []int                                `json:"users"`
	Packages map[int][]string                     `json:"packages"`
	Grants   map[int]map[string][]string          `json:"grants"`
	Settings map[int]map[string]map[string]string `json:"settings"`
	Display  map[string]string                    `json:"display"`
	Props    map[string]string                    `json:"props"`
	Accounts string                               `json:"accounts"`
	Files    []string                             `json:"files"`
	Links    []string                             `json:"links"`
}

func (d *Driver) kbPath(name string) string {
	return filepath.Join(d.root, name+".keepbooted.json")
}

func setList(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] {
			out = append(out, k)
		}
	}
	return out
}

func listSet(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, k := range l {
		m[k] = true
	}
	return m
}

// encodeBaseline renders bl as the file's bytes.
func encodeBaseline(bl *kbBaseline) ([]byte, error) {
	body := kbBody{Binding: bl.binding, Users: slices.Clone(bl.users), Packages: map[int][]string{},
		Grants: map[int]map[string][]string{}, Settings: bl.settings, Display: bl.display, Props: bl.props,
		Accounts: bl.accounts, Files: setList(bl.files), Links: setList(bl.links)}
	for u, pkgs := range bl.packages {
		body.Packages[u] = setList(pkgs)
	}
	for u, byPkg := range bl.grants {
		g := map[string][]string{}
		for pkg, perms := range byPkg {
			g[pkg] = setList(perms)
		}
		body.Grants[u] = g
	}
	return encodeBody(body)
}

// encodeBody wraps body in its envelope.
func encodeBody(body kbBody) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	return json.Marshal(kbEnvelope{Format: kbFileFormat, SHA256: hex.EncodeToString(sum[:]), Body: raw})
}

// decodeBaseline reads a file's bytes back; any doubt is an error.
func decodeBaseline(b []byte) (*kbBaseline, error) {
	if len(b) > kbFileMax {
		return nil, fmt.Errorf("%d bytes is more than a baseline can be", len(b))
	}
	var env kbEnvelope
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("not a baseline file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("data after the baseline")
	}
	if env.Format != kbFileFormat {
		return nil, fmt.Errorf("format %q, want %q", env.Format, kbFileFormat)
	}
	sum := sha256.Sum256(env.Body)
	if hex.EncodeToString(sum[:]) != env.SHA256 {
		return nil, errors.New("the body does not match its SHA-256 (torn or damaged)")
	}
	var body kbBody
	dec = json.NewDecoder(bytes.NewReader(env.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	if err := body.check(); err != nil {
		return nil, err
	}
	bl := &kbBaseline{binding: body.Binding, users: body.Users, packages: map[int]map[string]bool{},
		grants: map[int]map[string]map[string]bool{}, settings: map[int]map[string]map[string]string{},
		display: maps.Clone(body.Display), props: maps.Clone(body.Props), accounts: body.Accounts,
		files: listSet(body.Files), links: listSet(body.Links)}
	for _, u := range body.Users {
		bl.packages[u] = listSet(body.Packages[u])
		bl.grants[u] = map[string]map[string]bool{}
		for pkg, perms := range body.Grants[u] {
			bl.grants[u][pkg] = listSet(perms)
		}
		bl.settings[u] = map[string]map[string]string{}
		for ns, kv := range body.Settings[u] {
			bl.settings[u][ns] = maps.Clone(kv)
			if bl.settings[u][ns] == nil {
				bl.settings[u][ns] = map[string]string{}
			}
		}
	}
	return bl, nil
}

// check refuses a body no capture could have produced, so a cleaning
// never runs on a shape it does not expect.
func (b *kbBody) check() error {
	bd := b.Binding
	if !validAVDName(bd.AVD) || bd.Serial == "" || bd.Incarnation == "" || bd.BootID == "" || bd.User < 0 {
		return fmt.Errorf("incomplete binding %+v", bd)
	}
	if len(b.Users) == 0 {
		return errors.New("no users")
	}
	for i, u := range b.Users {
		if u < 0 || (i > 0 && u <= b.Users[i-1]) {
			return fmt.Errorf("users %v are not ascending non-negative ids", b.Users)
		}
	}
	users := map[int]bool{}
	for _, u := range b.Users {
		users[u] = true
	}
	for what, keys := range map[string][]int{"packages": slices.Collect(maps.Keys(b.Packages)),
		"grants": slices.Collect(maps.Keys(b.Grants)), "settings": slices.Collect(maps.Keys(b.Settings))} {
		if len(keys) != len(b.Users) {
			return fmt.Errorf("%s covers %d users, want %d", what, len(keys), len(b.Users))
		}
		for _, u := range keys {
			if !users[u] {
				return fmt.Errorf("%s names user %d, not in %v", what, u, b.Users)
			}
		}
	}
	for u, byNS := range b.Settings {
		for ns := range byNS {
			if ns != "system" && ns != "secure" && (ns != "global" || u != b.Users[0]) {
				return fmt.Errorf("settings namespace %q of user %d", ns, u)
			}
		}
	}
	if len(b.Display) != 2 || !hasKeys(b.Display, "size", "density") {
		return fmt.Errorf("display %v, want size and density", b.Display)
	}
	if len(b.Props) != len(kbProps) || !hasKeys(b.Props, kbProps...) {
		return fmt.Errorf("properties %v, want %v", b.Props, kbProps)
	}
	if len(b.Accounts) != 64 || strings.Trim(b.Accounts, "0123456789abcdef") != "" {
		return fmt.Errorf("account digest %q", b.Accounts)
	}
	for _, p := range append(slices.Clone(b.Files), b.Links...) {
		if !slices.ContainsFunc(kbRoots, func(r string) bool { return strings.HasPrefix(p, r+"/") }) {
			return fmt.Errorf("inventoried path %q is under no root", p)
		}
	}
	return nil
}

func hasKeys(m map[string]string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// kbBaselineFor returns the baseline bound to b: the one in memory, or
// else the AVD's file. A baseline bound to anything else is discarded.
func (d *Driver) kbBaselineFor(b kbBinding) *kbBaseline {
	d.kb.mu.Lock()
	defer d.kb.mu.Unlock()
	name := b.AVD
	if bl := d.kb.by[name]; bl != nil {
		if bl.binding == b {
			return bl
		}
		delete(d.kb.by, name)
	}
	raw, err := d.fs.ReadFile(d.kbPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var bl *kbBaseline
	if err == nil {
		bl, err = decodeBaseline(raw)
	}
	switch {
	case err != nil:
		d.kbDiscardLocked(name, "unreadable: "+err.Error())
		return nil
	case bl.binding != b:
		d.kbDiscardLocked(name, fmt.Sprintf("bound to %+v, the device is now %+v", bl.binding, b))
		return nil
	}
	if d.kb.by == nil {
		d.kb.by = map[string]*kbBaseline{}
	}
	d.kb.by[name] = bl
	d.log.Info("keep-booted: baseline read back from disk", "avd", name, "incarnation", b.Incarnation)
	return bl
}

func (d *Driver) kbDiscardLocked(name, why string) {
	d.log.Warn("keep-booted: persisted baseline discarded; the release will not clean by it", "avd", name, "reason", why)
	if err := d.fs.Remove(d.kbPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("keep-booted: remove the discarded baseline", "avd", name, "err", err)
	}
}

// kbStore keeps bl as the AVD's baseline, in memory and on disk. A write
// that fails, or whose bytes would not read back as bl, leaves this
// daemon's memory as the only copy (as before ADR 0056): the capture
// still serves this daemon's releases.
func (d *Driver) kbStore(bl *kbBaseline) {
	name := bl.binding.AVD
	d.kb.mu.Lock()
	defer d.kb.mu.Unlock()
	if d.kb.by == nil {
		d.kb.by = map[string]*kbBaseline{}
	}
	d.kb.by[name] = bl
	err := func() error {
		raw, err := encodeBaseline(bl)
		if err != nil {
			return err
		}
		// JSON cannot carry every byte string (invalid UTF-8 is replaced):
		// a baseline that would come back different is not written.
		if back, err := decodeBaseline(raw); err != nil || !reflect.DeepEqual(back, bl) {
			return fmt.Errorf("it would not read back as captured (%v)", err)
		}
		// A boot or a snapshot load begun since the capture started makes
		// it stale already: it must not outlive this daemon.
		st, err := d.loadState(name)
		if err != nil {
			return err
		}
		if st.Incarnation != bl.binding.Incarnation {
			return errors.New("the device began a new incarnation during the capture")
		}
		// WriteFileAtomic syncs the file and, after the rename, the AVD
		// root, so a capture reported written survives a power loss.
		return d.fs.WriteFileAtomic(d.kbPath(name), raw)
	}()
	if err != nil {
		d.log.Warn("keep-booted: baseline kept in memory only; a daemon restart loses it", "avd", name, "err", err)
	}
}

// kbForget drops the AVD's baseline, in memory and on disk: the device is
// gone, or is about to begin an incarnation the baseline cannot describe.
// Temporary files an interrupted write left go with it.
func (d *Driver) kbForget(name string) error {
	d.kb.mu.Lock()
	defer d.kb.mu.Unlock()
	delete(d.kb.by, name)
	var errs []error
	if err := d.fs.Remove(d.kbPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if ents, err := d.fs.ReadDir(d.root); err == nil {
		prefix := "." + name + ".keepbooted.json.tmp"
		for _, e := range ents {
			// os.CreateTemp puts only digits after the prefix.
			if rest, ok := strings.CutPrefix(e.Name(), prefix); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
				if err := d.fs.Remove(filepath.Join(d.root, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("android driver: remove the keep-booted baseline of %s: %w", name, err)
	}
	return nil
}
