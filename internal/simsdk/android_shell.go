package simsdk

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// `adb shell` runs a small subset of the device's /system/bin/sh: quoting,
// ; && || and | between commands, > >> 2> 2>&1 < redirections, and the
// commands below. The stages of a pipeline run at once, joined by pipes,
// each in a subshell (an exit in one ends only that stage); a stage that
// writes to a pipe whose reader has finished ends as if by SIGPIPE, which
// is how `yes | head -c N` terminates. /data maps to the emulator's data partition and /sdcard
// to /data/media/0 on it; the rest of the file system is read-only and
// empty. Like adb with shell_v2, stdout and stderr stay apart, output uses
// LF, and the exit status of the last command is adb's.
//
//	echo [-n] ARGS    cat [FILE...]   rm [-rf] PATH...   mkdir [-p] DIR...
//	touch FILE...     ls [-a] [PATH]  grep [-iv] PATTERN  true  false  exit [N]
//	getprop [KEY]     setprop KEY VALUE   id  whoami  sleep SECONDS  sh -c CMD
//	yes [STRING...]   head [-n N] [-c N] [-N] [FILE...]
//	pm list packages [-3|-s|-d|-e|-u] [--user N] [FILTER]   pm path PKG   pm uninstall PKG   pm clear PKG
//	pm disable-user|enable|default-state [--user N] PKG
//	pm list users  pm grant|revoke  wm size|density  find  dumpsys account  (android_keepbooted.go)
//	settings  cmd role|activity  bmgr  dumpsys package PKG  (android_settings.go)
//	dumpsys window [policy|displays]  wm dismiss-keyguard  (android_window.go)
//	cat /proc/sys/kernel/random/boot_id, /proc/meminfo
//	input ...         (checked; only the screen keys have an effect)
//
// Error texts are those of Android's toybox and mksh ("cat: F: No such file
// or directory", "/system/bin/sh: X: inaccessible or not found"), not
// captured.

func (s *sdk) adbShell(ctx context.Context, r *emuRun, args []string) int {
	// Options of `adb shell` itself come before the command.
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "--" { // the end of adb's own options
			i++
			break
		}
		switch args[i] {
		case "-e":
			i++
		case "-n", "-T", "-t", "-tt", "-x":
		default:
			fmt.Fprintf(s.stderr, "adb: unsupported shell option %s\n", args[i])
			return 1
		}
		i++
	}
	sh := &devShell{s: s, ctx: ctx, run: r}
	if i >= len(args) {
		// No command and no terminal: the device shell reads commands
		// from stdin, one per line.
		code := 0
		sc := bufio.NewScanner(s.stdin)
		for sc.Scan() && !sh.exited {
			code = sh.runLine(sc.Text(), s.stdout, s.stderr, nil)
		}
		return code
	}
	// adb joins the arguments with spaces; the device shell parses them.
	return sh.runLine(strings.Join(args[i:], " "), s.stdout, s.stderr, nil)
}

// exitSIGPIPE is the status of a command killed by SIGPIPE (128+13).
const exitSIGPIPE = 141

// errBrokenPipe is what a stage writing into a finished reader gets.
var errBrokenPipe = errors.New("broken pipe")

type devShell struct {
	s      *sdk
	ctx    context.Context
	run    *emuRun
	exited bool
}

// token is a shell word or operator.
type token struct {
	text string
	op   bool
}

// lexShell splits a command line into words and operators, applying the
// quoting rules of sh: '...' literal, "..." with \ escapes, \ outside
// quotes.
func lexShell(line string) ([]token, error) {
	var toks []token
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			toks = append(toks, token{text: cur.String()})
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("syntax error: unterminated quoted string")
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, fmt.Errorf("syntax error: unterminated quoted string")
			}
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == '#' && !inWord:
			i = len(line)
		case c == ';' || c == '|' || c == '&' || c == '>' || c == '<':
			op := string(c)
			if i+1 < len(line) && ((c == '&' && line[i+1] == '&') || (c == '|' && line[i+1] == '|') || (c == '>' && line[i+1] == '>')) {
				op += string(line[i+1])
				i++
			}
			if (op == ">" || op == ">>") && inWord && cur.String() == "2" {
				// "2>" redirects stderr; "2>&1" joins it to stdout.
				cur.Reset()
				inWord = false
				op = "2" + op
				if strings.HasPrefix(line[i+1:], "&1") {
					op += "&1"
					i += 2
				}
			} else {
				flush()
			}
			toks = append(toks, token{text: op, op: true})
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks, nil
}

