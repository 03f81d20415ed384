package model

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// checkIncremental builds s with inc and fails t unless the model and
// problems are Build's.
func checkIncremental(t *testing.T, inc *Incremental, s Snapshot, what string) BuildPath {
	t.Helper()
	got, gotProblems, path := inc.Build(s)
	want, wantProblems := Build(s)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotProblems, wantProblems) {
		t.Fatalf("%s: the incremental model differs:\n got %s %v\nwant %s %v", what, dump(got), gotProblems, dump(want), wantProblems)
	}
	return path
}

// With Gateway API objects beside the Ingresses, Incremental gives Build's
// model: the Gateway part is the globals part and the route islands
// beside it (TestIncrementalRouteIslands), a change of a Service a route
// names builds its island again, a new Ingress builds only its island,
// and a Gateway API change (objects, Namespaces, the Gateway flags)
// builds the Gateway part alone: Incremental, equal to Build after every
// step, alone and beside Ingress changes. (TestIncrementalEqualsBuild, in
// package render, checks Ingress and Gateway API change sequences at
// random.)
func TestIncrementalWithGatewayAPI(t *testing.T) {
	s := gwSnapshot(gw80())
	base := benchSnapshot(3)
	s.Ingresses, s.IngressClasses, s.IngressClass = base.Ingresses, base.IngressClasses, base.IngressClass
	s.Services, s.EndpointSlices = base.Services, base.EndpointSlices
	s.HTTPRoutes = ListOf(newRoute("default", "r", toGW(), []string{"r.example.com"},
		routeRule(nil, backendTo("", "app-1", 80))))
	inc := NewIncremental()
	check := func(what string, wantIncremental bool, wantReason string) {
		t.Helper()
		path := checkIncremental(t, inc, s, what)
		if path.Incremental != wantIncremental || path.Reason != wantReason {
			t.Errorf("%s: path %+v, want incremental %v reason %q", what, path, wantIncremental, wantReason)
		}
	}
	check("first", false, "first build")
	if m, _ := Build(s); m.GatewayRoutes.Len() == 0 || m.Servers.Len() != 3 {
		t.Fatalf("the snapshot serves %d Gateway routes and %d hosts", m.GatewayRoutes.Len(), m.Servers.Len())
	}

	added := benchSnapshot(5)
	s.Ingresses = ListOf(append(s.Ingresses.Slice(), added.Ingresses.At(4))...)
	s.Services = ListOf(append(s.Services.Slice(), added.Services.At(4))...)
	check("a new Ingress", true, "")

	svc := s.Services.At(1).DeepCopy()
	svc.Ports[0].Port = 8080
	s.Services = withAt(s.Services, 1, svc)
	check("the route's Service changed", true, "")

	route := s.HTTPRoutes.At(0).DeepCopy()
	route.Spec.Hostnames = []gatewayv1.Hostname{"other.example.com"}
	s.HTTPRoutes = ListOf(route)
	check("an HTTPRoute changed", true, "")

	// A second Gateway in another namespace whose listener takes routes
	// from Namespaces labelled team=b, and a route there.
	other := newGateway("other", "gw2", allowFrom(httpListener("http", 8081, ""), gatewayv1.NamespacesFromSelector, map[string]string{"team": "b"}))
	s.Gateways = ListOf(append(s.Gateways.Slice(), other)...)
	s.Namespaces = ListOf(nsObject("default", nil), nsObject("other", nil))
	s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), newRoute("other", "r2", parentList(parentOf("other", "gw2", "")), []string{"b.example.com"},
		routeRule(nil, backendTo("default", "app-2", 80))))...)
	check("a new Gateway and route", true, "")

	s.Namespaces = ListOf(nsObject("default", nil), nsObject("other", map[string]string{"team": "b"}))
	check("a Namespace's label", true, "")
	if m, _ := Build(s); !slices.ContainsFunc(m.GatewayAPI.Routes.Slice(), func(r *RouteStatus) bool { return r.Name == "r2" && r.Parents[0].Conditions[0].Status }) {
		t.Fatalf("route other/r2 is not accepted: %s", dump(m.GatewayAPI.Routes))
	}

	s.ReferenceGrants = ListOf(referenceGrant("default", "HTTPRoute", "other", "Service", ""))
	check("a ReferenceGrant", true, "")

	s.GatewayAddressesServed = map[string][]string{"default/gw": {gwPool[1]}}
	check("the served addresses", true, "")

	// An Ingress and a route change in one snapshot.
	more := benchSnapshot(6)
	s.Ingresses = ListOf(append(s.Ingresses.Slice(), more.Ingresses.At(5))...)
	s.Services = ListOf(append(s.Services.Slice(), more.Services.At(5))...)
	s.HTTPRoutes = ListOf(s.HTTPRoutes.Slice()[:1]...)
	check("an Ingress and a route at once", true, "")

	s.GatewayClasses = List[*gatewayv1.GatewayClass]{}
	check("the GatewayClass gone", true, "")
	if m, _ := Build(s); m.GatewayRoutes.Len() != 0 || m.Servers.Len() != 5 {
		t.Fatalf("without the class: %d Gateway routes, %d hosts", m.GatewayRoutes.Len(), m.Servers.Len())
	}

	s.IngressClasses = withAt(s.IngressClasses, 0, s.IngressClasses.At(0).DeepCopy())
	check("an IngressClass changed", false, "an IngressClass changed")
}

