package apply

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// After a plan that left the record current, the record holds the plan's
// routes list itself (Adopt), not a copy; the profile counts and the saved
// state's names stay those of the routes; a record that is not current
// keeps its own.
func TestLuaStateAdoptsTheRoutesList(t *testing.T) {
	l := NewLuaState(nil, nil)
	var routes []model.Route
	for i := range 1000 {
		routes = append(routes, model.Route{Host: fmt.Sprintf("h%04d.test", i), Locations: []model.RouteLocation{{Path: "/", Profile: fmt.Sprint("p", i%3)}}})
	}
	next := render.NewRouteList(routes)
	l.holdRoutes(next.Slice())
	if l.heldRoutes().Same(next) {
		t.Fatal("the record shares the list before Adopt")
	}
	l.Adopt(next)
	if l.heldRoutes().Same(next) {
		t.Error("a record that is not current adopted the list")
	}
	l.current = true
	l.Adopt(next)
	if !l.heldRoutes().Same(next) {
		t.Error("a current record did not adopt the list")
	}
	if !reflect.DeepEqual(l.RouteProfiles(), map[string]bool{"p0": true, "p1": true, "p2": true}) {
		t.Errorf("profiles %v", l.RouteProfiles())
	}
	// A push after it makes a new list and leaves render's as it was.
	before := next.Slice()
	changed := model.Route{Host: "h0001.test", Locations: []model.RouteLocation{{Path: "/x"}}}
	l.holdRoutes([]model.Route{changed})
	l.dropRoutes([]string{"h0002.test"})
	if !reflect.DeepEqual(next.Slice(), before) {
		t.Fatal("a push changed the adopted list")
	}
	if got, _ := l.heldRoutes().Get("h0001.test"); !reflect.DeepEqual(got, changed) {
		t.Errorf("record holds %+v, want %+v", got, changed)
	}
	if _, ok := l.heldRoutes().Get("h0002.test"); ok || l.heldRoutes().Len() != 999 {
		t.Errorf("record holds %d routes and h0002.test: %v, want 999 without it", l.heldRoutes().Len(), ok)
	}
	if l.savedRoutes.count != 999 {
		t.Errorf("saved state names %d routes, want 999", l.savedRoutes.count)
	}
	// A push that a current record's Adopt follows is put in no list of
	// the record's own: the record holds render's.
	l.holdRoutes([]model.Route{changed})
	l.Adopt(next)
	if !l.heldRoutes().Same(next) || l.pushed != nil {
		t.Error("a current record did not adopt the list after a push")
	}
}

// The backends record is a list sorted by name that pushes keep so: new
// names merged in, known ones replaced, removed ones gone, whatever the
// order of a push; it is the record's own, so the model writing into its
// list in place (the syncer's fast path) leaves it as Lua has it.
func TestLuaStateBackendsRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 13))
	l := NewLuaState(nil, nil)
	want := map[string]model.Backend{}
	for step := range 500 {
		var push []model.Backend
		var drop []string
		names := map[string]bool{}
		for range 1 + rng.IntN([]int{2, 30, 400}[rng.IntN(3)]) {
			names[fmt.Sprintf("ns/s%04d:80", rng.IntN(3000))] = true
		}
		for name := range names {
			if rng.IntN(4) > 0 {
				b := model.Backend{Name: name, Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: int32(step)}}}
				push = append(push, b)
				want[name] = b
			} else {
				drop = append(drop, name)
				delete(want, name)
			}
		}
		l.holdBackends(push)
		slices.Sort(drop)
		l.dropBackends(drop)
		if !slices.IsSortedFunc(l.backends, func(a, b model.Backend) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatalf("step %d: record not sorted", step)
		}
		got := map[string]model.Backend{}
		for _, b := range l.backends {
			got[b.Name] = b
		}
		if len(got) != len(l.backends) || !maps.EqualFunc(got, want, func(a, b model.Backend) bool { return reflect.DeepEqual(a, b) }) {
			t.Fatalf("step %d: record holds %d backends (%d names), want %d", step, len(l.backends), len(got), len(want))
		}
		if l.savedBackends.count != len(want) {
			t.Fatalf("step %d: saved state names %d backends, want %d", step, l.savedBackends.count, len(want))
		}
	}
	list := []model.Backend{{Name: "ns/own:80", Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: 80}}}}
	l.holdBackends(list)
	list[0].Endpoints = []model.Endpoint{{Address: "10.0.0.2", Port: 80}}
	if i, ok := l.backendIndex("ns/own:80"); !ok || l.backends[i].Endpoints[0].Address != "10.0.0.1" {
		t.Error("a write into the pushed list changed the record")
	}
}
