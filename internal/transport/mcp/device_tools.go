package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// Device tool names, listed only with Options.DeviceTools.
const (
	ToolDeviceExec       = "device_exec"
	ToolDeviceScreenshot = "device_screenshot"
	ToolDeviceInstall    = "device_install"
	ToolDeviceOpenURL    = "device_open_url"
)

const deviceInstructions = `
With a lease held, drive its device with device_exec (simctl or adb), device_screenshot (a PNG image), device_install and
device_open_url; they act only on this session's own lease.`

// maxToolOutput bounds each stream device_exec returns to the agent: a
// model's context is the scarce thing, not the daemon's memory.
const maxToolOutput = 256 << 10

// deviceExecIn names the lease optionally: the session's own is the default
// and the only one allowed.
type deviceExecIn struct {
	LeaseID string   `json:"leaseId,omitempty"`
	Tool    string   `json:"tool"`
	Args    []string `json:"args" contract:"freeform"`
	Stdin   string   `json:"stdin,omitempty" contract:"freeform"`
}

type deviceExecOut struct {
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Truncated says a stream was longer than the tool returns.
	Truncated bool `json:"truncated,omitempty"`
}

type deviceScreenshotIn struct {
	LeaseID string `json:"leaseId,omitempty"`
}

type deviceInstallIn struct {
	LeaseID string `json:"leaseId,omitempty"`
	// Path is an .app bundle (iOS) or .apk (Android) this server can read.
	Path string `json:"path,omitempty"`
	// Upload names a file sent with device.upload into the lease's scratch
	// directory; the daemon resolves it as {upload:NAME}.
	Upload string `json:"upload,omitempty"`
}

type deviceOpenURLIn struct {
	LeaseID string `json:"leaseId,omitempty"`
	URL     string `json:"url"`
}

func (s *session) deviceTools() []tool {
	confined := `Acts only on the lease this session holds (leaseId defaults to it); naming any other lease is refused with FORBIDDEN.`
	errs := `Errors (JSON {"error":{code,message,retryable,nextAction}}): FORBIDDEN (not this session's lease), BAD_REQUEST (no lease held: call lease_simulator first),
LEASE_ENDED (the lease ended while the command ran), PASSTHROUGH_REFUSED (the command would leave the leased device or change it behind simlock's back), EXEC_TIMEOUT.`
	leaseProp := map[string]any{"description": "The lease to act on (default and only choice: the one this session holds)."}
	return []tool{
		{decl: &mcpsdk.Tool{
			Name:  ToolDeviceExec,
			Title: "Run simctl or adb on the leased device",
			Description: `Run simctl (iOS lease) or adb (Android lease) against the leased device on the daemon's machine and return
{exitCode, stdout, stderr} (each stream cut at 256 KiB, then truncated=true). The command is pinned to the leased device: simctl must
name it by its udid, adb needs no -s. {udid}, {deviceSet}, {serial} and {leaseId} in args become the lease's values (as in simlock run),
e.g. ["getenv", "{udid}", "HOME"]; one of the other platform is BAD_REQUEST. There is no terminal: pass the full command
("adb shell getprop ro.build.version.sdk").
` + confined + "\n" + errs,
			Annotations: &mcpsdk.ToolAnnotations{Title: "Run simctl or adb on the leased device", DestructiveHint: new(true), OpenWorldHint: new(false)},
			InputSchema: schemaFor[deviceExecIn](map[string]any{
				"leaseId": leaseProp,
				"tool":    map[string]any{"enum": []string{"simctl", "adb"}, "description": "simctl for an iOS lease, adb for an Android lease."},
				"args":    map[string]any{"description": `The tool's arguments, e.g. ["listapps", "{udid}"] or ["shell", "pm", "list", "packages"].`},
				"stdin":   map[string]any{"description": "Sent to the command's standard input in one piece."},
			}),
			OutputSchema: schemaFor[deviceExecOut](nil),
		}, run: s.deviceExec},
		{decl: &mcpsdk.Tool{
			Name:  ToolDeviceScreenshot,
			Title: "Screenshot the leased device",
			Description: `Take a screenshot of the leased device's screen and return it as a PNG image (simctl io screenshot on iOS,
adb screencap on Android). ` + confined + "\n" + errs,
			Annotations:  &mcpsdk.ToolAnnotations{Title: "Screenshot the leased device", ReadOnlyHint: true, OpenWorldHint: new(false)},
			InputSchema:  schemaFor[deviceScreenshotIn](map[string]any{"leaseId": leaseProp}),
			OutputSchema: nil,
		}, run: s.deviceScreenshot},
		{decl: &mcpsdk.Tool{
			Name:  ToolDeviceInstall,
			Title: "Install an app on the leased device",
			Description: `Install an app on the leased device: path is an .app bundle (iOS) or .apk (Android) on the machine running this
server, or upload names a file sent earlier with device.upload. Returns {exitCode, stdout, stderr} of simctl install / adb install -r.
` + confined + "\n" + errs,
			Annotations: &mcpsdk.ToolAnnotations{Title: "Install an app on the leased device", DestructiveHint: new(false), OpenWorldHint: new(false)},
			InputSchema: schemaFor[deviceInstallIn](map[string]any{
				"leaseId": leaseProp,
				"path":    map[string]any{"description": "An absolute path to the .app or .apk, readable by this server."},
				"upload":  map[string]any{"description": "Instead of path: the name of a file uploaded with device.upload for this lease."},
			}),
			OutputSchema: schemaFor[deviceExecOut](nil),
		}, run: s.deviceInstall},
		{decl: &mcpsdk.Tool{
			Name:  ToolDeviceOpenURL,
			Title: "Open a URL on the leased device",
			Description: `Open a URL (a web page or an app's deep link) on the leased device: simctl openurl on iOS, an
android.intent.action.VIEW activity on Android. Returns {exitCode, stdout, stderr}. ` + confined + "\n" + errs,
			Annotations: &mcpsdk.ToolAnnotations{Title: "Open a URL on the leased device", DestructiveHint: new(false), OpenWorldHint: new(true)},
			InputSchema: schemaFor[deviceOpenURLIn](map[string]any{
				"leaseId": leaseProp,
				"url":     map[string]any{"description": `The URL, e.g. "https://example.com" or "myapp://item/42".`},
			}),
			OutputSchema: schemaFor[deviceExecOut](nil),
		}, run: s.deviceOpenURL},
	}
}

