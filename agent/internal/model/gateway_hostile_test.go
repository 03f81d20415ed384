package model

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/chars"
)

// Hostile Gateway API input: every field is tenant input. Each case puts
// one hostile HTTPRoute (or Gateway) beside a well-behaved neighbour
// route; the bad part must be a Problem on the hostile object with the
// spec's reason, and the neighbour must be served exactly as alone.

const goodHost = "good.example.com"

// gwNeighbour is the well-behaved route, created first.
func gwNeighbour() *gatewayv1.HTTPRoute {
	return olderBy(newRoute("default", "neighbour", toGW(), []string{goodHost},
		routeRule(matchList(withHeader(pathMatch(gatewayv1.PathMatchPathPrefix, "/api"), "x-env", "prod")), backendTo("", "web", 80)),
		routeRule(nil, backendTo("", "web", 80))), -1)
}

// checkGatewayNeighbour fails unless the neighbour's route in m is the one
// it gets alone, and no Problem names it.
func checkGatewayNeighbour(t *testing.T, m Model, problems []Problem) {
	t.Helper()
	alone, aloneProblems := Build(gwSnapshot(gw80(), gwNeighbour()))
	if len(aloneProblems) != 0 {
		t.Fatalf("the neighbour alone has problems: %v", aloneProblems)
	}
	want, _ := gatewayRoute(alone, front1, goodHost)
	if got, ok := gatewayRoute(m, front1, goodHost); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("neighbour's route:\n got %s\nwant %s", dump(got), dump(want))
	}
	for _, p := range problems {
		if p.Name == "neighbour" {
			t.Errorf("problem on the neighbour: %s", p)
		}
	}
}

// checkGatewayProblems fails unless every problem is on kind
// default/name, clipped and valid UTF-8, and one holds each of want.
func checkGatewayProblems(t *testing.T, problems []Problem, kind, name string, want ...string) {
	t.Helper()
	if len(problems) == 0 {
		t.Fatalf("no problem for %s default/%s, want %q", kind, name, want)
	}
	for _, p := range problems {
		if p.Kind != kind || p.Namespace != "default" || p.Name != name {
			t.Errorf("problem on another object than %s default/%s: %s", kind, name, clipForLog(p.String()))
		}
		if len(p.Reason) > maxReasonBytes+8 || !utf8.ValidString(p.Reason) {
			t.Errorf("problem reason not clipped or not UTF-8: %q", clipForLog(p.Reason))
		}
	}
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p.Reason, w)
		}
		if !found {
			t.Errorf("no problem holds %q; problems:\n%s", w, problemList(problems))
		}
	}
}

// withTimeouts sets a rule's timeouts.request and backendRequest ("":
// unset).
func withTimeouts(request, backend string) func(*gatewayv1.HTTPRouteRule) {
	return func(r *gatewayv1.HTTPRouteRule) {
		r.Timeouts = &gatewayv1.HTTPRouteTimeouts{}
		if request != "" {
			r.Timeouts.Request = ptrTo(gatewayv1.Duration(request))
		}
		if backend != "" {
			r.Timeouts.BackendRequest = ptrTo(gatewayv1.Duration(backend))
		}
	}
}

// headerFilterList is one RequestHeaderModifier setting name to value.
func headerFilterList(name, value string) []gatewayv1.HTTPRouteFilter {
	return []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{
		Set: []gatewayv1.HTTPHeader{{Name: gatewayv1.HTTPHeaderName(name), Value: value}}}}}
}

// hostileRule is a rule on /hostile with one change made by f.
func hostileRule(f func(*gatewayv1.HTTPRouteRule)) gatewayv1.HTTPRouteRule {
	r := routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/hostile")), backendTo("", "web", 80))
	f(&r)
	return r
}

func headerFilter(name, value string) func(*gatewayv1.HTTPRouteRule) {
	return func(r *gatewayv1.HTTPRouteRule) {
		r.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: gatewayv1.HTTPHeaderName(name), Value: value}}}}}
	}
}

