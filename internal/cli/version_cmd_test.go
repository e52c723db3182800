package cli

import (
	"runtime/debug"
	"testing"
)

func TestDescribeBuild(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Path: "github.com/simlock/simlock", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-06T07:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name                       string
		bi                         *debug.BuildInfo
		commit, commitTime         string
		wantCommit, wantFrom, when string
		modified                   bool
	}{
		{name: "no build information at all"},
		{name: "built with -buildvcs=false", bi: &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}}},
		{name: "from a checkout", bi: vcs, wantCommit: "abc123", wantFrom: "vcs", when: "2026-12-06T07:00:00Z", modified: true},
		{name: "a release stamp wins over the checkout", bi: vcs, commit: "fff", commitTime: "2026-12-01T00:00:00Z",
			wantCommit: "fff", wantFrom: "ldflags", when: "2026-12-01T00:00:00Z"},
		{name: "a stamp without build information", commit: "fff", wantCommit: "fff", wantFrom: "ldflags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := describeBuild(tc.bi, "1.2.0", tc.commit, tc.commitTime)
			if v.Version != "1.2.0" || v.Commit != tc.wantCommit || v.CommitFrom != tc.wantFrom || v.CommitTime != tc.when || v.Modified != tc.modified {
				t.Fatalf("got %+v", v)
			}
			if tc.bi != nil && (v.Module != tc.bi.Main.Path || v.ModuleVersion != tc.bi.Main.Version) {
				t.Fatalf("module %q %q, want %q %q", v.Module, v.ModuleVersion, tc.bi.Main.Path, tc.bi.Main.Version)
			}
			if v.GoVersion == "" || v.Platform == "" {
				t.Fatalf("go version or platform missing: %+v", v)
			}
		})
	}
}