// diffList finds by walking two sorted lists (diffOrdered) what
// diffNamed finds by name: random edits of a sorted list of Services
// (replaced, added, removed, one name twice, two swapped), each compared
// with diffNamed's changes and index; a next list out of order or with a
// name twice is found out, and diffed by name.
func TestDiffOrderedIsDiffNamed(t *testing.T) {
	service := func(ns, name string) *Service {
		return &Service{Namespace: ns, Name: name}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		var last []*Service
		for i := range rng.IntN(8) {
			last = append(last, service(fmt.Sprintf("ns%d", i/3), fmt.Sprintf("s%d", i)))
		}
		next := slices.Clone(last)
		for range rng.IntN(4) {
			switch i := rng.IntN(len(next) + 1); rng.IntN(5) {
			case 0: // replaced
				if i < len(next) {
					next[i] = service(next[i].Namespace, next[i].Name)
				}
			case 1: // added, at its place or not
				next = slices.Insert(next, i, service(fmt.Sprintf("ns%d", rng.IntN(3)), fmt.Sprintf("s%d", rng.IntN(10))))
			case 2:
				if i < len(next) {
					next = slices.Delete(next, i, i+1)
				}
			case 3: // swapped
				if i+1 < len(next) {
					next[i], next[i+1] = next[i+1], next[i]
				}
			default: // a name twice
				if i < len(next) {
					next = slices.Insert(next, i, service(next[i].Namespace, next[i].Name))
				}
			}
		}
		byName, _ := indexNamed(ListOf(last...))
		want := diffNamed(byName, ListOf(next...))
		index, _ := indexNamed(ListOf(last...))
		got, ordered := diffList(index, ListOf(last...), ListOf(next...), true)
		if ordered != isOrdered(ListOf(next...)) {
			t.Fatalf("round %d: ordered %v, want %v", round, ordered, isOrdered(ListOf(next...)))
		}
		key := func(c objectChange[*Service]) string { return c.key.namespace + "/" + c.key.name }
		slices.SortFunc(got, func(a, b objectChange[*Service]) int { return strings.Compare(key(a), key(b)) })
		slices.SortFunc(want, func(a, b objectChange[*Service]) int { return strings.Compare(key(a), key(b)) })
		if ordered && !reflect.DeepEqual(got, want) || !reflect.DeepEqual(index, byName) {
			t.Fatalf("round %d: last %v next %v: changes %v, want %v", round, serviceNames(last), serviceNames(next), got, want)
		}
	}
}

func serviceNames(list []*Service) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

// TestLinkKeysOnePerHost: the names that link Ingresses are one per host,
// the same for a host, its case and its www twin, so that the links hold
// one key for each (and still join what the three names did).
func TestLinkKeysOnePerHost(t *testing.T) {
	ing := &networkingv1.Ingress{Spec: networkingv1.IngressSpec{
		Rules: []networkingv1.IngressRule{{Host: "WWW.Shop.example"}, {Host: "shop.example"}, {Host: "www.www.shop.example"}},
		TLS:   []networkingv1.IngressTLS{{Hosts: []string{"www.shop.example"}}},
	}}
	if got := linkKeys(ing); !slices.Equal(got, []string{"shop.example"}) {
		t.Errorf("linkKeys = %q, want [shop.example]", got)
	}
	for _, host := range []string{"a.example", "A.example", "www.a.example", "Www.A.Example"} {
		if got := linkKey(host); got != "a.example" {
			t.Errorf("linkKey(%q) = %q, want a.example", host, got)
		}
	}
	if got := linkKey(""); got != "" {
		t.Errorf(`linkKey("") = %q, want ""`, got)
	}
}

// TestIncrementalSliceIndex: Incremental holds no index of the
// EndpointSlices by name while their lists come ordered (the walk needs
// none), makes one when a list comes out of order, finds a name twice
// there, and drops it once they are ordered again; Build's model at each
// step.
func TestIncrementalSliceIndex(t *testing.T) {
	s := benchSnapshot(5) // app-0 … app-4: ordered
	inc := NewIncremental()
	step := func(what string, wantIndex, wantIncremental bool) {
		t.Helper()
		path := checkIncremental(t, inc, s, what)
		if (inc.slices != nil) != wantIndex || path.Incremental != wantIncremental {
			t.Errorf("%s: index of %d slices (nil %v), path %+v; want an index %v, incremental %v",
				what, len(inc.slices), inc.slices == nil, path, wantIndex, wantIncremental)
		}
	}
	changed := func(slice *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
		c := slice.DeepCopy()
		c.Endpoints = c.Endpoints[:1]
		return c
	}
	step("first", false, false)
	s.EndpointSlices = withAt(s.EndpointSlices, 1, changed(s.EndpointSlices.At(1)))
	step("a slice changed, in order", false, true)
	s.EndpointSlices = reversed(s.EndpointSlices)
	s.EndpointSlices = withAt(s.EndpointSlices, 0, changed(s.EndpointSlices.At(0)))
	step("a slice changed, out of order", true, true)
	ordered := s.EndpointSlices.Slice()
	slices.Reverse(ordered)
	s.EndpointSlices = ListOf(append(s.EndpointSlices.Slice(), changed(s.EndpointSlices.At(2)))...)
	step("a name twice, out of order", true, false)
	s.EndpointSlices = ListOf(ordered...)
	step("in order again", false, true)
	s.EndpointSlices = withAt(s.EndpointSlices, 3, changed(s.EndpointSlices.At(3)))
	step("a slice changed, in order again", false, true)
}
