package model

import (
	"reflect"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Tests of HTTPRoutes: attachment, status, hostnames, precedence,
// filters and backends. Names follow the conformance test they stand in
// for.

// gw80 is Gateway default/gw with one HTTP listener on port 80.
func gw80(listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	if len(listeners) == 0 {
		listeners = []gatewayv1.Listener{httpListener("http", 80, "")}
	}
	return newGateway("default", "gw", listeners...)
}

// toGW is the parentRefs of a route to default/gw.
func toGW() []gatewayv1.ParentReference { return parentList(parentOf("", "gw", "")) }

func TestHTTPRouteSimpleSameNamespace(t *testing.T) {
	r := newRoute("default", "r", toGW(), nil, routeRule(nil, backendTo("", "web", 80)))
	m, problems := Build(gwSnapshot(gw80(), r))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	want := []*Route{{Host: front1 + " _", Ordered: true, Locations: []RouteLocation{{Path: "/", Rule: &RouteRule{
		Route: "HTTPRoute default/r", Backends: []WeightedBackend{{Backend: "default/web:80", Weight: 1}}}}}}}
	if !reflect.DeepEqual(m.GatewayRoutes.Slice(), want) {
		t.Errorf("routes:\n got %s\nwant %s", dump(m.GatewayRoutes), dump(want))
	}
	if m.Backends.Len() != 1 || m.Backends.At(0).Name != "default/web:80" || !reflect.DeepEqual(m.Backends.At(0).Endpoints, webEndpoints) {
		t.Errorf("backends: %s", dump(m.Backends))
	}
	st := routeStatusOf(t, m, "default", "r")
	if len(st.Parents) != 1 || st.Parents[0].Namespace != "default" || st.Parents[0].Name != "gw" {
		t.Fatalf("parents: %s", dump(st))
	}
	wantCondition(t, "route", st.Parents[0].Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "route", st.Parents[0].Conditions, condResolvedRefs, true, reasonResolvedRefs)
	if l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "gw"), "http"); l.AttachedRoutes != 1 {
		t.Errorf("attached routes: %d", l.AttachedRoutes)
	}
}

// TestHTTPRouteNeedsNoListenerChange: adding a route changes the routes,
// backends and status, never the listeners (what nginx.conf is made of).
func TestHTTPRouteNeedsNoListenerChange(t *testing.T) {
	before, _ := Build(gwSnapshot(gw80()))
	after, _ := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), []string{"a.example.com"}, routeRule(nil, backendTo("", "web", 80)))))
	if !reflect.DeepEqual(before.Listeners, after.Listeners) || !reflect.DeepEqual(before.Servers, after.Servers) || !reflect.DeepEqual(before.Default, after.Default) {
		t.Errorf("a route changed the listeners or servers:\n%s\n%s", dump(before.Listeners), dump(after.Listeners))
	}
	if after.GatewayRoutes.Len() != 1 {
		t.Errorf("routes: %s", dump(after.GatewayRoutes))
	}
}

// TestIngressAndHTTPRouteApart: an Ingress and an HTTPRoute for one host
// keep their own routes.
func TestIngressAndHTTPRouteApart(t *testing.T) {
	ing := newIngress("default", "app", rule("a.example.com", prefix("/", "web", 80)))
	s := gwSnapshot(gw80(), newRoute("default", "r", toGW(), []string{"a.example.com"}, routeRule(nil, backendTo("", "web", 80))))
	s.Ingresses = ListOf(append(s.Ingresses.Slice(), ing)...)
	m, problems := Build(s)
	alone, _ := Build(snapshotOf(ing))
	if len(problems) != 0 || !reflect.DeepEqual(m.Servers, alone.Servers) {
		t.Errorf("the Ingress's servers changed: %s, problems %v", dump(m.Servers), problems)
	}
	if hosts := routeHosts(m); !reflect.DeepEqual(hosts, []string{front1 + " a.example.com"}) {
		t.Errorf("route hosts: %v", hosts)
	}
}

