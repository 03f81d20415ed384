package render

import (
	mathrand "math/rand"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// Random Gateway API objects for TestRandomSnapshotsNginxAccepts: a class
// of ours, up to three Gateways with listeners of every protocol, port and
// hostname (hostile ones too), and HTTPRoutes whose every field is picked
// from good and hostile values, so that what the model accepts reaches
// render and nginx -t (and Lua's PCRE, for the regexes) as Build made it.

var (
	randomGatewayPool  = []string{"127.29.50.1", "127.29.50.2", "::1"}
	randomGatewayHosts = []string{"", "a.example.com", "*.example.com", "*.a.example.com", "example.com", "A.Example.com",
		"bad\r\nhost", "*", "x.*.com", "_", "a b.com", "ünicode.example.com"}
	randomGatewayPaths = []string{"/", "/a", "/a/", "/a/b", "", "a", "/a b", "/{x}", "/a;b", "/a\"b", "/\\", "/a\nb", "/é", "/%00"}
	randomGatewayRegex = []string{"/v[0-9]+", "^/x$", "/a|/b", "(", "/(?P<n>x)", "[[=a=]]", "\\x{100}", "/a\nb", ".*", "/${x}"}
	randomHeaderNames  = []string{"version", "X-A", "bad name", "x\r\ny", "", "Host", "content-type"}
	randomHeaderValues = []string{"one", "", "a\r\nb", "\"quoted\"", "${var}", "}; evil {", "ünicode", "\x00"}
)

func randomGatewayObjects(rng *mathrand.Rand, s *model.Snapshot) {
	s.GatewayController = model.GatewayControllerName
	s.GatewayAddresses = randomGatewayPool
	s.GatewayClasses = model.ListOf(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: model.GatewayControllerName}})
	protocols := []gatewayv1.ProtocolType{gatewayv1.HTTPProtocolType, gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType, gatewayv1.TLSProtocolType, "bogus"}
	var secrets []string
	for sec := range s.Secrets.All() {
		if sec.Type == corev1.SecretTypeTLS {
			secrets = append(secrets, sec.Namespace+"/"+sec.Name)
		}
	}
	for g := range rng.Intn(4) {
		gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw" + string(rune('a'+g))},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync"}}
		if rng.Intn(4) == 0 {
			gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Value: pick(rng, append([]string{"10.0.0.1", "bad"}, randomGatewayPool...))}}
		}
		for l := range 1 + rng.Intn(4) {
			ln := gatewayv1.Listener{Name: gatewayv1.SectionName("l" + string(rune('a'+l))), Protocol: pick(rng, protocols),
				Port: int32(pick(rng, []int{80, 443, 8080, 18080, 18443, 0, 70000}))}
			if h := pick(rng, randomGatewayHosts); h != "" && rng.Intn(3) == 0 {
				hn := gatewayv1.Hostname(h)
				ln.Hostname = &hn
			}
			if len(secrets) > 0 && rng.Intn(4) > 0 {
				ns, name, _ := cutSlash(pick(rng, secrets))
				namespace := gatewayv1.Namespace(ns)
				ln.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: gatewayv1.ObjectName(name), Namespace: &namespace}}}
			}
			all := gatewayv1.NamespacesFromAll
			ln.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}
			gw.Spec.Listeners = append(gw.Spec.Listeners, ln)
		}
		s.Gateways = model.ListOf(append(s.Gateways.Slice(), gw)...)
	}
	for r := range rng.Intn(10) {
		s.HTTPRoutes = model.ListOf(append(s.HTTPRoutes.Slice(), randomHTTPRoute(rng, r, s))...)
	}
}