// shellCmd is one simple command with its redirections.
type shellCmd struct {
	args      []string
	out       string // device path for > or >>, "" for none
	outAppend bool
	errOut    string // device path for 2> or 2>>, "" for none
	errAppend bool
	errToOut  bool
	in        string // device path for <
}

// runLine runs a command list; stdin feeds the first command when set.
func (sh *devShell) runLine(line string, stdout, stderr io.Writer, stdin io.Reader) int {
	toks, err := lexShell(line)
	if err != nil {
		fmt.Fprintf(stderr, "/system/bin/sh: %v\n", err)
		return 2
	}
	status := 0
	skip := false // set by && / || when the next pipeline must not run
	var pipeline [][]token
	var cmd []token
	run := func() {
		pipeline = append(pipeline, cmd)
		cmd = nil
		if !skip && !sh.exited && !(len(pipeline) == 1 && len(pipeline[0]) == 0) {
			status = sh.runPipeline(pipeline, stdout, stderr, stdin)
		}
		pipeline = nil
	}
	for _, t := range toks {
		if !t.op || strings.Contains(t.text, ">") || t.text == "<" {
			cmd = append(cmd, t)
			continue
		}
		switch t.text {
		case "|":
			pipeline = append(pipeline, cmd)
			cmd = nil
		case ";", "&":
			run()
			skip = false
		case "&&":
			run()
			skip = status != 0
		case "||":
			run()
			skip = status == 0
		}
	}
	run()
	return status
}

func (sh *devShell) runPipeline(cmds [][]token, stdout, stderr io.Writer, stdin io.Reader) int {
	parsed := make([]shellCmd, len(cmds))
	for i, toks := range cmds {
		c, err := parseShellCmd(toks)
		if err != nil {
			fmt.Fprintf(stderr, "/system/bin/sh: %v\n", err)
			return 2
		}
		parsed[i] = c
	}
	if len(parsed) == 1 {
		return sh.runCmd(parsed[0], stdout, stderr, stdin)
	}
	// Stages run at once; stderr is shared, so writes to it are serialized.
	errw := &lockedWriter{w: stderr}
	status := make([]int, len(parsed))
	var wg sync.WaitGroup
	in := stdin
	for i, c := range parsed {
		out, next := stdout, (*io.PipeReader)(nil)
		var pw *io.PipeWriter
		if i < len(parsed)-1 {
			next, pw = io.Pipe()
			out = pw
		}
		wg.Add(1)
		go func(i int, c shellCmd, in io.Reader, out io.Writer, pw *io.PipeWriter) {
			defer wg.Done()
			sub := &devShell{s: sh.s, ctx: sh.ctx, run: sh.run}
			status[i] = sub.runCmd(c, out, errw, in)
			if pw != nil {
				pw.Close() // the next stage reads EOF
			}
			if pr, ok := in.(*io.PipeReader); ok {
				pr.CloseWithError(errBrokenPipe) // the previous stage's writes now fail
			}
		}(i, c, in, out, pw)
		if next != nil {
			in = next
		}
	}
	wg.Wait()
	return status[len(status)-1]
}

// lockedWriter serializes writes from concurrent pipeline stages.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func parseShellCmd(toks []token) (shellCmd, error) {
	var c shellCmd
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !t.op {
			c.args = append(c.args, t.text)
			continue
		}
		if t.text == "2>&1" {
			c.errToOut = true
			continue
		}
		if i+1 >= len(toks) || toks[i+1].op {
			return c, fmt.Errorf("syntax error: redirection without a file")
		}
		i++
		target := toks[i].text
		switch t.text {
		case ">", ">>":
			c.out, c.outAppend = target, t.text == ">>"
		case "2>", "2>>":
			c.errOut, c.errAppend = target, t.text == "2>>"
		case "<":
			c.in = target
		}
	}
	return c, nil
}

