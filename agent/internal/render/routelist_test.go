package render

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// checkRouteList says how l breaks what RouteList keeps: routes sorted
// by host, each host once, and as many as Len says. (How a model.List
// keeps its chunks is model's test.)
func checkRouteList(l RouteList) error {
	n, last := 0, ""
	for r := range l.All() {
		if n > 0 && r.Host <= last {
			return fmt.Errorf("route list: %q after %q", r.Host, last)
		}
		last = r.Host
		n++
	}
	if n != l.Len() {
		return fmt.Errorf("route list: holds %d routes, says %d", n, l.Len())
	}
	return nil
}

// A list made by with from another holds what a map of the same changes
// holds, through random sets and removes of few and many hosts, and the
// list it was made from is as it was.
func TestRouteListWith(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 1))
	want := map[string]model.Route{}
	var l RouteList
	for step := range 300 {
		before, beforeRoutes := l, l.Slice()
		changed := map[string]routeChange{}
		for range 1 + rng.IntN([]int{3, 40, 700}[rng.IntN(3)]) {
			host := fmt.Sprintf("h%04d", rng.IntN(2000))
			c := routeChange{Key: host, Remove: rng.IntN(3) == 0}
			if !c.Remove {
				c.Value = &model.Route{Host: host, HTTPS: rng.IntN(2) == 0, Locations: []model.RouteLocation{{Path: fmt.Sprint("/", step)}}}
			}
			changed[host] = c
		}
		var changes []routeChange
		for _, c := range changed {
			changes = append(changes, c)
			if !c.Remove {
				want[c.Key] = *c.Value
			} else {
				delete(want, c.Key)
			}
		}
		slices.SortFunc(changes, func(a, b routeChange) int { return strings.Compare(a.Key, b.Key) })
		l = l.with(changes)
		if err := checkRouteList(l); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if l.Len() != len(want) {
			t.Fatalf("step %d: %d routes, want %d", step, l.Len(), len(want))
		}
		for host, r := range want {
			if got, ok := l.Get(host); !ok || !reflect.DeepEqual(got, r) {
				t.Fatalf("step %d: Get(%q) = %+v, %v; want %+v", step, host, got, ok, r)
			}
		}
		if _, ok := l.Get("h9999"); ok {
			t.Fatalf("step %d: Get of a host not held found one", step)
		}
		if !reflect.DeepEqual(before.Slice(), beforeRoutes) {
			t.Fatalf("step %d: with changed the list it was made from", step)
		}
		if l.Same(before) {
			t.Fatalf("step %d: a list with changes is the same as the one before", step)
		}
	}
	if again := NewRouteList(l.Slice()); !reflect.DeepEqual(again.Slice(), l.Slice()) || checkRouteList(again) != nil {
		t.Fatalf("NewRouteList of a list's routes is not that list")
	}
}

