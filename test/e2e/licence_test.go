package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// An Android image download whose SDK licence is not accepted: without
// downloads.acceptLicenses the lease is refused with LICENSE_NOT_ACCEPTED
// naming `sdkmanager --licenses` (nothing is installed); with it the
// daemon accepts the licence and the lease is served on the new image.
func TestAndroidDownloadWithAnUnacceptedLicence(t *testing.T) {
	for _, accept := range []bool{false, true} {
		name := "refused"
		cfg := `{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`
		if accept {
			name = "accepted"
			cfg = `{"downloads":{"policy":"on-request","acceptLicenses":true},"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, cfg)
			w.env = append(w.env, "SIMLOCK_SIMSDK_ANDROID_LICENSES=unaccepted")
			r := w.run("lease", "--platform", "android", "--model", "pixel_6", "--os", "14", "--allow-download", "--detach", "--json")
			if accept {
				if r.code != 0 || !strings.Contains(r.stdout, `"osVersion":"14"`) {
					t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
				}
				return
			}
			var refusal struct {
				Error struct {
					Code       string         `json:"code"`
					Message    string         `json:"message"`
					NextAction string         `json:"nextAction"`
					Details    map[string]any `json:"details"`
				} `json:"error"`
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &refusal) != nil {
				t.Fatalf("exit %d\nstderr %s", r.code, r.stderr)
			}
			e := refusal.Error
			if e.Code != "LICENSE_NOT_ACCEPTED" || !strings.Contains(e.NextAction, "sdkmanager --licenses") ||
				!strings.Contains(e.Message, "android-sdk-license") {
				t.Fatalf("refusal %+v", e)
			}
			if w.countEvents("component.install-failed", "") != 1 || w.countEvents("component.installed", "") != 0 {
				t.Fatalf("events %+v", w.events())
			}
		})
	}
}
