package android

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

// The keep-booted session reset (core.KeepBootedCleaner, ADR 0048): a
// running emulator is cleaned back to a baseline captured after the boot
// that began its incarnation, instead of being restarted. It is cleaning,
// not isolation: what it does not inventory (app data of baseline apps,
// accounts, system package updates) it does not undo.
//
// The baseline is filed under the AVD (the device's stable identity) and
// bound to the driver's incarnation of it, the guest's boot id, the adb
// serial and the current user: a recycled serial, a reboot, a snapshot
// load or a user switch each leave the old baseline unusable, and the
// cleaning then fails so the core falls back. Baselines are kept in
// memory and beside the AVD on disk (keepbooted_persist.go, ADR 0056), so
// a daemon restart does not cost a still-running device its baseline.

var _ core.KeepBootedCleaner = (*Driver)(nil)

const (
	// kbCommandTimeout bounds each command of a capture or a cleaning.
	kbCommandTimeout = 2 * time.Second
	// kbUninstallTimeout bounds one pm uninstall.
	kbUninstallTimeout = 10 * time.Second
)

// kbRoots are the shared-storage roots whose files are inventoried.
var kbRoots = []string{"/sdcard/Download", "/sdcard/DCIM", "/sdcard/Pictures", "/sdcard/Movies", "/sdcard/Documents"}

// kbBaseline is one incarnation's baseline.
type kbBaseline struct {
	binding  kbBinding
	users    []int
	packages map[int]map[string]bool            // every package, per user
	grants   map[int]map[string]map[string]bool // third-party package -> granted runtime permissions, per user
	settings map[int]map[string]map[string]string
	display  map[string]string // wm size / density override ("" none)
	props    map[string]string // locale, timezone
	accounts string            // SHA-256 of the account inventory
	files    map[string]bool   // regular files under kbRoots
	links    map[string]bool   // symbolic links under kbRoots
}

// keepBootedBook holds the newest baseline of each AVD this driver has
// captured or read back (keepbooted_persist.go keeps the files).
type keepBootedBook struct {
	mu sync.Mutex
	by map[string]*kbBaseline // AVD name ->
}

// kbProps are the properties a baseline restores.
var kbProps = []string{"persist.sys.locale", "persist.sys.timezone"}

// kbDevice is a keep-booted call's device and what binds a baseline to it.
type kbDevice struct {
	resDevice
	binding kbBinding
}

func (d *Driver) kbDeviceFor(ctx context.Context, dev core.DeviceRef) (kbDevice, error) {
	rd, err := d.resDeviceFor(ctx, dev)
	if err != nil {
		return kbDevice{}, err
	}
	return kbDevice{resDevice: rd, binding: kbBinding{AVD: rd.name, Serial: rd.serial,
		Incarnation: rd.incarnation, BootID: rd.bootID, User: rd.user}}, nil
}

// kbShell runs one bounded device command. The words are quoted for the
// device's shell, which is what parses them.
func (d *Driver) kbShell(ctx context.Context, serial string, limit time.Duration, words ...string) (string, ports.Result, error) {
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = kbQuote(w)
	}
	res, err := d.adbOn(cctx, serial, "shell", strings.Join(q, " "))
	if err != nil {
		msg := strings.TrimSpace(string(res.Stderr) + " " + string(res.Stdout))
		return string(res.Stdout), res, fmt.Errorf("adb shell %s: %w (%s)", strings.Join(words, " "), err, msg)
	}
	return string(res.Stdout), res, nil
}

var kbPlainWord = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)

// kbQuote leaves plain words alone and single-quotes anything else (an
// empty value included).
func kbQuote(w string) string {
	if kbPlainWord.MatchString(w) {
		return w
	}
	return shellQuote(w)
}

