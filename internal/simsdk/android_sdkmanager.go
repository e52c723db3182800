package simsdk

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// sdkmanager [--sdk_root=PATH] [--channel=N] ... one of:
//
//	--list_installed | --list | [--install] PACKAGE... | --uninstall PACKAGE...
//	--version | --licenses
//
// The tables and the progress lines follow the captures; "Warning: Failed
// to find package", the download progress and the download failure are
// modelled on the real tool's messages, not captured.
//
// Licenses count as accepted (a simulated SDK is set up, like a CI image)
// unless SIMLOCK_SIMSDK_ANDROID_LICENSES=unaccepted: then an install of a
// missing package prints the licence and "Accept? (y/N): " and reads the
// answer from stdin, as the real tool does; "y" accepts it for good (as
// `sdkmanager --licenses` answered "y" does), anything else or a closed
// stdin skips the package and fails.
// --sdk_root is accepted and ignored: the installed set is the simulated
// SDK's, kept in its home.
func (s *sdk) sdkmanager(ctx context.Context, args []string) int {
	action := ""
	var pkgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasVal := strings.Cut(a, "=")
		switch {
		case a == "--list" || a == "--list_installed" || a == "--version" || a == "--licenses" ||
			a == "--install" || a == "--uninstall" || a == "--update":
			if action != "" && action != a {
				return s.sdkUsage("Error: Only one of --list, --list_installed, --install, --uninstall, --update, --licenses and --version may be given.")
			}
			action = a
		case hasVal && slices.Contains([]string{"--sdk_root", "--channel", "--proxy", "--proxy_host", "--proxy_port", "--package_file"}, name):
		case a == "--verbose" || a == "--no_https" || a == "--include_obsolete" || a == "--newer":
		case a == "-h" || a == "--help":
			fmt.Fprint(s.stdout, sdkmanagerUsage)
			return 0
		case strings.HasPrefix(a, "-"):
			return s.sdkUsage("Error: Unknown argument " + a)
		default:
			pkgs = append(pkgs, a)
		}
	}
	if action == "" && len(pkgs) > 0 {
		action = "--install"
	}
	var err error
	switch action {
	case "--version":
		fmt.Fprintln(s.stdout, cmdlineToolsVersion)
	case "--licenses":
		err = s.sdkLicenses()
	case "--list_installed":
		err = s.sdkList(false)
	case "--list":
		err = s.sdkList(true)
	case "--install", "--update":
		if action == "--install" && len(pkgs) == 0 {
			return s.sdkUsage("Error: No packages specified for --install.")
		}
		err = s.sdkInstall(ctx, pkgs)
	case "--uninstall":
		err = s.sdkUninstall(pkgs)
	default:
		return s.sdkUsage("")
	}
	return s.androidReport("sdkmanager", err)
}

const sdkmanagerUsage = `Usage:
  sdkmanager [--uninstall] [<common args>] [--package_file=<file>] [<packages>...]
  sdkmanager --update [<common args>]
  sdkmanager --list [<common args>]
  sdkmanager --list_installed [<common args>]
  sdkmanager --licenses [<common args>]
  sdkmanager --version
(simlock simulated SDK)
`

func (s *sdk) sdkUsage(msg string) int {
	if msg != "" {
		fmt.Fprintln(s.stderr, msg)
	}
	fmt.Fprint(s.stderr, sdkmanagerUsage)
	return 1
}

// sdkLoadingLines is what precedes every listing when stdout is not a
// terminal (capture: list-full-windows-cmdline-tools-19-2026.txt, minus
// the byte-order mark PowerShell added).
func sdkLoadingLines() string {
	return pad80("Loading package information...") + repoLoadingLines() +
		progressLine(100, "Computing updates...") + "\n"
}