// ownLease resolves the lease a device tool acts on (sessionLease) and
// reads it.
func (s *session) ownLease(ctx context.Context, c *client.Client, id string) (contract.Lease, error) {
	id, err := s.sessionLease(id)
	if err != nil {
		return contract.Lease{}, err
	}
	return client.Do(ctx, c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: id})
}

// onOwnLease is every device tool's preamble: decode the arguments into in
// (whose leaseId field is *id once decoded), connect, and resolve the
// session's own lease.
func (s *session) onOwnLease(ctx context.Context, req *mcpsdk.CallToolRequest, in any, id *string) (*client.Client, contract.Lease, error) {
	if err := decodeArgs(req, in); err != nil {
		return nil, contract.Lease{}, err
	}
	c, err := s.conn(ctx, true)
	if err != nil {
		return nil, contract.Lease{}, err
	}
	l, err := s.ownLease(ctx, c, *id)
	return c, l, err
}

// execOn runs one tool command on the lease through device.exec.
func (s *session) execOn(ctx context.Context, c *client.Client, l contract.Lease, tool string, args []string, stdin string) (deviceExecOut, error) {
	if args == nil {
		args = []string{}
	}
	var out, errb capped
	in := contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: tool, Args: args, Stdin: stdin}
	if s.slot != nil {
		in.RequesterID = s.slot.requester() // the execution lease answers to its own requester only
	}
	res, err := c.Exec(ctx, in, func(o contract.ExecOutput) {
		if o.Stream == "stderr" {
			errb.add(o.Chunk)
		} else {
			out.add(o.Chunk)
		}
	})
	if err != nil {
		return deviceExecOut{}, err
	}
	return deviceExecOut{ExitCode: res.ExitCode, Stdout: out.b.String(), Stderr: errb.b.String(), Truncated: out.cut || errb.cut}, nil
}

// capped keeps the first maxToolOutput bytes of a stream.
type capped struct {
	b   strings.Builder
	cut bool
}

func (c *capped) add(chunk string) {
	if room := maxToolOutput - c.b.Len(); room < len(chunk) {
		chunk, c.cut = chunk[:max(room, 0)], true
	}
	c.b.WriteString(chunk)
}

// toolFor is the platform's tool for a lease.
func toolFor(l contract.Lease) (string, error) {
	switch l.Platform {
	case "ios":
		return "simctl", nil
	case "android":
		return "adb", nil
	}
	return "", contract.Errorf(contract.CodeUnsupportedPlatform, "device tools do not drive %s devices", l.Platform)
}

func udidOf(l contract.Lease) string {
	if l.Device != nil {
		return l.Device.UDID
	}
	return ""
}

func (s *session) deviceExec(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in deviceExecIn
	c, l, err := s.onOwnLease(ctx, req, &in, &in.LeaseID)
	if err != nil {
		return nil, err
	}
	return s.execOn(ctx, c, l, in.Tool, in.Args, in.Stdin)
}

