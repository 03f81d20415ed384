package model

import (
	"reflect"
	"slices"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// With Gateway API objects beside the Ingresses, Incremental gives Build's
// model: the Gateway part is built whole (the globals part), a change of
// a Service a route names builds it again, a new Ingress builds only its
// island, and a Gateway API change is a full build that says so.
// (TestIncrementalEqualsBuild, in package render, checks Ingress change
// sequences at random.)
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
		got, gotProblems, path := inc.Build(s)
		want, wantProblems := Build(s)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotProblems, wantProblems) {
			t.Fatalf("%s: the incremental model differs:\n got %s %v\nwant %s %v", what, dump(got), gotProblems, dump(want), wantProblems)
		}
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
	check("an HTTPRoute changed", false, "a Gateway API object changed")
}
