package model

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// newGRPCRoute is a GRPCRoute of Gateway infra/gw with the given rules.
func newGRPCRoute(name string, rules ...gatewayv1.GRPCRouteRule) *gatewayv1.GRPCRoute {
	return &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(baseTime)},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parentList(parentOf("", "gw", ""))},
			Rules:           rules,
		},
	}
}

func grpcRule(service, method string, headers map[string]string, backend string) gatewayv1.GRPCRouteRule {
	port := gatewayv1.PortNumber(80)
	m := gatewayv1.GRPCRouteMatch{}
	if service != "" || method != "" {
		m.Method = &gatewayv1.GRPCMethodMatch{}
		if service != "" {
			m.Method.Service = &service
		}
		if method != "" {
			m.Method.Method = &method
		}
	}
	for name, value := range headers {
		m.Headers = append(m.Headers, gatewayv1.GRPCHeaderMatch{Name: gatewayv1.GRPCHeaderName(name), Value: value})
	}
	return gatewayv1.GRPCRouteRule{
		Matches:     []gatewayv1.GRPCRouteMatch{m},
		BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(backend), Port: &port}}}},
	}
}

// TestGRPCRouteMethodMatches: a GRPCRoute is routed as the HTTP/2 POSTs
// its calls are — service and method an exact path, a service a prefix,
// a method alone or no method a regex —, its status is a GRPCRoute's, and
// its front speaks gRPC.
func TestGRPCRouteMethodMatches(t *testing.T) {
	route := newGRPCRoute("calls",
		grpcRule("pkg.Echo", "Echo", nil, "web"),
		grpcRule("pkg.Echo", "", nil, "web"),
		grpcRule("", "Two", nil, "web"),
		grpcRule("", "", map[string]string{"version": "two"}, "web"))
	m, problems := Build(gwSnapshot(newGateway("infra", "gw", httpListener("http", 80, "")), webIn("infra"), route))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	want := []Listener{{Address: "127.0.50.1", Port: 80, Front: front1, GRPC: true}}
	if !reflect.DeepEqual(m.Listeners, want) {
		t.Errorf("listeners: got %s, want %s", dump(m.Listeners), dump(want))
	}
	r, ok := gatewayRoute(m, front1, "_")
	if !ok {
		t.Fatalf("no route on %s: %v", front1, routeHosts(m))
	}
	var paths []string
	for _, l := range r.Locations {
		paths = append(paths, l.Path)
		if l.Rule.Route != "GRPCRoute infra/calls" {
			t.Errorf("location %s: owner %q", l.Path, l.Rule.Route)
		}
	}
	wantPaths := []string{"/pkg.Echo/Echo", "/pkg.Echo", "/pkg.Echo/", "^/[^/]+/Two$", "^/"}
	if !reflect.DeepEqual(paths, wantPaths) {
		t.Errorf("paths: got %q, want %q", paths, wantPaths)
	}
	st := routeStatusOf(t, m, "infra", "calls")
	if st.Kind != kindGRPCRoute {
		t.Errorf("status kind %q", st.Kind)
	}
	wantCondition(t, "route", st.Parents[0].Conditions, condAccepted, true, reasonAccepted)
}

// TestGRPCRouteBesideHTTPRoute: a front with both kinds stays HTTP/1.1
// and says why each GRPCRoute on it fails.
func TestGRPCRouteBesideHTTPRoute(t *testing.T) {
	httpRoute := newRoute("infra", "pages", parentList(parentOf("", "gw", "")), nil, routeRule(nil, backendTo("", "web", 80)))
	grpc := newGRPCRoute("calls", grpcRule("pkg.Echo", "Echo", nil, "web"))
	m, problems := Build(gwSnapshot(newGateway("infra", "gw", httpListener("http", 80, "")), webIn("infra"), httpRoute, grpc))
	if len(m.Listeners) != 1 || m.Listeners[0].GRPC {
		t.Errorf("listeners: %s", dump(m.Listeners))
	}
	if len(problems) != 1 || problems[0].Kind != kindGRPCRoute || !strings.Contains(problems[0].Reason, "also serves HTTPRoutes") {
		t.Errorf("problems: %v", problems)
	}
}

// TestGRPCRouteBadMethod: a method match the CRD would refuse leaves its
// rule out, naming it.
func TestGRPCRouteBadMethod(t *testing.T) {
	route := newGRPCRoute("calls", grpcRule("pkg/Echo", "Echo", nil, "web"), grpcRule("pkg.Echo", "Echo", nil, "web"))
	m, problems := Build(gwSnapshot(newGateway("infra", "gw", httpListener("http", 80, "")), webIn("infra"), route))
	if len(problems) != 1 || problems[0].Kind != kindGRPCRoute || !strings.Contains(problems[0].Reason, "spec.rules[0]") {
		t.Errorf("problems: %v", problems)
	}
	wantCondition(t, "route", routeStatusOf(t, m, "infra", "calls").Parents[0].Conditions, condPartiallyInvalid, true, reasonUnsupportedValue)
}