func headerMatch(name, value string, regex bool) func(*gatewayv1.HTTPRouteRule) {
	return func(r *gatewayv1.HTTPRouteRule) {
		m := gatewayv1.HTTPHeaderMatch{Name: gatewayv1.HTTPHeaderName(name), Value: value}
		if regex {
			t := gatewayv1.HeaderMatchRegularExpression
			m.Type = &t
		}
		r.Matches[0].Headers = []gatewayv1.HTTPHeaderMatch{m}
	}
}

func TestHostileHTTPRouteRules(t *testing.T) {
	huge := strings.Repeat("x", mib)
	for _, c := range []struct {
		name string
		rule gatewayv1.HTTPRouteRule
		want string
	}{
		{"CR LF in a set header value", hostileRule(headerFilter("X-A", "v\r\nSet-Cookie: evil=1")), "contains the control character U+000D"},
		{"NUL in a set header value", hostileRule(headerFilter("X-A", "v\x00")), "control character U+0000"},
		{"a header name with a colon", hostileRule(headerFilter("X-A: b", "v")), "is not an HTTP header name"},
		{"a header name with CR LF", hostileRule(headerFilter("X-A\r\nB", "v")), "is not an HTTP header name"},
		{"a 1 MiB header value", hostileRule(headerFilter("X-A", huge)), "longer than 4096"},
		{"invalid UTF-8 in a header match", hostileRule(headerMatch("X-A", "\xff\xfe", false)), "is not valid UTF-8"},
		{"a bidi override in a header match", hostileRule(headerMatch("X-A", "a\u202eb", false)), "U+202E"},
		{"a regex PCRE refuses (class range)", hostileRule(headerMatch("X-A", `[\d-z]`, true)), "class range"},
		{"a regex PCRE refuses (named group)", hostileRule(headerMatch("X-A", `(?P<host>x)`, true)), "named group"},
		{"a regex PCRE refuses (code point)", hostileRule(headerMatch("X-A", `\x{100}`, true)), `\x{100}`},
		{"a regex RE2 refuses", hostileRule(headerMatch("X-A", `(`, true)), "is not a valid regular expression"},
		{"a path regex PCRE refuses", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.Matches = matchList(pathMatch(gatewayv1.PathMatchRegularExpression, `/[[=a=]]`))
		}), "POSIX collating"},
		{"a path with nginx syntax", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.Matches = matchList(pathMatch(gatewayv1.PathMatchExact, `/a;return 200 x;`))
		}), `contains ';'`},
		{"a 1 MiB path", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.Matches = matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/"+huge))
		}), "longer than 2048"},
		{"a relative path", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.Matches = matchList(pathMatch(gatewayv1.PathMatchExact, "relative"))
		}), `must start with "/"`},
		{"an unknown method", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.Matches[0] = withMethod(r.Matches[0], "GET\r\nX")
		}), "is not an HTTP method"},
		{"a huge weight", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.BackendRefs[0] = weighted(r.BackendRefs[0], 1<<31-1)
		}), "must be from 0 to 1000000"},
		{"a negative weight", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.BackendRefs[0] = weighted(r.BackendRefs[0], -1)
		}), "must be from 0 to 1000000"},
		{"a redirect status 200", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			code := 200
			r.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{StatusCode: &code}}}
		}), "statusCode 200"},
		{"a redirect scheme javascript", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			scheme := "javascript"
			r.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: &scheme}}}
		}), `scheme "javascript"`},
		{"a redirect host with CR LF", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			host := gatewayv1.PreciseHostname("a.test\r\nX: y")
			r.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Hostname: &host}}}
		}), "hostname"},
		{"a rewrite path with a query", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			p := "/x?y=1"
			r.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
				Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: &p}}}}
		}), `contains '?'`},
		{"a filter with no settings", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite}}
		}), "has no settings"},
		{"an unsupported filter", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExtensionRef}}
		}), "is not supported"},
		{"a redirect and a rewrite", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}},
				{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{}}}
		}), "cannot be used together"},
		{"CR LF in a backendRef's header value", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.BackendRefs[0].Filters = headerFilterList("X-A", "v\r\nSet-Cookie: evil=1")
		}), "contains the control character U+000D"},
		{"a backendRef filter restysync does not apply per backend", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.BackendRefs[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{}}}
		}), "is not supported on a backendRef"},
		{"two backendRef header modifiers", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			r.BackendRefs[0].Filters = append(headerFilterList("X-A", "1"), headerFilterList("X-B", "2")...)
		}), "a second RequestHeaderModifier"},
		{"a timeout with nginx syntax", hostileRule(withTimeouts("1s;return 200 x", "")), "is not a Gateway API duration"},
		{"a timeout in days", hostileRule(withTimeouts("", "1d")), "is not a Gateway API duration"},
		{"a timeout of 99999h", hostileRule(withTimeouts("99999h", "")), "longer than 24h0m0s is not supported"},
		{"a backendRequest timeout longer than the request's", hostileRule(withTimeouts("1s", "2s")), "must not be longer than timeouts.request"},
		{"a retry code nginx cannot retry on", hostileRule(withRetry(nil, "", 500, 418)), "retry.codes[1] 418: is not supported"},
		{"a retry of 0 attempts", hostileRule(withRetry(ptrTo(0), "")), "retry.attempts 0: must be from 1 to 10"},
		{"a retry of 11 attempts", hostileRule(withRetry(ptrTo(11), "")), "retry.attempts 11: must be from 1 to 10"},
		{"a retry backoff", hostileRule(withRetry(nil, "100ms", 503)), "retry.backoff 100ms: is not supported (nginx retries at once)"},
		{"a retry backoff with nginx syntax", hostileRule(withRetry(nil, "1s;return 200 x")), "is not a Gateway API duration"},
		{"17 header matches", hostileRule(func(r *gatewayv1.HTTPRouteRule) {
			for i := range 17 {
				r.Matches[0] = withHeader(r.Matches[0], fmt.Sprintf("X-%d", i), "v")
			}
		}), "more than 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostile := newRoute("default", "hostile", toGW(), []string{"bad.example.com"}, c.rule)
			m, problems := buildBounded(t, gwSnapshot(gw80(), gwNeighbour(), hostile), 64*mib)
			checkGatewayNeighbour(t, m, problems)
			checkGatewayProblems(t, problems, kindHTTPRoute, "hostile", c.want)
			st := routeStatusOf(t, m, "default", "hostile").Parents[0]
			if c := conditionOf(t, st.Conditions, condAccepted); c.Status || (c.Reason != reasonUnsupportedValue && c.Reason != "IncompatibleFilters") {
				t.Errorf("Accepted: %s", dump(c))
			}
			if _, ok := gatewayRoute(m, front1, "bad.example.com"); ok {
				t.Errorf("the hostile route is served")
			}
		})
	}
}

