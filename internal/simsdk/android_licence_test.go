package simsdk

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// With the licence unaccepted, `sdkmanager --install` of a missing package
// prints the licence and "Accept? (y/N): " and reads stdin: a closed stdin
// skips the package and fails; `sdkmanager --licenses` answered "y"
// accepts it for good, after which the install asks nothing.
func TestSDKManagerPromptsForAnUnacceptedLicence(t *testing.T) {
	h := newHarness(t, EnvAndroidLicenses, "unaccepted")
	const pkg = "system-images;android-34;google_apis;x86_64"
	run := func(stdin string, args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), "sdkmanager", args, strings.NewReader(stdin), &out, &errb, func(k string) string { return h.env[k] })
		return out.String() + errb.String(), code
	}
	out, code := run("", "--install", pkg)
	if code == 0 || !strings.Contains(out, "License android-sdk-license:\n---------------------------------------\n") ||
		!strings.Contains(out, "---------------------------------------\nAccept? (y/N): Skipping following packages as the license is not accepted:\n") ||
		!strings.Contains(out, "  "+pkg+"\n") {
		t.Fatalf("declined install: exit %d\n%s", code, out)
	}
	if out, _ := run("", "--list_installed"); strings.Contains(out, pkg) {
		t.Fatal("declined package was installed")
	}
	if out, code := run("y\n", "--licenses"); code != 0 || !strings.Contains(out, "All SDK package licenses accepted.") {
		t.Fatalf("--licenses: exit %d\n%s", code, out)
	}
	out, code = run("", "--install", pkg)
	if code != 0 || strings.Contains(out, "Accept?") {
		t.Fatalf("install after acceptance: exit %d\n%s", code, out)
	}
}
