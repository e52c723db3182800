package e2e

import (
	"strings"
	"testing"
)

func TestDownloadPolicyNeverRefusesAtOnce(t *testing.T) {
	w := newWorld(t, `{"downloads":{"policy":"never"},"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`)
	r := w.run("lease", "--platform", "ios", "--model", "iPhone 16", "--os", "26.5", "--allow-download", "--detach", "--json")
	if r.code == 0 || !strings.Contains(r.stderr, "DOWNLOAD_FORBIDDEN") {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
	if w.countEvents("component.install-started", "") != 0 {
		t.Fatal("an install started despite policy never")
	}
}

func TestDownloadOnRequestInstallsWithProgress(t *testing.T) {
	w := newWorld(t, `{"downloads":{"policy":"on-request"},"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`)
	r := w.run("lease", "--platform", "ios", "--model", "iPhone 16", "--os", "26.5", "--detach", "--json")
	if !strings.Contains(r.stderr, "RUNTIME_NOT_INSTALLED") {
		t.Fatalf("without --allow-download: %s", r.stderr)
	}
	r = w.run("lease", "--platform", "ios", "--model", "iPhone 16", "--os", "26.5", "--allow-download", "--detach", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `"phase":"downloading"`) || !strings.Contains(r.stderr, `"phase":"installed"`) {
		t.Fatalf("no download progress on stderr:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, `"osVersion":"26.5`) {
		t.Fatalf("grant %s", r.stdout)
	}
	if w.countEvents("component.installed", "") != 1 {
		t.Fatal("want exactly one component.installed")
	}
}

func TestFailedInstallEndsAsInstallFailed(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`)
	w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=install-fail")
	r := w.run("lease", "--platform", "ios", "--model", "iPhone 16", "--os", "26.5", "--allow-download", "--detach", "--json")
	if r.code == 0 {
		t.Fatal("granted despite a failed install")
	}
	if w.countEvents("component.install-failed", "") != 1 || w.countEvents("component.installed", "") != 0 {
		t.Fatalf("events %+v", w.events())
	}
}

func TestInstallerThatLiesEndsAsInstallFailed(t *testing.T) {
	for _, c := range []struct{ platform, model, os string }{{"ios", "iPhone 16", "26.5"}, {"android", "pixel_6", "14"}} {
		t.Run(c.platform, func(t *testing.T) {
			w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`)
			w.env = append(w.env, "SIMLOCK_SIMSDK_FAULTS=install-noop")
			r := w.run("lease", "--platform", c.platform, "--model", c.model, "--os", c.os, "--allow-download", "--detach", "--json")
			if r.code == 0 {
				t.Fatal("granted although the installer installed nothing")
			}
			if w.countEvents("component.install-failed", "") != 1 || w.countEvents("component.installed", "") != 0 {
				t.Fatalf("an installer exiting 0 without installing must end as install-failed: %+v", w.events())
			}
		})
	}
}

func TestAndroidImageDownloadOnRequest(t *testing.T) {
	w := newWorld(t, `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`)
	r := w.run("lease", "--platform", "android", "--model", "pixel_6", "--os", "14", "--allow-download", "--detach", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `"phase":"downloading"`) || !strings.Contains(r.stdout, `"osVersion":"14"`) {
		t.Fatalf("stdout %s\nstderr %s", r.stdout, r.stderr)
	}
}