func TestHostileHTTPRouteHostnames(t *testing.T) {
	for _, host := range []string{"bad.example.com\r\nX: y", "Bad.Example.Com", "10.0.0.1", strings.Repeat("a.", 127) + "example.com",
		"a..example.com", "*", "**.example.com", "a.*.example.com", "bad example.com", "bad\u200b.example.com", strings.Repeat("x", mib)} {
		t.Run(clipForLog(host), func(t *testing.T) {
			hostile := newRoute("default", "hostile", toGW(), []string{host}, routeRule(nil, backendTo("", "web", 80)))
			m, problems := buildBounded(t, gwSnapshot(gw80(), gwNeighbour(), hostile), 64*mib)
			checkGatewayNeighbour(t, m, problems)
			checkGatewayProblems(t, problems, kindHTTPRoute, "hostile", "spec.hostnames[0]")
			wantCondition(t, "hostile", routeStatusOf(t, m, "default", "hostile").Parents[0].Conditions, condAccepted, false, reasonUnsupportedValue)
			if m.GatewayRoutes.Len() != 1 {
				t.Errorf("routes: %q", routeHosts(m))
			}
		})
	}
}

func TestHostileGatewayListenerHostname(t *testing.T) {
	gw := gw80(httpListener("http", 80, ""), httpListener("bad", 80, "bad\r\n.example.com"))
	m, problems := Build(gwSnapshot(gw, gwNeighbour()))
	checkGatewayNeighbour(t, m, problems)
	checkGatewayProblems(t, problems, "Gateway", "gw", "spec.listeners[1]")
	wantCondition(t, "bad", listenerStatusOf(t, gatewayStatusOf(t, m, "default", "gw"), "bad").Conditions, condAccepted, false, reasonUnsupportedValue)
}