// devicePath maps a device path to the host file backing it; ok is false
// for paths outside the writable data partition.
func devicePath(r *emuRun, p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // adb shell starts in /
	}
	p = path.Clean(p)
	for _, prefix := range []string{"/sdcard", "/storage/emulated/0", "/storage/self/primary"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			p = "/data/media/0" + strings.TrimPrefix(p, prefix)
		}
	}
	if p == "/data" {
		return r.DataDir, true
	}
	if rest, ok := strings.CutPrefix(p, "/data/"); ok {
		return filepath.Join(r.DataDir, filepath.FromSlash(rest)), true
	}
	return "", false
}

// runCmd runs one simple command with its redirections.
func (sh *devShell) runCmd(c shellCmd, stdout, stderr io.Writer, stdin io.Reader) int {
	if len(c.args) == 0 {
		return 0
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	open := func(target string, appendTo bool) (io.Writer, bool) {
		if target == "/dev/null" {
			return io.Discard, true
		}
		host, ok := devicePath(sh.run, target)
		if !ok {
			fmt.Fprintf(stderr, "/system/bin/sh: can't create %s: Read-only file system\n", target)
			return nil, false
		}
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if appendTo {
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
		}
		f, err := os.OpenFile(host, flags, fileMode)
		if err != nil {
			fmt.Fprintf(stderr, "/system/bin/sh: can't create %s: No such file or directory\n", target)
			return nil, false
		}
		files = append(files, f)
		return f, true
	}
	if c.errOut != "" {
		w, ok := open(c.errOut, c.errAppend)
		if !ok {
			return 1
		}
		stderr = w
	}
	if c.out != "" {
		w, ok := open(c.out, c.outAppend)
		if !ok {
			return 1
		}
		stdout = w
	}
	if c.errToOut {
		stderr = stdout
	}
	if c.in != "" {
		host, _ := devicePath(sh.run, c.in)
		f, err := os.Open(host)
		if host == "" || err != nil {
			fmt.Fprintf(stderr, "/system/bin/sh: can't open '%s': No such file or directory\n", c.in)
			return 1
		}
		files = append(files, f)
		stdin = f
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	return sh.builtin(c.args, stdout, stderr, stdin)
}

func (sh *devShell) builtin(args []string, stdout, stderr io.Writer, stdin io.Reader) int {
	name, rest := args[0], args[1:]
	switch name {
	case "input":
		return sh.input(rest, stdout, stderr)
	case "true", ":":
		return 0
	case "false":
		return 1
	case "exit":
		sh.exited = true
		if len(rest) > 0 {
			n, _ := strconv.Atoi(rest[0])
			return n & 0xff
		}
		return 0
	case "echo":
		nl := "\n"
		if len(rest) > 0 && rest[0] == "-n" {
			nl, rest = "", rest[1:]
		}
		fmt.Fprint(stdout, strings.Join(rest, " ")+nl)
		return 0
	case "cat":
		return sh.cat(rest, stdout, stderr, stdin)
	case "grep":
		return grep(rest, stdout, stderr, stdin)
	case "yes":
		return sh.yes(rest, stdout)
	case "head":
		return sh.head(rest, stdout, stderr, stdin)
	case "rm":
		return sh.rm(rest, stderr)
	case "mkdir":
		return sh.mkdir(rest, stderr)
	case "touch":
		return sh.touch(rest, stderr)
	case "ls":
		return sh.ls(rest, stdout, stderr)
	case "find":
		return sh.find(rest, stdout, stderr) // android_keepbooted.go
	case "getprop":
		return sh.getprop(rest, stdout)
	case "setprop":
		return sh.setprop(rest, stderr)
	case "id":
		fmt.Fprintln(stdout, "uid=2000(shell) gid=2000(shell) groups=2000(shell) context=u:r:shell:s0")
		return 0
	case "whoami":
		fmt.Fprintln(stdout, "shell")
		return 0
	case "sleep":
		if len(rest) == 1 {
			if f, err := strconv.ParseFloat(rest[0], 64); err == nil && f >= 0 {
				if sleepCtx(sh.ctx, time.Duration(f*float64(time.Second))) != nil {
					return 130
				}
				return 0
			}
		}
		fmt.Fprintln(stderr, "sleep: usage: sleep SECONDS")
		return 1
	case "sh":
		if len(rest) >= 2 && rest[0] == "-c" {
			sub := &devShell{s: sh.s, ctx: sh.ctx, run: sh.run}
			return sub.runLine(rest[1], stdout, stderr, stdin)
		}
		fmt.Fprintln(stderr, "sh: only 'sh -c COMMAND' is simulated")
		return 2
	case "pm":
		return sh.pm(rest, stdout, stderr, stdin)
	case "bmgr":
		return sh.bmgr(rest, stdout, stderr)
	case "settings":
		return sh.settings(rest, stdout, stderr)
	case "cmd":
		if code, ok := sh.cmdApps(rest, stdout, stderr, stdin); ok {
			return code
		}
		return sh.cmd(rest, stdout, stderr)
	case "pidof":
		return sh.pidof(rest, stdout)
	case "dumpsys":
		return sh.dumpsys(rest, stdout, stderr)
	case "wm":
		return sh.wm(rest, stdout, stderr)
	case "am":
		return sh.am(rest, stdout, stderr)
	case "screencap":
		return sh.screencap(rest, stdout, stderr)
	case "logcat", "svc", "screenrecord", "monkey", "reboot":
		return notSimulated(name, stderr)
	}
	// mksh's answer for a command that does not exist.
	fmt.Fprintf(stderr, "/system/bin/sh: %s: inaccessible or not found\n", name)
	return 127
}

func (sh *devShell) cat(files []string, stdout, stderr io.Writer, stdin io.Reader) int {
	if len(files) == 0 {
		if _, err := io.Copy(stdout, stdin); errors.Is(err, errBrokenPipe) {
			return exitSIGPIPE
		}
		return 0
	}
	status := 0
	for _, f := range files {
		if text, ok := sh.procFile(f); ok {
			_, _ = io.WriteString(stdout, text)
			continue
		}
		host, _ := devicePath(sh.run, f)
		b, err := os.ReadFile(host)
		if host == "" || err != nil {
			reason := "No such file or directory"
			if fi, serr := os.Stat(host); host != "" && serr == nil && fi.IsDir() {
				reason = "Is a directory"
			}
			fmt.Fprintf(stderr, "cat: %s: %s\n", f, reason)
			status = 1
			continue
		}
		_, _ = stdout.Write(b)
	}
	return status
}

func grep(args []string, stdout, stderr io.Writer, stdin io.Reader) int {
	ignoreCase, invert := false, false
	pattern, havePattern := "", false
	for _, a := range args {
		switch {
		case a == "-i":
			ignoreCase = true
		case a == "-v":
			invert = true
		case a == "-E" || a == "-e":
		case !havePattern:
			pattern, havePattern = a, true
		}
	}
	if ignoreCase {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		fmt.Fprintf(stderr, "grep: bad regex '%s'\n", pattern)
		return 2
	}
	found := false
	br := bufio.NewReader(stdin)
	for {
		l, err := br.ReadString('\n')
		if l != "" && re.MatchString(strings.TrimSuffix(l, "\n")) != invert {
			found = true
			if _, werr := io.WriteString(stdout, l); werr != nil {
				return exitSIGPIPE
			}
		}
		if err != nil {
			break
		}
	}
	if !found {
		return 1
	}
	return 0
}

func (sh *devShell) rm(args []string, stderr io.Writer) int {
	force, recursive := false, false
	status := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			force = force || strings.Contains(a, "f")
			recursive = recursive || strings.ContainsAny(a, "rR")
			continue
		}
		host, ok := devicePath(sh.run, a)
		if !ok {
			fmt.Fprintf(stderr, "rm: %s: Read-only file system\n", a)
			status = 1
			continue
		}
		fi, err := os.Lstat(host) // a link is removed itself, never followed
		switch {
		case err != nil:
			if !force {
				fmt.Fprintf(stderr, "rm: %s: No such file or directory\n", a)
				status = 1
			}
		case fi.IsDir() && !recursive:
			fmt.Fprintf(stderr, "rm: %s: Is a directory\n", a)
			status = 1
		default:
			if err := sh.s.withDataLock(sh.run.AVDDir, func() error { return os.RemoveAll(host) }); err != nil {
				fmt.Fprintf(stderr, "rm: %s: %v\n", a, err)
				status = 1
			}
		}
	}
	return status
}