func TestHTTPRouteInvalidCrossNamespaceParentRef(t *testing.T) {
	r := newRoute("web", "r", parentList(parentOf("default", "gw", "")), nil, routeRule(nil, backendTo("", "web", 80)))
	m, problems := Build(gwSnapshot(gw80(), r))
	wantCondition(t, "route", routeStatusOf(t, m, "web", "r").Parents[0].Conditions, condAccepted, false, "NotAllowedByListeners")
	if m.GatewayRoutes.Len() != 0 || !strings.Contains(problemList(problems), "NotAllowedByListeners") {
		t.Errorf("routes %s, problems %v", dump(m.GatewayRoutes), problems)
	}
}

func TestHTTPRouteAllowedRoutesSelector(t *testing.T) {
	gw := gw80(allowFrom(httpListener("http", 80, ""), gatewayv1.NamespacesFromSelector, map[string]string{"team": "a"}))
	in := newRoute("a", "r", parentList(parentOf("default", "gw", "")), nil, routeRule(nil, backendTo("", "web", 80)))
	out := newRoute("b", "r", parentList(parentOf("default", "gw", "")), nil, routeRule(nil, backendTo("", "web", 80)))
	byName := newRoute("c", "r", parentList(parentOf("default", "gw", "")), nil, routeRule(nil, backendTo("", "web", 80)))
	gwByName := newGateway("default", "by-name", allowFrom(httpListener("http", 80, ""), gatewayv1.NamespacesFromSelector, map[string]string{"kubernetes.io/metadata.name": "c"}))
	byName.Spec.ParentRefs = append(byName.Spec.ParentRefs, parentOf("default", "by-name", ""))
	m, _ := Build(gwSnapshot(gw, gwByName, in, out, byName, nsObject("a", map[string]string{"team": "a"}), nsObject("b", map[string]string{"team": "b"})))
	wantCondition(t, "a", routeStatusOf(t, m, "a", "r").Parents[0].Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "b", routeStatusOf(t, m, "b", "r").Parents[0].Conditions, condAccepted, false, "NotAllowedByListeners")
	c := routeStatusOf(t, m, "c", "r")
	wantCondition(t, "c on gw", c.Parents[0].Conditions, condAccepted, false, "NotAllowedByListeners")
	wantCondition(t, "c on by-name (namespace not in the snapshot)", c.Parents[1].Conditions, condAccepted, true, reasonAccepted)
}

func TestHTTPRouteInvalidParentRefNotMatchingSectionName(t *testing.T) {
	r := newRoute("default", "r", parentList(parentOf("", "gw", "nope")), nil, routeRule(nil, backendTo("", "web", 80)))
	m, _ := Build(gwSnapshot(gw80(), r))
	wantCondition(t, "route", routeStatusOf(t, m, "default", "r").Parents[0].Conditions, condAccepted, false, "NoMatchingParent")
}

func TestHTTPRouteInvalidParentRefNotMatchingListenerPort(t *testing.T) {
	ref := parentOf("", "gw", "http")
	port := int32(81)
	ref.Port = &port
	r := newRoute("default", "r", parentList(ref), nil, routeRule(nil, backendTo("", "web", 80)))
	m, _ := Build(gwSnapshot(gw80(), r))
	st := routeStatusOf(t, m, "default", "r")
	wantCondition(t, "route", st.Parents[0].Conditions, condAccepted, false, "NoMatchingParent")
	if st.Parents[0].Port != 81 || st.Parents[0].SectionName != "http" {
		t.Errorf("parent: %s", dump(st.Parents[0]))
	}
}

