package simsdk

import (
	"strings"
	"testing"
	"time"
)

// captureSection returns the lines of a table section: from the line after
// title to the first blank line (or the end).
func captureSection(text, title string) string {
	_, rest, ok := strings.Cut(text, title+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n\n"); i >= 0 {
		rest = rest[:i+1]
	}
	return rest
}

// rowsOf splits a captured table back into cells.
func rowsOf(table string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		var row []string
		for _, c := range strings.Split(strings.TrimPrefix(l, "  "), " | ") {
			row = append(row, strings.TrimRight(c, " "))
		}
		rows = append(rows, row)
	}
	return rows
}

func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}

func TestSDKManagerTableLayoutMatchesCaptures(t *testing.T) {
	full := strings.TrimPrefix(readTestdata(t, "android/sdkmanager/list-full-windows-cmdline-tools-19-2026.txt"), "\ufeff")
	// The file capture keeps every column padded, the last one included.
	for _, title := range []string{"Installed packages:", "Available Packages:", "Available Updates:"} {
		table := captureSection(full, title)
		if table == "" {
			t.Fatalf("no %s section in the capture", title)
		}
		if got := renderTable(rowsOf(table)); got != table {
			t.Errorf("%s\n%s\nwant\n%s", title, got, table)
		}
	}
	// The Linux capture went through a markdown page, which dropped the
	// trailing spaces; the layout is otherwise the same.
	linux := readTestdata(t, "android/sdkmanager/list-installed-linux-2026.txt")
	table := captureSection(linux, "Installed packages:")
	if got := trimLines(renderTable(rowsOf(table))); got != table {
		t.Errorf("linux list_installed\n%s\nwant\n%s", got, table)
	}
	// The progress lines before the tables, as in the capture.
	lines := strings.SplitAfter(full, "\n")
	if got := sdkLoadingLines(); !strings.HasPrefix(got, strings.Join(lines[:4], "")) ||
		!strings.HasSuffix(got, lines[46]+lines[47]) {
		t.Errorf("progress lines:\n%s\ncapture:\n%s%s", got, strings.Join(lines[:4], ""), lines[46]+lines[47])
	}
}

func TestSDKManagerListsWhatIsInstalled(t *testing.T) {
	a := newAndroid(t)
	out := a.ok("sdkmanager", "--list_installed")
	installed := captureSection(out, "Installed packages:")
	for _, want := range []string{hostImage(35, "google_apis"), hostImage(35, "google_apis_playstore"),
		hostImage(36, "google_apis"), hostImage(36, "google_apis_playstore"), "platform-tools", "emulator   "} {
		if !strings.Contains(installed, "  "+want) {
			t.Errorf("--list_installed lacks %s:\n%s", want, installed)
		}
	}
	if strings.Contains(installed, "android-34") || strings.Contains(out, "Available Packages:") {
		t.Errorf("--list_installed lists too much:\n%s", out)
	}
	out = a.ok("sdkmanager", "--list", "--sdk_root=/opt/android-sdk")
	avail := captureSection(out, "Available Packages:")
	for _, want := range []string{"system-images;android-34;google_apis;x86_64", "system-images;android-34;google_apis_playstore;arm64-v8a",
		"system-images;android-36;google_apis_ps16k;x86_64", hostImage(35, "google_apis")} {
		if !strings.Contains(avail, "  "+want+" ") {
			t.Errorf("--list lacks %s", want)
		}
	}
	if a.ok("sdkmanager", "--version") != "19.0\n" {
		t.Error("--version")
	}
	if r := a.run("sdkmanager", "--frobnicate"); r.code != 1 || !strings.HasPrefix(r.stderr, "Error: Unknown argument --frobnicate") {
		t.Errorf("bad flag: %+v", r)
	}
}

func TestSDKManagerInstallAndUninstall(t *testing.T) {
	a := newAndroid(t)
	pkg := "system-images;android-34;google_apis;" + hostABI()
	out := a.ok("sdkmanager", "--install", pkg)
	if !strings.Contains(out, "] 0% Downloading "+hostABI()+"-34_r14.zip...") ||
		!strings.HasSuffix(out, progressLine(100, "Unzipping... "+hostABI()+"/system.img")) {
		t.Errorf("install progress:\n%s", out)
	}
	if !strings.Contains(a.ok("sdkmanager", "--list_installed"), "  "+pkg+" ") {
		t.Error("installed package not listed")
	}
	// A second install has nothing to download.
	if out := a.ok("sdkmanager", pkg); strings.Contains(out, "Downloading") {
		t.Errorf("reinstall downloaded again:\n%s", out)
	}
	if r := a.run("sdkmanager", "--install", "system-images;android-99;google_apis;x86_64"); r.code != 1 ||
		r.stderr != "Warning: Failed to find package 'system-images;android-99;google_apis;x86_64'\n" {
		t.Errorf("unknown package: %+v", r)
	}
	a.ok("sdkmanager", "--uninstall", pkg)
	if strings.Contains(a.ok("sdkmanager", "--list_installed"), pkg) {
		t.Error("uninstalled package still listed")
	}
	// install-fail breaks the download half way, once.
	a.env[EnvFaults] = "install-fail@1"
	r := a.run("sdkmanager", "--install", pkg)
	if r.code != 1 || !strings.Contains(r.stderr, "Download failed. (simlock simulated fault install-fail)") ||
		!strings.Contains(r.stdout, "] 50% Downloading") || strings.Contains(r.stdout, "Unzipping") {
		t.Errorf("install-fail: %+v", r)
	}
	a.ok("sdkmanager", "--install", pkg)
}

func TestSDKManagerInstallTakesTheScaledDownloadTime(t *testing.T) {
	a := newAndroid(t, EnvSpeed, "0.002") // 60 s * 0.002 = 120 ms
	start := time.Now()
	a.ok("sdkmanager", "--install", "platforms;android-34")
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("install took %v, want about 120ms", d)
	}
}
