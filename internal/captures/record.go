package captures

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/ports"
)

// Probe is one command worth capturing.
type Probe struct {
	Tool string // the directory its files go to
	Name string
	// Args follow the tool's scoping prefix; {udid} and {serial} are
	// replaced by the booted device's.
	Args []string
	// Refusal marks a command the tool is expected to refuse.
	Refusal bool
	// Version, when set, reads the tool family's version from this probe's
	// stdout; it names the files of every later probe of Family.
	Version func([]byte) string
	Family  []string
}

// IOSProbes are the Xcode commands simlock parses or the simulator models.
// The xcodebuild version comes first: it names every later file.
func IOSProbes() []Probe {
	return []Probe{
		{Tool: "xcodebuild", Name: "version", Args: []string{"-version"}, Version: XcodeVersion, Family: []string{"xcodebuild", "simctl"}},
		{Tool: "xcodebuild", Name: "showdestinations-no-project", Args: []string{"-showdestinations"}, Refusal: true},
		{Tool: "simctl", Name: "list-json", Args: []string{"list", "-j"}},
		{Tool: "simctl", Name: "list-text", Args: []string{"list"}},
		{Tool: "simctl", Name: "list-devices-json", Args: []string{"list", "devices", "-j"}},
		{Tool: "simctl", Name: "list-devices-text", Args: []string{"list", "devices"}},
		{Tool: "simctl", Name: "list-runtimes-json", Args: []string{"list", "runtimes", "-j"}},
		{Tool: "simctl", Name: "list-runtimes-text", Args: []string{"list", "runtimes"}},
		{Tool: "simctl", Name: "list-devicetypes-json", Args: []string{"list", "devicetypes", "-j"}},
		{Tool: "simctl", Name: "runtime-match-list-json", Args: []string{"runtime", "match", "list", "-j"}},
		{Tool: "simctl", Name: "launchctl-print-disabled", Args: []string{"spawn", "{udid}", "launchctl", "print-disabled", "system"}},
		{Tool: "simctl", Name: "boot-already-booted", Args: []string{"boot", "{udid}"}, Refusal: true},
		{Tool: "simctl", Name: "unknown-subcommand", Args: []string{"frobnicate"}, Refusal: true},
		{Tool: "simctl", Name: "unknown-device", Args: []string{"getenv", "00000000-0000-0000-0000-000000000000", "HOME"}, Refusal: true},
	}
}

// AndroidProbes are the platform-tools, emulator and cmdline-tools
// commands simlock parses or the simulator models.
func AndroidProbes() []Probe {
	return []Probe{
		{Tool: "adb", Name: "version", Args: []string{"version"}, Version: ADBVersion, Family: []string{"adb"}},
		{Tool: "emulator", Name: "version", Args: []string{"-version"}, Version: EmulatorVersion, Family: []string{"emulator"}},
		{Tool: "sdkmanager", Name: "version", Args: []string{"--version"}, Version: CmdlineToolsVersion, Family: []string{"sdkmanager", "avdmanager"}},
		{Tool: "adb", Name: "devices", Args: []string{"devices"}},
		{Tool: "adb", Name: "devices-l", Args: []string{"devices", "-l"}},
		{Tool: "adb", Name: "getprop", Args: []string{"-s", "{serial}", "shell", "getprop"}},
		{Tool: "adb", Name: "shell-exit-code", Args: []string{"-s", "{serial}", "shell", "exit 3"}, Refusal: true},
		{Tool: "adb", Name: "device-not-found", Args: []string{"-s", "emulator-5998", "shell", "true"}, Refusal: true},
		{Tool: "adb", Name: "unknown-command", Args: []string{"frobnicate"}, Refusal: true},
		{Tool: "emulator", Name: "list-avds", Args: []string{"-list-avds"}},
		{Tool: "emulator", Name: "unknown-avd", Args: []string{"-avd", "simlock_no_such_avd", "-no-window", "-no-snapshot"}, Refusal: true},
		{Tool: "avdmanager", Name: "list-avd", Args: []string{"list", "avd"}},
		{Tool: "avdmanager", Name: "list-device", Args: []string{"list", "device"}},
		{Tool: "avdmanager", Name: "unknown-verb", Args: []string{"frobnicate"}, Refusal: true},
	}
}

