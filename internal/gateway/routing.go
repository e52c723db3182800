package gateway

import (
	"strings"

	"github.com/simlock/simlock/contract"
)

// routeRequest is what routing knows about a lease request.
type routeRequest struct {
	Platform      string
	Model         string
	OSVersion     string
	AllowDownload bool
	// group, when set, is a multi-device request: routed and booked as a
	// whole on one worker (group.go).
	group *groupRoute
}

// viewSnapshot is one worker view as routing reads it. Routing never
// mutates one; the dispatcher works on private copies (see claim).
type viewSnapshot struct {
	ID       string
	State    string
	Drained  bool
	Policy   string // the worker's downloads.policy
	Capacity contract.Capacity
	Devices  []contract.Device
	Catalog  []contract.PlatformCatalog

	private bool // Devices and Capacity.Platforms are this snapshot's own
}

// routeFunc is a routing policy: a pure function from the current views
// and one request to the worker that should get it.
type routeFunc func(views []viewSnapshot, req routeRequest) (workerID string, ok bool)

// routingPolicies is the one registration point for policies
// (gateway.routing). Nothing else in the gateway knows how a worker is
// chosen.
var routingPolicies = map[string]routeFunc{
	RoutingWarmThenFree: warmThenFree,
}

// warmThenFree is the v1 policy:
//  1. drop workers that are not connected, are drained or incompatible, or
//     lack the platform, model or runtime (a missing runtime counts only
//     where the worker's downloads.policy would let it be installed);
//  2. prefer a worker with an unleased ready device matching the request
//     (a warm hit), the freest of them if several;
//  3. otherwise the worker with the most free running capacity for the
//     platform.
//
// Ties go to the smaller worker id, so the choice is deterministic.
func warmThenFree(views []viewSnapshot, req routeRequest) (string, bool) {
	warm, cold := -1, -1
	warmFree, coldFree := 0, 0
	// Cheap tests first: the catalog check runs only for a worker that
	// would otherwise win.
	for i := range views {
		v := &views[i]
		if v.State != contract.WorkerConnected || v.Drained {
			continue
		}
		f := freeRunning(v, req.Platform)
		if hasWarm(v, req) {
			if (warm < 0 || f > warmFree || (f == warmFree && v.ID < views[warm].ID)) && eligible(v, req) {
				warm, warmFree = i, f
			}
			continue
		}
		if f <= 0 || warm >= 0 {
			continue
		}
		if (cold < 0 || f > coldFree || (f == coldFree && v.ID < views[cold].ID)) && eligible(v, req) {
			cold, coldFree = i, f
		}
	}
	switch {
	case warm >= 0:
		return views[warm].ID, true
	case cold >= 0:
		return views[cold].ID, true
	}
	return "", false
}

// eligible reports whether a worker could serve req at all.
func eligible(v *viewSnapshot, req routeRequest) bool {
	if v.State != contract.WorkerConnected || v.Drained {
		return false
	}
	pc := platformCatalog(v, req.Platform)
	if pc == nil {
		_, ok := v.Capacity.Platforms[req.Platform]
		return ok // no catalog to judge by: the worker decides
	}
	if pc.Error != "" && len(pc.Models) == 0 && len(pc.Runtimes) == 0 {
		return true // the worker could not list it; let it answer for itself
	}
	if req.Model != "" && len(pc.Models) > 0 && !anyModel(pc, req.Model, func(*contract.CatalogModel) bool { return true }) {
		return false
	}
	for i := range pc.Runtimes {
		r := &pc.Runtimes[i]
		if r.Available && osMatches(r, req.OSVersion) && supports(pc, r, req.Model) {
			return true
		}
	}
	// Only a download could serve it.
	return downloadAllowed(v.Policy, req.AllowDownload)
}

// downloadAllowed mirrors how a worker clamps allowDownload through its
// own downloads.policy (an unknown policy is taken as the default,
// on-request).
func downloadAllowed(policy string, allow bool) bool {
	switch policy {
	case "always":
		return true
	case "never":
		return false
	}
	return allow
}

func platformCatalog(v *viewSnapshot, platform string) *contract.PlatformCatalog {
	for i := range v.Catalog {
		if v.Catalog[i].Platform == platform {
			return &v.Catalog[i]
		}
	}
	return nil
}

// sameName compares model names the way a person types them: case and
// runs of spaces do not matter.
func sameName(a, b string) bool {
	for {
		a, b = strings.TrimLeft(a, " \t"), strings.TrimLeft(b, " \t")
		if a == "" || b == "" {
			return a == b
		}
		i, j := strings.IndexAny(a, " \t"), strings.IndexAny(b, " \t")
		if i < 0 {
			i = len(a)
		}
		if j < 0 {
			j = len(b)
		}
		if !strings.EqualFold(a[:i], b[:j]) {
			return false
		}
		a, b = a[i:], b[j:]
	}
}

