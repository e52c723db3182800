package android

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

// ErrLicenseNotAccepted marks an install sdkmanager refused because an SDK
// licence it asked about was not accepted (LICENSE_NOT_ACCEPTED).
var ErrLicenseNotAccepted = errors.New("SDK licence not accepted")

// licencePrompt is how sdkmanager ends a licence text: it then waits for an
// answer on stdin.
const licencePrompt = "Accept? (y/N)"

// licenceAnswers is the stdin of an install that may accept licences: one
// "y" per prompt, with room for every licence a package can carry.
var licenceAnswers = strings.Repeat("y\n", 16)

// sdkInstall runs `sdkmanager --install pkg`, answering sdkmanager's
// licence prompts only when downloads.acceptLicenses allows it. Otherwise
// stdin is empty, so sdkmanager reads "no" (EOF) and skips the package;
// that is reported as ErrLicenseNotAccepted naming the command that
// accepts them, rather than as an install that silently did nothing.
func (d *Driver) sdkInstall(ctx context.Context, pkg string) (ports.Result, error) {
	args := []string{"--install", pkg}
	if d.sdkRoot != "" {
		args = append([]string{"--sdk_root=" + d.sdkRoot}, args...)
	}
	c := d.command(d.tools.SDKManager, args...)
	c.Stdin = strings.NewReader("")
	if d.acceptLicenses {
		c.Stdin = strings.NewReader(licenceAnswers)
	}
	res, err := d.runner.Run(ctx, c)
	if !d.acceptLicenses && bytes.Contains(res.Stdout, []byte(licencePrompt)) {
		return res, d.licenceError(pkg, res)
	}
	return res, err
}

// licenceError names the licences sdkmanager asked about and the command
// that accepts them.
func (d *Driver) licenceError(pkg string, res ports.Result) error {
	var names []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		// "License android-sdk-license:" (after progress noise on the
		// same line when not on a terminal).
		if i := strings.Index(line, "License "); i >= 0 && strings.HasSuffix(strings.TrimSpace(line), ":") {
			names = append(names, strings.TrimSuffix(strings.TrimSpace(line[i+len("License "):]), ":"))
		}
	}
	cmd := "sdkmanager --licenses"
	if d.sdkRoot != "" {
		cmd = "sdkmanager --sdk_root=" + d.sdkRoot + " --licenses"
	}
	lic := "an SDK licence"
	if len(names) > 0 {
		lic = "the licence " + strings.Join(names, ", ")
	}
	se := core.NewSpecError(ErrLicenseNotAccepted,
		fmt.Sprintf("installing %s needs %s, which is not accepted on this machine", pkg, lic),
		"package", pkg, "licenses", names, "command", cmd)
	se.Next = "run `" + cmd + "` and accept, or set downloads.acceptLicenses: true in the daemon config"
	return se
}
