package model

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
	s.HTTPRoutes = []*gatewayv1.HTTPRoute{newRoute("default", "r", toGW(), []string{"r.example.com"},
		routeRule(nil, backendTo("", "app-1", 80)))}
	inc := NewIncremental()
	check := func(what string, wantIncremental bool, wantReason string) {
		t.Helper()
		path := checkIncremental(t, inc, s, what)
		if path.Incremental != wantIncremental || path.Reason != wantReason {
			t.Errorf("%s: path %+v, want incremental %v reason %q", what, path, wantIncremental, wantReason)
		}
	}
	check("first", false, "first build")
	if m, _ := Build(s); len(m.GatewayRoutes) == 0 || len(m.Servers) != 3 {
		t.Fatalf("the snapshot serves %d Gateway routes and %d hosts", len(m.GatewayRoutes), len(m.Servers))
	}

	added := benchSnapshot(5)
	s.Ingresses = append(slices.Clone(s.Ingresses), added.Ingresses[4])
	s.Services = append(slices.Clone(s.Services), added.Services[4])
	check("a new Ingress", true, "")

	svc := s.Services[1].DeepCopy()
	svc.Spec.Ports[0].Port = 8080
	s.Services = slices.Clone(s.Services)
	s.Services[1] = svc
	check("the route's Service changed", true, "")

	route := s.HTTPRoutes[0].DeepCopy()
	route.Spec.Hostnames = []gatewayv1.Hostname{"other.example.com"}
	s.HTTPRoutes = []*gatewayv1.HTTPRoute{route}
	check("an HTTPRoute changed", true, "")

	// A second Gateway in another namespace whose listener takes routes
	// from Namespaces labelled team=b, and a route there.
	other := newGateway("other", "gw2", allowFrom(httpListener("http", 8081, ""), gatewayv1.NamespacesFromSelector, map[string]string{"team": "b"}))
	s.Gateways = append(slices.Clone(s.Gateways), other)
	s.Namespaces = []*corev1.Namespace{nsObject("default", nil), nsObject("other", nil)}
	s.HTTPRoutes = append(slices.Clone(s.HTTPRoutes), newRoute("other", "r2", parentList(parentOf("other", "gw2", "")), []string{"b.example.com"},
		routeRule(nil, backendTo("default", "app-2", 80))))
	check("a new Gateway and route", true, "")

	s.Namespaces = []*corev1.Namespace{nsObject("default", nil), nsObject("other", map[string]string{"team": "b"})}
	check("a Namespace's label", true, "")
	if m, _ := Build(s); !slices.ContainsFunc(m.GatewayAPI.Routes, func(r RouteStatus) bool { return r.Name == "r2" && r.Parents[0].Conditions[0].Status }) {
		t.Fatalf("route other/r2 is not accepted: %s", dump(m.GatewayAPI.Routes))
	}

	s.ReferenceGrants = []*gatewayv1.ReferenceGrant{referenceGrant("default", "HTTPRoute", "other", "Service", "")}
	check("a ReferenceGrant", true, "")

	s.GatewayAddressesServed = map[string][]string{"default/gw": {gwPool[1]}}
	check("the served addresses", true, "")

	// An Ingress and a route change in one snapshot.
	more := benchSnapshot(6)
	s.Ingresses = append(slices.Clone(s.Ingresses), more.Ingresses[5])
	s.Services = append(slices.Clone(s.Services), more.Services[5])
	s.HTTPRoutes = s.HTTPRoutes[:1]
	check("an Ingress and a route at once", true, "")

	s.GatewayClasses = nil
	check("the GatewayClass gone", true, "")
	if m, _ := Build(s); len(m.GatewayRoutes) != 0 || len(m.Servers) != 5 {
		t.Fatalf("without the class: %d Gateway routes, %d hosts", len(m.GatewayRoutes), len(m.Servers))
	}

	s.IngressClasses = slices.Clone(s.IngressClasses)
	s.IngressClasses[0] = s.IngressClasses[0].DeepCopy()
	check("an IngressClass changed", false, "an IngressClass changed")
}
