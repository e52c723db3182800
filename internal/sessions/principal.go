package sessions

import (
	"context"
	"crypto/subtle"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
)

// principalOf is the principal a session belongs to. Three places know
// it, and this is the only function that reads them, in one order (ADR
// 0055, ADR 0058):
//
//  1. the receipt's principal, recorded once at prepare and never updated;
//  2. the broker's memory of the session, which only ever holds what this
//     function answered when the session became live, so it keeps the
//     answer of 3 for a receipt from before store migration 9 once the
//     lease is gone;
//  3. the owner of the session's lease while it is held: the lease was
//     requested with the preparing principal as its owner.
//
// "" means nobody is known to own it; callers treat that as no one's,
// never as anyone's.
func (b *Broker) principalOf(rec Record) string {
	if rec.Principal != "" {
		return rec.Principal
	}
	if sid := rec.Receipt.SessionID; sid != "" {
		b.mu.Lock()
		s, ok := b.live[sid]
		owner := ""
		if ok {
			owner = s.owner
		}
		b.mu.Unlock()
		if owner != "" {
			return owner
		}
	}
	if id := rec.Receipt.LeaseID; id != "" {
		if l, ok := b.engine.Lease(id); ok {
			return l.OwnerID
		}
	}
	return ""
}

// mayRead reports whether the caller may read a session owned by
// principal without an owner token: an admin reads any; an agent only one
// whose principal is its own and known.
func mayRead(call *dispatch.Call, principal string) bool {
	if isAdmin(call) {
		return true
	}
	return principal != "" && principal == call.Session.Principal
}

// isAdmin reports whether the call comes from an admin, who is told the
// precise reason a session call was refused.
func isAdmin(call *dispatch.Call) bool {
	return call == nil || call.Session.Role == contract.RoleAdmin
}

// ownerKey is the owner digest a caller's token is stored and looked up
// under (ADR 0063). An agent's session is bound to its principal as well
// as to its token, so another principal holding the token computes
// another key: every session call, on the same path and through the same
// store reads, answers it exactly as it answers a wrong token. An admin's
// key is the token's alone: admins act for the operator across
// processes (each CLI process is its own principal) and bypass ownership
// elsewhere too.
func ownerKey(call *dispatch.Call, token string) string {
	if isAdmin(call) {
		return OwnerDigest(token)
	}
	return PrincipalOwnerDigest(call.Session.Principal, token)
}

// receiptByRequest reads the caller's receipt of a request id under its
// token, and the owner digest it is kept under. An agent reads only under
// its own key. An admin reads its own key first and then, holding an
// agent's token, the agent's receipt of that request id: admins act on
// any session whose token they hold.
func (b *Broker) receiptByRequest(ctx context.Context, call *dispatch.Call, token, requestID string) (Record, bool, string, error) {
	od := ownerKey(call, token)
	rec, ok, err := b.st.SessionReceiptByRequest(ctx, od, requestID)
	if err != nil || ok || !isAdmin(call) {
		return rec, ok, od, err
	}
	recs, err := b.st.SessionReceiptsByRequestID(ctx, requestID)
	if err != nil {
		return Record{}, false, od, err
	}
	// Several principals may have used one token and request id; a
	// session wins over another principal's tombstone of the id.
	var tomb *Record
	for i, r := range recs {
		if r.Principal == "" || subtle.ConstantTimeCompare([]byte(r.OwnerDigest), []byte(PrincipalOwnerDigest(r.Principal, token))) != 1 {
			continue
		}
		if !r.Abandoned {
			return r, true, r.OwnerDigest, nil
		}
		if tomb == nil {
			tomb = &recs[i]
		}
	}
	if tomb != nil {
		return *tomb, true, tomb.OwnerDigest, nil
	}
	return Record{}, false, od, nil
}

// holdsToken compares a stored owner digest with the caller's token in constant
// time, so how long a mismatch takes says nothing about how much of the
// digest matched. An agent must present its own key; an admin with the
// token also owns an agent's session (principal, from principalOf).
func holdsToken(call *dispatch.Call, digest, principal, token string) bool {
	same := func(want string) bool { return subtle.ConstantTimeCompare([]byte(digest), []byte(want)) == 1 }
	if !isAdmin(call) {
		return same(ownerKey(call, token))
	}
	byToken := same(OwnerDigest(token))
	byPrincipal := principal != "" && same(PrincipalOwnerDigest(principal, token))
	return byToken || byPrincipal
}
