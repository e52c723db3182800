package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the build's version string. It is a variable only so that a
// release build can stamp it, with the two below, through the linker:
//
//	go build -ldflags "-X github.com/simlock/simlock/internal/cli.Version=1.2.0
//	  -X github.com/simlock/simlock/internal/cli.stampCommit=$(git rev-parse HEAD)
//	  -X github.com/simlock/simlock/internal/cli.stampTime=$(git log -1 --format=%cI)" ./cmd/simlock
//
// Nothing writes them at run time.
var (
	Version     = "0.1.0"
	stampCommit string
	stampTime   string
)

// buildVersion is what `simlock version` reports.
type buildVersion struct {
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from ("" when the
	// build carried none, e.g. `go run`, or a build outside a checkout).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time, as the build recorded it.
	CommitTime string `json:"commitTime,omitempty"`
	// Modified says the working tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// CommitFrom says where Commit came from: "ldflags" (a release build
	// stamped it) or "vcs" (the go command read the checkout).
	CommitFrom string `json:"commitFrom,omitempty"`
	// Module is the main module's path and version as the go command saw
	// it: "(devel)" for a build from a checkout, a tag for `go install
	// module@version`.
	Module        string `json:"module,omitempty"`
	ModuleVersion string `json:"moduleVersion,omitempty"`
	GoVersion     string `json:"goVersion"`
	Platform      string `json:"platform"`
}

func currentBuild() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return describeBuild(bi, Version, stampCommit, stampTime)
}

// describeBuild combines what the linker was told (version, commit, time:
// a release build's stamps, which win) with what the go command embedded
// (bi, nil when the binary carries no build information).
func describeBuild(bi *debug.BuildInfo, version, commit, commitTime string) buildVersion {
	v := buildVersion{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		v.Module, v.ModuleVersion = bi.Main.Path, bi.Main.Version
		if bi.GoVersion != "" {
			v.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit, v.CommitFrom = s.Value, "vcs"
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if commit != "" {
		// A stamp describes the release as built; the checkout's own
		// dirtiness is not known then.
		v.Commit, v.CommitFrom, v.CommitTime, v.Modified = commit, "ldflags", commitTime, false
	}
	return v
}

func (a *app) versionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print simlock's version, the commit it was built from and its Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentBuild()
			if a.jsonOut {
				return a.printJSON(v)
			}
			a.printf("simlock %s\n", v.Version)
			switch {
			case v.Commit == "":
				a.printf("commit   unknown (the build embedded none: `go run`, a build outside a git checkout, or -buildvcs=false)\n")
			default:
				line := v.Commit
				if v.CommitTime != "" {
					line += " " + v.CommitTime
				}
				if v.Modified {
					line += " (modified)"
				}
				a.printf("commit   %s\n", line)
			}
			if v.Module != "" {
				a.printf("module   %s %s\n", v.Module, v.ModuleVersion)
			}
			a.printf("go       %s %s\n", v.GoVersion, v.Platform)
			return nil
		},
	}
	a.addJSON(cmd)
	return cmd
}