// TestHostileManyRulesAndMatches: 16 rules of 8 matches each, with
// headers and queries, is served whole and costs little.
func TestHostileManyRulesAndMatches(t *testing.T) {
	var rules []gatewayv1.HTTPRouteRule
	for ri := range 16 {
		var ms []gatewayv1.HTTPRouteMatch
		for mi := range 8 {
			m := pathMatch(gatewayv1.PathMatchPathPrefix, fmt.Sprintf("/r%d/m%d", ri, mi))
			for h := range 16 {
				m = withHeader(m, fmt.Sprintf("X-H%d", h), "v")
			}
			m = withQuery(m, "q", "1")
			ms = append(ms, m)
		}
		rules = append(rules, routeRule(ms, backendTo("", "web", 80)))
	}
	big := newRoute("default", "big", toGW(), []string{"big.example.com"}, rules...)
	m, problems := buildBounded(t, gwSnapshot(gw80(), gwNeighbour(), big), 32*mib)
	checkGatewayNeighbour(t, m, problems)
	if len(problems) != 0 {
		t.Errorf("problems: %v", problems)
	}
	r, _ := gatewayRoute(m, front1, "big.example.com")
	if len(r.Locations) != 16*8*2 {
		t.Errorf("locations: %d, want %d", len(r.Locations), 16*8*2)
	}
}

