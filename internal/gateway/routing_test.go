package gateway

import (
	"fmt"
	"testing"

	"github.com/simlock/simlock/contract"
)

func iosCatalog(runtimes ...contract.CatalogRuntime) []contract.PlatformCatalog {
	if len(runtimes) == 0 {
		runtimes = []contract.CatalogRuntime{{Name: "iOS 18.2", Version: "18.2", Identifier: "rt-18-2", Available: true}}
	}
	return []contract.PlatformCatalog{{Platform: "ios",
		Models:   []contract.CatalogModel{{Name: "iPhone 16", Identifier: "com.apple.iPhone-16"}, {Name: "iPad Air", Identifier: "com.apple.iPad-Air"}},
		Runtimes: runtimes}}
}

func androidCatalog() []contract.PlatformCatalog {
	return []contract.PlatformCatalog{{Platform: "android",
		Models: []contract.CatalogModel{{Name: "Pixel 8", Identifier: "pixel_8"}},
		Runtimes: []contract.CatalogRuntime{
			{Name: "Android 14", Version: "14", Build: "API 34", Identifier: "system-images;android-34;google_apis;arm64-v8a", Available: true},
			{Name: "Android 15", Version: "15", Build: "API 35", Identifier: "system-images;android-35;google_apis;arm64-v8a", Available: false},
		}}}
}

// view builds a connected worker with maxRun running slots for platform,
// running of them in use, and the given devices.
func view(id, platform string, maxRun, running int, devs ...contract.Device) viewSnapshot {
	cat := iosCatalog()
	if platform == "android" {
		cat = androidCatalog()
	}
	return viewSnapshot{ID: id, State: contract.WorkerConnected, Policy: "on-request", Catalog: cat, Devices: devs,
		Capacity: contract.Capacity{MaxRunning: maxRun, Running: running,
			Platforms: map[string]contract.PlatformCapacity{platform: {MaxRunning: maxRun, Running: running}}}}
}

func ready(platform, model, os string) contract.Device {
	return contract.Device{ID: "d", Platform: platform, Model: model, OSVersion: os, Runtime: contract.DeviceRuntime{Lifecycle: contract.StateReady}}
}

func leased(d contract.Device) contract.Device {
	lid := "lse_x"
	d.Runtime.Lease, d.Runtime.Lifecycle = &lid, contract.StateLeased
	return d
}

func with(v viewSnapshot, f func(*viewSnapshot)) viewSnapshot { f(&v); return v }