func TestHTTPRouteParentRefPort(t *testing.T) {
	gw := gw80(httpListener("http", 80, ""), httpListener("alt", 8080, ""))
	ref := parentOf("", "gw", "")
	port := int32(8080)
	ref.Port = &port
	m, _ := Build(gwSnapshot(gw, newRoute("default", "r", parentList(ref), nil, routeRule(nil, backendTo("", "web", 80)))))
	if hosts := routeHosts(m); !reflect.DeepEqual(hosts, []string{"127.0.50.1:8080 _"}) {
		t.Errorf("the route is on port 8080 only: %v", hosts)
	}
}

func TestHTTPRouteParentOfAnotherController(t *testing.T) {
	r := newRoute("default", "r", parentList(parentOf("", "gw", ""), parentOf("", "someone-elses", "")), nil, routeRule(nil, backendTo("", "web", 80)))
	m, _ := Build(gwSnapshot(gw80(), r))
	if st := routeStatusOf(t, m, "default", "r"); len(st.Parents) != 1 || st.Parents[0].Name != "gw" {
		t.Errorf("only our parents are ours to write: %s", dump(st))
	}
}

func TestGatewayWithAttachedRoutes(t *testing.T) {
	gw := gw80(httpListener("http", 80, "foo.example.com"))
	r2 := newRoute("default", "r2", toGW(), nil, routeRule(nil, backendTo("", "web", 80)))
	r3 := newRoute("default", "r3", toGW(), nil, routeRule(nil, backendTo("", "web", 80)))
	notAccepted := newRoute("default", "not-accepted", toGW(), []string{"not-accepted.test.com"}, routeRule(nil, backendTo("", "web", 80)))
	unresolved := newGateway("default", "unresolved", httpsListener("tls", 443, "", secretRef("", "does-not-exist")))
	r4 := newRoute("default", "r4", parentList(parentOf("", "unresolved", "tls")), nil, routeRule(nil, backendTo("", "does-not-exist", 8080)))
	m, _ := Build(gwSnapshot(gw, r2, r3, notAccepted, unresolved, r4))

	if l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "gw"), "http"); l.AttachedRoutes != 2 {
		t.Errorf("attached routes: %d, want 2", l.AttachedRoutes)
	}
	wantCondition(t, "not accepted", routeStatusOf(t, m, "default", "not-accepted").Parents[0].Conditions, condAccepted, false, "NoMatchingListenerHostname")
	l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "unresolved"), "tls")
	if l.AttachedRoutes != 1 {
		t.Errorf("unresolved listener: attached routes %d, want 1", l.AttachedRoutes)
	}
	wantCondition(t, "unresolved", l.Conditions, condProgrammed, false, reasonInvalid)
	wantCondition(t, "unresolved", l.Conditions, condResolvedRefs, false, reasonInvalidCertificateRef)
	wantCondition(t, "r4", routeStatusOf(t, m, "default", "r4").Parents[0].Conditions, condResolvedRefs, false, "BackendNotFound")
}