func (sh *devShell) mkdir(args []string, stderr io.Writer) int {
	parents := false
	status := 0
	for _, a := range args {
		if a == "-p" {
			parents = true
			continue
		}
		host, ok := devicePath(sh.run, a)
		if !ok {
			fmt.Fprintf(stderr, "mkdir: '%s': Read-only file system\n", a)
			status = 1
			continue
		}
		var err error
		if parents {
			err = os.MkdirAll(host, dirMode)
		} else {
			err = os.Mkdir(host, dirMode)
		}
		if err != nil {
			reason := "No such file or directory"
			if os.IsExist(err) {
				reason = "File exists"
			}
			fmt.Fprintf(stderr, "mkdir: '%s': %s\n", a, reason)
			status = 1
		}
	}
	return status
}

func (sh *devShell) touch(args []string, stderr io.Writer) int {
	status := 0
	for _, a := range args {
		host, ok := devicePath(sh.run, a)
		if !ok {
			fmt.Fprintf(stderr, "touch: '%s': Read-only file system\n", a)
			status = 1
			continue
		}
		f, err := os.OpenFile(host, os.O_WRONLY|os.O_CREATE, fileMode)
		if err != nil {
			fmt.Fprintf(stderr, "touch: '%s': No such file or directory\n", a)
			status = 1
			continue
		}
		f.Close()
	}
	return status
}