// Runner runs one command; a command that exits non-zero comes back as a
// *ports.ExitError carrying its Result.
type Runner interface {
	Run(ctx context.Context, c ports.Command) (ports.Result, error)
}

// Recorder runs probes and writes a recording into Dir.
type Recorder struct {
	Dir    string
	GOOS   string
	Arch   string
	Runner Runner
	Scrub  *Scrubber
	// PerProbe bounds each command (a tool that hangs must not hang the
	// selftest); zero means a minute.
	PerProbe time.Duration

	versions map[string]string
	entries  []Entry
	skipped  []string
}

// Run captures probes, each run as base plus its arguments. vars fills
// {udid} and {serial}. A probe whose program cannot be started (not
// installed) is noted and skipped; any other failure to write stops.
func (r *Recorder) Run(ctx context.Context, base map[string]ports.Command, probes []Probe, vars map[string]string) error {
	if r.versions == nil {
		r.versions = map[string]string{}
	}
	per := r.PerProbe
	if per == 0 {
		per = time.Minute
	}
	for _, p := range probes {
		b, ok := base[p.Tool]
		if !ok {
			r.skipped = append(r.skipped, p.Tool+" "+p.Name+": no such tool here")
			continue
		}
		args := make([]string, len(p.Args))
		for i, a := range p.Args {
			for k, v := range vars {
				a = strings.ReplaceAll(a, "{"+k+"}", v)
			}
			args[i] = a
		}
		c := b
		c.Args = append(append([]string(nil), b.Args...), args...)
		pctx, cancel := context.WithTimeout(ctx, per)
		res, err := r.Runner.Run(pctx, c)
		cancel()
		var exit *ports.ExitError
		switch {
		case errors.As(err, &exit):
			res = exit.Result
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.skipped = append(r.skipped, p.Tool+" "+p.Name+": "+r.Scrub.ScrubString(err.Error()))
			continue
		}
		if p.Version != nil {
			v := p.Version(res.Stdout)
			for _, f := range p.Family {
				r.versions[f] = v
			}
		}
		if err := r.write(p, args, res); err != nil {
			return err
		}
	}
	return nil
}

func (r *Recorder) write(p Probe, args []string, res ports.Result) error {
	version := r.versions[p.Tool]
	if version == "" {
		version = "unknown"
	}
	e := Entry{Tool: p.Tool, Probe: p.Name, ToolVersion: version, ExitCode: res.ExitCode, Refusal: p.Refusal,
		Command: r.Scrub.ScrubString(strings.Join(append([]string{p.Tool}, args...), " "))}
	put := func(stderr bool, b []byte) (string, error) {
		if len(b) == 0 {
			return "", nil
		}
		name := FileName(p.Tool, p.Name, version, r.GOOS, stderr)
		full := filepath.Join(r.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		return name, os.WriteFile(full, r.Scrub.Scrub(p.Tool, b), 0o644)
	}
	var err error
	if e.Stdout, err = put(false, res.Stdout); err != nil {
		return err
	}
	if e.Stderr, err = put(true, res.Stderr); err != nil {
		return err
	}
	r.entries = append(r.entries, e)
	return nil
}

// Skipped lists the probes that could not run, with why.
func (r *Recorder) Skipped() []string { return r.skipped }

// Finish writes the manifest and returns it.
func (r *Recorder) Finish(m Manifest) (Manifest, error) {
	m.Format = Format
	m.OS, m.Arch = r.GOOS, r.Arch
	m.Captures = append([]Entry{}, r.entries...)
	if len(r.skipped) > 0 {
		m.Skipped = append([]string{}, r.skipped...)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return m, err
	}
	if err := os.WriteFile(filepath.Join(r.Dir, ManifestName), append(b, '\n'), 0o644); err != nil {
		return m, fmt.Errorf("captures: %w", err)
	}
	return m, nil
}
