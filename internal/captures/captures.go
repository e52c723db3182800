// Package captures records what a machine's real SDK tools print, scrubbed
// of anything that identifies the machine, so that the parsers and the
// simulated SDK can be checked against the field.
//
// A recording is a directory: one file per captured stream, named
// <tool>/<probe>.<tool version>.<os>.txt (stderr beside it as
// ….stderr.txt), and a manifest.json that says what ran and how it ended.
// `simlock selftest --record DIR` writes one; testdata/captures/ holds the
// ones contributed so far, and the replay tests read every one of them.
package captures

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Format is the manifest format this package writes and reads.
const Format = 1

// ManifestName is the manifest's file name inside a recording.
const ManifestName = "manifest.json"

// Manifest describes one recording.
type Manifest struct {
	Format     int    `json:"format"`
	RecordedAt string `json:"recordedAt"` // a date (YYYY-MM-DD), not a time: the hour says nothing useful
	Simlock    string `json:"simlock,omitempty"`
	OS         string `json:"os"`
	Arch       string `json:"arch,omitempty"`
	// Simulated is true for a recording of simlock's own simulated SDK,
	// which the shape checks never treat as the truth.
	Simulated bool `json:"simulated"`
	// Source says where captures not recorded by simlock came from.
	Source   string  `json:"source,omitempty"`
	Captures []Entry `json:"captures"`
	// Skipped names the probes that could not run here, with why.
	Skipped []string `json:"skipped,omitempty"`
}

// Entry is one captured command.
type Entry struct {
	Tool        string `json:"tool"`  // simctl, xcodebuild, adb, emulator, avdmanager
	Probe       string `json:"probe"` // what was asked, e.g. list-json, devices-l
	ToolVersion string `json:"toolVersion"`
	// Command is the command line as run, scrubbed, with simlock's own
	// scoping options (the device set, the adb server port) left out.
	Command  string `json:"command"`
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout,omitempty"` // file names relative to the recording
	Stderr   string `json:"stderr,omitempty"`
	// Refusal marks a command run to capture how the tool refuses it.
	Refusal bool   `json:"refusal,omitempty"`
	Note    string `json:"note,omitempty"`
}

// Recording is a manifest read back with its captured bytes.
type Recording struct {
	Dir      string
	Manifest Manifest
	Out      map[int][]byte // entry index -> stdout
	Err      map[int][]byte // entry index -> stderr
}

// Load reads the recording in dir and checks that every file the manifest
// names is there and inside dir.
func Load(dir string) (*Recording, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestName), err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%s: manifest format %d, this simlock reads %d", dir, m.Format, Format)
	}
	r := &Recording{Dir: dir, Manifest: m, Out: map[int][]byte{}, Err: map[int][]byte{}}
	read := func(name string) ([]byte, error) {
		if name == "" {
			return nil, nil
		}
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("%s: %q is not a path inside the recording", dir, name)
		}
		return os.ReadFile(filepath.Join(dir, name))
	}
	for i, e := range m.Captures {
		if e.Tool == "" || e.Probe == "" {
			return nil, fmt.Errorf("%s: capture %d names no tool or probe", dir, i)
		}
		if r.Out[i], err = read(e.Stdout); err != nil {
			return nil, err
		}
		if r.Err[i], err = read(e.Stderr); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// LoadAll reads every recording directly under root (each a directory with
// a manifest), sorted by directory name.
func LoadAll(root string) ([]*Recording, error) {
	des, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []*Recording
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		r, err := Load(filepath.Join(root, de.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// FileName is where a capture's stream goes: <tool>/<probe>.<version>.<os>.txt,
// or ….stderr.txt for stderr. Versions and probes are reduced to a safe
// alphabet so a tool's odd version text cannot make a path.
func FileName(tool, probe, version, goos string, stderr bool) string {
	suffix := ".txt"
	if stderr {
		suffix = ".stderr.txt"
	}
	return tool + "/" + safe(probe) + "." + safe(version) + "." + safe(goos) + suffix
}

var unsafeRun = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safe(s string) string {
	s = strings.Trim(unsafeRun.ReplaceAllString(s, "-"), "-.")
	if s == "" {
		return "unknown"
	}
	return s
}
