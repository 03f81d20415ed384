package model

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RequestMirror filters of HTTPRoute rules (RouteRule.Mirrors): each
// names a backendRef, resolved as a rule's backendRefs are (a Service and
// port, a ReferenceGrant for another namespace, its endpoints checked by
// Targets), and the share of requests it gets. A mirror whose backendRef
// cannot be used is left out, the route's ResolvedRefs is False with the
// spec's reason and a Problem names the route; the rule keeps serving. A
// mirror's value that cannot be (both percent and fraction, a fraction
// over 1) leaves the rule out, as any other invalid filter does. Lua
// serves the mirrors (restysync.gateway; render/gateway.go says how).

// compileMirror reads the RequestMirror filter f (at field) into
// template.Mirrors. bad is why its backendRef cannot be used (the mirror
// is then left out); reason why the filter is invalid.
func (p *gatewayProcessor) compileMirror(r *gatewayv1.HTTPRoute, template *RouteRule, field string, f *gatewayv1.HTTPRequestMirrorFilter) (bad *ruleError, reason string) {
	if f == nil {
		return nil, "has no settings"
	}
	if p.grpcRoutes[r] {
		return nil, "is not supported on a GRPCRoute"
	}
	numerator, denominator, reason := mirrorShare(f)
	if reason != "" {
		return nil, reason
	}
	name, bad := p.backendOf(p.routeKind(r), r.Namespace, &f.BackendRef, field+".backendRef")
	if bad != nil {
		p.routeProblem(r, bad.msg+"; that mirror is left out")
		return bad, ""
	}
	namespace := r.Namespace
	if f.BackendRef.Namespace != nil && *f.BackendRef.Namespace != "" {
		namespace = string(*f.BackendRef.Namespace)
	}
	if f.BackendRef.Port != nil && len(p.backendTLSPolicies(namespace, string(f.BackendRef.Name), int32(*f.BackendRef.Port))) > 0 {
		// Copies are sent over plain HTTP; never to a backend that wants TLS.
		p.routeProblem(r, fmt.Sprintf("%s.backendRef: a BackendTLSPolicy applies to Service %s/%s, and mirrors are sent without TLS; that mirror is left out", field, namespace, clip(string(f.BackendRef.Name))))
		return nil, ""
	}
	if numerator > 0 {
		template.Mirrors = append(template.Mirrors, RouteMirror{Backend: name, Numerator: numerator, Denominator: denominator})
	}
	return nil, ""
}

// mirrorShare is the share of requests f mirrors, as the CRD checks it:
// percent (0 to 100) or fraction (numerator 0 up to its denominator, 100
// unless set), not both; neither is every request.
func mirrorShare(f *gatewayv1.HTTPRequestMirrorFilter) (numerator, denominator int32, reason string) {
	switch {
	case f.Percent != nil && f.Fraction != nil:
		return 0, 0, "sets both percent and fraction; only one may be set"
	case f.Percent != nil:
		if *f.Percent < 0 || *f.Percent > 100 {
			return 0, 0, fmt.Sprintf("percent %d: must be from 0 to 100", *f.Percent)
		}
		return *f.Percent, 100, ""
	case f.Fraction != nil:
		denominator = 100
		if f.Fraction.Denominator != nil {
			denominator = *f.Fraction.Denominator
		}
		if denominator < 1 {
			return 0, 0, fmt.Sprintf("fraction.denominator %d: must be at least 1", denominator)
		}
		if f.Fraction.Numerator < 0 || f.Fraction.Numerator > denominator {
			return 0, 0, fmt.Sprintf("fraction.numerator %d: must be from 0 to the denominator %d", f.Fraction.Numerator, denominator)
		}
		return f.Fraction.Numerator, denominator, ""
	}
	return 100, 100, ""
}