// renderTable lays out a package table as sdkmanager does: two leading
// spaces, every column padded to its widest cell, " | " between columns.
func renderTable(rows [][]string) string {
	if len(rows) == 0 {
		return ""
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("  ")
		for i, c := range r {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-len(c)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func installedRows(pkgs []sdkPackage) [][]string {
	rows := [][]string{{"Path", "Version", "Description", "Location"}, {"-------", "-------", "-------", "-------"}}
	for _, p := range pkgs {
		rows = append(rows, []string{p.Path, p.Version, p.Description, p.location()})
	}
	return rows
}

func availableRows(pkgs []sdkPackage) [][]string {
	rows := [][]string{{"Path", "Version", "Description"}, {"-------", "-------", "-------"}}
	for _, p := range pkgs {
		rows = append(rows, []string{p.Path, p.Version, p.Description})
	}
	return rows
}

// sdkList prints --list_installed, or with remote --list: the installed
// table then every package of the remote catalog (installed ones
// included, as the real tool lists them). No "Available Updates" section
// is printed: the installed versions are the catalog's.
func (s *sdk) sdkList(remote bool) error {
	installed, err := s.installedPackages()
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(sdkLoadingLines())
	b.WriteString("Installed packages:\n")
	b.WriteString(renderTable(installedRows(installed)))
	if remote {
		b.WriteString("\nAvailable Packages:\n")
		b.WriteString(renderTable(availableRows(androidPackages)))
		b.WriteString("\n")
	}
	_, err = io.WriteString(s.stdout, b.String())
	return err
}

// archiveName is the file a package download fetches, for the progress
// lines ("x86_64-35_r09.zip" for an image).
func archiveName(p sdkPackage) string {
	if p.isImage() {
		v := p.Version
		if len(v) == 1 {
			v = "0" + v
		}
		return fmt.Sprintf("%s-%d_r%s.zip", p.ABI, p.API, v)
	}
	return strings.NewReplacer(";", "-", ".", "_").Replace(p.Path) + ".zip"
}

// sdkInstall installs packages one after the other, taking the scaled
// download time for each one that is missing. install-fail breaks the
// download half way.
func (s *sdk) sdkInstall(ctx context.Context, paths []string) error {
	fmt.Fprint(s.stdout, pad80("Loading package information...")+repoLoadingLines())
	var want []sdkPackage
	for _, path := range paths {
		p, ok := findPackage(path)
		if !ok {
			return &toolError{text: fmt.Sprintf("Warning: Failed to find package '%s'\n", path), exit: 1}
		}
		want = append(want, p)
	}
	var missing []sdkPackage
	for _, p := range want {
		if ok, err := s.packageInstalled(p.Path); err != nil {
			return err
		} else if !ok {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		if err := s.askLicence(missing); err != nil {
			return err
		}
	}
	for _, p := range missing {
		_, failNow, err := s.fire(faultInstallFail)
		if err != nil {
			return err
		}
		step := s.scaled(androidDownloadTime) / downloadSteps
		for i := 0; i < downloadSteps; i++ {
			fmt.Fprint(s.stdout, progressLine(i*100/downloadSteps, "Downloading "+archiveName(p)+"..."))
			if failNow && i == downloadSteps/2 {
				return &toolError{
					text: fmt.Sprintf("Warning: An error occurred while preparing SDK package %s: Download failed. %s\n", p.Description, faultNote(faultInstallFail)),
					exit: 1,
				}
			}
			if err := sleepCtx(ctx, step); err != nil {
				return err
			}
		}
		fmt.Fprint(s.stdout, progressLine(100, "Unzipping... "+unzipName(p)))
		if _, noop, err := s.fire(faultInstallNoop); err != nil {
			return err
		} else if noop {
			continue
		}
		err = updateHomeState(s.home, func(st *homeState) (bool, error) {
			st.AndroidUninstalled = slices.DeleteFunc(st.AndroidUninstalled, func(x string) bool { return x == p.Path })
			if !p.preinstalled() && !slices.Contains(st.AndroidInstalled, p.Path) {
				st.AndroidInstalled = append(st.AndroidInstalled, p.Path)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func unzipName(p sdkPackage) string {
	if p.isImage() {
		return p.ABI + "/system.img"
	}
	return p.location()
}

// sdkUninstall removes installed packages; one that is not installed is
// reported like an unknown one.
func (s *sdk) sdkUninstall(paths []string) error {
	fmt.Fprint(s.stdout, pad80("Loading package information...")+repoLoadingLines())
	for _, path := range paths {
		ok, err := s.packageInstalled(path)
		if err != nil {
			return err
		}
		if !ok {
			return &toolError{text: fmt.Sprintf("Warning: Failed to find package '%s'\n", path), exit: 1}
		}
		err = updateHomeState(s.home, func(st *homeState) (bool, error) {
			st.AndroidInstalled = slices.DeleteFunc(st.AndroidInstalled, func(x string) bool { return x == path })
			if p, _ := findPackage(path); p.preinstalled() && !slices.Contains(st.AndroidUninstalled, path) {
				st.AndroidUninstalled = append(st.AndroidUninstalled, path)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		fmt.Fprint(s.stdout, progressLine(100, "Uninstalling "+path))
	}
	return nil
}

// EnvAndroidLicenses set to "unaccepted" makes the simulated SDK's licence
// unaccepted until an install or `--licenses` is answered "y".
const EnvAndroidLicenses = "SIMLOCK_SIMSDK_ANDROID_LICENSES"

const sdkLicenceName = "android-sdk-license"

// sdkLicenceText stands in for the licence agreement (the simulated SDK
// ships none).
const sdkLicenceText = `Terms and Conditions

This is the licence of the simlock simulated Android SDK. It stands in
for the Android Software Development Kit License Agreement, which a real
SDK asks you to accept here.`

func (s *sdk) licenceAcceptedPath() string {
	return filepath.Join(s.home, "licenses", sdkLicenceName)
}

// licencePending reports whether the licence still needs an answer.
func (s *sdk) licencePending() bool {
	if s.env(EnvAndroidLicenses) != "unaccepted" {
		return false
	}
	_, err := os.Stat(s.licenceAcceptedPath())
	return err != nil
}

// promptLicence prints the licence and the prompt and reads one answer;
// true means it was accepted (and is recorded).
func (s *sdk) promptLicence() (bool, error) {
	fmt.Fprintf(s.stdout, "License %s:\n---------------------------------------\n%s\n---------------------------------------\nAccept? (y/N): ", sdkLicenceName, sdkLicenceText)
	var answer string
	if s.stdin != nil {
		answer, _ = bufio.NewReader(s.stdin).ReadString('\n')
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(s.licenceAcceptedPath()), dirMode); err != nil {
		return false, err
	}
	return true, os.WriteFile(s.licenceAcceptedPath(), []byte("\nsimlock-simulated-licence\n"), 0o644)
}

// askLicence asks about the licence before installing pkgs, when it is
// not yet accepted. Declined, the packages are skipped and the install
// fails (exit status modelled, not captured).
func (s *sdk) askLicence(pkgs []sdkPackage) error {
	if !s.licencePending() {
		return nil
	}
	ok, err := s.promptLicence()
	if err != nil || ok {
		return err
	}
	var b strings.Builder
	b.WriteString("Skipping following packages as the license is not accepted:\n")
	for _, p := range pkgs {
		b.WriteString(p.Description + "\n")
	}
	b.WriteString("The following packages can not be installed since their licenses or those of the packages they depend on were not accepted:\n")
	for _, p := range pkgs {
		b.WriteString("  " + p.Path + "\n")
	}
	fmt.Fprint(s.stdout, b.String())
	return &toolError{exit: 1}
}

// sdkLicenses is `sdkmanager --licenses`: it asks about an unaccepted
// licence, or says all are accepted.
func (s *sdk) sdkLicenses() error {
	if s.licencePending() {
		fmt.Fprintln(s.stdout, "1 of 1 SDK package license not accepted.")
		ok, err := s.promptLicence()
		if err != nil {
			return err
		}
		fmt.Fprintln(s.stdout)
		if !ok {
			return nil
		}
	}
	fmt.Fprintln(s.stdout, "All SDK package licenses accepted.")
	return nil
}
