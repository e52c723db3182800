package android

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/simsdk"
)

// simSDKManager runs sdkmanager as the simulated SDK, in this process,
// with the licence unaccepted; everything else goes to the scripted runner.
type simSDKManager struct {
	inner ports.ProcessRunner
	env   map[string]string
}

func (r simSDKManager) Run(ctx context.Context, c ports.Command) (ports.Result, error) {
	if filepath.Base(c.Name) != "sdkmanager" {
		return r.inner.Run(ctx, c)
	}
	var out, errb bytes.Buffer
	code := simsdk.Main(ctx, "sdkmanager", c.Args, c.Stdin, &out, &errb, func(k string) string { return r.env[k] })
	res := ports.Result{Stdout: out.Bytes(), Stderr: errb.Bytes(), ExitCode: code}
	if code != 0 {
		return res, &ports.ExitError{Command: c, Result: res}
	}
	return res, nil
}

// Against the simulated sdkmanager, which prompts for an unaccepted
// licence as the real one does: without downloads.acceptLicenses the
// install is LICENSE_NOT_ACCEPTED naming the licence and the command to
// run, and nothing is installed; with it the driver answers "y" and the
// package is installed.
func TestSDKInstallHandlesTheLicencePrompt(t *testing.T) {
	const pkg = "system-images;android-34;google_apis;x86_64"
	for _, accept := range []bool{false, true} {
		env := map[string]string{simsdk.EnvHome: t.TempDir(), simsdk.EnvSpeed: "0", simsdk.EnvAndroidLicenses: "unaccepted"}
		h := newHarness(t, func(o *Options) {
			o.AcceptLicenses = accept
			o.Runner = simSDKManager{inner: o.Runner, env: env}
		})
		res, err := h.d.sdkInstall(context.Background(), pkg)
		if !strings.Contains(string(res.Stdout), "Accept? (y/N): ") {
			t.Fatalf("accept=%v: no licence prompt in %q", accept, res.Stdout)
		}
		list, lerr := (simSDKManager{env: env}).Run(context.Background(), ports.Command{Name: "sdkmanager", Args: []string{"--list_installed"}})
		if lerr != nil {
			t.Fatal(lerr)
		}
		installed := strings.Contains(string(list.Stdout), pkg)
		if !accept {
			var se *core.SpecError
			if !errors.Is(err, ErrLicenseNotAccepted) || !errors.As(err, &se) {
				t.Fatalf("declined install: %v, want ErrLicenseNotAccepted", err)
			}
			if !strings.Contains(se.Error(), "android-sdk-license") || !strings.Contains(se.Next, "sdkmanager --licenses") ||
				!strings.Contains(se.Next, "downloads.acceptLicenses") {
				t.Fatalf("error %q next %q", se.Error(), se.Next)
			}
			if installed {
				t.Fatal("installed although the licence was declined")
			}
			continue
		}
		if err != nil || !installed {
			t.Fatalf("accepted install: %v, installed %v", err, installed)
		}
	}
}

// Through ResolveSpec the licence refusal is the typed error and the one
// install-failed diagnostic, not "sdkmanager reported success but ... is
// not installed".
func TestResolveSpecDownloadLicenceNotAccepted(t *testing.T) {
	const pkg = "system-images;android-33;google_apis;x86_64"
	h := newHarness(t, func(o *Options) { o.DiskGuard = &fakeGuard{free: 10 << 30} })
	h.run.Always(fake.Step{Match: "avdmanager list device", Stdout: deviceListFull})
	h.run.Expect(
		fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
		fake.Step{Match: "sdkmanager --list_installed", Stdout: installedLinux(t)},
		fake.Step{Match: "sdkmanager --install " + pkg, ExitCode: 1,
			Stdout: "License android-sdk-license:\n---------------------------------------\nterms\n---------------------------------------\nAccept? (y/N): Skipping following packages as the license is not accepted:\n"},
	)
	_, err := h.d.ResolveSpec(context.Background(), core.SpecRequest{Model: "pixel_6", OSVersion: "13", AllowDownload: true})
	if !errors.Is(err, ErrLicenseNotAccepted) {
		t.Fatalf("err = %v", err)
	}
	h.assertDone()
	d := h.diagnostics()
	if len(d) != 2 || d[1].Type != "component.install-failed" || !strings.Contains(d[1].Message, "licence") {
		t.Fatalf("diagnostics %+v", d)
	}
}