func TestHTTPRouteHostnameIntersection(t *testing.T) {
	gw := gw80(httpListener("specific", 80, "very.specific.com"), httpListener("wildcard", 80, "*.wildcard.io"), httpListener("any-wildcard", 80, "*.anotherwildcard.io"))
	routes := []any{
		newRoute("default", "specific-specific", toGW(), []string{"non.matching.com", "*.nonmatchingwildcard.io", "very.specific.com"}, routeRule(nil, backendTo("", "web", 80))),
		newRoute("default", "wildcard-specific", toGW(), []string{"*.specific.com"}, routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/s2")), backendTo("", "web", 80))),
		newRoute("default", "wildcard-wildcard", toGW(), []string{"*.wildcard.io"}, routeRule(nil, backendTo("", "web", 80))),
		newRoute("default", "specific-wildcard", toGW(), []string{"non.matching.com", "foo.wildcard.io", "bar.wildcard.io", "foo.bar.wildcard.io"}, routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/s4")), backendTo("", "web", 80))),
		newRoute("default", "narrower", toGW(), []string{"*.foo.anotherwildcard.io"}, routeRule(nil, backendTo("", "web", 80))),
		newRoute("default", "none", toGW(), []string{"specific.but.wrong.com", "wildcard.io"}, routeRule(nil, backendTo("", "web", 80))),
	}
	m, _ := Build(gwSnapshot(append([]any{gw}, routes...)...))
	want := []string{
		front1 + " *.anotherwildcard.io", // the listener's own host: no route, 404
		front1 + " *.foo.anotherwildcard.io",
		front1 + " *.wildcard.io",
		front1 + " bar.wildcard.io",
		front1 + " foo.bar.wildcard.io",
		front1 + " foo.wildcard.io",
		front1 + " very.specific.com",
	}
	if hosts := routeHosts(m); !reflect.DeepEqual(hosts, want) {
		t.Errorf("hosts:\n got %q\nwant %q", hosts, want)
	}
	// foo.wildcard.io holds specific-wildcard's /s4 and wildcard-wildcard's /.
	r, _ := gatewayRoute(m, front1, "foo.wildcard.io")
	var owners []string
	for _, l := range r.Locations {
		owners = append(owners, l.Path+" "+l.Rule.Route)
	}
	if want := []string{"/s4 HTTPRoute default/specific-wildcard", "/s4/ HTTPRoute default/specific-wildcard", "/ HTTPRoute default/wildcard-wildcard"}; !reflect.DeepEqual(owners, want) {
		t.Errorf("foo.wildcard.io:\n got %q\nwant %q", owners, want)
	}
	if r, _ := gatewayRoute(m, front1, "*.anotherwildcard.io"); len(r.Locations) != 0 {
		t.Errorf("the listener's own host has locations: %s", dump(r))
	}
	wantCondition(t, "none", routeStatusOf(t, m, "default", "none").Parents[0].Conditions, condAccepted, false, "NoMatchingListenerHostname")
	g := gatewayStatusOf(t, m, "default", "gw")
	for name, n := range map[string]int32{"specific": 2, "wildcard": 2, "any-wildcard": 1} {
		if got := listenerStatusOf(t, g, name).AttachedRoutes; got != n {
			t.Errorf("listener %s: attached %d, want %d", name, got, n)
		}
	}
}

func TestGatewayHTTPListenerIsolation(t *testing.T) {
	gw := gw80(httpListener("empty", 80, ""), httpListener("wildcard-example", 80, "*.example.com"),
		httpListener("wildcard-foo", 80, "*.foo.example.com"), httpListener("abc-foo", 80, "abc.foo.example.com"))
	route := func(name, section string, hostnames ...string) *gatewayv1.HTTPRoute {
		return newRoute("default", name, parentList(parentOf("", "gw", section)), hostnames,
			routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/"+name)), backendTo("", "web", 80)))
	}
	m, _ := Build(gwSnapshot(gw,
		route("empty", "empty"), route("wildcard-example", "wildcard-example"), route("wildcard-foo", "wildcard-foo"), route("abc-foo", "abc-foo"),
		// A route on the catch-all listener for a name a more specific listener has: left out there.
		route("shadowed", "empty", "x.foo.example.com"),
		// A route on *.example.com narrower than *.foo.example.com: left out too.
		route("narrow", "wildcard-example", "*.bar.foo.example.com"),
	))
	owners := func(host string) []string {
		r, ok := gatewayRoute(m, front1, host)
		if !ok {
			return nil
		}
		var out []string
		for _, l := range r.Locations {
			if !strings.HasSuffix(l.Path, "/") {
				out = append(out, l.Rule.Route)
			}
		}
		return out
	}
	for host, want := range map[string][]string{
		"_":                     {"HTTPRoute default/empty"},
		"*.example.com":         {"HTTPRoute default/wildcard-example"},
		"*.foo.example.com":     {"HTTPRoute default/wildcard-foo"},
		"abc.foo.example.com":   {"HTTPRoute default/abc-foo"},
		"x.foo.example.com":     nil,
		"*.bar.foo.example.com": nil,
	} {
		if got := owners(host); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %q, want %q", host, got, want)
		}
	}
}

func TestHTTPRoutePathMatchOrder(t *testing.T) {
	b := backendTo("", "web", 80)
	older := olderBy(newRoute("default", "older", toGW(), nil,
		routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/match"))),
		routeRule(matchList(withHeader(pathMatch(gatewayv1.PathMatchPathPrefix, "/match"), "x", "1")), b),
	), -1)
	newer := newRoute("default", "newer", toGW(), nil,
		routeRule(matchList(pathMatch(gatewayv1.PathMatchRegularExpression, "/m.*"), pathMatch(gatewayv1.PathMatchPathPrefix, "/match/long")), b),
		routeRule(matchList(pathMatch(gatewayv1.PathMatchExact, "/match")), b),
		routeRule(matchList(withMethod(pathMatch(gatewayv1.PathMatchPathPrefix, "/match"), "POST")), b),
		routeRule(matchList(withQuery(withHeader(pathMatch(gatewayv1.PathMatchPathPrefix, "/match"), "x", "1"), "q", "1")), b),
		routeRule(matchList(withHeader(withHeader(pathMatch(gatewayv1.PathMatchPathPrefix, "/match"), "x", "1"), "y", "1")), b),
		routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/match")), b),
	)
	m, problems := Build(gwSnapshot(gw80(), newer, older))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	r, _ := gatewayRoute(m, front1, "_")
	var got []string
	for _, l := range r.Locations {
		desc := l.Path
		switch {
		case l.Exact:
			desc = "= " + desc
		case l.Regex:
			desc = "~ " + desc
		}
		desc += " " + strings.TrimPrefix(l.Rule.Route, "HTTPRoute default/")
		if l.Rule.Method != "" {
			desc += " " + l.Rule.Method
		}
		desc += strings.Repeat(" h", len(l.Rule.Headers)) + strings.Repeat(" q", len(l.Rule.Query))
		if l.Rule.Status != 0 {
			desc += " 500"
		}
		got = append(got, desc)
	}
	want := []string{
		"= /match newer",
		"= /match/long newer", "/match/long/ newer",
		"= /match newer POST", "/match/ newer POST",
		"= /match newer h h", "/match/ newer h h",
		"= /match newer h q", "/match/ newer h q",
		"= /match older h", "/match/ older h",
		"= /match older 500", "/match/ older 500",
		"= /match newer", "/match/ newer",
		"~ ^(?:/m.*) newer",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order:\n got %q\nwant %q", got, want)
	}
	if l := r.Locations[len(r.Locations)-1]; !l.Rule.CaseSensitive {
		t.Errorf("a regex path is case-sensitive: %s", dump(l))
	}
}

func TestHTTPRouteBackendRefs(t *testing.T) {
	kind := gatewayv1.Kind("UnknownKind")
	unknown := backendTo("", "web", 80)
	unknown.Kind = &kind
	for _, c := range []struct {
		name   string // the conformance test
		ref    gatewayv1.HTTPBackendRef
		grant  bool
		reason string
	}{
		{"HTTPRouteInvalidNonExistentBackendRef", backendTo("", "nonexistent", 8080), false, "BackendNotFound"},
		{"missing port", backendTo("", "web", 8080), false, "BackendNotFound"},
		{"HTTPRouteInvalidBackendRefUnknownKind", unknown, false, "InvalidKind"},
		{"HTTPRouteInvalidCrossNamespaceBackendRef", backendTo("other", "web", 80), false, "RefNotPermitted"},
		{"HTTPRouteReferenceGrant", backendTo("other", "web", 80), true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRoute("default", "r", toGW(), nil, routeRule(nil, c.ref, weighted(backendTo("", "web", 80), 3)))
			objects := []any{gw80(), r, webIn("other")}
			if c.grant {
				objects = append(objects, referenceGrant("other", "HTTPRoute", "default", "Service", "web"))
			}
			m, _ := Build(gwSnapshot(objects...))
			st := routeStatusOf(t, m, "default", "r")
			wantCondition(t, c.name, st.Parents[0].Conditions, condAccepted, true, reasonAccepted)
			route, _ := gatewayRoute(m, front1, "_")
			backends := route.Locations[0].Rule.Backends
			if c.reason == "" {
				wantCondition(t, c.name, st.Parents[0].Conditions, condResolvedRefs, true, reasonResolvedRefs)
				if backends[0].Backend != "other/web:80" {
					t.Errorf("backends: %s", dump(backends))
				}
				return
			}
			wantCondition(t, c.name, st.Parents[0].Conditions, condResolvedRefs, false, c.reason)
			want := []WeightedBackend{{Backend: "", Weight: 1}, {Backend: "default/web:80", Weight: 3}}
			if !reflect.DeepEqual(backends, want) {
				t.Errorf("backends: got %s, want %s", dump(backends), dump(want))
			}
		})
	}
}

func TestHTTPRouteWeight(t *testing.T) {
	r := newRoute("default", "r", toGW(), nil,
		routeRule(matchList(pathMatch(gatewayv1.PathMatchExact, "/split")), weighted(backendTo("", "web", 80), 70), weighted(backendTo("", "web", 80), 0)),
		routeRule(matchList(pathMatch(gatewayv1.PathMatchExact, "/zero")), weighted(backendTo("", "web", 80), 0)))
	m, _ := Build(gwSnapshot(gw80(), r))
	route, _ := gatewayRoute(m, front1, "_")
	for _, l := range route.Locations {
		switch l.Path {
		case "/split":
			if want := []WeightedBackend{{Backend: "default/web:80", Weight: 70}, {Backend: "default/web:80", Weight: 0}}; !reflect.DeepEqual(l.Rule.Backends, want) || l.Rule.Status != 0 {
				t.Errorf("/split: %s", dump(l.Rule))
			}
		case "/zero":
			if l.Rule.Backends != nil || l.Rule.Status != 500 {
				t.Errorf("/zero: every weight 0 answers 500: %s", dump(l.Rule))
			}
		}
	}
}

func TestHTTPRouteNoBackendRefs(t *testing.T) {
	m, problems := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, routeRule(nil))))
	route, _ := gatewayRoute(m, front1, "_")
	if len(problems) != 0 || len(route.Locations) != 1 || route.Locations[0].Rule.Status != 500 {
		t.Errorf("a rule without backends answers 500: %s, problems %v", dump(route), problems)
	}
}