// FuzzGatewayBuild builds a Gateway and an HTTPRoute from fuzzed
// hostnames, path, header, weight and a RequestMirror's share. Build must
// not panic, must be deterministic, and what it emits must be safe for
// Lua and nginx.
func FuzzGatewayBuild(f *testing.F) {
	f.Add("*.example.com", "a.example.com", "/p", uint8(0), "X-A", "v", int32(1), int32(0))
	f.Add("", "", "/", uint8(1), "x", "a\r\nb", int32(0), int32(0))
	f.Add("a.example.com", "*.example.com", "/[\\d-z]", uint8(2), "X:Y", "(?P<n>x)", int32(-1), int32(0))
	f.Add("*.a.b", "*.b", "//x", uint8(3), "", "\xff", int32(1<<30), int32(0))
	f.Add("Upper.Example", "10.0.0.1", "/a b", uint8(4), "X-\u202e", "\u2028", int32(7), int32(0))
	f.Add("", "https://*.a.com", "500ms", uint8(32|64|128), "X-B", "https://b.com\r\n", int32(5), int32(0))
	f.Add("", "*", "1h", uint8(32|64|128), "*", "0s", int32(0), int32(0))
	// RequestMirror: a percent (mirror > 0), a fraction weight/-mirror
	// (mirror < 0), to namespace headerName when mirror is even.
	f.Add("", "", "/m", uint8(1|4), "other", "v", int32(3), int32(20))
	f.Add("", "", "/m", uint8(1), "default", "v", int32(25), int32(-50))
	f.Add("", "", "/m", uint8(1|16), "a;b\r\n", "v", int32(-1), int32(-2))
	f.Add("", "", "/m", uint8(1), "x", "v", int32(7), int32(101))
	f.Fuzz(func(t *testing.T, listenerHost, routeHost, path string, choice uint8, headerName, headerValue string, weight, mirror int32) {
		pathTypes := []gatewayv1.PathMatchType{gatewayv1.PathMatchExact, gatewayv1.PathMatchPathPrefix, gatewayv1.PathMatchRegularExpression, "Other"}
		match := pathMatch(pathTypes[int(choice)%len(pathTypes)], path)
		if choice&4 != 0 {
			match = withHeader(match, headerName, headerValue)
		}
		if choice&8 != 0 {
			regex := gatewayv1.HeaderMatchRegularExpression
			match.Headers = append(match.Headers, gatewayv1.HTTPHeaderMatch{Type: &regex, Name: "X-R", Value: headerValue})
		}
		rule := routeRule(matchList(match), weighted(backendTo("", "web", 80), weight))
		if choice&16 != 0 {
			rule.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier,
				ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Add: []gatewayv1.HTTPHeader{{Name: gatewayv1.HTTPHeaderName(headerName), Value: headerValue}}}}}
		}
		if choice&32 != 0 {
			rule.BackendRefs[0].Filters = headerFilterList(headerName, headerValue)
		}
		if choice&64 != 0 {
			withTimeouts(path, headerValue)(&rule)
		}
		if choice&128 != 0 {
			rule.Filters = append(rule.Filters, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterCORS, CORS: &gatewayv1.HTTPCORSFilter{
				AllowOrigins: []gatewayv1.CORSOrigin{gatewayv1.CORSOrigin(routeHost), gatewayv1.CORSOrigin(headerValue)},
				AllowHeaders: []gatewayv1.HTTPHeaderName{gatewayv1.HTTPHeaderName(headerName)}, MaxAge: weight}})
		}
		if mirror != 0 {
			m := &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backendTo("", "web", 80).BackendObjectReference}
			if mirror%2 == 0 {
				ns := gatewayv1.Namespace(headerName)
				m.BackendRef.Namespace = &ns
			}
			if mirror > 0 {
				m.Percent = &mirror
			} else {
				denominator := -mirror
				m.Fraction = &gatewayv1.Fraction{Numerator: weight, Denominator: &denominator}
			}
			rule.Filters = append(rule.Filters, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: m})
		}
		var hostnames []string
		if routeHost != "" {
			hostnames = []string{routeHost}
		}
		s := gwSnapshot(gw80(httpListener("http", 80, listenerHost)), newRoute("default", "fuzz", toGW(), hostnames, rule))
		m, problems := Build(s)
		again, againProblems := Build(s)
		if !reflect.DeepEqual(m, again) || !reflect.DeepEqual(problems, againProblems) {
			t.Fatal("two builds of one snapshot differ")
		}
		backends := map[string]bool{}
		for _, b := range m.Backends.Slice() {
			backends[b.Name] = true
		}
		for r := range m.GatewayRoutes.All() {
			front, host, ok := strings.Cut(r.Host, " ")
			if !ok || front != front1 || host != anyHost && validHost(host) != "" {
				t.Fatalf("emitted route key %q", r.Host)
			}
			for _, l := range r.Locations {
				checkFuzzedLocation(t, l, backends)
			}
		}
		for _, p := range problems {
			if !utf8.ValidString(p.Reason) || len(p.Reason) > maxReasonBytes+8 {
				t.Fatalf("problem reason: %q", clipForLog(p.Reason))
			}
		}
	})
}

