package simsdk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image/png"
	"io"
	"os"
	"strings"
)

// The app and screen commands third-party clients send: am (android_am.go),
// screencap and input (android_input.go).

func (sh *devShell) am(args []string, stdout, stderr io.Writer) int {
	return sh.amCommand(args, stdout, stderr)
}

const screencapUsage = `usage: screencap [-hp] [-d display-id] [FILENAME]
   -h: this message
   -p: save the file as a png.
   -d: specify the display ID to capture (default: first)
If FILENAME ends with .png it will be saved as a png.
If FILENAME is not given, the results will be printed to stdout.
`

// screencap captures the simulated screen: a PNG with -p or a FILENAME
// ending in .png, otherwise the raw layout screencap writes (width,
// height, pixel format and colour space as little-endian uint32s, then
// RGBA pixels). Without FILENAME it goes to stdout, which is what
// `adb exec-out screencap -p` reads.
func (sh *devShell) screencap(args []string, stdout, stderr io.Writer) int {
	asPNG := false
	var file string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p":
			asPNG = true
		case a == "-h":
			fmt.Fprint(stderr, screencapUsage)
			return 0
		case a == "-d":
			if i+1 >= len(args) {
				fmt.Fprintf(stderr, "screencap: option requires an argument -- 'd'\n%s", screencapUsage)
				return 1
			}
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1:
			fmt.Fprintf(stderr, "screencap: invalid option -- '%s'\n%s", strings.TrimPrefix(a, "-")[:1], screencapUsage)
			return 1
		case file != "":
			fmt.Fprint(stderr, screencapUsage)
			return 1
		default:
			file = a
		}
	}
	if strings.HasSuffix(file, ".png") {
		asPNG = true
	}
	img := screenImage(androidScreenW, androidScreenH, sh.run.AVD)
	var out bytes.Buffer
	if asPNG {
		if err := png.Encode(&out, img); err != nil {
			fmt.Fprintf(stderr, "screencap: %v\n", err)
			return 1
		}
	} else {
		// Raw: PIXEL_FORMAT_RGBA_8888 (1) in the sRGB colour space (1).
		for _, v := range []uint32{androidScreenW, androidScreenH, 1, 1} {
			_ = binary.Write(&out, binary.LittleEndian, v)
		}
		out.Write(img.Pix)
	}
	if file == "" {
		if _, err := stdout.Write(out.Bytes()); err != nil {
			return 1
		}
		return 0
	}
	host, ok := devicePath(sh.run, file)
	if !ok {
		fmt.Fprintf(stderr, "Error opening file: %s (Read-only file system)\n", file)
		return 1
	}
	if err := os.WriteFile(host, out.Bytes(), fileMode); err != nil {
		fmt.Fprintf(stderr, "Error opening file: %s (No such file or directory)\n", file)
		return 1
	}
	return 0
}

// input taps and types (android_input.go checks the arguments); the keys
// that act on the screen change it (android_window.go).
func (sh *devShell) input(args []string, stdout, stderr io.Writer) int {
	code := inputCommand(args, stdout, stderr)
	if code == 0 {
		sh.screenKeys(args)
	}
	return code
}
