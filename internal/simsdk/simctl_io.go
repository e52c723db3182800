package simsdk

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
)

// The simulated screens' sizes in pixels. They are smaller than a real
// device's so that a screenshot stays cheap in tests; what matters to a
// client is that it gets a real, decodable PNG of the named device.
const (
	iosScreenW, iosScreenH         = 390, 844
	androidScreenW, androidScreenH = 540, 1200
)

// screenImage draws a device's simulated screen: a status bar over a body
// whose colour derives from the device's identity, so screenshots of two
// devices differ and a test can tell which one it got.
func screenImage(w, h int, identity string) *image.RGBA {
	f := fnv.New32a()
	f.Write([]byte(identity))
	sum := f.Sum32()
	body := color.RGBA{R: byte(sum), G: byte(sum >> 8), B: byte(sum >> 16), A: 0xff}
	bar := color.RGBA{R: 0x20, G: 0x20, B: 0x20, A: 0xff}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	barH := h / 20
	for y := range h {
		c := body
		if y < barH {
			c = bar
		}
		for x := range w {
			img.SetRGBA(x, y, c)
		}
	}
	return img
}

// screenPNG is screenImage encoded as PNG.
func screenPNG(w, h int, identity string) ([]byte, error) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, screenImage(w, h, identity)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

const simctlIOUsage = `io <device> <operation> <arguments>

	screenshot [--type=<type>] [--display=<display>] [--mask=<policy>] <file or url>
	    Saves a screenshot as a PNG to the specified file or url (use "-" for stdout).
	    --type      Can be "png", "tiff", "bmp", "gif", "jpeg". Default is png.
	    --display   iOS: supports "internal" or "external". Default is "internal".
	    --mask      For non-rectangular displays, handle the mask by policy: ignored, alpha, black.

(only screenshot --type=png is simulated by the simlock simulated SDK)`

// simctlIO runs "simctl io <device> <operation> ...". Only screenshot is
// simulated: it writes a PNG of the booted device's screen to a file, or
// to stdout for "-", and says where on stderr as simctl does.
func (s *sdk) simctlIO(ds deviceSet, args []string) error {
	if len(args) < 2 {
		return usageErr(simctlIOUsage)
	}
	ref, op, rest := args[0], args[1], args[2:]
	if op != "screenshot" {
		return &toolError{text: fmt.Sprintf("Unknown IO operation '%s' (not simulated by the simlock simulated SDK)\n", op), exit: 64}
	}
	typ := ""
	var target []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		name, val, hasVal := strings.Cut(a, "=")
		switch {
		case a == "-" || !strings.HasPrefix(a, "-"):
			target = append(target, a)
		case name == "--type" || name == "-t":
			if !hasVal {
				if i+1 >= len(rest) {
					return usageErr(simctlIOUsage)
				}
				i++
				val = rest[i]
			}
			typ = strings.ToLower(val)
		case name == "--display" || name == "--mask":
			if !hasVal {
				if i+1 >= len(rest) {
					return usageErr(simctlIOUsage)
				}
				i++
			}
		default:
			return &toolError{text: fmt.Sprintf("Unrecognized option: %s\nUsage: simctl %s\n", a, simctlIOUsage), exit: 64}
		}
	}
	if len(target) != 1 {
		return usageErr(simctlIOUsage)
	}
	file := target[0]
	fromExt := false
	if typ == "" && file != "-" {
		// simctl picks the type from the extension when --type is absent.
		ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(file)), ".")
		typ = map[string]string{"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "tif": "tiff", "tiff": "tiff",
			"bmp": "bmp", "gif": "gif"}[ext]
		fromExt = typ != ""
	}
	switch typ {
	case "", "png":
	case "tiff", "bmp", "gif", "jpeg":
		return &toolError{text: fmt.Sprintf("Error: screenshot type %s is not simulated by the simlock simulated SDK (use png)\n", typ), exit: 64}
	default:
		return &toolError{text: fmt.Sprintf("Error: Unknown type: %s\n", typ), exit: 64}
	}
	d, err := s.bootedDevice(ds, ref)
	if err != nil {
		return err
	}
	b, err := screenPNG(iosScreenW, iosScreenH, d.UDID)
	if err != nil {
		return err
	}
	if file == "-" {
		_, err := s.stdout.Write(b)
		return err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return &toolError{text: fmt.Sprintf("Error creating the image\nThe file “%s” couldn’t be saved.\n", filepath.Base(file)), exit: 1}
	}
	if abs, aerr := filepath.Abs(file); aerr == nil {
		file = abs
	}
	if fromExt {
		fmt.Fprintln(s.stderr, "Detected file type 'PNG' from extension")
	}
	fmt.Fprintf(s.stderr, "Wrote screenshot to: %s\n", file)
	return nil
}
