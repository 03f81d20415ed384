package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// benchModel has n hosts, each with one location and a backend of 10
// endpoints.
func benchModel(n int) model.Model {
	var m model.Model
	var servers []*model.Server
	var backends []model.Backend
	for i := range n {
		name := fmt.Sprintf("default/app-%d:80", i)
		servers = append(servers, &model.Server{Host: fmt.Sprintf("app-%d.example.com", i),
			Locations: []model.Location{{Path: "/", PathType: model.PathPrefix, Backend: name, Ingress: fmt.Sprintf("default/app-%d", i)}}})
		b := model.Backend{Name: name}
		for j := range 10 {
			b.Endpoints = append(b.Endpoints, model.Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", i/256%256, i%256, j+1), Port: 8080})
		}
		backends = append(backends, b)
	}
	slices.SortFunc(backends, func(a, b model.Backend) int { return strings.Compare(a.Name, b.Name) }) // as a model holds them
	m.Backends = model.ListOf(backends...)
	m.Servers = model.ListOf(servers...)
	return m
}

// BenchmarkComputeEndpointChange is the plan of a fast-path sync: one
// backend's endpoints changed (Next.EndpointsOnly), so only it is
// compared; and, for reference, the same change found by a full compare
// of every backend (a full build).
func BenchmarkComputeEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, narrow := range []bool{true, false} {
			b.Run(fmt.Sprintf("backends=%d/endpoints-only=%v", n, narrow), func(b *testing.B) {
				applied := benchModel(n)
				cfg := render.Config{Hash: "same"}
				held := Held{ConfigHash: cfg.Hash, Backends: applied.Backends.Slice(), Current: true}
				backends := applied.Backends.Slice()
				backends[n/2].Endpoints = []model.Endpoint{{Address: "10.255.0.1", Port: 8080}}
				next := Next{Config: cfg, Backends: model.ListOf(backends...), EndpointsOnly: narrow}
				if narrow {
					next.ChangedBackends = backends[n/2 : n/2+1]
				}
				b.ReportAllocs()
				for b.Loop() {
					p := Compute(held, next)
					if push, ok := p.Step(PushBackends); len(p.Steps) != 1 || !ok || len(push.Backends) != 1 {
						b.Fatalf("plan %+v", p)
					}
				}
			})
		}
	}
}

// BenchmarkComputeNewRoute is the route diff of a new Ingress at n
// routes: every route compared (a walk of both lists, which share no
// chunk here), or only the hosts render says may have changed
// (Next.ChangedRoutes).
func BenchmarkComputeNewRoute(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		var next []model.Route
		for i := range n {
			r := model.Route{Host: fmt.Sprintf("app-%d.example.com", i), Locations: []model.RouteLocation{{Path: "/", Backend: "b"}}}
			next = append(next, r)
		}
		held := render.NewRouteList(next)
		added := model.Route{Host: "new.example.com", Locations: []model.RouteLocation{{Path: "/", Backend: "b"}}}
		next = append(next, added)
		for _, hinted := range []bool{false, true} {
			b.Run(fmt.Sprintf("routes=%d/changed-routes=%v", n, hinted), func(b *testing.B) {
				in := Next{Routes: render.NewRouteList(next)}
				if hinted {
					in.ChangedRoutes = map[string]bool{added.Host: true}
				}
				for b.Loop() {
					if p := Compute(Held{Routes: held, Current: true}, in); len(p.Steps) != 1 {
						b.Fatal(p.Steps)
					}
				}
			})
		}
	}
}