// CaptureBaseline records the baseline of the device's current
// incarnation, unless it has one already: in memory, or on disk from an
// earlier daemon (then that one is kept, not the device's state now).
func (d *Driver) CaptureBaseline(ctx context.Context, dev core.DeviceRef) error {
	kd, err := d.kbDeviceFor(ctx, dev)
	if err != nil {
		return err
	}
	if d.kbBaselineFor(kd.binding) != nil {
		return nil
	}
	bl, err := d.readBaseline(ctx, kd)
	if err != nil {
		return fmt.Errorf("android driver: capture the keep-booted baseline of %s: %w", kd.name, err)
	}
	d.kbStore(bl)
	return nil
}

// readBaseline reads everything a baseline holds from the device now.
func (d *Driver) readBaseline(ctx context.Context, kd kbDevice) (*kbBaseline, error) {
	bl := &kbBaseline{binding: kd.binding, packages: map[int]map[string]bool{}, grants: map[int]map[string]map[string]bool{},
		settings: map[int]map[string]map[string]string{}, display: map[string]string{}, props: map[string]string{}}
	var err error
	if bl.users, err = d.kbUsers(ctx, kd.serial); err != nil {
		return nil, err
	}
	for _, u := range bl.users {
		if bl.packages[u], err = d.kbPackages(ctx, kd.serial, u, false); err != nil {
			return nil, err
		}
		third, err := d.kbPackages(ctx, kd.serial, u, true)
		if err != nil {
			return nil, err
		}
		bl.grants[u] = map[string]map[string]bool{}
		for _, pkg := range slices.Sorted(maps.Keys(third)) {
			if bl.grants[u][pkg], err = d.kbGrants(ctx, kd.serial, u, pkg); err != nil {
				return nil, err
			}
		}
		if bl.settings[u], err = d.kbSettings(ctx, kd.serial, u, u == bl.users[0]); err != nil {
			return nil, err
		}
	}
	for _, what := range []string{"size", "density"} {
		if bl.display[what], err = d.kbDisplay(ctx, kd.serial, what); err != nil {
			return nil, err
		}
	}
	for _, p := range kbProps {
		out, _, err := d.kbShell(ctx, kd.serial, kbCommandTimeout, "getprop", p)
		if err != nil {
			return nil, err
		}
		bl.props[p] = strings.TrimSpace(out)
	}
	if bl.accounts, err = d.kbAccounts(ctx, kd.serial); err != nil {
		return nil, err
	}
	if bl.files, bl.links, err = d.kbFiles(ctx, kd.serial); err != nil {
		return nil, err
	}
	return bl, nil
}

var kbUserRe = regexp.MustCompile(`UserInfo\{(\d+):`)

// kbUsers lists the device's users (`pm list users`), the system user
// first.
func (d *Driver) kbUsers(ctx context.Context, serial string) ([]int, error) {
	out, _, err := d.kbShell(ctx, serial, kbCommandTimeout, "pm", "list", "users")
	if err != nil {
		return nil, err
	}
	var users []int
	for _, m := range kbUserRe.FindAllStringSubmatch(out, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil {
			users = append(users, n)
		}
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("pm list users named no user: %q", out)
	}
	sort.Ints(users)
	return users, nil
}

// kbPackages lists a user's packages, only the third-party ones with third.
func (d *Driver) kbPackages(ctx context.Context, serial string, user int, third bool) (map[string]bool, error) {
	args := []string{"pm", "list", "packages"}
	if third {
		args = append(args, "-3")
	}
	out, _, err := d.kbShell(ctx, serial, kbCommandTimeout, append(args, "--user", strconv.Itoa(user))...)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]bool{}
	for _, l := range lines([]byte(out)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(l), "package:"); ok && p != "" {
			pkgs[p] = true
		}
	}
	return pkgs, nil
}

var (
	kbDumpUserRe = regexp.MustCompile(`^\s*User (\d+):`)
	kbPermRe     = regexp.MustCompile(`^\s+([A-Za-z0-9_.]+): granted=(true|false)`)
)

