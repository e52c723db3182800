package android

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// emulatorVersions remembers the version `emulator -version` printed, next
// to the fingerprint of the binary that printed it. The version is part of
// every baseline tag, and a tag is checked on every reclaim: without this
// each purge started an emulator process only to learn a fact that changes
// when, and only when, the emulator is updated.
type emulatorVersions struct {
	mu      sync.Mutex
	stamp   string // emulatorStamp when version was read; "" never matches
	version string
}

// emulatorVersion returns the emulator's version, read again whenever the
// binary's fingerprint moved (an update replaces the file, so its size or
// modification time change) or cannot be taken at all.
func (d *Driver) emulatorVersion(ctx context.Context) (string, error) {
	// The stamp is taken before the read: a binary replaced while it runs
	// leaves a stamp that no longer matches, so the next call reads again.
	stamp := d.emulatorStamp()
	c := &d.emuVersion
	if stamp != "" {
		c.mu.Lock()
		v, ok := c.version, c.stamp == stamp
		c.mu.Unlock()
		if ok {
			return v, nil
		}
	}
	res, err := d.runner.Run(ctx, d.command(d.tools.Emulator, "-version"))
	if err != nil {
		return "", fmt.Errorf("emulator -version: %w", err)
	}
	ver := parseEmulatorVersion(res.Stdout)
	if ver == "" {
		return "", errors.New("emulator -version printed no version")
	}
	if stamp != "" {
		c.mu.Lock()
		c.stamp, c.version = stamp, ver
		c.mu.Unlock()
	}
	return ver, nil
}

// emulatorStamp fingerprints the emulator binary the runner would start:
// its resolved path, size and modification time (through the Filesystem
// port, links followed). "" means it could not be found, and then nothing
// is remembered: every check runs the tool, as before.
func (d *Driver) emulatorStamp() string {
	p := d.emulatorPath()
	if p == "" {
		return ""
	}
	fi, err := d.fs.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return p + "\x00" + strconv.FormatInt(fi.Size(), 10) + "\x00" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// emulatorPath resolves the emulator tool the way the process runner does:
// a name with a slash is a path, any other name is looked up on the
// daemon's PATH (the environment the runner starts tools with).
func (d *Driver) emulatorPath() string {
	tool := d.tools.Emulator
	if strings.Contains(tool, "/") {
		return tool
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, tool)
		if fi, err := d.fs.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}