func checkFuzzedLocation(t *testing.T, l RouteLocation, backends map[string]bool) {
	t.Helper()
	if l.Rule == nil || !l.Rule.CaseSensitive && l.Regex {
		t.Fatalf("location without a rule, or a case-insensitive regex: %s", dump(l))
	}
	if l.Regex && gatewayRegexReason(l.Path) != "" || !l.Regex && validPath(l.Path) != "" && !strings.HasSuffix(l.Path, "/") {
		t.Fatalf("emitted path %q", l.Path)
	}
	for _, v := range append(l.Rule.Headers, l.Rule.Query...) {
		if headerNameReason(v.Name) != "" || matchValueReason(v.Value, v.Regex) != "" {
			t.Fatalf("emitted match %s", dump(v))
		}
	}
	if c := l.Rule.ResponseHeaders; c != nil {
		for _, h := range c.Add {
			if headerNameReason(h.Name) != "" || chars.Check(h.Value) != nil {
				t.Fatalf("emitted header %s", dump(h))
			}
		}
	}
	for _, b := range l.Rule.Backends {
		if b.Weight < 0 || b.Weight > maxBackendWeight || b.Backend != "" && !backends[b.Backend] {
			t.Fatalf("emitted backend %s", dump(b))
		}
		if c := b.RequestHeaders; c != nil {
			for _, h := range c.Set {
				if headerNameReason(h.Name) != "" || chars.Check(h.Value) != nil {
					t.Fatalf("emitted backend header %s", dump(h))
				}
			}
		}
	}
	for _, m := range l.Rule.Mirrors {
		if !backends[m.Backend] || m.Numerator < 1 || m.Numerator > m.Denominator {
			t.Fatalf("emitted mirror %s", dump(m))
		}
	}
	if l.Rule.TimeoutMS < 0 || l.Rule.TimeoutMS > maxGatewayTimeout.Milliseconds() {
		t.Fatalf("emitted timeout %d ms", l.Rule.TimeoutMS)
	}
	if c := l.Rule.CORS; c != nil {
		for _, o := range c.AllowOrigins {
			if !corsOrigin.MatchString(o) || o != strings.ToLower(o) {
				t.Fatalf("emitted CORS origin %q", o)
			}
		}
		if c.MaxAge < 1 {
			t.Fatalf("emitted CORS maxAge %d", c.MaxAge)
		}
	}
}

// TestHostileHugeLists: lists the CRD bounds but the file source does
// not (listeners, parentRefs, hostnames, rules, backendRefs) cost a
// Problem, not a quadratic build.
func TestHostileHugeLists(t *testing.T) {
	const n = 20000
	var listeners []gatewayv1.Listener
	var refs []gatewayv1.ParentReference
	var hostnames []string
	var rules []gatewayv1.HTTPRouteRule
	var backends []gatewayv1.HTTPBackendRef
	for i := range n {
		listeners = append(listeners, httpListener(fmt.Sprintf("l%d", i), 80, fmt.Sprintf("h%d.example.com", i)))
		refs = append(refs, parentOf("", "gw", ""))
		hostnames = append(hostnames, fmt.Sprintf("h%d.example.com", i))
		rules = append(rules, routeRule(nil, backendTo("", "web", 80)))
		backends = append(backends, backendTo("", "web", 80))
	}
	big := olderBy(newGateway("default", "big", listeners...), 5)
	manyRefs := newRoute("default", "refs", refs, []string{"refs.example.com"}, routeRule(nil, backendTo("", "web", 80)))
	manyHosts := newRoute("default", "hosts", toGW(), hostnames, routeRule(nil, backendTo("", "web", 80)))
	manyRules := newRoute("default", "rules", toGW(), []string{"rules.example.com"}, rules...)
	manyBackends := newRoute("default", "backends", toGW(), []string{"backends.example.com"}, routeRule(nil, backends...))
	m, problems := buildBounded(t, gwSnapshot(gw80(), gwNeighbour(), big, manyRefs, manyHosts, manyRules, manyBackends), 256*mib)
	checkGatewayNeighbour(t, m, problems)
	wantCondition(t, "big", gatewayStatusOf(t, m, "default", "big").Conditions, condAccepted, false, reasonInvalid)
	if st := routeStatusOf(t, m, "default", "refs"); len(st.Parents) != maxParentRefs {
		t.Errorf("refs: %d parents, want %d", len(st.Parents), maxParentRefs)
	}
	for _, name := range []string{"hosts", "rules", "backends"} {
		wantCondition(t, name, routeStatusOf(t, m, "default", name).Parents[0].Conditions, condAccepted, false, reasonUnsupportedValue)
	}
	if len(problems) > 10 {
		t.Errorf("%d problems", len(problems))
	}
}