func TestHTTPRouteFilters(t *testing.T) {
	prefix := gatewayv1.PrefixMatchHTTPPathModifier
	full := gatewayv1.FullPathHTTPPathModifier
	one, host, scheme, status, port := "/one", gatewayv1.PreciseHostname("example.org"), "https", 301, int32(8443)
	rule := routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/prefix/")), backendTo("", "web", 80))
	rule.Filters = []gatewayv1.HTTPRouteFilter{
		{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{
			Set: []gatewayv1.HTTPHeader{{Name: "X-Set", Value: "1"}}, Add: []gatewayv1.HTTPHeader{{Name: "X-Add", Value: "2"}}, Remove: []string{"X-Remove"}}},
		{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Remove: []string{"Server"}}},
		{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: &host, Path: &gatewayv1.HTTPPathModifier{Type: prefix, ReplacePrefixMatch: &one}}},
	}
	redirect := routeRule(matchList(pathMatch(gatewayv1.PathMatchExact, "/old")), backendTo("", "web", 80))
	redirect.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{
		Scheme: &scheme, Hostname: &host, Port: &port, StatusCode: &status, Path: &gatewayv1.HTTPPathModifier{Type: full, ReplaceFullPath: &one}}}}
	m, problems := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, rule, redirect)))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	route, _ := gatewayRoute(m, front1, "_")
	if len(route.Locations) != 3 {
		t.Fatalf("locations: %s", dump(route))
	}
	old := route.Locations[0].Rule
	if want := (Redirect{Scheme: "https", Host: "example.org", Port: 8443, Path: "/one", Status: 301}); old.Redirect == nil || *old.Redirect != want || old.Backends != nil || old.Status != 0 {
		t.Errorf("redirect: %s", dump(old))
	}
	for _, l := range route.Locations[1:] {
		r := l.Rule
		if want := (Rewrite{Host: "example.org", Path: "/one", ReplacePrefix: true, MatchedPrefix: "/prefix"}); r.Rewrite == nil || *r.Rewrite != want {
			t.Errorf("%s: rewrite %s", l.Path, dump(r.Rewrite))
		}
		if want := (&HeaderChanges{Set: []Header{{"X-Set", "1"}}, Add: []Header{{"X-Add", "2"}}, Remove: []string{"X-Remove"}}); !reflect.DeepEqual(r.RequestHeaders, want) {
			t.Errorf("%s: request headers %s", l.Path, dump(r.RequestHeaders))
		}
		if want := (&HeaderChanges{Remove: []string{"Server"}}); !reflect.DeepEqual(r.ResponseHeaders, want) {
			t.Errorf("%s: response headers %s", l.Path, dump(r.ResponseHeaders))
		}
	}
}

