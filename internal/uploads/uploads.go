package uploads

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
)

// PartialPrefix marks a file still being received. Upload names start with
// a letter or digit (contract.ValidateUploadName), so a partial can never
// be named by {upload:NAME}, and a re-upload never shows a half file.
const PartialPrefix = ".partial-"

// Store keeps each lease's scratch directory, <home>/uploads/<leaseId>
// (0700): created on the lease's first upload, removed the moment the
// lease ends, whatever ended it, and swept at startup for leases that did
// not survive the restart (ADR 0034).
type Store struct {
	root     string
	maxBytes int64
	// reserve is the free space the disk guard keeps
	// (diskPressure.freeBytesThreshold); free reads the volume's.
	reserve uint64
	free    func() (uint64, error)
	leases  Leases
	ends    LeaseEnds
	touch   func(leaseID string)
	ctx     context.Context // the daemon's life: ends the watchers
	log     *slog.Logger

	mu      sync.Mutex
	scratch map[string]*scratch
}

// Leases is the engine's lease book as the uploads use it (*core.Engine).
type Leases interface {
	Lease(id string) (core.LeaseRecord, bool)
}

// LeaseEnds is the engine's watch on a lease's end (core.WatchDesk): a
// lease's directory goes the moment it ends.
type LeaseEnds interface {
	// LeaseEnded is closed once the lease is gone.
	LeaseEnded(leaseID string) <-chan struct{}
}

var (
	_ Leases    = (*core.Engine)(nil)
	_ LeaseEnds = core.WatchDesk{}
)

// Config is what the daemon hands the store.
type Config struct {
	// Home is the daemon's home; the directories are under its uploads/.
	Home string
	// MaxBytes is upload.maxBytes, the cap on one file.
	MaxBytes int64
	// Reserve is diskPressure.freeBytesThreshold; Free reads the volume's
	// free bytes (nil: no disk guard).
	Reserve uint64
	Free    func() (uint64, error)
	Leases  Leases
	Ends    LeaseEnds
	// TouchLease is told of every chunk's lease: a device call restarts a
	// session's idle window (the session broker's TouchLease; nil: none).
	TouchLease func(leaseID string)
	Log        *slog.Logger
}

// New builds the store; ctx is the daemon's life, which ends the watchers.
func New(ctx context.Context, c Config) *Store {
	touch := c.TouchLease
	if touch == nil {
		touch = func(string) {}
	}
	return &Store{root: filepath.Join(c.Home, "uploads"), maxBytes: c.MaxBytes, reserve: c.Reserve, free: c.Free,
		leases: c.Leases, ends: c.Ends, touch: touch, ctx: ctx, log: c.Log, scratch: map[string]*scratch{}}
}

// scratch is one lease's directory and the files still being received.
type scratch struct {
	dir      string
	received map[string]*partial
}

// partial is one file in flight. Its mutex orders the chunks of one name;
// lock order is partial.mu before Store.mu.
type partial struct {
	mu       sync.Mutex
	f        *os.File
	tmp      string
	received int64
	size     int64 // declared on the first chunk; 0 when unknown
	sum      hash.Hash
	done     bool // committed, aborted, superseded or its lease ended
}

// Upload is device.upload: it stores one chunk of a file for a lease
// holder. The dispatcher has checked the caller owns the lease (ownsLease).
func (u *Store) Upload(_ context.Context, _ *dispatch.Call, in contract.DeviceUploadIn) (contract.DeviceUploadOut, error) {
	if _, ok := u.leases.Lease(in.LeaseID); !ok {
		return contract.DeviceUploadOut{}, core.ErrUnknownLease
	}
	u.touch(in.LeaseID) // a device call restarts a session's idle window
	return u.chunk(in)
}

