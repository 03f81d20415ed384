package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// Backends of a held list sorted by name finds what a diff by name finds
// (the upserts in next's order, the removes sorted), whether next comes
// sorted (one walk of both) or not (a search per backend).
func TestBackendsOfASortedRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 11))
	for round := range 300 {
		var held, next []model.Backend
		byName := map[string]model.Backend{}
		for i := range 200 {
			name := fmt.Sprintf("ns/s%03d:80", i)
			b := model.Backend{Name: name, Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: int32(rng.IntN(3))}}}
			if rng.IntN(3) > 0 {
				held = append(held, b)
				byName[name] = b
			}
			if rng.IntN(3) > 0 {
				b.Endpoints = []model.Endpoint{{Address: "10.0.0.1", Port: int32(rng.IntN(3))}}
				next = append(next, b)
			}
		}
		if round%2 == 1 {
			rng.Shuffle(len(next), func(i, j int) { next[i], next[j] = next[j], next[i] })
		}
		var wantUp []model.Backend
		wanted := map[string]bool{}
		for _, b := range next {
			wanted[b.Name] = true
			if have, ok := byName[b.Name]; !ok || !slices.Equal(have.Endpoints, b.Endpoints) {
				wantUp = append(wantUp, b)
			}
		}
		var wantRm []string
		for _, b := range held {
			if !wanted[b.Name] {
				wantRm = append(wantRm, b.Name)
			}
		}
		up, rm := Backends(held, model.ListOf(next...))
		if !reflect.DeepEqual(up, wantUp) || !reflect.DeepEqual(rm, wantRm) {
			t.Fatalf("round %d: upserts %v removes %v, want %v and %v", round, up, rm, wantUp, wantRm)
		}
		for _, b := range next {
			got, ok := HeldBackend(held, b.Name)
			if want, isHeld := byName[b.Name]; ok != isHeld || !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: HeldBackend(%q) = %v, %v", round, b.Name, got, ok)
			}
		}
	}
}

// A diff of the routes Lua holds against a next list made from them
// looks at the chunks that changed, not at every host: the plan of a new
// host at 50,000 compares at most a chunk's worth of routes.
func TestRoutesSkipsSharedChunks(t *testing.T) {
	routes := make([]model.Route, 50000)
	for i := range routes {
		routes[i] = model.Route{Host: fmt.Sprintf("f%d.bench.test", i), Locations: []model.RouteLocation{{Path: "/"}}}
	}
	held := render.NewRouteList(routes)
	added := model.Route{Host: "new-0.bench.test", Locations: []model.RouteLocation{{Path: "/"}}}
	next := held.Upsert([]model.Route{added})
	compared := 0
	render.CompareRoutes(held, next, func(a, b *model.Route) { compared++ })
	if compared > 2*256+1 {
		t.Errorf("the diff met %d hosts, want a chunk's worth", compared)
	}
	p := Routes(held, next)
	if len(p.Upserts) != 1 || p.Upserts[0].Host != added.Host || len(p.Removes) != 0 {
		t.Errorf("plan %+v, want the new host alone", p)
	}
	if p := Routes(next, held); len(p.Upserts) != 0 || !slices.Equal(p.Removes, []string{added.Host}) {
		t.Errorf("plan %+v, want the new host removed", p)
	}
}
