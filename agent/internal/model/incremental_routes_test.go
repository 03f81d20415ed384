package model

import (
	"maps"
	"slices"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// HTTPRoutes in islands: a change to one builds the routes whose
// hostnames cover or share one of its own (a new wildcard joins every
// route under it, a second route of a hostname joins the first), a
// Service change builds the routes that read it, the status the agent
// writes on a Gateway builds nothing, and what does not fit islands (a
// route without hostnames, a Gateway change) builds the globals part;
// Build's model after every step.
func TestIncrementalRouteIslands(t *testing.T) {
	s := benchGatewaySnapshot(3)
	inc := NewIncremental()
	check := func(what string, wantGlobals bool, wantRoutes int) {
		t.Helper()
		path := checkIncremental(t, inc, s, what)
		if !path.Incremental || path.Globals != wantGlobals || path.HTTPRoutes != wantRoutes {
			t.Errorf("%s: path %+v, want incremental, globals %v, %d HTTPRoutes", what, path, wantGlobals, wantRoutes)
		}
	}
	route := func(name string, hostnames ...string) *gatewayv1.HTTPRoute {
		return newRoute("default", name, toGW(), hostnames, routeRule(nil, backendTo("", "app-0", 80)))
	}
	if _, _, path := inc.Build(s); path.Incremental {
		t.Fatalf("first build: %+v", path)
	}
	changed := s.HTTPRoutes[1].DeepCopy()
	changed.Generation = 2
	s.HTTPRoutes = replaced(s.HTTPRoutes, 1, changed)
	check("a route changed (its first batch built again, in islands)", false, 3)
	s.HTTPRoutes = replaced(s.HTTPRoutes, 1, s.HTTPRoutes[1].DeepCopy())
	check("the route changed again (its island alone)", false, 1)

	s.HTTPRoutes = append(slices.Clone(s.HTTPRoutes), route("wild", "*.example.com"))
	check("a wildcard route that covers every route", false, 4)
	s.HTTPRoutes = s.HTTPRoutes[:3]
	check("the wildcard route gone", false, 3)
	s.HTTPRoutes = append(slices.Clone(s.HTTPRoutes), route("twin", "app-0.example.com"))
	check("a second route of a hostname", false, 2)
	s.HTTPRoutes = append(slices.Clone(s.HTTPRoutes), route("narrow", "*.x.example.com"), route("under", "a.x.example.com"))
	check("a wildcard and a name under it", false, 2)

	svc := s.Services[2].DeepCopy()
	svc.Spec.Ports[0].Port = 8080
	s.Services = replaced(s.Services, 2, svc)
	check("the Service of one route", false, 1)

	s.HTTPRoutes = append(slices.Clone(s.HTTPRoutes), route("every", []string{}...))
	check("a route without hostnames: not in islands", true, 7)
	s.HTTPRoutes = s.HTTPRoutes[:6]
	check("that route gone: islands again", true, 6)

	s.Gateways = []*gatewayv1.Gateway{gw80(httpListener("http", 80, "*.example.com"))}
	check("a listener hostname", true, 6)
	written := s.Gateways[0].DeepCopy()
	written.ResourceVersion = "2"
	written.Status.Listeners = []gatewayv1.ListenerStatus{{Name: "http", AttachedRoutes: 6}}
	s.Gateways = []*gatewayv1.Gateway{written}
	check("the Gateway's status written", false, 0)
	moved := written.DeepCopy()
	moved.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "127.0.0.9"}}
	s.Gateways = []*gatewayv1.Gateway{moved}
	check("the addresses of the Gateway's status (Build reads them)", true, 6)
	s.HTTPRoutes = append(slices.Clone(s.HTTPRoutes), route("outside", "other.test"))
	check("a route the listener does not take", false, 1)

	// The syncer hands each build the addresses the last one served
	// (Snapshot.GatewayAddressesServed): the same ones build nothing,
	// others the globals part.
	m, _ := Build(s)
	served := map[string][]string{}
	for _, g := range m.GatewayAPI.Gateways {
		served[g.Namespace+"/"+g.Name] = g.Addresses
	}
	if len(served) != 1 || slices.Equal(slices.Collect(maps.Values(served))[0], []string{"127.0.50.3"}) {
		t.Fatalf("served %v, want one Gateway on another address than 127.0.50.3", served)
	}
	s.GatewayAddressesServed = served
	check("the addresses the last build served", false, 0)
	for k := range served {
		s.GatewayAddressesServed = map[string][]string{k: {"127.0.50.3"}}
	}
	check("the Gateway served on another address", true, 7)
}

func replaced[T any](list []T, i int, v T) []T {
	out := slices.Clone(list)
	out[i] = v
	return out
}