func (sh *devShell) ls(args []string, stdout, stderr io.Writer) int {
	all := false
	var paths []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			all = all || strings.Contains(a, "a")
			continue
		}
		paths = append(paths, a)
	}
	if len(paths) == 0 {
		paths = []string{"/data/local/tmp"}
	}
	status := 0
	for _, p := range paths {
		host, _ := devicePath(sh.run, p)
		fi, err := os.Stat(host)
		if host == "" || err != nil {
			fmt.Fprintf(stderr, "ls: %s: No such file or directory\n", p)
			status = 1
			continue
		}
		if !fi.IsDir() {
			fmt.Fprintln(stdout, p)
			continue
		}
		ents, _ := os.ReadDir(host)
		var names []string
		for _, e := range ents {
			if all || !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintln(stdout, n)
		}
	}
	return status
}

func (sh *devShell) getprop(args []string, stdout io.Writer) int {
	// Re-read the record: a snapshot load or setprop may have changed it.
	cur := liveRun(sh.s.runDir(sh.run.ConsolePort))
	if cur == nil {
		cur = sh.run
	}
	props := deviceProps(cur, sh.s.now())
	if len(args) > 0 {
		fmt.Fprintln(stdout, props.get(args[0]))
		return 0
	}
	_, _ = io.WriteString(stdout, props.format())
	return 0
}

func (sh *devShell) setprop(args []string, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: setprop NAME VALUE")
		return 1
	}
	if strings.HasPrefix(args[0], "ro.") {
		fmt.Fprintf(stderr, "Failed to set property '%s' to '%s'.\nSee dmesg for error reason.\n", args[0], args[1])
		return 1
	}
	err := sh.s.updateRun(sh.run.ConsolePort, func(r *emuRun) error {
		if r.Props == nil {
			r.Props = map[string]string{}
		}
		r.Props[args[0]] = args[1]
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "setprop: %v\n", err)
		return 1
	}
	return 0
}