func TestHTTPRoutePartiallyInvalid(t *testing.T) {
	good := routeRule(matchList(pathMatch(gatewayv1.PathMatchExact, "/good")), backendTo("", "web", 80))
	bad := routeRule(matchList(pathMatch(gatewayv1.PathMatchRegularExpression, `/[\d-z]`)), backendTo("", "web", 80))
	m, problems := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, good, bad)))
	st := routeStatusOf(t, m, "default", "r").Parents[0]
	wantCondition(t, "route", st.Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "route", st.Conditions, condPartiallyInvalid, true, reasonUnsupportedValue)
	route, _ := gatewayRoute(m, front1, "_")
	if len(route.Locations) != 1 || route.Locations[0].Path != "/good" {
		t.Errorf("the good rule is served: %s", dump(route))
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, "spec.rules[1]: matches[0]: path") {
		t.Errorf("problems: %v", problems)
	}

	m, _ = Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, bad)))
	wantCondition(t, "all bad", routeStatusOf(t, m, "default", "r").Parents[0].Conditions, condAccepted, false, reasonUnsupportedValue)
	if m.GatewayRoutes.Len() != 0 {
		t.Errorf("routes: %s", dump(m.GatewayRoutes))
	}
	if l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "gw"), "http"); l.AttachedRoutes != 0 {
		t.Errorf("a route that is not accepted is not attached: %d", l.AttachedRoutes)
	}
}

