package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"
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
	changed := s.HTTPRoutes.At(1).DeepCopy()
	changed.Generation = 2
	s.HTTPRoutes = ListOf(replaced(s.HTTPRoutes.Slice(), 1, changed)...)
	check("a route changed (its first batch built again, in islands)", false, 3)
	s.HTTPRoutes = ListOf(replaced(s.HTTPRoutes.Slice(), 1, s.HTTPRoutes.At(1).DeepCopy())...)
	check("the route changed again (its island alone)", false, 1)

	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route("wild", "*.example.com"))...)
	check("a wildcard route that covers every route", false, 4)
	s.HTTPRoutes = ListOf(s.HTTPRoutes.Slice()[:3]...)
	check("the wildcard route gone", false, 3)
	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route("twin", "app-0.example.com"))...)
	check("a second route of a hostname", false, 2)
	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route("narrow", "*.x.example.com"), route("under", "a.x.example.com"))...)
	check("a wildcard and a name under it", false, 2)

	svc := s.Services.At(2).DeepCopy()
	svc.Ports[0].Port = 8080
	s.Services = ListOf(replaced(s.Services.Slice(), 2, svc)...)
	check("the Service of one route", false, 1)

	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route("every", []string{}...))...)
	check("a route without hostnames: not in islands", true, 7)
	s.HTTPRoutes = ListOf(s.HTTPRoutes.Slice()[:6]...)
	check("that route gone: islands again", true, 6)

	s.Gateways = ListOf(gw80(httpListener("http", 80, "*.example.com")))
	check("a listener hostname", true, 6)
	written := s.Gateways.At(0).DeepCopy()
	written.ResourceVersion = "2"
	written.Status.Listeners = []gatewayv1.ListenerStatus{{Name: "http", AttachedRoutes: 6}}
	s.Gateways = ListOf(written)
	check("the Gateway's status written", false, 0)
	moved := written.DeepCopy()
	moved.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "127.0.0.9"}}
	s.Gateways = ListOf(moved)
	check("the addresses of the Gateway's status (Build reads them)", true, 6)
	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route("outside", "other.test"))...)
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

// ChangedGatewayRoutes names the hosts whose route changed since the
// model before (the very GatewayRoutes slice it returned) while the
// HTTPRoutes stay in islands, and cannot say after a full build or one
// that built the globals part (every route) again.
func TestIncrementalChangedGatewayRoutes(t *testing.T) {
	s := benchGatewaySnapshot(3)
	inc := NewIncremental()
	var last List[*Route]
	check := func(what string, wantOK bool, wantHosts int) {
		t.Helper()
		m, _, _ := inc.Build(s)
		from, hosts, ok := inc.ChangedGatewayRoutes()
		if ok != wantOK {
			t.Fatalf("%s: ok %v, want %v", what, ok, wantOK)
		}
		if ok {
			if from.Len() != last.Len() || from.Len() > 0 && !from.Same(last) {
				t.Errorf("%s: from is not the routes of the build before", what)
			}
			before, after := map[string]*Route{}, map[string]*Route{}
			for r := range from.All() {
				before[r.Host] = r
			}
			for r := range m.GatewayRoutes.All() {
				after[r.Host] = r
			}
			changed := 0
			for host := range maps.Keys(before) {
				if before[host] != after[host] {
					changed++
				}
			}
			for host := range maps.Keys(after) {
				if before[host] == nil {
					changed++
				}
			}
			for host := range maps.Keys(before) {
				if before[host] != after[host] && !hosts[host] {
					t.Errorf("%s: %q changed, not among %v", what, host, hosts)
				}
			}
			for host := range maps.Keys(after) {
				if before[host] != after[host] && !hosts[host] {
					t.Errorf("%s: %q changed, not among %v", what, host, hosts)
				}
			}
			if len(hosts) != wantHosts || changed != wantHosts {
				t.Errorf("%s: %d hosts named (%v), %d changed; want %d", what, len(hosts), hosts, changed, wantHosts)
			}
		}
		last = m.GatewayRoutes
	}
	route := func(name string, hostnames ...string) *gatewayv1.HTTPRoute {
		return newRoute("default", name, toGW(), hostnames, routeRule(nil, backendTo("", "app-0", 80)))
	}
	check("first build", false, 0)
	check("nothing changed", true, 0)
	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route("new", "new.example.com"))...)
	check("a new route", true, 1)
	changed := s.HTTPRoutes.At(1).DeepCopy()
	changed.Spec.Rules = append(changed.Spec.Rules, routeRule(nil, backendTo("", "app-2", 80)))
	s.HTTPRoutes = ListOf(replaced(s.HTTPRoutes.Slice(), 1, changed)...)
	check("a route changed (its first batch built again: 3 new routes)", true, 3)
	s.HTTPRoutes = ListOf(slices.Delete(s.HTTPRoutes.Slice(), 3, 4)...)
	check("the new route gone", true, 1)
	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route("every", []string{}...))...)
	check("a route without hostnames: the globals part", false, 0)
	s.HTTPRoutes = ListOf(s.HTTPRoutes.Slice()[:3]...)
	check("that route gone: islands built again", false, 0)
	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route("new", "new.example.com"))...)
	check("a new route in islands again", true, 1)
}

// A new HTTPRoute's build beside 2,000 makes the next Gateway routes list
// from the last (editedList): the two share every chunk but the one the
// new route's host falls in, where a flat list was copied whole (400 KB
// at 50,000 routes), and the new route is in it.
func TestNewRouteSharesTheGatewayRoutesList(t *testing.T) {
	const n = 2000
	s := benchGatewaySnapshot(n)
	inc := NewIncremental()
	last, _, _ := inc.Build(s)
	if last.GatewayRoutes.Len() < n {
		t.Fatalf("%d Gateway routes, want %d or more", last.GatewayRoutes.Len(), n)
	}
	for added := 1; added <= 3; added++ {
		host := fmt.Sprintf("new-%d.example.com", added)
		s.HTTPRoutes = ListOf(slices.SortedFunc(slices.Values(append(s.HTTPRoutes.Slice(), newRoute("default", fmt.Sprintf("new-%d", added), toGW(), []string{host},
			routeRule(nil, backendTo("", "app-0", 80))))), compareNamed)...)
		m, _, path := inc.Build(s)
		if !path.Incremental || m.GatewayRoutes.Len() != last.GatewayRoutes.Len()+1 {
			t.Fatalf("new route %d: path %+v, %d routes after %d", added, path, m.GatewayRoutes.Len(), last.GatewayRoutes.Len())
		}
		if !m.GatewayRoutes.Shares(last.GatewayRoutes) {
			t.Errorf("new route %d: the Gateway routes list shares no chunk with the last", added)
		}
		if !slices.ContainsFunc(m.GatewayRoutes.Slice(), func(r *Route) bool { return strings.HasSuffix(r.Host, " "+host) }) {
			t.Errorf("new route %d: %s not among the routes", added, host)
		}
		last = m
	}
}
