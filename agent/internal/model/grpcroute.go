package model

import (
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GRPCRoutes: each one is converted into the HTTPRoute it means and then
// attached, compiled and ranked by httproute.go like any other, its kind
// kept for status, problems and ReferenceGrants. A gRPC call is an HTTP/2
// POST to "/<service>/<method>", so a method match is a path match
// (service and method exact: that exact path; a service alone: the
// prefix "/<service>/"; a method alone or a RegularExpression match: an
// anchored path regex; none: every path) and a header match is a header
// match. Converting keeps one router: the Lua side never knows a gRPC
// route from an HTTP one.
//
// What differs is the wire. nginx before 1.25.1 cannot tell HTTP/1.1
// from HTTP/2 without TLS on one port: `listen ... http2` on a plaintext
// port takes every connection as HTTP/2 (prior knowledge, which is how
// gRPC clients connect). So a front (a Gateway's address:port) is gRPC
// when GRPCRoutes and no HTTPRoute attach to it (Listener.GRPC): render
// then listens with HTTP/2 and grpc_passes to the backends. A front with
// both stays HTTP/1.1, and each GRPCRoute on it gets a Problem.

// gRPC method match shapes, as the CRD checks them (Exact type).
var (
	grpcServiceExact = regexp.MustCompile(`^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$`)
	grpcMethodExact  = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*$`)
)

// convertGRPCRoutes returns the source's GRPCRoutes as HTTPRoutes,
// remembered in p.grpcRoutes. A match that cannot be converted leaves
// its rule with a match httproute.go refuses, with the reason.
func (p *gatewayProcessor) convertGRPCRoutes() []*gatewayv1.HTTPRoute {
	out := make([]*gatewayv1.HTTPRoute, 0, p.source.GRPCRoutes.Len())
	for g := range p.source.GRPCRoutes.All() {
		r := httpRouteOf(g)
		p.grpcRoutes[r] = true
		out = append(out, r)
	}
	return out
}

// httpRouteOf is the HTTPRoute that routes the gRPC calls g routes. It
// shares g's metadata (status is written to the GRPCRoute of that name).
func httpRouteOf(g *gatewayv1.GRPCRoute) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{Kind: kindGRPCRoute, APIVersion: gatewayv1.GroupVersion.String()},
		ObjectMeta: g.ObjectMeta,
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: g.Spec.CommonRouteSpec,
			Hostnames:       g.Spec.Hostnames,
		},
	}
	for _, gr := range g.Spec.Rules {
		rule := gatewayv1.HTTPRouteRule{Name: gr.Name, SessionPersistence: gr.SessionPersistence, Filters: httpFilters(gr.Filters)}
		for _, m := range gr.Matches {
			rule.Matches = append(rule.Matches, httpMatchOf(m))
		}
		if len(rule.Matches) == 0 {
			rule.Matches = []gatewayv1.HTTPRouteMatch{httpMatchOf(gatewayv1.GRPCRouteMatch{})}
		}
		for _, b := range gr.BackendRefs {
			rule.BackendRefs = append(rule.BackendRefs, gatewayv1.HTTPBackendRef{BackendRef: b.BackendRef, Filters: httpFilters(b.Filters)})
		}
		r.Spec.Rules = append(r.Spec.Rules, rule)
	}
	return r
}

// httpFilters are gRPC filters as HTTPRoute filters: the types a
// GRPCRoute has are named as an HTTPRoute's and hold the same fields.
func httpFilters(in []gatewayv1.GRPCRouteFilter) []gatewayv1.HTTPRouteFilter {
	var out []gatewayv1.HTTPRouteFilter
	for _, f := range in {
		out = append(out, gatewayv1.HTTPRouteFilter{
			Type:                   gatewayv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier:  f.RequestHeaderModifier,
			ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror:          f.RequestMirror,
			ExtensionRef:           f.ExtensionRef,
		})
	}
	return out
}

// httpMatchOf is the HTTPRoute match of one gRPC match. A match every
// call holds is the regex "^/" rather than the prefix "/", so that it
// ranks after the method-only and regex matches and not before them, as
// the GRPCRoute precedence wants: compileRule ranks a GRPCRoute's regexes
// by their length, the longest first, then by header count.
func httpMatchOf(m gatewayv1.GRPCRouteMatch) gatewayv1.HTTPRouteMatch {
	var out gatewayv1.HTTPRouteMatch
	for _, h := range m.Headers {
		t := gatewayv1.HeaderMatchExact
		if h.Type != nil {
			t = gatewayv1.HeaderMatchType(*h.Type)
		}
		out.Headers = append(out.Headers, gatewayv1.HTTPHeaderMatch{Type: &t, Name: gatewayv1.HTTPHeaderName(h.Name), Value: h.Value})
	}
	pathType, value := grpcPath(m.Method)
	out.Path = &gatewayv1.HTTPPathMatch{Type: &pathType, Value: &value}
	return out
}

// grpcPath is the path match of a gRPC method match. A value the CRD
// would refuse becomes a path match compileMatch refuses, saying so.
func grpcPath(m *gatewayv1.GRPCMethodMatch) (gatewayv1.PathMatchType, string) {
	if m == nil || m.Service == nil && m.Method == nil {
		return gatewayv1.PathMatchRegularExpression, "^/"
	}
	service, method := "", ""
	if m.Service != nil {
		service = *m.Service
	}
	if m.Method != nil {
		method = *m.Method
	}
	if m.Type != nil && *m.Type == gatewayv1.GRPCMethodMatchRegularExpression {
		return gatewayv1.PathMatchRegularExpression, fmt.Sprintf("^/(?:%s)/(?:%s)$", orAny(service), orAny(method))
	}
	if m.Type != nil && *m.Type != gatewayv1.GRPCMethodMatchExact ||
		service != "" && !grpcServiceExact.MatchString(service) || method != "" && !grpcMethodExact.MatchString(method) {
		// "grpc:" is not a path: compileMatch refuses it, naming it.
		return gatewayv1.PathMatchExact, fmt.Sprintf("grpc: method %q, service %q are not an Exact gRPC method match", clip(method), clip(service))
	}
	switch {
	case method == "":
		return gatewayv1.PathMatchPathPrefix, "/" + service
	case service == "":
		return gatewayv1.PathMatchRegularExpression, "^/[^/]+/" + regexp.QuoteMeta(method) + "$"
	}
	return gatewayv1.PathMatchExact, "/" + service + "/" + method
}

func orAny(re string) string {
	if re == "" {
		return "[^/]+"
	}
	return re
}

// grpcOnly says whether the front group serves GRPCRoutes and no
// HTTPRoute, and reports each GRPCRoute of a group that has both.
func (p *gatewayProcessor) grpcOnly(fg *frontGroup) bool {
	var grpc []*compiledRoute
	http := false
	for _, a := range fg.attachments {
		if a.route.kind == kindGRPCRoute {
			grpc = append(grpc, a.route)
		} else {
			http = true
		}
	}
	if http {
		for _, c := range grpc {
			p.routeProblem(c.route, fmt.Sprintf("Gateway %s port %d also serves HTTPRoutes: it stays an HTTP/1.1 port with HTTP/1.1 backends, and gRPC calls on it fail (one port cannot serve both: nginx before 1.25.1 cannot serve HTTP/1.1 and h2c on one plaintext port)", fg.gateway.id, fg.port))
		}
	}
	return len(grpc) > 0 && !http
}