// systemPackages are the packages every simulated image carries: the
// core ones, and the optional apps of the image's flavour (AOSP or Google
// APIs) that resource tuning may disable.
func systemPackages(tag string) []string {
	pkgs := []string{"android", "com.android.phone", "com.android.settings", "com.android.shell", "com.android.systemui",
		"com.android.providers.contacts", "com.android.providers.calendar", "com.android.providers.media",
		"com.android.documentsui", "com.android.printspooler", "com.android.bips"}
	if strings.HasPrefix(tag, "google_apis") {
		pkgs = append(pkgs, "com.google.android.gms", "com.google.android.gsf",
			"com.google.android.apps.nexuslauncher", "com.google.android.inputmethod.latin",
			"com.google.android.dialer", "com.google.android.apps.messaging", "com.android.chrome",
			"com.google.android.gm", "com.google.android.calendar", "com.google.android.contacts",
			"com.google.android.apps.maps", "com.google.android.youtube", "com.google.android.apps.youtube.music",
			"com.google.android.apps.photos", "com.google.android.printservice.recommendation",
			"com.google.android.marvin.talkback", "com.google.android.tts",
			"com.google.android.googlequicksearchbox", "com.google.android.apps.wellbeing",
			"com.google.android.apps.wallpaper", "com.android.wallpaper.livepicker",
			// Mainline modules' APKs, Google-signed on these images.
			"com.google.android.healthconnect.controller", "com.google.android.adservices.api",
			"com.google.android.ondevicepersonalization.services")
	} else {
		pkgs = append(pkgs, "com.android.launcher3", "com.android.inputmethod.latin", "com.android.dialer",
			"com.android.messaging", "org.chromium.webview_shell", "com.android.email", "com.android.calendar",
			"com.android.contacts", "com.android.music", "com.android.gallery3d",
			"com.android.wallpaper", "com.android.wallpaper.livepicker",
			"com.android.healthconnect.controller", "com.android.adservices.api",
			"com.android.ondevicepersonalization.services")
	}
	if strings.HasPrefix(tag, "google_apis_playstore") {
		pkgs = append(pkgs, "com.android.vending")
	}
	return pkgs
}

func (sh *devShell) pm(args []string, stdout, stderr io.Writer, stdin io.Reader) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: pm list packages|features | pm path PKG | pm install PATH | pm uninstall PKG | pm clear PKG")
		return 1
	}
	apps := installedApps(sh.run.DataDir)
	system := systemPackages(sh.run.Tag)
	switch args[0] {
	case "list":
		if len(args) >= 2 && args[1] == "users" {
			return sh.pmListUsers(args[2:], stdout, stderr)
		}
		if len(args) >= 2 && args[1] == "features" {
			for _, f := range deviceFeatures {
				fmt.Fprintln(stdout, "feature:"+f)
			}
			return 0
		}
		if len(args) < 2 || args[1] != "packages" {
			fmt.Fprintln(stderr, "pm list: only 'pm list packages' and 'pm list features' are simulated")
			return 1
		}
		third, sys, paths, uids, versions, filter := false, false, false, false, false, ""
		onlyDisabled, onlyEnabled, user := false, false, "0"
		for i := 2; i < len(args); i++ {
			switch a := args[i]; {
			case a == "-3":
				third = true
			case a == "-s":
				sys = true
			case a == "-d":
				onlyDisabled = true
			case a == "-e":
				onlyEnabled = true
			case a == "-u":
				// Uninstalled packages too: none are kept after uninstall here.
			case a == "--user":
				if i+1 >= len(args) {
					fmt.Fprintln(stderr, "Error: no USER_ID specified")
					return 1
				}
				i++
				if user = args[i]; user == "current" {
					user = "0"
				}
				if user != "0" {
					fmt.Fprintf(stderr, "Error: user %s does not exist\n", user)
					return 1
				}
			case a == "-f":
				paths = true
			case a == "-U":
				uids = true
			case a == "--show-versioncode":
				versions = true
			case a == "-i" || a == "-l" || a == "-a" || a == "--apex-only":
			case a == "--uid":
				i++
			case strings.HasPrefix(a, "-"):
				fmt.Fprintln(stderr, "Error: Unknown option: "+a)
				return 255
			default:
				filter = a
			}
		}
		var names []string
		if !third {
			names = append(names, system...)
		}
		if !sys {
			names = append(names, apps...)
		}
		sort.Strings(names)
		st := readDevState(sh.run)
		for _, n := range names {
			state := st.packageState(user, n)
			disabled := state == "disabled" || state == "disabled-user"
			if (onlyDisabled && !disabled) || (onlyEnabled && disabled) || !strings.Contains(n, filter) {
				continue
			}
			line := "package:"
			if paths {
				line += sh.apkPath(n, slices.Contains(apps, n)) + "="
			}
			line += n
			if versions {
				line += " versionCode:1"
			}
			if uids {
				line += fmt.Sprintf(" uid:%d", 10000+appPID(n)%9000)
			}
			fmt.Fprintln(stdout, line)
		}
		return 0
	case "grant", "revoke":
		return sh.pmGrant(args[0], args[1:], stdout, stderr)
	case "disable-user", "enable", "default-state":
		return sh.setPackageState(args[0], args[1:], append(append([]string(nil), system...), apps...), stdout, stderr)
	case "path":
		var pkgs []string
		for i := 1; i < len(args); i++ {
			if args[i] == "--user" {
				i++
				continue
			}
			pkgs = append(pkgs, args[i])
		}
		if len(pkgs) == 1 && (slices.Contains(apps, pkgs[0]) || slices.Contains(system, pkgs[0])) {
			fmt.Fprintf(stdout, "package:%s\n", sh.apkPath(pkgs[0], slices.Contains(apps, pkgs[0])))
			return 0
		}
		return 1
	case "install", "install-streamed":
		return sh.pmInstall(args[1:], stdout, stderr, stdin)
	case "uninstall":
		var pkgs []string
		for i := 1; i < len(args); i++ {
			switch {
			case args[i] == "--user" || args[i] == "--versionCode":
				i++
			case args[i] == "-k":
			default:
				pkgs = append(pkgs, args[i])
			}
		}
		if len(pkgs) == 1 && slices.Contains(apps, pkgs[0]) {
			err := sh.s.withDataLock(sh.run.AVDDir, func() error {
				return os.RemoveAll(filepath.Join(sh.run.DataDir, "app", pkgs[0]))
			})
			if err == nil {
				_ = sh.setRunning(func(r []string) []string {
					return slices.DeleteFunc(r, func(p string) bool { return p == pkgs[0] })
				})
				sh.dropGrants(pkgs[0])
				fmt.Fprintln(stdout, "Success")
				return 0
			}
		}
		fmt.Fprintln(stdout, "Failure [DELETE_FAILED_INTERNAL_ERROR]")
		return 1
	case "clear":
		if len(args) == 2 && (slices.Contains(apps, args[1]) || slices.Contains(system, args[1])) {
			fmt.Fprintln(stdout, "Success")
			return 0
		}
		fmt.Fprintln(stdout, "Failed")
		return 1
	}
	return notSimulated("pm "+args[0], stderr)
}