func (u *Store) chunk(in contract.DeviceUploadIn) (contract.DeviceUploadOut, error) {
	if err := contract.ValidateUploadName(in.Name); err != nil {
		return contract.DeviceUploadOut{}, err
	}
	switch {
	case len(in.Data) > contract.UploadChunkBytes:
		return contract.DeviceUploadOut{}, contract.Errorf(contract.CodeBadRequest,
			"a chunk carries at most %d bytes, this one %d", contract.UploadChunkBytes, len(in.Data)).
			WithDetails("maxChunkBytes", contract.UploadChunkBytes)
	case in.Offset < 0 || in.SizeBytes < 0:
		return contract.DeviceUploadOut{}, contract.Errorf(contract.CodeBadRequest, "offset and sizeBytes must not be negative")
	case in.SizeBytes > 0 && in.Offset > 0:
		return contract.DeviceUploadOut{}, contract.Errorf(contract.CodeBadRequest, "sizeBytes is declared on the first chunk (offset 0) only")
	}
	if in.Abort {
		u.abort(in.LeaseID, in.Name)
		return contract.DeviceUploadOut{Name: in.Name}, nil
	}
	p, err := u.partialFor(in)
	if err != nil {
		return contract.DeviceUploadOut{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		// Superseded by a restart of the same name, or the lease ended.
		if _, live := u.scratchOf(in.LeaseID); !live {
			return contract.DeviceUploadOut{}, leaseGone(in.LeaseID)
		}
		return contract.DeviceUploadOut{}, wrongOffset(in, 0)
	}
	if in.Offset != p.received {
		return contract.DeviceUploadOut{}, wrongOffset(in, p.received)
	}
	n := int64(len(in.Data))
	if p.size > 0 && p.received+n > p.size {
		u.abortLocked(in.LeaseID, in.Name, p)
		return contract.DeviceUploadOut{}, contract.Errorf(contract.CodeBadRequest,
			"%s is longer than the %d bytes declared in sizeBytes; nothing was kept", in.Name, p.size)
	}
	if err := u.admit(in.Name, p.received+n, n); err != nil {
		u.abortLocked(in.LeaseID, in.Name, p)
		return contract.DeviceUploadOut{}, err
	}
	if n > 0 {
		if _, err := p.f.Write(in.Data); err != nil {
			u.abortLocked(in.LeaseID, in.Name, p)
			return contract.DeviceUploadOut{}, fmt.Errorf("write upload %s: %w", in.Name, err)
		}
		p.sum.Write(in.Data)
		p.received += n
	}
	out := contract.DeviceUploadOut{Name: in.Name, Received: p.received}
	if !in.Final {
		return out, nil
	}
	if p.size > 0 && p.received != p.size {
		u.abortLocked(in.LeaseID, in.Name, p)
		return contract.DeviceUploadOut{}, contract.Errorf(contract.CodeBadRequest,
			"%s ended at %d bytes, %d were declared in sizeBytes; nothing was kept", in.Name, p.received, p.size)
	}
	if err := u.commitLocked(in.LeaseID, in.Name, p); err != nil {
		return contract.DeviceUploadOut{}, err
	}
	out.Complete, out.SHA256 = true, hex.EncodeToString(p.sum.Sum(nil))
	return out, nil
}

// partialFor finds the file in flight for a continuing chunk, or starts a
// new one at offset 0 (superseding any earlier unfinished upload of the
// name, so a client that gave up can simply start over).
func (u *Store) partialFor(in contract.DeviceUploadIn) (*partial, error) {
	if in.Offset > 0 {
		u.mu.Lock()
		defer u.mu.Unlock()
		if sc, ok := u.scratch[in.LeaseID]; ok {
			if p, ok := sc.received[in.Name]; ok {
				return p, nil
			}
		}
		return nil, wrongOffset(in, 0)
	}
	// Refused before anything is written when the size is declared.
	if in.SizeBytes > 0 {
		if err := u.admit(in.Name, in.SizeBytes, in.SizeBytes); err != nil {
			return nil, err
		}
	}
	sc, err := u.scratchFor(in.LeaseID)
	if err != nil {
		return nil, err
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(sc.dir, PartialPrefix+in.Name+"-"+hex.EncodeToString(suffix[:]))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create upload %s: %w", in.Name, err)
	}
	p := &partial{f: f, tmp: tmp, size: in.SizeBytes, sum: sha256.New()}
	u.mu.Lock()
	cur, live := u.scratch[in.LeaseID]
	var old *partial
	if live && cur == sc {
		old = sc.received[in.Name]
		sc.received[in.Name] = p
	}
	u.mu.Unlock()
	if !live || cur != sc {
		// The lease ended while the file was being created.
		p.discard()
		return nil, leaseGone(in.LeaseID)
	}
	if old != nil {
		old.mu.Lock()
		old.discard()
		old.mu.Unlock()
	}
	return p, nil
}

// admit applies the cap and the disk guard to a file that will be total
// bytes long once the next need bytes are written.
func (u *Store) admit(name string, total, need int64) error {
	if total > u.maxBytes {
		return contract.Errorf(contract.CodeUploadTooLarge, "%s is larger than upload.maxBytes (%d bytes)", name, u.maxBytes).
			WithDetails("maxBytes", u.maxBytes)
	}
	if need <= 0 || u.free == nil {
		return nil
	}
	free, err := u.free()
	if err != nil {
		// An unreadable volume is not a full one; the write itself fails
		// if it really is.
		u.log.Warn("read free disk space for an upload", "err", err)
		return nil
	}
	if free < u.reserve || uint64(need) > free-u.reserve {
		return contract.Errorf(contract.CodeUploadTooLarge,
			"storing %d more bytes of %s would leave less than diskPressure.freeBytesThreshold (%d bytes) free; %d are free",
			need, name, u.reserve, free).WithDetails("freeBytes", free, "thresholdBytes", u.reserve)
	}
	return nil
}

// abort drops the name's file in flight, if there is one.
func (u *Store) abort(leaseID, name string) {
	u.mu.Lock()
	var p *partial
	if sc, ok := u.scratch[leaseID]; ok {
		p = sc.received[name]
	}
	u.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		u.abortLocked(leaseID, name, p)
		p.mu.Unlock()
	}
}

