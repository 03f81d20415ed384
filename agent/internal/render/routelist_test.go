package render

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// checkRouteList says how l breaks what RouteList keeps: chunks not
// empty and sorted by host, each after the one before, and its length.
func checkRouteList(l RouteList) error {
	n, last := 0, ""
	for i, chunk := range l.chunks {
		if len(chunk) == 0 {
			return fmt.Errorf("route list: chunk %d is empty", i)
		}
		if len(chunk) > 2*routeChunk {
			return fmt.Errorf("route list: chunk %d holds %d routes, more than %d", i, len(chunk), 2*routeChunk)
		}
		for _, r := range chunk {
			if n > 0 && r.Host <= last {
				return fmt.Errorf("route list: %q after %q", r.Host, last)
			}
			last = r.Host
			n++
		}
	}
	if n != l.n {
		return fmt.Errorf("route list: holds %d routes, says %d", n, l.n)
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
			c := routeChange{host: host, ok: rng.IntN(3) > 0}
			if c.ok {
				c.route = model.Route{Host: host, HTTPS: rng.IntN(2) == 0, Locations: []model.RouteLocation{{Path: fmt.Sprint("/", step)}}}
			}
			changed[host] = c
		}
		var changes []routeChange
		for _, c := range changed {
			changes = append(changes, c)
			if c.ok {
				want[c.host] = c.route
			} else {
				delete(want, c.host)
			}
		}
		slices.SortFunc(changes, func(a, b routeChange) int { return strings.Compare(a.host, b.host) })
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
// list of chunks: every other chunk is the last list's.
func TestRouteListSharesUnchangedChunks(t *testing.T) {
	routes := make([]model.Route, 50000)
	for i := range routes {
		routes[i] = model.Route{Host: fmt.Sprintf("f%d.bench.test", i), Locations: []model.RouteLocation{{Path: "/"}}}
	}
	l := NewRouteList(routes)
	next := l.with([]routeChange{{host: "new-0.bench.test", route: model.Route{Host: "new-0.bench.test"}, ok: true}})
	if next.Len() != l.Len()+1 {
		t.Fatalf("%d routes, want %d", next.Len(), l.Len()+1)
	}
	shared := map[*model.Route]bool{}
	for _, chunk := range l.chunks {
		shared[&chunk[0]] = true
	}
	fresh := 0
	for _, chunk := range next.chunks {
		if !shared[&chunk[0]] {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d of %d chunks are new, want 1", fresh, len(next.chunks))
	}
	allocs := testing.AllocsPerRun(10, func() {
		l.with([]routeChange{{host: "new-0.bench.test", route: model.Route{Host: "new-0.bench.test"}, ok: true}})
	})
	if allocs > 2 {
		t.Errorf("a change allocates %v times, want 2 (the chunk list and one chunk)", allocs)
	}
}
