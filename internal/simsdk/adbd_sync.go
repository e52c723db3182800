package simsdk

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The sync service moves files: `adb push`, `pull`, and the stat and
// listing they start with. Requests are a 4-byte id and a 4-byte
// little-endian length, then that many bytes (a path, mostly):
//
//	STAT / LST2 / STA2 path   the file's metadata (v1: mode, size, mtime)
//	LIST / LIS2 path          DENT / DNT2 entries, then DONE
//	SEND "path,mode"          then DATA chunks and DONE mtime; OKAY or FAIL
//	RECV path                 DATA chunks then DONE, or FAIL
//	QUIT                      the end of the session
//
// The device's file system is the emulator's data partition (devicePath):
// /data and /sdcard are writable, "/" is a directory holding them, and
// anything else does not exist.

const (
	// syncDataMax is the largest DATA chunk either side sends.
	syncDataMax = 64 * 1024
	// syncPathMax bounds a request's path, as adbd's does.
	syncPathMax = 1024
)

func syncID(s string) uint32 { return binary.LittleEndian.Uint32([]byte(s)) }

var (
	syncSTAT = syncID("STAT")
	syncSTA2 = syncID("STA2")
	syncLST2 = syncID("LST2")
	syncLIST = syncID("LIST")
	syncLIS2 = syncID("LIS2")
	syncDENT = syncID("DENT")
	syncDNT2 = syncID("DNT2")
	syncSEND = syncID("SEND")
	syncRECV = syncID("RECV")
	syncDATA = syncID("DATA")
	syncDONE = syncID("DONE")
	syncOKAY = syncID("OKAY")
	syncFAIL = syncID("FAIL")
	syncQUIT = syncID("QUIT")
)

// deviceFS is the device's file system as the sync service sees it.
type deviceFS interface {
	stat(p string) (fs.FileInfo, error)
	list(p string) ([]fs.FileInfo, error)
	open(p string) (io.ReadCloser, error)
	// create writes a file from fill, replacing any file there; the
	// device sees it whole or not at all.
	create(p string, mode fs.FileMode, fill func(io.Writer) error) error
}

// dataFS is an emulator's data partition.
type dataFS struct {
	run *emuRun
	// lock runs fn under the AVD's data lock, as every writer of the
	// partition does.
	lock func(fn func() error) error
}

// rootInfo is the read-only "/" of the device.
type rootInfo struct{ name string }

func (r rootInfo) Name() string       { return r.name }
func (r rootInfo) Size() int64        { return 0 }
func (r rootInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o755 }
func (r rootInfo) ModTime() time.Time { return time.Unix(0, 0) }
func (r rootInfo) IsDir() bool        { return true }
func (r rootInfo) Sys() any           { return nil }

func cleanDevicePath(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p)
}

func (d dataFS) stat(p string) (fs.FileInfo, error) {
	if cleanDevicePath(p) == "/" {
		return rootInfo{name: "/"}, nil
	}
	host, ok := devicePath(d.run, p)
	if !ok {
		return nil, fs.ErrNotExist
	}
	return os.Stat(host)
}

func (d dataFS) list(p string) ([]fs.FileInfo, error) {
	if cleanDevicePath(p) == "/" {
		return []fs.FileInfo{rootInfo{name: "data"}, rootInfo{name: "sdcard"}}, nil
	}
	host, ok := devicePath(d.run, p)
	if !ok {
		return nil, fs.ErrNotExist
	}
	ents, err := os.ReadDir(host)
	if err != nil {
		return nil, err
	}
	var out []fs.FileInfo
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			out = append(out, fi)
		}
	}
	return out, nil
}

func (d dataFS) open(p string) (io.ReadCloser, error) {
	host, ok := devicePath(d.run, p)
	if !ok {
		return nil, fs.ErrNotExist
	}
	f, err := os.Open(host)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, unix.EISDIR
	}
	return f, nil
}

func (d dataFS) create(p string, mode fs.FileMode, fill func(io.Writer) error) error {
	host, ok := devicePath(d.run, p)
	if !ok || host == d.run.DataDir {
		return unix.EROFS
	}
	// The bytes land in a temporary file beside the target first, so a
	// push that breaks off leaves nothing half-written, and the data lock
	// is held only for the rename, not while the host sends.
	if err := os.MkdirAll(filepath.Dir(host), dirMode); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(host), ".adbd-push-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := fill(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode.Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return d.lock(func() error {
		if fi, err := os.Stat(host); err == nil && fi.IsDir() {
			return unix.EISDIR
		}
		return os.Rename(tmp.Name(), host)
	})
}