// commitLocked makes the file visible under its name, replacing an earlier
// upload of the name in one rename.
func (u *Store) commitLocked(leaseID, name string, p *partial) error {
	err := p.f.Close()
	p.f = nil
	if err == nil {
		err = os.Rename(p.tmp, filepath.Join(filepath.Dir(p.tmp), name))
	}
	p.done = true
	u.forget(leaseID, name, p)
	if err != nil {
		_ = os.Remove(p.tmp)
		if _, live := u.scratchOf(leaseID); !live {
			return leaseGone(leaseID)
		}
		return fmt.Errorf("commit upload %s: %w", name, err)
	}
	u.log.Info("upload stored", "lease", leaseID, "name", name, "bytes", p.received)
	return nil
}

// abortLocked drops a file in flight: nothing of it stays behind.
func (u *Store) abortLocked(leaseID, name string, p *partial) {
	p.discard()
	u.forget(leaseID, name, p)
}

func (u *Store) forget(leaseID, name string, p *partial) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if sc, ok := u.scratch[leaseID]; ok && sc.received[name] == p {
		delete(sc.received, name)
	}
}

// discard closes and removes the partial file; the caller holds p.mu.
func (p *partial) discard() {
	if p.f != nil {
		_ = p.f.Close()
		p.f = nil
	}
	if !p.done {
		_ = os.Remove(p.tmp)
	}
	p.done = true
}

func (u *Store) scratchOf(leaseID string) (*scratch, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	sc, ok := u.scratch[leaseID]
	return sc, ok
}

// scratchFor returns the lease's directory, creating it (and the watcher
// that removes it when the lease ends) on first use.
func (u *Store) scratchFor(leaseID string) (*scratch, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if sc, ok := u.scratch[leaseID]; ok {
		return sc, nil
	}
	dir, err := u.dirOf(leaseID)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(u.root, 0o700); err != nil {
		return nil, fmt.Errorf("create the uploads directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create the lease's scratch directory: %w", err)
	}
	sc := &scratch{dir: dir, received: map[string]*partial{}}
	u.scratch[leaseID] = sc
	u.watch(leaseID)
	return sc, nil
}

// watch removes the lease's directory once the lease has ended. A lease
// that is already gone has a closed channel, so a directory made in a race
// with the lease's end is removed at once.
func (u *Store) watch(leaseID string) {
	ended := u.ends.LeaseEnded(leaseID)
	go func() {
		select {
		case <-ended:
			u.drop(leaseID)
		case <-u.ctx.Done():
		}
	}()
}

