package hostreg

import (
	"fmt"
	"strings"
)

// Reasons a claim operation is refused.
const (
	ReasonHeld     = "device-claimed" // Claim/Adopt: someone else holds the device
	ReasonNotOwner = "not-owner"      // Release/Mark*: the caller does not hold it
)

// ConflictOwner is the holder as the error contract names it.
type ConflictOwner struct {
	Home            string
	LeaseID         string
	DaemonPID       int
	DaemonStartTime string
}

// ConflictError refuses a claim operation because another owner (or an
// unreadable record) holds the device. It carries everything issue 10's
// DEVICE_IN_USE details need; the daemon maps it in one place.
type ConflictError struct {
	Reason         string
	Classification Class
	Liveness       Liveness
	DeviceKey      Key
	Owner          ConflictOwner
	// Recovery is a shell command that resolves the conflict when run
	// as printed.
	Recovery string
	Detail   string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("hostreg: device %s is held by home %s (pid %d, lease %q): %s (%s); to recover: %s",
		e.DeviceKey, e.Owner.Home, e.Owner.DaemonPID, e.Owner.LeaseID, e.Classification.Public(), e.Detail, e.Recovery)
}

func conflictFrom(reason string, st Status) *ConflictError {
	c := st.Claim
	return &ConflictError{
		Reason: reason, Classification: st.Class, Liveness: st.Liveness, DeviceKey: st.Key,
		Owner:    ConflictOwner{Home: c.Owner.Home, LeaseID: c.LeaseID, DaemonPID: c.Owner.PID, DaemonStartTime: c.Owner.Start},
		Recovery: RecoveryCommand(st), Detail: st.Detail,
	}
}

// RecoveryCommand is the command that resolves st: through the live owner
// (its home), with --stale once orphaning is proven, and with --force only
// for a record nobody can vouch for.
func RecoveryCommand(st Status) string {
	key := shellQuote(string(st.Key))
	switch st.Class {
	case ClassFree:
		return ""
	case ClassOrphaned:
		return "simlock device release --stale " + key
	case ClassInconsistent:
		return "simlock device release --force " + key
	default:
		return "simlock --home " + shellQuote(st.Claim.Owner.Home) + " device release " + key
	}
}

// shellQuote quotes s for a POSIX shell unless it needs none.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/._-@+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