// kbGrants reads a package's granted runtime permissions for user from
// `dumpsys package`: the lines of the "runtime permissions:" block of
// that user's section.
func (d *Driver) kbGrants(ctx context.Context, serial string, user int, pkg string) (map[string]bool, error) {
	out, _, err := d.kbShell(ctx, serial, kbCommandTimeout, "dumpsys", "package", pkg)
	if err != nil {
		return nil, err
	}
	return parseRuntimeGrants(out, user), nil
}

func parseRuntimeGrants(out string, user int) map[string]bool {
	granted := map[string]bool{}
	cur, inRuntime := -1, false
	for _, l := range lines([]byte(out)) {
		t := strings.TrimSpace(l)
		switch m := kbDumpUserRe.FindStringSubmatch(l); {
		case m != nil:
			cur, _ = strconv.Atoi(m[1])
			inRuntime = false
		case t == "runtime permissions:":
			inRuntime = true
		case inRuntime && kbPermRe.MatchString(l):
			if m := kbPermRe.FindStringSubmatch(l); cur == user && m[2] == "true" {
				granted[m[1]] = true
			}
		case strings.HasSuffix(t, ":"):
			inRuntime = false
		}
	}
	return granted
}

// kbSettings dumps the system and secure settings of user, and the
// global ones too when withGlobal (they are not per user: read once).
func (d *Driver) kbSettings(ctx context.Context, serial string, user int, withGlobal bool) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	nss := []string{"system", "secure"}
	if withGlobal {
		nss = append([]string{"global"}, nss...)
	}
	for _, ns := range nss {
		text, _, err := d.kbShell(ctx, serial, kbCommandTimeout, "settings", "--user", strconv.Itoa(user), "list", ns)
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, l := range lines([]byte(text)) {
			if k, v, ok := strings.Cut(l, "="); ok && k != "" {
				m[k] = v
			}
		}
		out[ns] = m
	}
	return out, nil
}

// kbDisplay reads wm's override of size or density ("" for none).
func (d *Driver) kbDisplay(ctx context.Context, serial, what string) (string, error) {
	out, _, err := d.kbShell(ctx, serial, kbCommandTimeout, "wm", what)
	if err != nil {
		return "", err
	}
	for _, l := range lines([]byte(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Override "+what+":"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", nil
}

// kbAccounts digests the account inventory, so no account name is kept.
func (d *Driver) kbAccounts(ctx context.Context, serial string) (string, error) {
	out, _, err := d.kbShell(ctx, serial, kbCommandTimeout, "dumpsys", "account")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(out))
	return hex.EncodeToString(sum[:]), nil
}

// kbFiles inventories the regular files and the symbolic links under the
// roots (find never follows a link). A root that does not exist holds
// nothing.
func (d *Driver) kbFiles(ctx context.Context, serial string) (files, links map[string]bool, err error) {
	files, links = map[string]bool{}, map[string]bool{}
	for _, root := range kbRoots {
		for kind, into := range map[string]map[string]bool{"f": files, "l": links} {
			out, res, err := d.kbShell(ctx, serial, kbCommandTimeout, "find", root, "-type", kind)
			if err != nil {
				if strings.Contains(string(res.Stderr), "No such file or directory") {
					continue
				}
				return nil, nil, err
			}
			for _, l := range lines([]byte(out)) {
				if l = strings.TrimSpace(l); l != "" {
					into[l] = true
				}
			}
		}
	}
	return files, links, nil
}

// guardedPath reports whether p may be removed as an added file under
// root: a clean absolute path strictly inside root, through no symbolic
// link the device listed.
func guardedPath(p, root string, links map[string]bool) bool {
	if path.Clean(p) != p || !strings.HasPrefix(p, root+"/") || links[root] {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." {
			return false
		}
	}
	for dir := path.Dir(p); dir != root && strings.HasPrefix(dir, root); dir = path.Dir(dir) {
		if links[dir] {
			return false
		}
	}
	return true
}