func TestHTTPRouteMultipleGateways(t *testing.T) {
	a := newGateway("default", "a", httpListener("http", 80, ""))
	b := olderBy(newGateway("default", "b", httpListener("http", 80, "")), 1)
	r := newRoute("default", "r", parentList(parentOf("", "a", ""), parentOf("", "b", "")), nil, routeRule(nil, backendTo("", "web", 80)))
	m, _ := Build(gwSnapshot(a, b, r))
	if hosts := routeHosts(m); !reflect.DeepEqual(hosts, []string{"127.0.50.1:80 _", "127.0.50.2:80 _"}) {
		t.Errorf("hosts: %v", hosts)
	}
	if st := routeStatusOf(t, m, "default", "r"); len(st.Parents) != 2 {
		t.Errorf("parents: %s", dump(st))
	}
}

// TestGatewayBuildDeterministic: the objects in any order give one Model.
func TestGatewayBuildDeterministic(t *testing.T) {
	objects := []any{
		gw80(httpListener("http", 80, ""), httpListener("w", 80, "*.example.com")),
		olderBy(newGateway("other", "gw", httpListener("http", 8080, "")), 3),
		newRoute("default", "a", toGW(), []string{"a.example.com"}, routeRule(nil, backendTo("", "web", 80))),
		newRoute("default", "b", toGW(), nil, routeRule(nil, backendTo("", "web", 80))),
		newRoute("other", "c", parentList(parentOf("", "gw", "")), nil, routeRule(nil, backendTo("", "nope", 80))),
	}
	first, firstProblems := Build(gwSnapshot(objects...))
	for i := range 5 {
		shuffled := append([]any(nil), objects...)
		for j := range shuffled {
			k := (j*7 + i*3) % len(shuffled)
			shuffled[j], shuffled[k] = shuffled[k], shuffled[j]
		}
		m, problems := Build(gwSnapshot(shuffled...))
		if !reflect.DeepEqual(m, first) || !reflect.DeepEqual(problems, firstProblems) {
			t.Fatalf("order %d gives another model", i)
		}
	}
}