func modelMatches(m *contract.CatalogModel, want string) bool {
	w := strings.TrimSpace(want)
	return w != "" && (m.Identifier == w || sameName(m.Name, w))
}

// anyModel reports whether some catalog model the request names satisfies f.
func anyModel(pc *contract.PlatformCatalog, want string, f func(*contract.CatalogModel) bool) bool {
	for i := range pc.Models {
		if m := &pc.Models[i]; modelMatches(m, want) && f(m) {
			return true
		}
	}
	return false
}

// supports reports whether a runtime runs the requested model (always,
// when either side says nothing).
func supports(pc *contract.PlatformCatalog, r *contract.CatalogRuntime, want string) bool {
	if strings.TrimSpace(want) == "" || len(r.SupportedModels) == 0 {
		return true
	}
	return containsStr(r.SupportedModels, strings.TrimSpace(want)) ||
		anyModel(pc, want, func(m *contract.CatalogModel) bool { return containsStr(r.SupportedModels, m.Identifier) })
}

// normOS strips a platform word from an OS request ("iOS 18", "Android 14").
func normOS(s string) string {
	t := strings.TrimSpace(s)
	for _, p := range []string{"ios", "android "} {
		if len(t) >= len(p) && strings.EqualFold(t[:len(p)], p) {
			t = strings.TrimSpace(t[len(p):])
		}
	}
	return t
}

// apiLevel reads "API 34", "api-34" or "android-34" as an API level.
func apiLevel(s string) (string, bool) {
	t := strings.TrimSpace(s)
	for _, p := range []string{"api level", "api", "android-"} {
		if len(t) >= len(p) && strings.EqualFold(t[:len(p)], p) {
			rest := strings.TrimLeft(t[len(p):], " -_")
			if rest != "" && strings.Trim(rest, "0123456789") == "" {
				return rest, true
			}
		}
	}
	return "", false
}

// versionPrefix reports whether version have lies under the requested
// prefix want: "17" covers 17.x, "17.5" covers 17.5 and 17.5.1, and a
// missing trailing component reads as 0.
func versionPrefix(have, want string) bool {
	if want == "" {
		return true
	}
	if have == "" {
		return false
	}
	for want != "" {
		var w, h string
		w, want, _ = strings.Cut(want, ".")
		h, have, _ = strings.Cut(have, ".")
		if h == "" {
			h = "0"
		}
		if trimZeros(w) != trimZeros(h) {
			return false
		}
	}
	return true
}

func trimZeros(s string) string {
	t := strings.TrimLeft(strings.TrimSpace(s), "0")
	if t == "" {
		return "0"
	}
	return t
}

// osMatches reports whether a catalog runtime serves an OS request.
func osMatches(r *contract.CatalogRuntime, want string) bool {
	if strings.TrimSpace(want) == "" {
		return true
	}
	if r.Identifier == strings.TrimSpace(want) {
		return true
	}
	if api, ok := apiLevel(want); ok {
		b, _ := apiLevel(r.Build)
		return b == api || strings.Contains(r.Identifier, "android-"+api+";")
	}
	return versionPrefix(r.Version, normOS(want))
}

// hasWarm reports whether the worker holds an unleased ready device that
// matches req.
func hasWarm(v *viewSnapshot, req routeRequest) bool {
	for i := range v.Devices {
		if warmMatch(v, &v.Devices[i], req) {
			return true
		}
	}
	return false
}

