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
	case e.Type == "lease.released" && (e.Reason == "device-lost" || e.Reason == "expired" || e.Reason == "reset"):
		return NotifyLeaseLost, true
	}
	return "", false
}

// OwnerOf is the principal owning the lease an event is about, when the
// event carries one.
func OwnerOf(e Event) string {
	s, _ := e.Data["ownerId"].(string)
	return s
}
