package simsdk

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"unicode/utf16"
)

// SampleAPK is a minimal APK for package pkg: a zip holding an
// AndroidManifest.xml compiled the way aapt compiles <manifest
// package="pkg">, as far as the simulated device reads it (a UTF-16 string
// pool and one start element). Tests install it through a real adb, whose
// streamed install carries no file name to fall back on.
func SampleAPK(pkg string) ([]byte, error) {
	le := binary.LittleEndian
	strs := []string{"package", "manifest", pkg}
	var data []byte
	var offsets []uint32
	for _, s := range strs {
		offsets = append(offsets, uint32(len(data)))
		u := utf16.Encode([]rune(s))
		data = le.AppendUint16(data, uint16(len(u)))
		for _, c := range u {
			data = le.AppendUint16(data, c)
		}
		data = le.AppendUint16(data, 0)
	}
	for len(data)%4 != 0 {
		data = append(data, 0)
	}
	var pool []byte
	pool = le.AppendUint16(pool, 0x0001)
	pool = le.AppendUint16(pool, 28)
	pool = le.AppendUint32(pool, uint32(28+4*len(strs)+len(data)))
	pool = le.AppendUint32(pool, uint32(len(strs)))
	pool = le.AppendUint32(pool, 0) // styles
	pool = le.AppendUint32(pool, 0) // flags: UTF-16
	pool = le.AppendUint32(pool, uint32(28+4*len(strs)))
	pool = le.AppendUint32(pool, 0)
	for _, o := range offsets {
		pool = le.AppendUint32(pool, o)
	}
	pool = append(pool, data...)

	var el []byte
	el = le.AppendUint16(el, 0x0102)
	el = le.AppendUint16(el, 16)
	el = le.AppendUint32(el, 16+20+20)
	el = le.AppendUint32(el, 1)          // line
	el = le.AppendUint32(el, 0xffffffff) // comment
	el = le.AppendUint32(el, 0xffffffff) // ns
	el = le.AppendUint32(el, 1)          // name: "manifest"
	el = le.AppendUint16(el, 20)         // attribute start
	el = le.AppendUint16(el, 20)         // attribute size
	el = le.AppendUint16(el, 1)          // count
	el = append(el, 0, 0, 0, 0, 0, 0)    // id, class, style
	el = le.AppendUint32(el, 0xffffffff) // attr ns
	el = le.AppendUint32(el, 0)          // attr name: "package"
	el = le.AppendUint32(el, 2)          // raw value: pkg
	el = append(el, 8, 0, 0, 3)          // typed value: string
	el = le.AppendUint32(el, 2)

	var doc []byte
	doc = le.AppendUint16(doc, 0x0003)
	doc = le.AppendUint16(doc, 8)
	doc = le.AppendUint32(doc, uint32(8+len(pool)+len(el)))
	doc = append(append(doc, pool...), el...)

	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create("AndroidManifest.xml")
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(doc); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