// apkPath is where a package's APK lives on the device.
func (sh *devShell) apkPath(pkg string, user bool) string {
	if user {
		return "/data/app/" + pkg + "/base.apk"
	}
	return "/system/priv-app/" + pkg + "/" + pkg + ".apk"
}

// pmInstallFlags are pm install's options without a value.
var pmInstallFlags = []string{"-r", "-t", "-d", "-g", "-f", "-l", "-s", "--dont-kill", "--force-queryable",
	"--instant", "--full", "--restrict-permissions", "--staged", "--enable-rollback", "--bypass-low-target-sdk-block"}

// pmInstall installs an APK already on the device (pushed to
// /data/local/tmp, say), or, with -S SIZE and no file, the SIZE bytes
// streamed on stdin (what `adb install` sends to `cmd package install`),
// into the same per-device package list that `adb install` fills.
func (sh *devShell) pmInstall(args []string, stdout, stderr io.Writer, stdin io.Reader) int {
	var files []string
	streamed := int64(-1)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case slices.Contains(pmInstallFlags, a):
		case a == "-S" && i+1 < len(args):
			i++
			n, err := strconv.ParseInt(args[i], 10, 64)
			if err != nil || n < 0 {
				fmt.Fprintln(stderr, "Error: Invalid size: "+args[i])
				return 1
			}
			streamed = n
		case a == "--user" || a == "-i" || a == "--install-reason" || a == "--abi" || a == "-p":
			i++
		case strings.HasPrefix(a, "-"):
			fmt.Fprintln(stderr, "Error: Unknown option: "+a)
			return 1
		default:
			files = append(files, a)
		}
	}
	var b []byte
	name := "base.apk"
	switch {
	case len(files) == 0 && streamed >= 0 && stdin != nil:
		var buf bytes.Buffer
		n, _ := io.CopyN(&buf, stdin, streamed)
		if n != streamed {
			fmt.Fprintf(stdout, "Failure [INSTALL_FAILED_INVALID_APK: the stream ended after %d of %d bytes]\n", n, streamed)
			return 1
		}
		b = buf.Bytes()
	case len(files) != 1:
		fmt.Fprintln(stderr, "Error: APK content must be streamed")
		return 1
	default:
		host, ok := devicePath(sh.run, files[0])
		var err error
		b, err = os.ReadFile(host)
		if !ok || err != nil {
			fmt.Fprintf(stderr, "Error: Unable to open file: %s\nConsider using a file under /data/local/tmp/\n", files[0])
			return 1
		}
		name = files[0]
	}
	if _, fired, err := sh.s.fire(faultInstallFail); err != nil || fired {
		fmt.Fprintf(stdout, "Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE: Failed to override installation location] %s\n", faultNote(faultInstallFail))
		return 1
	}
	pkg := apkPackage(name, b)
	if err := sh.s.storeAPK(sh.run, pkg, b); err != nil {
		fmt.Fprintf(stdout, "Failure [INSTALL_FAILED_INTERNAL_ERROR: %v]\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "Success")
	return 0
}

// yes prints its arguments (default "y") on a line, forever: until the
// reader goes away (SIGPIPE) or the command is interrupted.
func (sh *devShell) yes(args []string, stdout io.Writer) int {
	line := "y\n"
	if len(args) > 0 {
		line = strings.Join(args, " ") + "\n"
	}
	// Whole lines, about 64 KiB at a time.
	buf := []byte(strings.Repeat(line, max(1, (64<<10)/len(line))))
	for {
		if sh.ctx.Err() != nil {
			return 130
		}
		if _, err := stdout.Write(buf); err != nil {
			return exitSIGPIPE
		}
	}
}

// head copies the first lines (-n, default 10) or bytes (-c) of each file,
// or of stdin, as toybox head does. With several files each gets a
// "==> NAME <==" header.
func (sh *devShell) head(args []string, stdout, stderr io.Writer, stdin io.Reader) int {
	lines, bytes := int64(10), int64(-1)
	var files []string
	number := func(flag, v string) (int64, bool) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "head: -%s: not integer: %s\n", flag, v)
			return 0, false
		}
		return n, true
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var flag, v string
		switch {
		case a == "-n" || a == "-c":
			if i+1 >= len(args) {
				fmt.Fprintf(stderr, "head: Missing argument to %s\n", a)
				return 1
			}
			flag, v = a[1:], args[i+1]
			i++
		case strings.HasPrefix(a, "-n") || strings.HasPrefix(a, "-c"):
			flag, v = a[1:2], a[2:]
		case len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9':
			flag, v = "n", a[1:]
		case a == "-" || !strings.HasPrefix(a, "-"):
			files = append(files, a)
			continue
		default:
			fmt.Fprintf(stderr, "head: Unknown option '%s'\n", strings.TrimLeft(a, "-"))
			return 1
		}
		n, ok := number(flag, v)
		if !ok {
			return 1
		}
		if flag == "c" {
			bytes = n
		} else {
			lines, bytes = n, -1
		}
	}
	copyHead := func(r io.Reader) error {
		if bytes >= 0 {
			_, err := io.CopyN(stdout, r, bytes)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		br := bufio.NewReader(r)
		for n := int64(0); n < lines; n++ {
			l, err := br.ReadString('\n')
			if _, werr := io.WriteString(stdout, l); werr != nil {
				return werr
			}
			if err != nil {
				return nil
			}
		}
		return nil
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	status := 0
	for i, f := range files {
		if len(files) > 1 {
			sep := "\n"
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(stdout, "%s==> %s <==\n", sep, f)
		}
		r := stdin
		if f != "-" {
			host, _ := devicePath(sh.run, f)
			fh, err := os.Open(host)
			if host == "" || err != nil {
				fmt.Fprintf(stderr, "head: %s: No such file or directory\n", f)
				status = 1
				continue
			}
			r = fh
			defer fh.Close()
		}
		if err := copyHead(r); err != nil {
			if errors.Is(err, errBrokenPipe) {
				return exitSIGPIPE
			}
			status = 1
		}
	}
	return status
}