// drop ends every file in flight for the lease and removes its directory.
func (u *Store) drop(leaseID string) {
	u.mu.Lock()
	sc, ok := u.scratch[leaseID]
	delete(u.scratch, leaseID)
	u.mu.Unlock()
	if !ok {
		return
	}
	for _, p := range sc.receivedSnapshot(u) {
		p.mu.Lock()
		p.discard()
		p.mu.Unlock()
	}
	if err := os.RemoveAll(sc.dir); err != nil {
		u.log.Warn("remove an ended lease's uploads", "lease", leaseID, "dir", sc.dir, "err", err)
	}
}

func (sc *scratch) receivedSnapshot(u *Store) []*partial {
	u.mu.Lock()
	defer u.mu.Unlock()
	ps := make([]*partial, 0, len(sc.received))
	for _, p := range sc.received {
		ps = append(ps, p)
	}
	return ps
}

// Sweep runs once the registry is restored: directories of leases that did
// not survive go, and so do files a restart cut off mid-stream; a live
// lease's committed files stay and are watched again.
func (u *Store) Sweep(live []core.LeaseRecord) {
	ents, err := os.ReadDir(u.root)
	if err != nil {
		return
	}
	alive := map[string]bool{}
	for _, l := range live {
		alive[l.ID] = true
	}
	for _, e := range ents {
		dir := filepath.Join(u.root, e.Name())
		if !e.IsDir() || !alive[e.Name()] {
			if err := os.RemoveAll(dir); err != nil {
				u.log.Warn("sweep leftover uploads", "dir", dir, "err", err)
			}
			continue
		}
		files, _ := os.ReadDir(dir)
		for _, f := range files {
			if strings.HasPrefix(f.Name(), PartialPrefix) {
				_ = os.Remove(filepath.Join(dir, f.Name()))
			}
		}
		u.mu.Lock()
		if _, ok := u.scratch[e.Name()]; !ok {
			u.scratch[e.Name()] = &scratch{dir: dir, received: map[string]*partial{}}
			u.watch(e.Name())
		}
		u.mu.Unlock()
	}
}

// dirOf is the lease's scratch directory. Lease ids are the daemon's own,
// but the check keeps a path out of the name whatever produced it.
func (u *Store) dirOf(leaseID string) (string, error) {
	if leaseID == "" || leaseID == "." || leaseID == ".." || strings.ContainsAny(leaseID, `/\`) {
		return "", core.ErrUnknownLease
	}
	return filepath.Join(u.root, leaseID), nil
}

// uploadRef is {upload:NAME} inside a device.exec argument.
var uploadRef = regexp.MustCompile(`\{upload:([^{}]*)\}`)

// Substitute replaces each {upload:NAME} in args by the absolute
// path of the lease's committed file. A name never uploaded (or still in
// flight) is UNKNOWN_UPLOAD, before anything runs.
func (u *Store) Substitute(leaseID string, args []string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		var ferr error
		out[i] = uploadRef.ReplaceAllStringFunc(a, func(m string) string {
			name := uploadRef.FindStringSubmatch(m)[1]
			p, err := u.path(leaseID, name)
			if err != nil && ferr == nil {
				ferr = err
			}
			return p
		})
		if ferr != nil {
			return nil, ferr
		}
	}
	return out, nil
}

func (u *Store) path(leaseID, name string) (string, error) {
	unknown := func() error {
		return contract.Errorf(contract.CodeUnknownUpload, "lease %s has no uploaded file %q", leaseID, name).
			WithDetails("leaseId", leaseID, "name", name)
	}
	if contract.ValidateUploadName(name) != nil {
		return "", unknown()
	}
	dir, err := u.dirOf(leaseID)
	if err != nil {
		return "", unknown()
	}
	p := filepath.Join(dir, name)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return "", unknown()
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("resolve upload %s: %w", name, err)
	}
	return abs, nil
}

func wrongOffset(in contract.DeviceUploadIn, want int64) error {
	return contract.Errorf(contract.CodeBadRequest, "chunk of %s at offset %d, expected offset %d", in.Name, in.Offset, want).
		WithDetails("name", in.Name, "offset", in.Offset, "expectedOffset", want).
		WithNext("send the chunks in order; start over at offset 0 to replace the file")
}

func leaseGone(id string) error {
	return contract.Errorf(contract.CodeLeaseEnded, "lease %s ended while its file was being uploaded; nothing was kept", id).
		WithDetails("leaseId", id)
}