func TestWarmThenFree(t *testing.T) {
	ios := routeRequest{Platform: "ios"}
	iphone := routeRequest{Platform: "ios", Model: "iPhone 16", OSVersion: "18"}
	cases := []struct {
		name  string
		views []viewSnapshot
		req   routeRequest
		want  string // "" = no worker
	}{
		{"no workers", nil, ios, ""},
		{"the only free worker", []viewSnapshot{view("a", "ios", 2, 0)}, ios, "a"},
		{"most free capacity wins", []viewSnapshot{view("a", "ios", 2, 1), view("b", "ios", 4, 1)}, ios, "b"},
		{"ties go to the smaller id", []viewSnapshot{view("b", "ios", 2, 0), view("a", "ios", 2, 0)}, ios, "a"},
		{"a warm hit beats more free capacity",
			[]viewSnapshot{view("a", "ios", 2, 1, ready("ios", "iPhone 16", "18.2")), view("b", "ios", 8, 0)}, iphone, "a"},
		{"a warm hit even when the worker is otherwise full",
			[]viewSnapshot{view("a", "ios", 1, 1, ready("ios", "iPhone 16", "18.2")), view("b", "ios", 8, 0)}, iphone, "a"},
		{"a leased device is not warm",
			[]viewSnapshot{view("a", "ios", 2, 1, leased(ready("ios", "iPhone 16", "18.2"))), view("b", "ios", 8, 0)}, iphone, "b"},
		{"a device of another model is not warm (but evictable)",
			[]viewSnapshot{view("a", "ios", 1, 1, ready("ios", "iPad Air", "18.2")), view("b", "ios", 2, 1)}, iphone, "a"},
		{"a device of another OS is not warm",
			[]viewSnapshot{view("a", "ios", 4, 1, ready("ios", "iPhone 16", "17.5")), view("b", "ios", 8, 0)}, iphone, "b"},
		{"model by identifier finds the warm device",
			[]viewSnapshot{view("a", "ios", 2, 1, ready("ios", "iPhone 16", "18.2")), view("b", "ios", 8, 0)},
			routeRequest{Platform: "ios", Model: "com.apple.iPhone-16"}, "a"},
		{"full workers are passed over", []viewSnapshot{view("a", "ios", 2, 2), view("b", "ios", 1, 1)}, ios, ""},
		{"reserved slots count as used", []viewSnapshot{with(view("a", "ios", 2, 1), func(v *viewSnapshot) {
			v.Capacity.Reserved = 1
			v.Capacity.Platforms["ios"] = contract.PlatformCapacity{MaxRunning: 2, Running: 1, Reserved: 1}
		})}, ios, ""},
		{"the global limit binds too", []viewSnapshot{with(view("a", "ios", 4, 0), func(v *viewSnapshot) {
			v.Capacity.MaxRunning, v.Capacity.Running = 3, 3
		})}, ios, ""},
		{"disconnected, drained and incompatible workers are dropped", []viewSnapshot{
			with(view("a", "ios", 9, 0), func(v *viewSnapshot) { v.State = contract.WorkerDisconnected }),
			with(view("b", "ios", 9, 0), func(v *viewSnapshot) { v.Drained = true }),
			with(view("c", "ios", 9, 0), func(v *viewSnapshot) { v.State = contract.WorkerIncompatible }),
			view("d", "ios", 1, 0)}, ios, "d"},
		{"a drained worker's warm device is not offered", []viewSnapshot{
			with(view("a", "ios", 2, 1, ready("ios", "iPhone 16", "18.2")), func(v *viewSnapshot) { v.Drained = true }),
			view("b", "ios", 1, 0)}, iphone, "b"},
		{"a worker lacking the platform is dropped", []viewSnapshot{view("a", "android", 9, 0), view("b", "ios", 1, 0)}, ios, "b"},
		{"an unknown model is dropped", []viewSnapshot{view("a", "ios", 9, 0)}, routeRequest{Platform: "ios", Model: "Nokia 3310"}, ""},
		{"an android request skips an ios worker", []viewSnapshot{view("a", "ios", 9, 0), view("b", "android", 1, 0)},
			routeRequest{Platform: "android", OSVersion: "14"}, "b"},
		{"android by API level", []viewSnapshot{view("b", "android", 1, 0)}, routeRequest{Platform: "android", OSVersion: "API 34"}, "b"},
		{"a missing runtime without allowDownload is dropped", []viewSnapshot{view("a", "ios", 9, 0)},
			routeRequest{Platform: "ios", OSVersion: "17.5"}, ""},
		{"a missing runtime with allowDownload on an on-request worker", []viewSnapshot{view("a", "ios", 9, 0)},
			routeRequest{Platform: "ios", OSVersion: "17.5", AllowDownload: true}, "a"},
		{"a never worker does not download", []viewSnapshot{
			with(view("a", "ios", 9, 0), func(v *viewSnapshot) { v.Policy = "never" }), view("b", "ios", 1, 0)},
			routeRequest{Platform: "ios", OSVersion: "17.5", AllowDownload: true}, "b"},
		{"an always worker downloads unasked", []viewSnapshot{
			view("a", "ios", 9, 0), with(view("b", "ios", 1, 0), func(v *viewSnapshot) { v.Policy = "always" })},
			routeRequest{Platform: "ios", OSVersion: "17.5"}, "b"},
		{"a listed but uninstalled image needs a download", []viewSnapshot{view("a", "android", 9, 0)},
			routeRequest{Platform: "android", OSVersion: "15"}, ""},
		{"idle devices count as room (the worker evicts)", []viewSnapshot{
			view("a", "ios", 2, 2, ready("ios", "iPad Air", "18.2"), leased(ready("ios", "iPad Air", "18.2")))}, iphone, "a"},
		{"unknown limits count as full", []viewSnapshot{with(view("a", "ios", 0, 0), func(v *viewSnapshot) {
			v.Capacity = contract.Capacity{}
		})}, ios, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := warmThenFree(c.views, c.req)
			if c.want == "" {
				if ok {
					t.Fatalf("routed to %s, want no worker", got)
				}
				return
			}
			if !ok || got != c.want {
				t.Fatalf("routed to %q (%v), want %q", got, ok, c.want)
			}
		})
	}
}