// A change at 50,000 routes makes new only the chunk it falls in and the
// list of chunks: every other chunk is the last list's, so a diff of the
// two (CompareRoutes, plan's) meets at most one chunk's routes (a chunk
// of a model.List holds at most 512), and the change allocates the list
// of chunks, its counts and one chunk of pointers: some 12 KB, not the
// 400 KB of a copy of every pointer (or 3.2 MB of every route).
func TestRouteListSharesUnchangedChunks(t *testing.T) {
	routes := make([]model.Route, 50000)
	for i := range routes {
		routes[i] = model.Route{Host: fmt.Sprintf("f%d.bench.test", i), Locations: []model.RouteLocation{{Path: "/"}}}
	}
	l := NewRouteList(routes)
	before := l.Slice()
	added := model.Route{Host: "new-0.bench.test"}
	change := []routeChange{{Key: added.Host, Value: &added}}
	next := l.with(change)
	if next.Len() != l.Len()+1 {
		t.Fatalf("%d routes, want %d", next.Len(), l.Len()+1)
	}
	if !reflect.DeepEqual(l.Slice(), before) {
		t.Fatal("with changed the list it was made from")
	}
	if got, ok := next.Get(added.Host); !ok || !reflect.DeepEqual(got, added) {
		t.Fatalf("Get(%q) = %+v, %v", added.Host, got, ok)
	}
	compared := 0
	CompareRoutes(l, next, func(a, b *model.Route) {
		if compared++; a == nil && b.Host != added.Host || b == nil {
			t.Errorf("the diff found %v, %v: only %q changed", a, b, added.Host)
		}
	})
	if compared == 0 || compared > 2*256+1 {
		t.Errorf("the diff of one change met %d of %d hosts, want at most a chunk's worth", compared, next.Len())
	}
	allocs := testing.AllocsPerRun(10, func() { l.with(change) })
	if allocs > 4 { // and a second chunk when the changed one is joined to the one before
		t.Errorf("a change allocates %v times, want 3 (the chunk list, its counts and one chunk)", allocs)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range 10 {
		l.with(change)
	}
	runtime.ReadMemStats(&m1)
	if bytes := (m1.TotalAlloc - m0.TotalAlloc) / 10; bytes > 32<<10 {
		t.Errorf("a change allocates %d bytes, want a chunk's worth (under 32 KB)", bytes)
	}
}

// Upsert and Remove, in any order of their input, hold what a map of the
// same changes holds (Upsert a copy of its routes); CompareRoutes of two lists yields each host of
// either once, in host order, with its route in each, as a diff of two
// maps would, and leaves out the hosts of the chunks both share.
func TestRouteListUpsertRemoveCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 7))
	want := map[string]model.Route{}
	var l RouteList
	for step := range 200 {
		before, beforeWant := l, maps.Clone(want)
		hosts := map[string]bool{}
		for range 1 + rng.IntN([]int{3, 40, 700}[rng.IntN(3)]) {
			hosts[fmt.Sprintf("h%05d", rng.IntN(20000))] = true
		}
		var upserts []model.Route
		var removes []string
		for host := range hosts { // map order: not sorted
			if rng.IntN(3) > 0 {
				r := model.Route{Host: host, HTTPS: rng.IntN(2) == 0, Locations: []model.RouteLocation{{Path: fmt.Sprint("/", step)}}}
				upserts = append(upserts, r)
				want[host] = r
			} else {
				removes = append(removes, host)
				delete(want, host)
			}
		}
		l = l.Upsert(upserts).Remove(removes)
		for i := range upserts { // the list holds a copy: apply's slice is its own
			upserts[i] = model.Route{Host: "scribbled"}
		}
		if err := checkRouteList(l); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got := maps.Collect(func(yield func(string, model.Route) bool) {
			for r := range l.All() {
				yield(r.Host, r)
			}
		}); !reflect.DeepEqual(got, want) && len(want) > 0 {
			t.Fatalf("step %d: list holds %d routes, want %d", step, len(got), len(want))
		}
		// Compare before with l: every host of either once, in order.
		var last string
		calls := 0
		CompareRoutes(before, l, func(a, b *model.Route) {
			calls++
			host := ""
			switch {
			case a != nil && b != nil:
				if a.Host != b.Host {
					t.Fatalf("step %d: pair %q, %q", step, a.Host, b.Host)
				}
				host = a.Host
			case a != nil:
				host = a.Host
			case b != nil:
				host = b.Host
			default:
				t.Fatalf("step %d: a call with neither route", step)
			}
			if calls > 1 && host <= last {
				t.Fatalf("step %d: %q after %q", step, host, last)
			}
			last = host
			wa, inA := beforeWant[host]
			wb, inB := want[host]
			if inA != (a != nil) || inB != (b != nil) || inA && !reflect.DeepEqual(*a, wa) || inB && !reflect.DeepEqual(*b, wb) {
				t.Fatalf("step %d: %q: got %v, %v; want %v (%v), %v (%v)", step, host, a, b, wa, inA, wb, inB)
			}
		})
		// Each host that changed is met; the unchanged ones of shared chunks are not.
		for host := range hosts {
			_, inA := beforeWant[host]
			_, inB := want[host]
			if (inA || inB) && calls == 0 {
				t.Fatalf("step %d: %q changed and Compare met no host", step, host)
			}
		}
		if len(hosts) <= 3 && before.Len() > 1000 && calls > 3*2*256 {
			t.Errorf("step %d: %d hosts changed, Compare met %d hosts of %d", step, len(hosts), calls, l.Len())
		}
	}
	calls := 0
	CompareRoutes(l, l, func(a, b *model.Route) { calls++ })
	if calls != 0 {
		t.Errorf("Compare of a list with itself met %d hosts, want none", calls)
	}
	CompareRoutes(l, NewRouteList(l.Slice()), func(a, b *model.Route) {
		if calls++; a == nil || b == nil || !reflect.DeepEqual(*a, *b) {
			t.Fatalf("Compare of a copy: %v, %v", a, b)
		}
	})
	if calls != l.Len() {
		t.Errorf("Compare of a list with a copy that shares no chunk met %d hosts, want %d", calls, l.Len())
	}
}
