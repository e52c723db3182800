package hostreg

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Port leases: TCP ports on the loopback interface that simlock processes
// of several homes must not share (ADR 0025). An Android emulator needs a
// console port and the adb port after it, and every home runs its own
// private adb server on a port of its own. Leases are decided like claims,
// in one BEGIN IMMEDIATE transaction, and judged by the same owner proof.

// PortPurpose says what a leased port is for.
type PortPurpose string

const (
	// PortADBServer is a home's private adb server: one per home, kept
	// while the home exists, because the lease attributes handed to
	// clients name it.
	PortADBServer PortPurpose = "adb-server"
	// PortConsole is an emulator's console port; the lease also covers
	// the port after it, where the emulator's adbd listens.
	PortConsole PortPurpose = "console"
)

// width is how many consecutive ports a lease of p covers.
func (p PortPurpose) width() int {
	if p == PortConsole {
		return 2
	}
	return 1
}

// PortRecordVersion is the layout of one ports row this binary writes.
const PortRecordVersion = 1

// PortLease is one leased port.
type PortLease struct {
	Port    int
	Purpose PortPurpose
	Owner   Owner
	// Serves is what the port is for: the AVD name of a console port, the
	// owner's home for an adb server port.
	Serves      string
	AllocatedAt time.Time
}

// Covers reports whether the lease holds port.
func (l PortLease) Covers(port int) bool {
	return port >= l.Port && port < l.Port+l.Purpose.width()
}

func (l PortLease) validate() error {
	if l.Port < 1 || l.Port+l.Purpose.width()-1 > 65535 {
		return fmt.Errorf("port %d out of range", l.Port)
	}
	switch l.Purpose {
	case PortADBServer, PortConsole:
	default:
		return fmt.Errorf("unknown port purpose %q", l.Purpose)
	}
	if l.Owner.Home == "" || !filepath.IsAbs(l.Owner.Home) || strings.ContainsRune(l.Owner.Home, 0) {
		return fmt.Errorf("owner home %q is not an absolute path", l.Owner.Home)
	}
	if l.Owner.PID <= 0 || l.Owner.PID >= 1<<31 {
		return fmt.Errorf("owner pid %d", l.Owner.PID)
	}
	if l.Owner.Start == "" {
		return errors.New("owner start time missing")
	}
	if l.Serves == "" {
		return errors.New("port lease serves nothing")
	}
	if l.AllocatedAt.IsZero() || l.AllocatedAt.UnixMilli() <= 0 {
		return errors.New("allocatedAt missing")
	}
	return nil
}

// PortStatus is one port lease as inspected. Class is ClassClaimed (the
// owner is not proven gone), ClassOrphaned or ClassInconsistent (the row
// cannot be read: its port stays held, fail closed).
type PortStatus struct {
	Lease    PortLease
	Class    Class
	Liveness Liveness
	Detail   string
}

// PortRequest asks for a port lease.
type PortRequest struct {
	Purpose PortPurpose
	Owner   Owner
	Serves  string
	// Want, when set, is the port the caller already uses for Serves (an
	// AVD's recorded console port): it is taken back without a bind
	// proof when nobody else's lease covers it, since the caller's own
	// process may be listening on it.
	Want int
	// First, Last and Step are the candidates for a new port, in order.
	First, Last, Step int
	// Skip rules out ports the caller must never use.
	Skip func(port int) bool
	// Free proves a candidate unused by binding it (every port the lease
	// would cover). A port some program holds is skipped.
	Free func(port int) bool
	// Now stamps allocatedAt: the registry reads no clock.
	Now time.Time
}

// ErrNoFreePort is wrapped when every candidate is leased or bound.
var ErrNoFreePort = errors.New("no free port")

// PortHeldError refuses a request whose lease another live owner of the
// same home holds (two daemons on one home, which the home lock forbids).
type PortHeldError struct{ Status PortStatus }

func (e *PortHeldError) Error() string {
	l := e.Status.Lease
	return fmt.Sprintf("hostreg: port %d (%s for %s) is held by pid %d of home %s: %s",
		l.Port, l.Purpose, l.Serves, l.Owner.PID, l.Owner.Home, e.Status.Detail)
}