// syncService serves one sync: session on the stream.
func (d *adbd) syncService(ctx context.Context, st *adbdStream) {
	fsys, err := d.dev.files()
	if err != nil {
		return
	}
	if err := serveSync(bufio.NewReader(st), st, fsys); err != nil {
		d.logf("adbd: sync session ended", "err", err)
	}
}

var errSyncProtocol = errors.New("adb sync: protocol error")

// serveSync answers sync requests read from r on w until QUIT, the end
// of r, or a request it cannot parse.
func serveSync(r io.Reader, w io.Writer, fsys deviceFS) error {
	bw := bufio.NewWriterSize(w, syncDataMax+8)
	for {
		id, n, err := readSyncHeader(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if id == syncQUIT {
			return nil
		}
		if n > syncPathMax {
			return fmt.Errorf("%w: path of %d bytes", errSyncProtocol, n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return err
		}
		p := string(b)
		switch id {
		case syncSTAT:
			writeStatV1(bw, fsys, p)
		case syncSTA2, syncLST2:
			writeStatV2(bw, id, fsys, p)
		case syncLIST, syncLIS2:
			writeList(bw, id == syncLIS2, fsys, p)
		case syncRECV:
			if err := sendFile(bw, fsys, p); err != nil {
				return err
			}
		case syncSEND:
			if err := receiveFile(r, bw, fsys, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: unknown request %s", errSyncProtocol, adbCmdName(id))
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	}
}

func readSyncHeader(r io.Reader) (id, n uint32, err error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, fmt.Errorf("%w: truncated request", errSyncProtocol)
		}
		return 0, 0, err
	}
	return binary.LittleEndian.Uint32(h[:]), binary.LittleEndian.Uint32(h[4:]), nil
}

func putU32(w io.Writer, vs ...uint32) {
	var b [4]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint32(b[:], v)
		_, _ = w.Write(b[:])
	}
}

func putU64(w io.Writer, vs ...uint64) {
	var b [8]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint64(b[:], v)
		_, _ = w.Write(b[:])
	}
}

// unixMode is a file's mode as stat(2) reports it.
func unixMode(fi fs.FileInfo) uint32 {
	m := uint32(fi.Mode().Perm())
	if fi.IsDir() {
		return m | unix.S_IFDIR
	}
	return m | unix.S_IFREG
}

// errnoOf is the errno a failed stat or open reports to the host.
func errnoOf(err error) uint32 {
	var en unix.Errno
	switch {
	case errors.As(err, &en):
		return uint32(en)
	case errors.Is(err, fs.ErrNotExist):
		return uint32(unix.ENOENT)
	case errors.Is(err, fs.ErrPermission):
		return uint32(unix.EACCES)
	}
	return uint32(unix.EIO)
}

// strerror is the C library's text for err's errno, capitalised as
// bionic's strerror is ("No such file or directory").
func strerror(err error) string {
	t := unix.Errno(errnoOf(err)).Error()
	if t == "" {
		return t
	}
	return strings.ToUpper(t[:1]) + t[1:]
}

// writeStatV1 answers STAT; a missing file is all zeros, which is how
// the host tells that it does not exist.
func writeStatV1(w io.Writer, fsys deviceFS, p string) {
	putU32(w, syncSTAT)
	fi, err := fsys.stat(p)
	if err != nil {
		putU32(w, 0, 0, 0)
		return
	}
	putU32(w, unixMode(fi), uint32(fi.Size()), uint32(fi.ModTime().Unix()))
}

func statV2Body(w io.Writer, fi fs.FileInfo, err error) {
	if err != nil {
		putU32(w, errnoOf(err))
		putU64(w, 0, 0)
		putU32(w, 0, 0, 0, 0)
		putU64(w, 0, 0, 0, 0)
		return
	}
	nlink := uint32(1)
	if fi.IsDir() {
		nlink = 2
	}
	mt := uint64(fi.ModTime().Unix())
	putU32(w, 0)
	putU64(w, 0, 0)                            // dev, ino
	putU32(w, unixMode(fi), nlink, 2000, 2000) // mode, nlink, uid, gid (shell)
	putU64(w, uint64(fi.Size()), mt, mt, mt)   // size, atime, mtime, ctime
}

