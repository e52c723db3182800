package core

import "context"

// LiveState is what a driver read of a running device's screen just now:
// whether its lock screen is showing, and its orientation
// (contract.OrientationPortrait or contract.OrientationLandscape). A nil
// Locked or an empty Orientation is a fact the read could not establish;
// the device's description shows it as null, never as a guess.
type LiveState struct {
	Locked      *bool
	Orientation string
}

// LiveObserver is the optional driver ability to read a running device's
// live state (docs/adr/0090). The daemon's inventory asks it about the
// devices its listing saw running, one call per device, and the driver
// bounds each read itself. A failed read means only that the facts are
// unknown: it never fails the listing it belongs to.
type LiveObserver interface {
	ObserveLive(ctx context.Context, handle string) (LiveState, error)
}