// AllocatePort leases a port for req.Serves. The caller's existing lease
// for the same purpose and Serves is returned again (reused=true), after
// taking it over from its own home's dead daemon when need be: a restarted
// daemon keeps its ports. Otherwise Want is tried, then the candidates:
// a port is taken only when no lease covers it and Free proves it unbound.
// Another owner's orphaned lease is reclaimed only when no candidate is
// otherwise free, because its home may come back for it; a lease whose
// owner home is gone is dropped as soon as it is met.
func (db *DB) AllocatePort(ctx context.Context, req PortRequest) (lease PortLease, reused bool, err error) {
	want := PortLease{Purpose: req.Purpose, Owner: req.Owner, Serves: req.Serves, AllocatedAt: req.Now, Port: 1}
	if err := want.validate(); err != nil {
		return PortLease{}, false, fmt.Errorf("hostreg: invalid port request: %w", err)
	}
	if req.Step <= 0 {
		req.Step = req.Purpose.width()
	}
	err = db.immediate(ctx, func(q querier) error {
		all, err := db.portStatuses(ctx, q)
		if err != nil {
			return err
		}
		// The caller's own lease for the same thing.
		for _, st := range all {
			l := st.Lease
			if st.Class == ClassInconsistent || l.Purpose != req.Purpose || l.Serves != req.Serves || l.Owner.Home != req.Owner.Home {
				continue
			}
			if l.Owner != req.Owner {
				if st.Class != ClassOrphaned {
					return &PortHeldError{Status: st}
				}
				l.Owner = req.Owner
				if err := putPort(ctx, q, l); err != nil {
					return err
				}
			}
			lease, reused = l, true
			return nil
		}
		held := func(port int, allowOrphans bool) (blocked bool, drop []int) {
			for _, st := range all {
				if !overlaps(st.Lease, port, req.Purpose.width()) {
					continue
				}
				switch {
				case st.Class == ClassOrphaned && st.Liveness == LivenessHomeGone:
					drop = append(drop, st.Lease.Port)
				case st.Class == ClassOrphaned && allowOrphans:
					drop = append(drop, st.Lease.Port)
				default:
					return true, nil
				}
			}
			return false, drop
		}
		take := func(port int, drop []int) error {
			for _, p := range drop {
				if _, err := q.ExecContext(ctx, `DELETE FROM ports WHERE port = ?`, p); err != nil {
					return fmt.Errorf("hostreg: drop orphaned port %d: %w", p, err)
				}
			}
			lease = PortLease{Port: port, Purpose: req.Purpose, Owner: req.Owner, Serves: req.Serves, AllocatedAt: req.Now}
			return putPort(ctx, q, lease)
		}
		if req.Want > 0 && (req.Skip == nil || !req.Skip(req.Want)) {
			if blocked, drop := held(req.Want, false); !blocked {
				reused = true
				return take(req.Want, drop)
			}
		}
		for _, allowOrphans := range []bool{false, true} {
			for p := req.First; p > 0 && p <= req.Last && p+req.Purpose.width()-1 <= 65535; p += req.Step {
				if req.Skip != nil && req.Skip(p) {
					continue
				}
				blocked, drop := held(p, allowOrphans)
				if blocked || (req.Free != nil && !req.Free(p)) {
					continue
				}
				return take(p, drop)
			}
		}
		return fmt.Errorf("hostreg: %s port in %d–%d: %w", req.Purpose, req.First, req.Last, ErrNoFreePort)
	})
	if err != nil {
		return PortLease{}, false, err
	}
	return lease, reused, nil
}

func overlaps(l PortLease, port, width int) bool {
	return port < l.Port+l.Purpose.width() && l.Port < port+width
}

// ReleasePort ends owner's lease of port. A port nobody leases is already
// released; another owner's lease is left alone and refused.
func (db *DB) ReleasePort(ctx context.Context, port int, owner Owner) error {
	return db.immediate(ctx, func(q querier) error {
		all, err := db.portStatuses(ctx, q)
		if err != nil {
			return err
		}
		for _, st := range all {
			if st.Lease.Port != port {
				continue
			}
			if st.Class == ClassInconsistent || st.Lease.Owner != owner {
				return &PortHeldError{Status: st}
			}
			if _, err := q.ExecContext(ctx, `DELETE FROM ports WHERE port = ?`, port); err != nil {
				return fmt.Errorf("hostreg: release port %d: %w", port, err)
			}
		}
		return nil
	})
}

// Ports lists every port lease, classified. It writes nothing.
func (db *DB) Ports(ctx context.Context) ([]PortStatus, error) {
	return db.portStatuses(ctx, db.sql)
}