// failed turns a command that exited non-zero into a tool error that
// carries its output, for tools whose only product is the side effect.
func failed(what string, out deviceExecOut) error {
	return contract.Errorf(contract.CodeInternal, "%s exited %d: %s", what, out.ExitCode, strings.TrimSpace(out.Stderr+" "+out.Stdout)).
		WithDetails("exitCode", out.ExitCode)
}

// deviceScreenshot has the platform's tool write a PNG to a private
// directory and returns it as image content. A file, not stdout: exec
// output travels as UTF-8 text and would not carry PNG bytes intact. The
// MCP server reaches the daemon on its local socket, so both see the file.
func (s *session) deviceScreenshot(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in deviceScreenshotIn
	c, l, err := s.onOwnLease(ctx, req, &in, &in.LeaseID)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "simlock-mcp-shot-")
	if err != nil {
		return nil, fmt.Errorf("screenshot directory: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "screen.png")
	switch l.Platform {
	case "ios":
		out, err := s.execOn(ctx, c, l, "simctl", []string{"io", udidOf(l), "screenshot", "--type=png", file}, "")
		if err != nil {
			return nil, err
		}
		if out.ExitCode != 0 {
			return nil, failed("simctl io screenshot", out)
		}
	case "android":
		// On the device first, then pulled: adb pull copies bytes as they are.
		const onDevice = "/data/local/tmp/simlock-mcp-screen.png"
		for _, args := range [][]string{{"shell", "screencap", "-p", onDevice}, {"pull", onDevice, file}} {
			out, err := s.execOn(ctx, c, l, "adb", args, "")
			if err != nil {
				return nil, err
			}
			if out.ExitCode != 0 {
				return nil, failed("adb "+args[0], out)
			}
		}
		_, _ = s.execOn(ctx, c, l, "adb", []string{"shell", "rm", "-f", onDevice}, "")
	default:
		_, err := toolFor(l)
		return nil, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read the screenshot: %w", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, contract.Errorf(contract.CodeInternal, "the screenshot is not a PNG: %v", err)
	}
	meta, _ := json.Marshal(map[string]any{"leaseId": l.LeaseID, "width": cfg.Width, "height": cfg.Height, "bytes": len(b)})
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
		&mcpsdk.ImageContent{Data: b, MIMEType: "image/png"},
		&mcpsdk.TextContent{Text: string(meta)},
	}}, nil
}

func (s *session) deviceInstall(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in deviceInstallIn
	if err := decodeArgs(req, &in); err != nil {
		return nil, err
	}
	var target string
	switch {
	case (in.Path == "") == (in.Upload == ""):
		return nil, contract.Errorf(contract.CodeBadRequest, "give exactly one of path and upload")
	case in.Upload != "":
		// The seam to device.upload: the daemon resolves the reference to
		// the file in the lease's scratch directory.
		target = "{upload:" + in.Upload + "}"
	default:
		if !filepath.IsAbs(in.Path) {
			return nil, contract.Errorf(contract.CodeBadRequest, "path %q is not absolute", in.Path).
				WithNext("pass the app's absolute path on the machine running simlock mcp")
		}
		if _, err := os.Stat(in.Path); err != nil {
			return nil, contract.Errorf(contract.CodeBadRequest, "cannot read %s: %v", in.Path, err)
		}
		target = in.Path
	}
	c, err := s.conn(ctx, true)
	if err != nil {
		return nil, err
	}
	l, err := s.ownLease(ctx, c, in.LeaseID)
	if err != nil {
		return nil, err
	}
	tool, err := toolFor(l)
	if err != nil {
		return nil, err
	}
	args := []string{"install", "-r", target}
	if tool == "simctl" {
		args = []string{"install", udidOf(l), target}
	}
	return s.execOn(ctx, c, l, tool, args, "")
}

func (s *session) deviceOpenURL(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in deviceOpenURLIn
	if err := decodeArgs(req, &in); err != nil {
		return nil, err
	}
	if u, err := url.Parse(in.URL); err != nil || u.Scheme == "" {
		return nil, contract.Errorf(contract.CodeBadRequest, "url %q has no scheme", in.URL).
			WithNext(`pass a full URL such as "https://example.com" or "myapp://path"`)
	}
	c, err := s.conn(ctx, true)
	if err != nil {
		return nil, err
	}
	l, err := s.ownLease(ctx, c, in.LeaseID)
	if err != nil {
		return nil, err
	}
	tool, err := toolFor(l)
	if err != nil {
		return nil, err
	}
	args := []string{"shell", "am", "start", "-a", "android.intent.action.VIEW", "-d", shellWord(in.URL)}
	if tool == "simctl" {
		args = []string{"openurl", udidOf(l), in.URL}
	}
	return s.execOn(ctx, c, l, tool, args, "")
}

// shellWord quotes s for the device's shell, which adb shell hands its
// joined arguments to: a URL's & or ? must not be read as shell syntax.
func shellWord(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
