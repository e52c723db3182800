package ports

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Filesystem is the subset of file operations simlock's components use.
// Everything simlock writes is owner-only: files 0600, directories 0700.
type Filesystem interface {
	ReadFile(path string) ([]byte, error)
	// WriteFileAtomic writes data to a temporary file beside path and renames
	// it into place, so readers never observe a partial file.
	WriteFileAtomic(path string, data []byte) error
	Remove(path string) error
	RemoveAll(path string) error
	MkdirAll(path string) error
	Stat(path string) (fs.FileInfo, error)
	ReadDir(path string) ([]fs.DirEntry, error)
}

// OSFilesystem is the real Filesystem.
type OSFilesystem struct{}

func (OSFilesystem) ReadFile(p string) ([]byte, error)        { return os.ReadFile(p) }
func (OSFilesystem) Remove(p string) error                    { return os.Remove(p) }
func (OSFilesystem) RemoveAll(p string) error                 { return os.RemoveAll(p) }
func (OSFilesystem) MkdirAll(p string) error                  { return os.MkdirAll(p, 0o700) }
func (OSFilesystem) Stat(p string) (fs.FileInfo, error)       { return os.Stat(p) }
func (OSFilesystem) ReadDir(p string) ([]fs.DirEntry, error)  { return os.ReadDir(p) }
func (OSFilesystem) WriteFileAtomic(p string, b []byte) error { return WriteFileAtomic(p, b) }

// WriteFileAtomic writes b to path through a 0600 temporary file and a
// rename, and then syncs the directory: the rename lives in the
// directory's entries, so until they reach the disk a power loss can
// leave the old file, or none, however well the new one was synced.
func WriteFileAtomic(path string, b []byte) error { return writeFileAtomic(path, b, syncDir) }

// writeFileAtomic is WriteFileAtomic with the directory sync passed in, so
// a test can see that it runs, and after the rename.
func writeFileAtomic(path string, b []byte, syncDir func(dir string) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		// The new file is in place but may not survive a power loss.
		return fmt.Errorf("sync %s after replacing %s: %w", dir, filepath.Base(path), err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil && !dirSyncUnsupported(err) {
		d.Close()
		return err
	}
	return d.Close()
}

// dirSyncUnsupported tells a filesystem that cannot sync a directory at
// all (some FUSE, 9p and network mounts answer EINVAL or ENOTSUP) from a
// sync that failed. There the rename is as durable as that filesystem
// makes anything, and failing every atomic write would stop the daemon
// from starting for no gain.
func dirSyncUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, errors.ErrUnsupported)
}