func writeStatV2(w io.Writer, id uint32, fsys deviceFS, p string) {
	putU32(w, id)
	fi, err := fsys.stat(p)
	statV2Body(w, fi, err)
}

// writeList answers LIST/LIS2: one entry per name, "." and ".." first as
// readdir gives them, then DONE padded to an entry's size.
func writeList(w io.Writer, v2 bool, fsys deviceFS, p string) {
	ents, err := fsys.list(p)
	if err == nil {
		self, serr := fsys.stat(p)
		if serr == nil {
			ents = append([]fs.FileInfo{named{self, "."}, named{self, ".."}}, ents...)
		}
		sort.SliceStable(ents[min(2, len(ents)):], func(i, j int) bool {
			rest := ents[min(2, len(ents)):]
			return rest[i].Name() < rest[j].Name()
		})
	}
	for _, fi := range ents {
		name := fi.Name()
		if v2 {
			putU32(w, syncDNT2)
			statV2Body(w, fi, nil)
		} else {
			putU32(w, syncDENT, unixMode(fi), uint32(fi.Size()), uint32(fi.ModTime().Unix()))
		}
		putU32(w, uint32(len(name)))
		_, _ = io.WriteString(w, name)
	}
	putU32(w, syncDONE)
	pad := 16 // mode, size, mtime, namelen
	if v2 {
		pad = 72 // error, dev, ino, mode, nlink, uid, gid, size, times, namelen
	}
	_, _ = w.Write(make([]byte, pad))
}

// named is a FileInfo under another name ("." and "..").
type named struct {
	fs.FileInfo
	name string
}

func (n named) Name() string { return n.name }

func writeFail(w io.Writer, msg string) {
	putU32(w, syncFAIL, uint32(len(msg)))
	_, _ = io.WriteString(w, msg)
}

// sendFile answers RECV with the file in DATA chunks.
func sendFile(w *bufio.Writer, fsys deviceFS, p string) error {
	f, err := fsys.open(p)
	if err != nil {
		writeFail(w, "open failed: "+strerror(err))
		return nil
	}
	defer f.Close()
	buf := make([]byte, syncDataMax)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			putU32(w, syncDATA, uint32(n))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeFail(w, "read failed: "+err.Error())
			return nil
		}
	}
	putU32(w, syncDONE, 0)
	return nil
}

// receiveFile answers SEND "path,mode": the DATA chunks that follow, up to
// DONE, become the file. A file that cannot be created is still read to
// its DONE, so the session stays in step, and then refused.
func receiveFile(r io.Reader, w io.Writer, fsys deviceFS, spec string) error {
	p, modeText, ok := strings.Cut(spec, ",")
	if i := strings.LastIndexByte(spec, ','); i >= 0 {
		p, modeText, ok = spec[:i], spec[i+1:], true
	}
	mode := fs.FileMode(0o644)
	if ok {
		if m, err := strconv.ParseUint(modeText, 10, 32); err == nil {
			mode = fs.FileMode(m & 0o777)
		}
	}
	done := false // the upload's DONE was read
	var streamErr error
	fill := func(dst io.Writer) error {
		for {
			id, n, err := readSyncHeader(r)
			if err != nil {
				streamErr = err
				return err
			}
			switch id {
			case syncDATA:
				if n > syncDataMax {
					streamErr = fmt.Errorf("%w: DATA chunk of %d bytes", errSyncProtocol, n)
					return streamErr
				}
				if _, err := io.CopyN(dst, r, int64(n)); err != nil {
					streamErr = err
					return err
				}
			case syncDONE:
				// n is the file's mtime; the simulated device keeps
				// the time the file arrived, as a push without
				// --sync shows no difference.
				done = true
				return nil
			default:
				streamErr = fmt.Errorf("%w: %s inside SEND", errSyncProtocol, adbCmdName(id))
				return streamErr
			}
		}
	}
	err := fsys.create(p, mode, fill)
	if streamErr != nil {
		return streamErr
	}
	if err != nil && !done {
		// create refused before reading: drain the upload to its DONE.
		if derr := fill(io.Discard); derr != nil {
			return derr
		}
	}
	if err != nil {
		writeFail(w, "couldn't create file: "+strerror(err))
		return nil
	}
	putU32(w, syncOKAY, 0)
	return nil
}