func putPort(ctx context.Context, q querier, l PortLease) error {
	if err := l.validate(); err != nil {
		return fmt.Errorf("hostreg: invalid port lease: %w", err)
	}
	_, err := q.ExecContext(ctx, `INSERT INTO ports (port, record_version, purpose, owner_home, owner_pid, owner_start, serves, allocated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (port) DO UPDATE SET record_version = excluded.record_version, purpose = excluded.purpose,
			owner_home = excluded.owner_home, owner_pid = excluded.owner_pid, owner_start = excluded.owner_start,
			serves = excluded.serves, allocated_at = excluded.allocated_at`,
		l.Port, PortRecordVersion, string(l.Purpose), l.Owner.Home, l.Owner.PID, l.Owner.Start, l.Serves, l.AllocatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("hostreg: write port %d: %w", l.Port, err)
	}
	return nil
}

// portStatuses reads and judges every row. Columns are scanned untyped so
// that a wrongly typed value makes its row inconsistent (its port stays
// held) instead of failing the whole read.
func (db *DB) portStatuses(ctx context.Context, q querier) ([]PortStatus, error) {
	rows, err := q.QueryContext(ctx, `SELECT port, record_version, purpose, owner_home, owner_pid, owner_start, serves, allocated_at FROM ports ORDER BY port`)
	if err != nil {
		return nil, fmt.Errorf("hostreg: read ports: %w", err)
	}
	defer rows.Close()
	var out []PortStatus
	for rows.Next() {
		v := make([]any, 8)
		p := make([]any, len(v))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			return nil, fmt.Errorf("hostreg: read ports: %w", err)
		}
		l, derr := decodePort(v)
		if derr != nil {
			out = append(out, PortStatus{Lease: l, Class: ClassInconsistent, Detail: derr.Error()})
			continue
		}
		out = append(out, PortStatus{Lease: l})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hostreg: read ports: %w", err)
	}
	for i := range out {
		if out[i].Class == ClassInconsistent {
			continue
		}
		out[i].Class, out[i].Liveness, out[i].Detail = judgeOwner(ctx, db.prober, out[i].Lease.Owner)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Lease.Port < out[j].Lease.Port })
	return out, nil
}

func decodePort(v []any) (PortLease, error) {
	num := func(x any) (int64, bool) { n, ok := x.(int64); return n, ok }
	str := func(x any) (string, bool) {
		switch s := x.(type) {
		case string:
			return s, true
		case []byte:
			return string(s), true
		}
		return "", false
	}
	var l PortLease
	port, ok1 := num(v[0])
	ver, ok2 := num(v[1])
	purpose, ok3 := str(v[2])
	home, ok4 := str(v[3])
	pid, ok5 := num(v[4])
	start, ok6 := str(v[5])
	serves, ok7 := str(v[6])
	at, ok8 := num(v[7])
	l = PortLease{Port: int(port), Purpose: PortPurpose(purpose), Owner: Owner{Home: home, PID: int(pid), Start: start},
		Serves: serves, AllocatedAt: time.UnixMilli(at).UTC()}
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8) {
		return l, errors.New("unreadable port row: a column has the wrong type")
	}
	if ver != PortRecordVersion {
		return l, fmt.Errorf("port record version %d (this simlock writes %d)", ver, PortRecordVersion)
	}
	if pid <= 0 || pid >= 1<<31 {
		return l, fmt.Errorf("owner pid %d", pid)
	}
	return l, l.validate()
}

// judgeOwner applies the claims' owner proof (ownerLiveness) to a port
// lease's owner, so a port is reclaimable exactly when a claim of the same
// owner would be. A dead owner's home may come back for its ports; a home
// that is gone never will, so it is checked for dead owners too and
// AllocatePort drops those leases at once.
func judgeOwner(ctx context.Context, p Prober, o Owner) (Class, Liveness, string) {
	liv, detail := ownerLiveness(ctx, p, o)
	switch liv {
	case LivenessHomeGone:
		return ClassOrphaned, liv, detail
	case LivenessDead, LivenessReused:
		if ok, err := p.HomeExists(ctx, o.Home); err == nil && !ok {
			return ClassOrphaned, LivenessHomeGone, detail + "; owner home " + o.Home + " no longer exists"
		}
		return ClassOrphaned, liv, detail
	}
	return ClassClaimed, liv, detail
}