// CleanToBaseline undoes a session's changes by the baseline of the
// device's incarnation. The first hard failure ends it; the core then
// falls back or destroys the device.
func (d *Driver) CleanToBaseline(ctx context.Context, dev core.DeviceRef) (map[string]time.Duration, error) {
	kd, err := d.kbDeviceFor(ctx, dev)
	if err != nil {
		return nil, err
	}
	bl := d.kbBaselineFor(kd.binding)
	if bl == nil {
		return nil, errors.New("android driver: no keep-booted baseline for this incarnation of the device (rebooted, restored or never captured)")
	}
	phases := map[string]time.Duration{}
	for _, ph := range []struct {
		name string
		run  func(context.Context, kbDevice, *kbBaseline) error
	}{
		{"uninstall", d.kbCleanPackages},
		{"grants", d.kbCleanGrants},
		{"settings", d.kbCleanSettings},
		{"display", d.kbCleanDisplay},
		{"locale", d.kbCleanProps},
		{"files", d.kbCleanFiles},
		{"clipboard", d.kbClearClipboard},
	} {
		start := d.clock.Now()
		err := ph.run(ctx, kd, bl)
		phases[ph.name] = d.clock.Now().Sub(start)
		if err != nil {
			return phases, fmt.Errorf("%s: %w", ph.name, err)
		}
	}
	if now, err := d.kbAccounts(ctx, kd.serial); err == nil && now != bl.accounts {
		// Accounts are not removed (no revert is qualified for them): say so.
		d.log.Warn("keep-booted: the account inventory changed during the session and is not reverted", "avd", kd.name)
	}
	return phases, nil
}

// kbCleanPackages uninstalls, per user of the baseline, every third-party
// package the baseline does not list for that user.
func (d *Driver) kbCleanPackages(ctx context.Context, kd kbDevice, bl *kbBaseline) error {
	for _, u := range bl.users {
		now, err := d.kbPackages(ctx, kd.serial, u, true)
		if err != nil {
			return err
		}
		for _, pkg := range slices.Sorted(maps.Keys(now)) {
			if bl.packages[u][pkg] {
				continue
			}
			out, _, err := d.kbShell(ctx, kd.serial, kbUninstallTimeout, "pm", "uninstall", "--user", strconv.Itoa(u), pkg)
			if err != nil {
				return err
			}
			if !strings.Contains(out, "Success") {
				return fmt.Errorf("pm uninstall %s: %s", pkg, strings.TrimSpace(out))
			}
		}
	}
	return nil
}