func cutSlash(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

func randomHTTPRoute(rng *mathrand.Rand, i int, s *model.Snapshot) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "route" + string(rune('a'+i))}}
	for range 1 + rng.Intn(2) {
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, gatewayv1.ParentReference{Name: gatewayv1.ObjectName(pick(rng, []string{"gwa", "gwb", "gwc"}))})
	}
	for range rng.Intn(3) {
		if h := pick(rng, randomGatewayHosts); h != "" && rng.Intn(2) == 0 {
			r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
		}
	}
	for range 1 + rng.Intn(3) {
		var rule gatewayv1.HTTPRouteRule
		for range rng.Intn(3) {
			rule.Matches = append(rule.Matches, randomMatch(rng))
		}
		if rng.Intn(2) == 0 {
			rule.Filters = append(rule.Filters, randomFilter(rng))
		}
		if rng.Intn(4) == 0 {
			// A retry: its codes' location goes into every Gateway server.
			attempts := pick(rng, []int{1, 3, 0, 11})
			rule.Retry = &gatewayv1.HTTPRouteRetry{Attempts: &attempts}
			for range rng.Intn(4) {
				rule.Retry.Codes = append(rule.Retry.Codes, gatewayv1.HTTPRouteRetryStatusCode(pick(rng, []int{500, 503, 429, 404, 418, 599})))
			}
		}
		for range rng.Intn(3) {
			port := gatewayv1.PortNumber(pick(rng, []int{80, 8080, 0, 443}))
			ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Port: &port}}}
			if s.Services.Len() > 0 && rng.Intn(4) > 0 {
				svc := pick(rng, s.Services.Slice())
				ns := gatewayv1.Namespace(svc.Namespace)
				ref.Name, ref.Namespace = gatewayv1.ObjectName(svc.Name), &ns
				if len(svc.Ports) > 0 {
					p := svc.Ports[0].Port
					ref.Port = &p
				}
			} else {
				ref.Name = gatewayv1.ObjectName(pick(rng, []string{"missing", "Bad Name", ""}))
			}
			w := int32(pick(rng, []int{1, 0, 70, 1000000, -1}))
			ref.Weight = &w
			rule.BackendRefs = append(rule.BackendRefs, ref)
		}
		r.Spec.Rules = append(r.Spec.Rules, rule)
	}
	return r
}

func randomMatch(rng *mathrand.Rand) gatewayv1.HTTPRouteMatch {
	var m gatewayv1.HTTPRouteMatch
	kind := pick(rng, []gatewayv1.PathMatchType{gatewayv1.PathMatchExact, gatewayv1.PathMatchPathPrefix, gatewayv1.PathMatchRegularExpression, "Bogus"})
	value := pick(rng, randomGatewayPaths)
	if kind == gatewayv1.PathMatchRegularExpression {
		value = pick(rng, randomGatewayRegex)
	}
	m.Path = &gatewayv1.HTTPPathMatch{Type: &kind, Value: &value}
	if rng.Intn(3) == 0 {
		method := gatewayv1.HTTPMethod(pick(rng, []string{"GET", "POST", "get", "BREW"}))
		m.Method = &method
	}
	for range rng.Intn(3) {
		typ := pick(rng, []gatewayv1.HeaderMatchType{gatewayv1.HeaderMatchExact, gatewayv1.HeaderMatchRegularExpression})
		value := pick(rng, randomHeaderValues)
		if typ == gatewayv1.HeaderMatchRegularExpression {
			value = pick(rng, randomGatewayRegex)
		}
		m.Headers = append(m.Headers, gatewayv1.HTTPHeaderMatch{Type: &typ, Name: gatewayv1.HTTPHeaderName(pick(rng, randomHeaderNames)), Value: value})
	}
	for range rng.Intn(2) {
		m.QueryParams = append(m.QueryParams, gatewayv1.HTTPQueryParamMatch{Name: gatewayv1.HTTPHeaderName(pick(rng, randomHeaderNames)), Value: pick(rng, randomHeaderValues)})
	}
	return m
}

func randomFilter(rng *mathrand.Rand) gatewayv1.HTTPRouteFilter {
	headers := func() *gatewayv1.HTTPHeaderFilter {
		f := &gatewayv1.HTTPHeaderFilter{}
		for range rng.Intn(3) {
			h := gatewayv1.HTTPHeader{Name: gatewayv1.HTTPHeaderName(pick(rng, randomHeaderNames)), Value: pick(rng, randomHeaderValues)}
			if rng.Intn(2) == 0 {
				f.Set = append(f.Set, h)
			} else {
				f.Add = append(f.Add, h)
			}
		}
		if rng.Intn(2) == 0 {
			f.Remove = []string{pick(rng, randomHeaderNames)}
		}
		return f
	}
	pathModifier := func() *gatewayv1.HTTPPathModifier {
		if rng.Intn(2) == 0 {
			return nil
		}
		v := pick(rng, randomGatewayPaths)
		if rng.Intn(2) == 0 {
			return &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: &v}
		}
		return &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: &v}
	}
	host := func() *gatewayv1.PreciseHostname {
		if rng.Intn(2) == 0 {
			return nil
		}
		h := gatewayv1.PreciseHostname(pick(rng, randomGatewayHosts))
		return &h
	}
	switch rng.Intn(4) {
	case 0:
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: headers()}
	case 1:
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: headers()}
	case 2:
		scheme := pick(rng, []string{"http", "https", "javascript"})
		status := pick(rng, []int{301, 302, 200})
		port := gatewayv1.PortNumber(pick(rng, []int{80, 8443, 0}))
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{
			Scheme: &scheme, Hostname: host(), Path: pathModifier(), Port: &port, StatusCode: &status}}
	}
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: host(), Path: pathModifier()}}
}
