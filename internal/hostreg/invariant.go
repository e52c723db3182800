package hostreg

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// The ownership invariant (ADR 0059), written once: on a host, each device
// key has at most one live (home, lease); a lease is trusted after a
// restart only once its device's claim is proven its own home's in this
// registry; a lease whose claim is gone, or another owner's, ends at once
// (lease.released with one of the Reason* below) before any command of
// its home reaches the device. The daemon's startup check and its host
// watcher judge with LeaseTrust; a host-wide checker (the multi-home chaos
// drill) judges a whole host with Violations.

// Why a lease lost its device to the registry.
const (
	// ReasonClaimReleased: no claim names the device any more (a
	// `device release --stale` or `--force`, or an automatic reclaim,
	// cleared it while the lease's daemon was away or hung).
	ReasonClaimReleased = "claim-released-by-recovery"
	// ReasonClaimHeldElsewhere: another owner (another home, or another
	// daemon) holds the device's claim now.
	ReasonClaimHeldElsewhere = "claim-held-by-another-home"
	// ReasonClaimUnreadable: the record is inconsistent, so it proves
	// nobody's ownership, this home's included.
	ReasonClaimUnreadable = "claim-inconsistent"
)

// Trust is LeaseTrust's verdict on one lease's device.
type Trust struct {
	// Trusted: the claim is the caller's own (Adopt false), or its home's
	// previous daemon's, proven dead, and becomes the caller's once Adopt
	// of the record succeeds (Adopt true; a failed adoption is not trust).
	Trusted bool
	Adopt   bool
	// Reason is one of the Reason* constants when not trusted; Detail says
	// who holds the device instead, for people.
	Reason string
	Detail string
}

// LeaseTrust judges whether a lease of self's home may keep its device,
// given the device's current record (found false: no claim). It is pure:
// st is what the registry says now, classified. Elapsed time never enters
// into it, and neither does the record's lease id (the lease writer lags
// the lease): the claim's owner is what proves the device this home's.
func LeaseTrust(self Owner, st Status, found bool) Trust {
	if !found {
		return Trust{Reason: ReasonClaimReleased, Detail: "the device has no claim in the host registry"}
	}
	if st.Class == ClassInconsistent {
		return Trust{Reason: ReasonClaimUnreadable, Detail: "the claim is unreadable: " + st.Detail}
	}
	o := st.Claim.Owner
	if st.BeingReclaimed() {
		return Trust{Reason: ReasonClaimReleased, Detail: fmt.Sprintf("another daemon is reclaiming the device from pid %d of %s", o.PID, o.Home)}
	}
	if o.same(self) {
		return Trust{Trusted: true}
	}
	if o.Home == self.Home && st.Class == ClassOrphaned && st.Claim.State == StateClaimed &&
		(st.Liveness == LivenessDead || st.Liveness == LivenessReused) {
		// This home's previous daemon, proven dead: its lease is this
		// home's. A record another daemon marked for reclaim (releasing)
		// is not: its device is being shut down under it.
		return Trust{Trusted: true, Adopt: true}
	}
	if o.Home == self.Home {
		return Trust{Reason: ReasonClaimHeldElsewhere,
			Detail: fmt.Sprintf("the claim is %s by pid %d of this home (%s)", st.Class, o.PID, st.Detail)}
	}
	return Trust{Reason: ReasonClaimHeldElsewhere,
		Detail: fmt.Sprintf("the claim is %s by home %s (pid %d)", st.Class, o.Home, o.PID)}
}

// LiveLease is one lease a running daemon serves, on one device key (a
// multi-device lease is one LiveLease per member).
type LiveLease struct {
	Home    string
	LeaseID string
	Key     Key
}

// Violation is one breach of the invariant Violations found.
type Violation struct {
	Key    Key
	Rule   string
	Detail string
}

// Rules Violations checks.
const (
	RuleTwoHolders        = "two-live-leases"         // two live leases name one device key
	RuleLeaseWithoutClaim = "lease-without-own-claim" // a live lease's device is not claimed by its home
)

// Violations judges a host: claims is the registry as inspected, leases
// every live lease of every running daemon whose readiness gate is open
// (a dead daemon's leases are not live). It reports every key with two
// live leases, and every live lease whose key its own home does not claim.
// The result is sorted by key and rule, so a checker can print it as is.
func Violations(claims []Status, leases []LiveLease) []Violation {
	byKey := map[Key]Status{}
	for _, st := range claims {
		byKey[st.Key] = st
	}
	holders := map[Key][]LiveLease{}
	for _, l := range leases {
		holders[l.Key] = append(holders[l.Key], l)
	}
	var out []Violation
	for k, ls := range holders {
		distinct := map[[2]string]bool{}
		for _, l := range ls {
			distinct[[2]string{l.Home, l.LeaseID}] = true
		}
		if len(distinct) > 1 {
			out = append(out, Violation{Key: k, Rule: RuleTwoHolders, Detail: fmt.Sprintf("%d live leases: %v", len(distinct), ls)})
		}
		for _, l := range ls {
			st, ok := byKey[k]
			switch {
			case !ok:
				out = append(out, Violation{Key: k, Rule: RuleLeaseWithoutClaim, Detail: fmt.Sprintf("lease %s of %s: no claim", l.LeaseID, l.Home)})
			case st.Class == ClassInconsistent:
				out = append(out, Violation{Key: k, Rule: RuleLeaseWithoutClaim, Detail: fmt.Sprintf("lease %s of %s: unreadable claim", l.LeaseID, l.Home)})
			case st.Claim.Owner.Home != l.Home:
				out = append(out, Violation{Key: k, Rule: RuleLeaseWithoutClaim,
					Detail: fmt.Sprintf("lease %s of %s: claimed by %s", l.LeaseID, l.Home, st.Claim.Owner.Home)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Rule < out[j].Rule
	})
	return out
}

// Lookup reads key's record now, classified (found false: no claim). It
// is the fresh read a daemon makes before acting on what an older
// snapshot suggested.
func (db *DB) Lookup(ctx context.Context, key Key) (Status, bool, error) {
	r, held, err := current(ctx, db.sql, key)
	if !held {
		return Status{}, false, err
	}
	var u errUnscannable
	if errors.As(err, &u) {
		return Status{Key: key, Class: ClassInconsistent, Detail: u.Error()}, true, nil
	}
	return classify(ctx, db.prober, r), true, nil
}