func TestClaimBooksCapacityWithinAPass(t *testing.T) {
	views := []viewSnapshot{view("a", "ios", 1, 1, ready("ios", "iPhone 16", "18.2")), view("b", "ios", 1, 0)}
	shared := views[0].Devices
	req := routeRequest{Platform: "ios", Model: "iPhone 16"}
	var got []string
	for range 4 {
		id, ok := warmThenFree(views, req)
		if !ok {
			got = append(got, "-")
			continue
		}
		got = append(got, id)
		for i := range views {
			if views[i].ID == id {
				claim(&views[i], req)
			}
		}
	}
	// a's warm device, then b's one free slot; a's only running slot is its
	// warm device, so nothing is left.
	if fmt.Sprint(got) != "[a b - -]" {
		t.Fatalf("decisions %v", got)
	}
	if shared[0].Runtime.Lease != nil {
		t.Fatal("claim mutated the view's own device list")
	}
}

func TestVersionPrefix(t *testing.T) {
	for _, c := range []struct {
		have, want string
		ok         bool
	}{{"18.2", "18", true}, {"18.2", "18.2", true}, {"18.2.1", "18.2", true}, {"18", "18.0", true},
		{"18.20", "18.2", false}, {"17.5", "18", false}, {"", "18", false}, {"18.2", "", true}} {
		if got := versionPrefix(c.have, c.want); got != c.ok {
			t.Errorf("versionPrefix(%q, %q) = %v", c.have, c.want, got)
		}
	}
}

// Dispatch decisions at fleet scale: one pass over the queued requests
// (200, 2,000 or 20,000) and 200 worker views, each request routed and
// booked. "free" has room for some of them; "full" has none (the steady
// state of a deep queue). bench/cmd/report quotes ns/decision and how it
// grows with the queue.
func BenchmarkRoutingDecisions(b *testing.B) {
	for _, bc := range []struct {
		name    string
		running int
	}{{"free", 6}, {"full", 8}} {
		for _, queued := range []int{200, 2000, 20000} {
			b.Run(fmt.Sprintf("%s/queued=%d", bc.name, queued), func(b *testing.B) {
				base := make([]viewSnapshot, 200)
				for i := range base {
					p := "ios"
					if i%2 == 1 {
						p = "android"
					}
					var devs []contract.Device
					for j := range 6 {
						d := ready(p, "iPhone 16", "18.2")
						if p == "android" {
							d.Model, d.OSVersion = "Pixel 8", "14"
						}
						d.ID = fmt.Sprintf("w%d-d%d", i, j)
						if j%2 == 0 || bc.running == 8 {
							d = leased(d)
						}
						devs = append(devs, d)
					}
					base[i] = view(fmt.Sprintf("w%03d", i), p, 8, bc.running, devs...)
				}
				reqs := make([]routeRequest, queued)
				for i := range reqs {
					switch i % 4 {
					case 0:
						reqs[i] = routeRequest{Platform: "ios", Model: "iPhone 16", OSVersion: "18"}
					case 1:
						reqs[i] = routeRequest{Platform: "android", OSVersion: "14"}
					case 2:
						reqs[i] = routeRequest{Platform: "ios"}
					default:
						reqs[i] = routeRequest{Platform: "android", Model: "pixel_8", OSVersion: "15"} // unservable: passed over
					}
				}
				placed := 0
				b.ResetTimer()
				for b.Loop() {
					pl := newPlanner(warmThenFree, append([]viewSnapshot(nil), base...))
					placed = 0
					for _, r := range reqs {
						if _, ok := pl.place(r, nil); ok {
							placed++
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(reqs)), "ns/decision")
				b.ReportMetric(float64(placed), "placed/pass")
			})
		}
	}
}
