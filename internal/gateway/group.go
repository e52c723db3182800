package gateway

import "github.com/simlock/simlock/contract"

// Multi-device requests through the gateway (ADR 0043): the whole group
// goes to one worker, which grants it all or nothing; a group is never
// split over workers, since no worker could then promise the all-or-none
// grant.

// groupRoute is a group's members. routeRequest carries it by pointer so
// the request stays comparable (the planner keys unroutable shapes by it).
type groupRoute struct{ members []routeRequest }

func groupOf(in contract.LeaseRequestIn) *groupRoute {
	if len(in.Devices) == 0 {
		return nil
	}
	g := &groupRoute{}
	for _, m := range in.Devices {
		g.members = append(g.members, routeRequest{Platform: m.Platform, Model: m.Model, OSVersion: m.OSVersion, AllowDownload: in.AllowDownload})
	}
	return g
}

// routeGroup picks the worker that can hold every member at once: each
// member eligible there, and each served by a warm device or free running
// capacity after the members before it were booked on a private copy. The
// worker with the most warm members wins; ties go to the smaller id.
func routeGroup(views []viewSnapshot, g *groupRoute) (string, bool) {
	best, bestWarm := -1, -1
	for i := range views {
		v := views[i]
		if v.State != contract.WorkerConnected || v.Drained {
			continue
		}
		v.private = false // book on this copy only
		v.privatize()
		warm, ok := 0, true
		for _, m := range g.members {
			if !eligible(&v, m) {
				ok = false
				break
			}
			switch {
			case hasWarm(&v, m):
				warm++
			case freeRunning(&v, m.Platform) <= 0:
				ok = false
			}
			if !ok {
				break
			}
			claim(&v, m)
		}
		if ok && (warm > bestWarm || (warm == bestWarm && v.ID < views[best].ID)) {
			best, bestWarm = i, warm
		}
	}
	if best < 0 {
		return "", false
	}
	return views[best].ID, true
}

// claimGroup books every member of a group against one snapshot.
func claimGroup(v *viewSnapshot, g *groupRoute) {
	for _, m := range g.members {
		claim(v, m)
	}
}
