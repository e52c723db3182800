package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion is what `simlock version` reports.
type buildVersion struct {
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from ("" when the
	// build carried none, e.g. `go run` outside a checkout).
	Commit string `json:"commit,omitempty"`
	// Modified says the working tree had uncommitted changes.
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func currentBuild() buildVersion {
	v := buildVersion{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
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
			commit := v.Commit
			if commit == "" {
				commit = "unknown"
			} else if v.Modified {
				commit += " (modified)"
			}
			a.printf("simlock %s\ncommit   %s\ngo       %s %s\n", v.Version, commit, v.GoVersion, v.Platform)
			return nil
		},
	}
	a.addJSON(cmd)
	return cmd
}