// TestHTTPRouteRegexPathAnchored: a RegularExpression path reaches the
// router anchored at the start (it refuses a regex without "^"),
// case-sensitive, an alternation kept whole.
func TestHTTPRouteRegexPathAnchored(t *testing.T) {
	for value, want := range map[string]string{
		"/v[0-9]+/.*": "^(?:/v[0-9]+/.*)",
		"/a|/b":       "^(?:/a|/b)",
		"^/already$":  "^/already$",
	} {
		regex := gatewayv1.PathMatchRegularExpression
		m := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: &regex, Value: &value}}
		ranked, err := compileMatch(&m, RouteRule{Backends: []WeightedBackend{{Backend: "ns/a:80", Weight: 1}}})
		if err != nil {
			t.Fatalf("%s: %v", value, err.msg)
		}
		loc := ranked[0].loc
		if loc.Path != want || !loc.Regex || !loc.Rule.CaseSensitive {
			t.Errorf("%s: got path %q regex %v case-sensitive %v, want %q", value, loc.Path, loc.Regex, loc.Rule.CaseSensitive, want)
		}
	}
}

func TestHTTPRouteTimeouts(t *testing.T) {
	for _, c := range []struct {
		request, backend string // "" unset
		want             int64
	}{
		{"500ms", "", 500},
		{"", "500ms", 500},
		{"0s", "", 0},
		{"", "0s", 0},
		{"10s", "1s", 1000},
		{"0s", "1m30s", 90_000},
		{"1h", "1h", 3_600_000},
	} {
		rule := routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/t")), backendTo("", "web", 80))
		withTimeouts(c.request, c.backend)(&rule)
		m, problems := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, rule)))
		if len(problems) != 0 {
			t.Fatalf("%+v: problems: %v", c, problems)
		}
		route, _ := gatewayRoute(m, front1, "_")
		for _, l := range route.Locations {
			if l.Rule.TimeoutMS != c.want {
				t.Errorf("%+v: %s: timeout %d ms, want %d", c, l.Path, l.Rule.TimeoutMS, c.want)
			}
		}
	}
}

func TestHTTPRouteBackendRefFilters(t *testing.T) {
	rule := routeRule(nil, backendTo("", "web", 80), backendTo("", "web", 80))
	rule.BackendRefs[0].Filters = headerFilterList("Backend", "web")
	m, problems := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, rule)))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	route, _ := gatewayRoute(m, front1, "_")
	backends := route.Locations[0].Rule.Backends
	if len(backends) != 2 {
		t.Fatalf("backends: %s", dump(backends))
	}
	if want := (&HeaderChanges{Set: []Header{{"Backend", "web"}}}); !reflect.DeepEqual(backends[0].RequestHeaders, want) || backends[1].RequestHeaders != nil {
		t.Errorf("backends' request headers: %s", dump(backends))
	}
}
