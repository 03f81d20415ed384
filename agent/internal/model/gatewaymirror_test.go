package model

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// mirrorFilter is a RequestMirror filter to Service namespace/name:port
// ("" namespace: the route's), changed by each of opts.
func mirrorFilter(namespace, name string, port int32, opts ...func(*gatewayv1.HTTPRequestMirrorFilter)) gatewayv1.HTTPRouteFilter {
	f := &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backendTo(namespace, name, port).BackendObjectReference}
	for _, o := range opts {
		o(f)
	}
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: f}
}

func mirrorPercent(p int32) func(*gatewayv1.HTTPRequestMirrorFilter) {
	return func(f *gatewayv1.HTTPRequestMirrorFilter) { f.Percent = &p }
}

// mirrorFraction sets a fraction; denominator 0 leaves it to the default.
func mirrorFraction(numerator, denominator int32) func(*gatewayv1.HTTPRequestMirrorFilter) {
	return func(f *gatewayv1.HTTPRequestMirrorFilter) {
		f.Fraction = &gatewayv1.Fraction{Numerator: numerator}
		if denominator != 0 {
			f.Fraction.Denominator = &denominator
		}
	}
}

// mirrorRule is a rule on path to the web Service with filters.
func mirrorRule(path string, filters ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPRouteRule {
	r := routeRule(matchList(pathMatch(gatewayv1.PathMatchExact, path)), backendTo("", "web", 80))
	r.Filters = filters
	return r
}

// TestHTTPRouteRequestMirror: the suite's mirror manifests' shapes (one
// mirror, two, a percent, a fraction, beside a header modifier) become
// the rule's Mirrors, their backends the model's; a share of none is left
// out, and a rule that answers by itself mirrors nothing.
func TestHTTPRouteRequestMirror(t *testing.T) {
	redirect := mirrorRule("/redirect", mirrorFilter("", "web", 80),
		gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}})
	r := newRoute("default", "r", toGW(), nil,
		mirrorRule("/mirror", mirrorFilter("", "mirror", 8080)),
		mirrorRule("/multi", mirrorFilter("", "mirror", 8080), headerFilterList("X-A", "1")[0], mirrorFilter("other", "web", 80)),
		mirrorRule("/percent", mirrorFilter("", "mirror", 8080, mirrorPercent(20))),
		mirrorRule("/fraction", mirrorFilter("", "mirror", 8080, mirrorFraction(25, 50))),
		mirrorRule("/fraction-default", mirrorFilter("", "mirror", 8080, mirrorFraction(3, 0))),
		mirrorRule("/none", mirrorFilter("", "mirror", 8080, mirrorPercent(0))),
		redirect)
	m, problems := Build(gwSnapshot(gw80(), r, service("default", "mirror", servicePort("http", 8080)), webIn("other"),
		referenceGrant("other", "HTTPRoute", "default", "Service", "web")))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	wantCondition(t, "r", routeStatusOf(t, m, "default", "r").Parents[0].Conditions, condResolvedRefs, true, reasonResolvedRefs)
	route, _ := gatewayRoute(m, front1, "_")
	want := map[string][]RouteMirror{
		"/mirror":           {{"default/mirror:8080", 100, 100}},
		"/multi":            {{"default/mirror:8080", 100, 100}, {"other/web:80", 100, 100}},
		"/percent":          {{"default/mirror:8080", 20, 100}},
		"/fraction":         {{"default/mirror:8080", 25, 50}},
		"/fraction-default": {{"default/mirror:8080", 3, 100}},
		"/none":             nil,
		"/redirect":         nil,
	}
	for _, l := range route.Locations {
		if w, ok := want[l.Path]; !ok || !reflect.DeepEqual(l.Rule.Mirrors, w) {
			t.Errorf("%s: mirrors %s, want %s", l.Path, dump(l.Rule.Mirrors), dump(w))
		}
		if l.Path == "/multi" && (l.Rule.RequestHeaders == nil || len(l.Rule.Backends) != 1) {
			t.Errorf("/multi: the other filters and the backend stay: %s", dump(l.Rule))
		}
	}
	if len(route.Locations) != len(want) {
		t.Errorf("locations: %s", dump(route.Locations))
	}
	for _, name := range []string{"default/mirror:8080", "other/web:80"} {
		if !slices.ContainsFunc(m.Backends.Slice(), func(b Backend) bool { return b.Name == name }) {
			t.Errorf("the mirror backend %s is not among the model's backends", name)
		}
	}
}