// kbCleanGrants revokes runtime permissions of retained third-party
// packages that the baseline did not grant.
func (d *Driver) kbCleanGrants(ctx context.Context, kd kbDevice, bl *kbBaseline) error {
	for _, u := range bl.users {
		for _, pkg := range slices.Sorted(maps.Keys(bl.grants[u])) {
			now, err := d.kbGrants(ctx, kd.serial, u, pkg)
			if err != nil {
				return err
			}
			for _, perm := range slices.Sorted(maps.Keys(now)) {
				if bl.grants[u][pkg][perm] {
					continue
				}
				if _, _, err := d.kbShell(ctx, kd.serial, kbCommandTimeout, "pm", "revoke", "--user", strconv.Itoa(u), pkg, perm); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// kbCleanSettings puts back every baseline setting that changed or went
// missing. A key the baseline lacks is kept: without a record that the
// session wrote it, it may be the system's own.
func (d *Driver) kbCleanSettings(ctx context.Context, kd kbDevice, bl *kbBaseline) error {
	for i, u := range bl.users {
		now, err := d.kbSettings(ctx, kd.serial, u, i == 0)
		if err != nil {
			return err
		}
		for _, ns := range slices.Sorted(maps.Keys(bl.settings[u])) {
			want := bl.settings[u][ns]
			for _, k := range slices.Sorted(maps.Keys(want)) {
				if v, ok := now[ns][k]; ok && v == want[k] {
					continue
				}
				if _, _, err := d.kbShell(ctx, kd.serial, kbCommandTimeout, "settings", "--user", strconv.Itoa(u), "put", ns, k, want[k]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// kbCleanDisplay restores wm's size and density overrides.
func (d *Driver) kbCleanDisplay(ctx context.Context, kd kbDevice, bl *kbBaseline) error {
	for _, what := range []string{"size", "density"} {
		now, err := d.kbDisplay(ctx, kd.serial, what)
		if err != nil {
			return err
		}
		if now == bl.display[what] {
			continue
		}
		v := bl.display[what]
		if v == "" {
			v = "reset"
		}
		if _, _, err := d.kbShell(ctx, kd.serial, kbCommandTimeout, "wm", what, v); err != nil {
			return err
		}
	}
	return nil
}

// kbCleanProps restores the locale and the timezone.
func (d *Driver) kbCleanProps(ctx context.Context, kd kbDevice, bl *kbBaseline) error {
	for _, p := range kbProps {
		out, _, err := d.kbShell(ctx, kd.serial, kbCommandTimeout, "getprop", p)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == bl.props[p] {
			continue
		}
		if _, _, err := d.kbShell(ctx, kd.serial, kbCommandTimeout, "setprop", p, bl.props[p]); err != nil {
			return err
		}
	}
	return nil
}

// kbCleanFiles removes regular files and links added under the roots. A
// path that leaves its root or passes through a link is never touched,
// and rm removes a link itself, never what it points to. Baseline files
// stay, whatever their contents now.
func (d *Driver) kbCleanFiles(ctx context.Context, kd kbDevice, bl *kbBaseline) error {
	files, links, err := d.kbFiles(ctx, kd.serial)
	if err != nil {
		return err
	}
	var remove []string
	for _, root := range kbRoots {
		for _, p := range append(slices.Sorted(maps.Keys(files)), slices.Sorted(maps.Keys(links))...) {
			if bl.files[p] || bl.links[p] || !guardedPath(p, root, links) {
				continue
			}
			remove = append(remove, p)
		}
	}
	slices.Sort(remove)
	for _, p := range slices.Compact(remove) {
		if _, _, err := d.kbShell(ctx, kd.serial, kbCommandTimeout, "rm", "-f", p); err != nil {
			return err
		}
	}
	return nil
}

// kbClearClipboard clears the clipboard through the clipboard service. An
// image whose service takes no shell commands (cmd's "Can't find service",
// exit 20) is skipped; any other failure is hard.
func (d *Driver) kbClearClipboard(ctx context.Context, kd kbDevice, _ *kbBaseline) error {
	_, res, err := d.kbShell(ctx, kd.serial, kbCommandTimeout, "cmd", "clipboard", "clear-primary-clip")
	if err != nil && res.ExitCode == 20 && strings.Contains(string(res.Stderr), "Can't find service") {
		d.log.Debug("keep-booted: the clipboard service takes no shell commands; not cleared", "avd", kd.name)
		return nil
	}
	return err
}

// CheckHealth proves a cleaned device usable: boot completed and the
// package manager answering.
func (d *Driver) CheckHealth(ctx context.Context, dev core.DeviceRef) error {
	name, port, _, err := d.device(ctx, dev)
	if err != nil {
		return err
	}
	serial := serialFor(port)
	out, _, err := d.kbShell(ctx, serial, kbCommandTimeout, "getprop")
	if err != nil {
		return fmt.Errorf("android driver: health of %s: %w", name, err)
	}
	// The same readiness rule as a boot's (boot completed, animation done).
	if props := parseGetprop([]byte(out)); !bootCompleted(props) {
		return fmt.Errorf("android driver: health of %s: boot not completed (sys.boot_completed=%q, init.svc.bootanim=%q)",
			name, props["sys.boot_completed"], props["init.svc.bootanim"])
	}
	out, _, err = d.kbShell(ctx, serial, kbCommandTimeout, "pm", "path", "android")
	if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "package:") {
		return fmt.Errorf("android driver: health of %s: the package manager does not answer: %v %q", name, err, strings.TrimSpace(out))
	}
	return nil
}
