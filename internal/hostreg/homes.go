package hostreg

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// HomesDir is the directory, inside the host directory, where each daemon
// leaves a record of its home (ADR 0064). It lives outside host.db on
// purpose: it is what `simlock host repair` reads when host.db is damaged.
const HomesDir = "homes"

// DaemonRecordFile is the daemon's own record inside its home: the pid and
// process start identity `daemon stop` proves before it signals anything.
const DaemonRecordFile = "daemon.json"

// homeRecordVersion is the only schemaVersion this binary writes and reads.
const homeRecordVersion = 1

// maxHomeRecord bounds what the decoder reads: a record is a few hundred
// bytes, and a huge file is not one.
const maxHomeRecord = 64 << 10

// HomeRecord names a daemon and its home: written atomically by the daemon
// at start, to its home (daemon.json) and to the host directory's homes/
// directory. Readers never trust it alone: stop proves the pid's start
// identity and the home lock, repair proves the home lock free or held.
type HomeRecord struct {
	SchemaVersion int    `json:"schemaVersion"`
	Home          string `json:"home"`
	PID           int    `json:"pid"`
	Start         string `json:"start"`
	// StartedAt is the daemon's start, unix ms UTC (informational).
	StartedAt int64 `json:"startedAt"`
	// Roots are the home's absolute device roots by platform, which the
	// repair needs to derive its devices' claim keys.
	Roots map[string]string `json:"roots,omitempty"`
	// Registry is the identity of the host.db file the daemon has open
	// (device:inode), rewritten when it reopens a replaced registry, so the
	// repair can see that a running daemon has moved to the new file.
	Registry string `json:"registry,omitempty"`
}

// Owner is the record's daemon as a claim owner.
func (r HomeRecord) Owner() Owner { return Owner{Home: r.Home, PID: r.PID, Start: r.Start} }

// EncodeHomeRecord returns r as the bytes a record file holds, refusing a
// record the decoder would refuse.
func EncodeHomeRecord(r HomeRecord) ([]byte, error) {
	r.SchemaVersion = homeRecordVersion
	if err := r.valid(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// DecodeHomeRecord reads one record strictly: unknown fields, a missing or
// other schemaVersion, a relative home or root, or an impossible pid are
// refused, because a record that is wrong could aim a signal or a restored
// claim at the wrong process or home.
func DecodeHomeRecord(b []byte) (HomeRecord, error) {
	if len(b) > maxHomeRecord {
		return HomeRecord{}, fmt.Errorf("hostreg: home record of %d bytes is too large", len(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r HomeRecord
	if err := dec.Decode(&r); err != nil {
		return HomeRecord{}, fmt.Errorf("hostreg: home record: %w", err)
	}
	if dec.More() {
		return HomeRecord{}, errors.New("hostreg: home record: trailing data")
	}
	if r.SchemaVersion != homeRecordVersion {
		return HomeRecord{}, fmt.Errorf("hostreg: home record schemaVersion %d, want %d", r.SchemaVersion, homeRecordVersion)
	}
	if err := r.valid(); err != nil {
		return HomeRecord{}, err
	}
	if len(r.Roots) == 0 {
		r.Roots = nil // "roots":{} and no roots are one record
	}
	return r, nil
}

func (r HomeRecord) valid() error {
	if !cleanAbs(r.Home) {
		return fmt.Errorf("hostreg: home record: home %q is not a clean absolute path", r.Home)
	}
	if r.PID <= 1 || r.PID >= 1<<31 {
		return fmt.Errorf("hostreg: home record: pid %d", r.PID)
	}
	if r.Start == "" || len(r.Start) > 256 || strings.ContainsAny(r.Start, "\x00\n") {
		return fmt.Errorf("hostreg: home record: start identity %q", r.Start)
	}
	if r.StartedAt < 0 {
		return fmt.Errorf("hostreg: home record: startedAt %d", r.StartedAt)
	}
	for p, root := range r.Roots {
		if p == "" || !cleanAbs(root) {
			return fmt.Errorf("hostreg: home record: root %q=%q is not a clean absolute path", p, root)
		}
	}
	if len(r.Registry) > 256 {
		return errors.New("hostreg: home record: registry identity too long")
	}
	return nil
}

func cleanAbs(p string) bool {
	return p != "" && filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}

// HomeRecordPath is where home's record lives in the host directory dir:
// named by a hash of the home, so any path maps to one short file name.
func HomeRecordPath(dir, home string) string {
	sum := sha256.Sum256([]byte(home))
	return filepath.Join(dir, HomesDir, hex.EncodeToString(sum[:12])+".json")
}

// WriteHomeRecord writes r atomically (a temporary file renamed over the
// old one) with mode 0600, creating the directory 0700.
func WriteHomeRecord(path string, r HomeRecord) error {
	b, err := EncodeHomeRecord(r)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("hostreg: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("hostreg: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	// The write and sync errors must reach the rename check: a record
	// renamed into place after a failed write would be torn.
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("hostreg: write %s: %w", path, err)
	}
	return nil
}

// ReadHomeRecord reads and decodes one record file.
func ReadHomeRecord(path string) (HomeRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return HomeRecord{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHomeRecord+1))
	if err != nil {
		return HomeRecord{}, fmt.Errorf("hostreg: read %s: %w", path, err)
	}
	r, err := DecodeHomeRecord(b)
	if err != nil {
		return HomeRecord{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// HomeRecords lists the records in dir's homes/ directory by home; a file that does not decode is returned in bad with
// its error rather than hiding the others. A missing directory is none.
func HomeRecords(dir string) (recs []HomeRecord, bad map[string]error, err error) {
	ents, err := os.ReadDir(filepath.Join(dir, HomesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("hostreg: %w", err)
	}
	bad = map[string]error{}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, HomesDir, e.Name())
		r, err := ReadHomeRecord(p)
		if err != nil {
			bad[p] = err
			continue
		}
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b HomeRecord) int { return strings.Compare(a.Home, b.Home) })
	return recs, bad, nil
}