// TestHTTPRouteRequestMirrorRefs: a mirror's backendRef follows a
// backendRef's rules (ReferenceGrant, kind, existence): one that cannot be
// used is left out with ResolvedRefs False and the spec's reason, a
// Problem names the route, and the rule is served without it.
func TestHTTPRouteRequestMirrorRefs(t *testing.T) {
	kind := gatewayv1.Kind("Pod")
	for _, c := range []struct {
		name   string
		filter gatewayv1.HTTPRouteFilter
		reason string
	}{
		{"another namespace without a ReferenceGrant", mirrorFilter("other", "web", 80), "RefNotPermitted"},
		{"a Service that does not exist", mirrorFilter("", "nonexistent", 80), "BackendNotFound"},
		{"a port the Service does not have", mirrorFilter("", "web", 8080), "BackendNotFound"},
		{"a Pod", mirrorFilter("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) { f.BackendRef.Kind = &kind }), "InvalidKind"},
		{"a name with CR LF", mirrorFilter("", "web\r\nx", 80), "BackendNotFound"},
		{"a namespace with nginx syntax", mirrorFilter("a;b", "web", 80), "BackendNotFound"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRoute("default", "r", toGW(), nil, mirrorRule("/m", c.filter, mirrorFilter("", "web", 80)))
			m, problems := Build(gwSnapshot(gw80(), r, webIn("other")))
			checkGatewayProblems(t, problems, kindHTTPRoute, "r", "filters[0].requestMirror.backendRef", "that mirror is left out")
			st := routeStatusOf(t, m, "default", "r").Parents[0]
			wantCondition(t, c.name, st.Conditions, condAccepted, true, reasonAccepted)
			wantCondition(t, c.name, st.Conditions, condResolvedRefs, false, c.reason)
			route, _ := gatewayRoute(m, front1, "_")
			if len(route.Locations) != 1 || !reflect.DeepEqual(route.Locations[0].Rule.Mirrors, []RouteMirror{{"default/web:80", 100, 100}}) {
				t.Errorf("the rule is served with its good mirror only: %s", dump(route.Locations))
			}
		})
	}
}

// TestHostileHTTPRouteRequestMirror: a mirror's values the CRD would
// refuse leave the rule out (UnsupportedValue), the neighbour serves on.
func TestHostileHTTPRouteRequestMirror(t *testing.T) {
	for _, c := range []struct {
		name   string
		filter gatewayv1.HTTPRouteFilter
		want   string
	}{
		{"no settings", gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror}, "has no settings"},
		{"percent 101", mirrorFilter("", "web", 80, mirrorPercent(101)), "percent 101: must be from 0 to 100"},
		{"a negative percent", mirrorFilter("", "web", 80, mirrorPercent(-1)), "percent -1"},
		{"percent and fraction", mirrorFilter("", "web", 80, mirrorPercent(5), mirrorFraction(1, 2)), "sets both percent and fraction"},
		{"a fraction over 1", mirrorFilter("", "web", 80, mirrorFraction(3, 2)), "fraction.numerator 3: must be from 0 to the denominator 2"},
		{"a negative numerator", mirrorFilter("", "web", 80, mirrorFraction(-1, 2)), "fraction.numerator -1"},
		{"a denominator 0", mirrorFilter("", "web", 80, func(f *gatewayv1.HTTPRequestMirrorFilter) {
			f.Fraction = &gatewayv1.Fraction{Numerator: 0, Denominator: ptrTo(int32(0))}
		}), "fraction.denominator 0: must be at least 1"},
		{"a negative denominator", mirrorFilter("", "web", 80, mirrorFraction(-5, -10)), "fraction.denominator -10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostile := newRoute("default", "hostile", toGW(), []string{"bad.example.com"}, hostileRule(func(r *gatewayv1.HTTPRouteRule) {
				r.Filters = []gatewayv1.HTTPRouteFilter{c.filter}
			}))
			m, problems := buildBounded(t, gwSnapshot(gw80(), gwNeighbour(), hostile), 64*mib)
			checkGatewayNeighbour(t, m, problems)
			checkGatewayProblems(t, problems, kindHTTPRoute, "hostile", "filters[0] (RequestMirror): "+c.want)
			wantCondition(t, "hostile", routeStatusOf(t, m, "default", "hostile").Parents[0].Conditions, condAccepted, false, reasonUnsupportedValue)
			if _, ok := gatewayRoute(m, front1, "bad.example.com"); ok {
				t.Errorf("the hostile route is served")
			}
		})
	}
}

// TestHostileManyMirrors: 16 mirrors, the most a rule's filters hold, are
// served; a 17th filter leaves the rule out.
func TestHostileManyMirrors(t *testing.T) {
	var filters []gatewayv1.HTTPRouteFilter
	for range maxRuleFilters {
		filters = append(filters, mirrorFilter("", "web", 80))
	}
	m, problems := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, mirrorRule("/m", filters...))))
	route, _ := gatewayRoute(m, front1, "_")
	if len(problems) != 0 || len(route.Locations) != 1 || len(route.Locations[0].Rule.Mirrors) != maxRuleFilters {
		t.Errorf("16 mirrors: problems %v, route %s", problems, dump(route))
	}
	filters = append(filters, mirrorFilter("", "web", 80))
	_, problems = Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, mirrorRule("/m", filters...))))
	checkGatewayProblems(t, problems, kindHTTPRoute, "r", "17 filters")
}

// TestGRPCRouteRequestMirror: a GRPCRoute's mirror is refused by name
// (its fronts speak gRPC, which restysync does not mirror); the rule is
// left out.
func TestGRPCRouteRequestMirror(t *testing.T) {
	rule := grpcRule("pkg.Echo", "Echo", nil, "web")
	rule.Filters = []gatewayv1.GRPCRouteFilter{{Type: gatewayv1.GRPCRouteFilterRequestMirror,
		RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backendTo("", "web", 80).BackendObjectReference}}}
	m, problems := Build(gwSnapshot(newGateway("infra", "gw", httpListener("http", 80, "")), webIn("infra"), newGRPCRoute("g", rule)))
	found := false
	for _, p := range problems {
		found = found || p.Kind == kindGRPCRoute && p.Name == "g" && strings.Contains(p.Reason, "(RequestMirror): is not supported on a GRPCRoute")
	}
	if !found || m.GatewayRoutes.Len() != 0 {
		t.Errorf("problems %v, routes %q", problems, routeHosts(m))
	}
}