func warmMatch(v *viewSnapshot, d *contract.Device, req routeRequest) bool {
	if d.Platform != req.Platform || d.Runtime.Lifecycle != contract.StateReady || d.Runtime.Lease != nil {
		return false
	}
	if req.Model != "" && !sameName(d.Model, req.Model) {
		pc := platformCatalog(v, req.Platform)
		if pc == nil || !anyModel(pc, req.Model, func(m *contract.CatalogModel) bool {
			return sameName(m.Name, d.Model) || m.Identifier == d.Model
		}) {
			return false
		}
	}
	if req.OSVersion != "" && !versionPrefix(d.OSVersion, normOS(req.OSVersion)) {
		ok := false
		if pc := platformCatalog(v, req.Platform); pc != nil {
			for i := range pc.Runtimes {
				if r := &pc.Runtimes[i]; osMatches(r, req.OSVersion) && r.Version == d.OSVersion {
					ok = true
					break
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// planner makes one dispatch pass's decisions: each request is routed over
// the views as booked so far, and booked against the chosen one. A request
// shape that found no worker stays unroutable for the rest of the pass
// (booking only ever takes capacity away), so a long queue of requests
// nobody can serve costs one routing decision per shape, not per request.
type planner struct {
	route routeFunc
	views []viewSnapshot
	idx   map[string]int
	dead  map[routeRequest]bool
	buf   []viewSnapshot
}

func newPlanner(route routeFunc, views []viewSnapshot) *planner {
	pl := &planner{route: route, views: views, idx: make(map[string]int, len(views)), dead: map[routeRequest]bool{}}
	for i := range views {
		pl.idx[views[i].ID] = i
	}
	return pl
}

// book records a request already in flight against its worker's view.
func (pl *planner) book(workerID string, req routeRequest) {
	if i, ok := pl.idx[workerID]; ok {
		if req.group != nil {
			claimGroup(&pl.views[i], req.group)
			return
		}
		claim(&pl.views[i], req)
	}
}

// place routes req, skipping the workers skip names (may be nil), and
// books it on success.
func (pl *planner) place(req routeRequest, skip func(workerID string) bool) (string, bool) {
	if skip == nil && pl.dead[req] {
		return "", false
	}
	views := pl.views
	if skip != nil {
		pl.buf = pl.buf[:0]
		for _, v := range pl.views {
			if !skip(v.ID) {
				pl.buf = append(pl.buf, v)
			}
		}
		views = pl.buf
	}
	var id string
	var ok bool
	if req.group != nil {
		id, ok = routeGroup(views, req.group)
	} else {
		id, ok = pl.route(views, req)
	}
	if !ok {
		if skip == nil {
			pl.dead[req] = true
		}
		return "", false
	}
	pl.book(id, req)
	return id, true
}

// unbounded stands for "no limit known" in capacity arithmetic.
const unbounded = 1 << 30

// rawFree is the running capacity left for platform without touching any
// idle device.
func rawFree(v *viewSnapshot, platform string) int {
	g, p := unbounded, unbounded
	if c := v.Capacity; c.MaxRunning > 0 {
		g = max(0, c.MaxRunning-c.Running-c.Reserved)
	}
	if pc, ok := v.Capacity.Platforms[platform]; ok && pc.MaxRunning > 0 {
		p = max(0, pc.MaxRunning-pc.Running-pc.Reserved)
	}
	return min(g, p)
}

// freeRunning is how many more devices of platform the worker could run
// now: its free running capacity, plus idle ready devices it would evict
// to make room. A worker whose limits are unknown counts as full.
func freeRunning(v *viewSnapshot, platform string) int {
	idlePlat, idleAll := 0, 0
	for i := range v.Devices {
		d := &v.Devices[i]
		if d.Runtime.Lifecycle == contract.StateReady && d.Runtime.Lease == nil {
			idleAll++
			if d.Platform == platform {
				idlePlat++
			}
		}
	}
	g, p := unbounded, unbounded
	if c := v.Capacity; c.MaxRunning > 0 {
		g = max(0, c.MaxRunning-c.Running-c.Reserved) + idleAll
	}
	if pc, ok := v.Capacity.Platforms[platform]; ok && pc.MaxRunning > 0 {
		p = max(0, pc.MaxRunning-pc.Running-pc.Reserved) + idlePlat
	}
	f := min(g, p)
	if f == unbounded {
		return 0
	}
	return f
}

// privatize gives the snapshot its own devices and platform capacities
// before the dispatcher marks anything in it.
func (v *viewSnapshot) privatize() {
	if v.private {
		return
	}
	v.Devices = append([]contract.Device(nil), v.Devices...)
	pl := make(map[string]contract.PlatformCapacity, len(v.Capacity.Platforms))
	for k, c := range v.Capacity.Platforms {
		pl[k] = c
	}
	v.Capacity.Platforms = pl
	v.private = true
}

// claimMark is the lease id a snapshot gives a device a request in flight
// is about to take.
const claimMark = "(dispatching)"

// claimed is a fresh pointer to claimMark for one device's runtime.lease.
func claimed() *string {
	m := claimMark
	return &m
}

// claim books req against a snapshot, so that later decisions in the same
// pass (and requests still in flight) see the capacity as taken: a warm
// device first, then free running capacity, then an idle device the worker
// would evict.
func claim(v *viewSnapshot, req routeRequest) {
	v.privatize()
	for i := range v.Devices {
		if warmMatch(v, &v.Devices[i], req) {
			v.Devices[i].Runtime.Lease = claimed()
			return
		}
	}
	if rawFree(v, req.Platform) > 0 {
		v.Capacity.Reserved++
		if pc, ok := v.Capacity.Platforms[req.Platform]; ok {
			pc.Reserved++
			v.Capacity.Platforms[req.Platform] = pc
		}
		return
	}
	pick := -1
	for i := range v.Devices {
		d := &v.Devices[i]
		if d.Runtime.Lifecycle != contract.StateReady || d.Runtime.Lease != nil {
			continue
		}
		if d.Platform == req.Platform {
			pick = i
			break
		}
		if pick < 0 {
			pick = i
		}
	}
	if pick >= 0 {
		v.Devices[pick].Runtime.Lease = claimed()
	}
}
