package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/captures"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

// selftestRecorded is what `selftest --record` reports: where the manifest
// is and what it holds.
type selftestRecorded struct {
	Dir      string   `json:"dir"`
	Manifest string   `json:"manifest"`
	Captures int      `json:"captures"`
	Skipped  []string `json:"skipped,omitempty"`
}

// newSelftestRecorder prepares dir (which must be empty or new, so a
// recording never mixes with an older one) and a scrubber for this machine.
func newSelftestRecorder(dir, scratch string, getenv func(string) string) (*captures.Recorder, error) {
	if des, err := os.ReadDir(dir); err == nil && len(des) > 0 {
		return nil, contract.Errorf(contract.CodeBadRequest, "--record %s: the directory is not empty", dir).
			WithNext("name a new or empty directory, so one recording never mixes with another")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--record: %w", err)
	}
	id := captures.Identity{Scratch: scratch, TempDir: os.TempDir(), User: getenv("USER")}
	if h, err := os.UserHomeDir(); err == nil {
		id.Home = h
	}
	if u, err := user.Current(); err == nil {
		if id.User == "" {
			id.User = u.Username
		}
		if id.Home == "" {
			id.Home = u.HomeDir
		}
	}
	if h, err := os.Hostname(); err == nil {
		id.Host, _, _ = strings.Cut(h, ".")
	}
	return &captures.Recorder{Dir: dir, GOOS: runtime.GOOS, Arch: runtime.GOARCH,
		Runner: ports.ExecRunner{Grace: 2 * time.Second}, Scrub: captures.NewScrubber(id)}, nil
}

// recordPlatform captures one platform's probes while its device is booted,
// each command scoped by the driver exactly as simlock scopes its own (the
// selftest's device set, its private adb server), so nothing outside the
// selftest's root is listed.
func recordPlatform(ctx context.Context, rec *captures.Recorder, drv core.Driver, ref core.DeviceRef, scratch string) (string, error) {
	pt, ok := drv.(core.Passthrougher)
	if !ok {
		return "", fmt.Errorf("the %s driver runs no tools", drv.Platform())
	}
	env := []string{}
	for k, v := range ref.Attrs {
		if name, ok := strings.CutPrefix(k, core.AttrEnvPrefix); ok {
			env = append(env, name+"="+v)
		}
	}
	base := map[string]ports.Command{}
	scoped := func(tool, as string) error {
		c, err := pt.ResolvePassthrough(tool, nil, core.PassthroughScope{})
		if err != nil {
			return fmt.Errorf("record: scoping %s: %w", tool, err)
		}
		c.Env = append(c.Env, env...)
		c.Dir = scratch
		base[as] = c
		return nil
	}
	var probes []captures.Probe
	vars := map[string]string{"udid": ref.Attrs[core.AttrUDID], "serial": ref.Attrs[core.AttrSerial]}
	switch drv.Platform() {
	case "ios":
		if vars["udid"] == "" {
			vars["udid"] = ref.Handle
		}
		if err := scoped("simctl", "simctl"); err != nil {
			return "", err
		}
		// xcodebuild lists no devices; it runs in the scratch root so that
		// -showdestinations finds no project of the user's.
		base["xcodebuild"] = ports.Command{Name: "xcodebuild", Dir: scratch, Env: env}
		probes = captures.IOSProbes()
	case "android":
		for _, t := range []string{"adb", "emulator", "avdmanager"} {
			if err := scoped(t, t); err != nil {
				return "", err
			}
		}
		// sdkmanager sits beside avdmanager in the command-line tools.
		sdk := base["avdmanager"]
		sdk.Name = "sdkmanager"
		if filepath.IsAbs(base["avdmanager"].Name) {
			sdk.Name = filepath.Join(filepath.Dir(base["avdmanager"].Name), "sdkmanager")
		}
		base["sdkmanager"] = sdk
		probes = captures.AndroidProbes()
	default:
		return "", fmt.Errorf("no probes for %s", drv.Platform())
	}
	before := len(rec.Skipped())
	if err := rec.Run(ctx, base, probes, vars); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d probes, %d skipped", len(probes), len(rec.Skipped())-before), nil
}

// finishRecording writes the manifest once every platform has run.
func finishRecording(rec *captures.Recorder, rep selftestReport) (*selftestRecorded, error) {
	simulated := false
	for _, p := range rep.Platforms {
		simulated = simulated || p.Simulated
	}
	m, err := rec.Finish(captures.Manifest{RecordedAt: time.Now().UTC().Format(time.DateOnly), Simlock: Version, Simulated: simulated})
	if err != nil {
		return nil, err
	}
	return &selftestRecorded{Dir: rec.Dir, Manifest: filepath.Join(rec.Dir, captures.ManifestName),
		Captures: len(m.Captures), Skipped: m.Skipped}, nil
}
