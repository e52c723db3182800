package simsdk

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"unicode/utf16"
)

// apkPackage is the package an APK installs as: the package attribute of
// its binary AndroidManifest.xml when the file is a real APK, else the file
// name without ".apk" (tests install any bytes under the name they want).
func apkPackage(name string, apk []byte) string {
	if pkg, err := manifestPackage(apk); err == nil && validPackageName(pkg) {
		return pkg
	}
	return strings.TrimSuffix(filepath.Base(name), ".apk")
}

var errNoManifest = errors.New("no binary AndroidManifest.xml")

// manifestPackage reads the <manifest package="..."> attribute from the
// APK's compiled manifest (Android's binary XML: a string pool, then
// element chunks whose attributes name strings by index).
func manifestPackage(apk []byte) (string, error) {
	zr, err := zip.NewReader(bytes.NewReader(apk), int64(len(apk)))
	if err != nil {
		return "", err
	}
	f, err := zr.Open("AndroidManifest.xml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return "", err
	}
	le := binary.LittleEndian
	if len(b) < 8 || le.Uint16(b) != 0x0003 {
		return "", errNoManifest
	}
	var pool []string
	for off := int(le.Uint16(b[2:])); off+8 <= len(b); {
		typ, hdr, size := le.Uint16(b[off:]), int(le.Uint16(b[off+2:])), int(le.Uint32(b[off+4:]))
		if size < 8 || off+size > len(b) {
			return "", errNoManifest
		}
		chunk := b[off : off+size]
		switch typ {
		case 0x0001: // string pool
			pool = readStringPool(chunk)
		case 0x0102: // start element
			if hdr+20 > len(chunk) || pool == nil {
				return "", errNoManifest
			}
			ext := chunk[hdr:]
			name := int(le.Uint32(ext[4:]))
			if name >= len(pool) || pool[name] != "manifest" {
				return "", errNoManifest // the first element is <manifest>
			}
			start, asize, count := int(le.Uint16(ext[8:])), int(le.Uint16(ext[10:])), int(le.Uint16(ext[12:]))
			for i := 0; i < count; i++ {
				at := start + i*asize
				if at+20 > len(ext) {
					break
				}
				an, raw := int(le.Uint32(ext[at+4:])), le.Uint32(ext[at+8:])
				if an < len(pool) && pool[an] == "package" && int(raw) < len(pool) {
					return pool[raw], nil
				}
			}
			return "", errNoManifest
		}
		off += size
	}
	return "", errNoManifest
}

// readStringPool decodes a binary XML string pool (UTF-8 or UTF-16).
func readStringPool(c []byte) []string {
	le := binary.LittleEndian
	if len(c) < 28 {
		return nil
	}
	count, flags, start := int(le.Uint32(c[8:])), le.Uint32(c[16:]), int(le.Uint32(c[20:]))
	utf8 := flags&0x100 != 0
	hdr := int(le.Uint16(c[2:]))
	out := make([]string, 0, count)
	for i := 0; i < count; i++ {
		o := hdr + 4*i
		if o+4 > len(c) {
			return out
		}
		p := start + int(le.Uint32(c[o:]))
		if p >= len(c) {
			out = append(out, "")
			continue
		}
		if utf8 {
			// character count, then byte count; each 1 or 2 bytes.
			p += lenPrefix8(c, p)
			n := int(c[p])
			if n&0x80 != 0 && p+1 < len(c) {
				n = (n&0x7f)<<8 | int(c[p+1])
				p++
			}
			p++
			if p+n > len(c) {
				out = append(out, "")
				continue
			}
			out = append(out, string(c[p:p+n]))
			continue
		}
		if p+2 > len(c) {
			out = append(out, "")
			continue
		}
		n := int(le.Uint16(c[p:]))
		p += 2
		if n&0x8000 != 0 && p+2 <= len(c) {
			n = (n&0x7fff)<<16 | int(le.Uint16(c[p:]))
			p += 2
		}
		u := make([]uint16, 0, n)
		for j := 0; j < n && p+2*j+2 <= len(c); j++ {
			u = append(u, le.Uint16(c[p+2*j:]))
		}
		out = append(out, string(utf16.Decode(u)))
	}
	return out
}

// lenPrefix8 is the width of a UTF-8 pool length prefix at p.
func lenPrefix8(c []byte, p int) int {
	if c[p]&0x80 != 0 {
		return 2
	}
	return 1
}
