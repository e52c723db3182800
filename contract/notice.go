package contract

// NoticeFor says whether an event is a lease-scoped fact its owner must
// hear about, and as which push: a crash (device-unhealthy), a recovery
// (device-recovered), or a lease that ended without its owner asking
// (lease-lost). Socket pushes and HTTP renew notices both use it, so the
// two can never disagree.
func NoticeFor(e Event) (string, bool) {
	switch {
	case e.Type == "device.crash-detected":
		return NotifyDeviceUnhealthy, true
	case e.Type == "device.recovered":
		return NotifyDeviceRecovered, true
	case e.Type == "lease.released" && lostReason(e.Reason):
		return NotifyLeaseLost, true
	}
	return "", false
}

// lostReason reports whether a lease ended with reason without its owner
// asking: its device was lost, it expired, a reset ended it, or the host
// registry no longer names its home as the device's owner (ADR 0059).
func lostReason(reason string) bool {
	switch reason {
	case "device-lost", "expired", "reset",
		"claim-released-by-recovery", "claim-held-by-another-home", "claim-inconsistent":
		return true
	}
	return false
}

// OwnerOf is the principal owning the lease an event is about, when the
// event carries one.
func OwnerOf(e Event) string {
	s, _ := e.Data["ownerId"].(string)
	return s
}
