package model

import (
	"fmt"
	"regexp"

	networkingv1 "k8s.io/api/networking/v1"
)

// Canary Ingresses, as ingress-nginx has them.
//
// An Ingress with the annotation canary: "true" serves no path of its own.
// Each of its paths names a path some other Ingress serves on the same host
// (same path, same match); the backend of that location becomes a variant
// whose Policy sends part of the traffic to the canary's backend: by header,
// then by cookie, then by weight. The split is decided in Lua per request,
// so changing the weight is a push; adding or removing the canary changes
// which backend the location names, which is one reload.

// headerName is an HTTP header name the canary may be chosen by.
var headerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// headerValue is a printable ASCII value of bounded length.
var headerValue = regexp.MustCompile(`^[\x20-\x7e]{0,256}$`)

// isCanary reports whether ing is a canary Ingress.
func (b *builder) isCanary(ing *networkingv1.Ingress) bool {
	return b.boolAnnotation(ing, "canary", false)
}

// canarySplit reads how a canary Ingress takes traffic into the canary
// fields of a Policy.
func (b *builder) canarySplit(ing *networkingv1.Ingress) Policy {
	var p Policy
	p.CanaryWeightTotal = b.intAnnotation(ing, "canary-weight-total", 100, 1, 1_000_000)
	p.CanaryWeight = b.intAnnotation(ing, "canary-weight", 0, 0, 1_000_000)
	if p.CanaryWeight > p.CanaryWeightTotal {
		b.ingressProblem(ing, fmt.Sprintf("annotation canary-weight %d: is more than canary-weight-total %d; the canary takes all traffic", p.CanaryWeight, p.CanaryWeightTotal))
		p.CanaryWeight = p.CanaryWeightTotal
	}
	if value, key, ok := lookupAnnotation(ing, "canary-by-header"); ok {
		if reason := checkCanaryHeader(value); reason == "" {
			p.CanaryHeader = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; no canary by header")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "canary-by-header-value"); ok {
		switch {
		case p.CanaryHeader == "":
			b.annotationProblem(ing, key, value, "needs canary-by-header; ignored")
		case checkCanaryHeaderValue(value) != "":
			b.annotationProblem(ing, key, value, checkCanaryHeaderValue(value)+`; the header's "always" and "never" are used`)
		default:
			p.CanaryHeaderValue = value
		}
	}
	if value, key, ok := lookupAnnotation(ing, "canary-by-header-pattern"); ok {
		switch {
		case p.CanaryHeader == "":
			b.annotationProblem(ing, key, value, "needs canary-by-header; ignored")
		case p.CanaryHeaderValue != "":
			b.annotationProblem(ing, key, value, "is ignored: canary-by-header-value is set, and it wins")
		case checkCanaryHeaderPattern(value) != "":
			b.annotationProblem(ing, key, value, checkCanaryHeaderPattern(value)+`; the header's "always" and "never" are used`)
		default:
			p.CanaryHeaderPattern = value
		}
	}
	if value, key, ok := lookupAnnotation(ing, "canary-by-cookie"); ok {
		if reason := checkCookieName(value); reason == "" {
			p.CanaryCookie = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; no canary by cookie")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "affinity-canary-behavior"); ok {
		switch value {
		case "sticky":
		case "legacy":
			p.CanaryAffinityLegacy = true
		default:
			b.annotationProblem(ing, key, value, checkCanaryBehavior(value)+"; sticky is used")
		}
	}
	return p
}

// withAffinityOf returns p with the session affinity of from (all of it:
// none when from has none), as ingress-nginx copies the primary's affinity
// onto the canary's backend.
func withAffinityOf(p, from Policy) Policy {
	p.Affinity, p.AffinityMode = from.Affinity, from.AffinityMode
	p.CookieName, p.CookieMaxAge, p.CookiePath = from.CookieName, from.CookieMaxAge, from.CookiePath
	p.CookieSameSite, p.CookieSecure, p.CookieDomain = from.CookieSameSite, from.CookieSecure, from.CookieDomain
	p.CookieExpires, p.CookieChangeOnFailure = from.CookieExpires, from.CookieChangeOnFailure
	p.CookieConditionalSameSiteNone = from.CookieConditionalSameSiteNone
	return p
}

// canaryRef returns the backend the split of a location sends to the
// canary: ref with the canary Ingress's own Policy, except that, unless
// affinity-canary-behavior is legacy, the session affinity is the
// primary's. Such a backend is named after both Ingresses
// ("ns/svc:port@ns/canary+ns/primary"): a canary that splits the paths of
// Ingresses with different affinity gets one backend for each.
func canaryRef(ref backendRef, own, primary Policy, legacy bool, id, primaryIngress string) backendRef {
	if legacy {
		return ref.withPolicy(own, id)
	}
	p := withAffinityOf(own, primary)
	if p == own || p == (Policy{}) {
		return ref.withPolicy(p, id)
	}
	ref.policy, ref.name = p, ref.name+variantSeparator+id+canarySeparator+primaryIngress
	return ref
}

// addCanary attaches the paths of the canary Ingress ing to the locations
// other Ingresses serve for the same host and path.
func (b *builder) addCanary(ing *networkingv1.Ingress) {
	id := ing.Namespace + "/" + ing.Name
	split := b.canarySplit(ing)
	useRegex := b.useRegex(ing)
	policy := b.policyFor(ing)
	if ing.Spec.DefaultBackend != nil {
		b.ingressProblem(ing, "spec.defaultBackend: a canary Ingress splits the paths of its rules only; default backend left out")
	}
	for ri := range ing.Spec.Rules {
		rule := &ing.Spec.Rules[ri]
		if rule.Host != "" {
			if reason := validHost(rule.Host); reason != "" {
				b.ingressProblem(ing, fmt.Sprintf("spec.rules[%d].host %q: %s; rule left out", ri, rule.Host, reason))
				continue
			}
		}
		if rule.HTTP == nil {
			continue
		}
		for pi := range rule.HTTP.Paths {
			b.addCanaryPath(ing, id, rule.Host, ri, pi, useRegex, policy, split)
		}
	}
}

func (b *builder) addCanaryPath(ing *networkingv1.Ingress, id, host string, ri, pi int, useRegex bool, policy, split Policy) {
	p := &ing.Spec.Rules[ri].HTTP.Paths[pi]
	field := fmt.Sprintf("spec.rules[%d].http.paths[%d]", ri, pi)
	kind, pathType, reason := matchType(p.PathType)
	if reason != "" {
		b.ingressProblem(ing, fmt.Sprintf("%s.pathType %q: %s; path left out", field, *p.PathType, reason))
		return
	}
	pathType, _ = b.pathMatch(ing, useRegex, host, p, kind, pathType)
	path, reason := locationPath(p.Path, kind, pathType)
	if reason != "" {
		b.ingressProblem(ing, fmt.Sprintf("%s.path %q: %s; path left out", field, p.Path, reason))
		return
	}
	ref, reason := parseBackend(ing.Namespace, &p.Backend, "backend")
	if reason != "" {
		b.ingressProblem(ing, field+"."+reason+"; path left out")
		return
	}
	locations := b.servers[host]
	key := locationKey{path, pathType}
	loc, ok := locations[key]
	if !ok {
		b.ingressProblem(ing, fmt.Sprintf("%s.path %q: no other Ingress serves path %q (%s) on %s, so there is nothing to split; path left out",
			field, p.Path, path, pathType, describeHost(host)))
		return
	}
	primary := b.resolved[loc.Backend]
	if primary.policy.Canary != "" {
		b.ingressProblem(ing, fmt.Sprintf("%s.path %q: path %q (%s) on %s already has the canary %s; path left out",
			field, p.Path, path, pathType, describeHost(host), primary.policy.Canary))
		return
	}
	ref = canaryRef(ref, policy, primary.policy, split.CanaryAffinityLegacy, id, loc.Ingress)
	if r := b.resolve(ref); r.problem != "" {
		b.ingressProblem(ing, field+".backend"+r.problem+"; requests sent to the canary answer 503")
	}
	variant := primary
	variant.backend.Name = loc.Backend + canarySeparator + id
	if baseBackendName(loc.Backend) == loc.Backend {
		variant.backend.Name = loc.Backend + variantSeparator + loc.Ingress + canarySeparator + id
	}
	variant.policy.Canary = ref.name
	variant.policy.CanaryWeight = split.CanaryWeight
	variant.policy.CanaryWeightTotal = split.CanaryWeightTotal
	variant.policy.CanaryHeader = split.CanaryHeader
	variant.policy.CanaryHeaderValue = split.CanaryHeaderValue
	variant.policy.CanaryHeaderPattern = split.CanaryHeaderPattern
	variant.policy.CanaryCookie = split.CanaryCookie
	variant.policy.CanaryAffinityLegacy = split.CanaryAffinityLegacy
	b.resolved[variant.backend.Name] = variant
	loc.Backend = variant.backend.Name
	locations[key] = loc
	b.extraBackends[ref.name] = true
}

// canarySeparator joins the variant of a backend and the canary Ingress
// that splits it.
const canarySeparator = "+"

// The checks of the canary's keys (the table's Check column).
var (
	checkCanaryHeader      = matching(headerName, "is not an HTTP header name (letters, digits, '-' and '_', at most 64)")
	checkCanaryHeaderValue = matching(headerValue, "is not 1 to 256 printable ASCII characters")
	checkCanaryBehavior    = oneOf("sticky", "legacy")
)

// checkCanaryHeaderPattern checks canary-by-header-pattern: printable, a
// regular expression PCRE reads as Go does.
func checkCanaryHeaderPattern(value string) string {
	if reason := checkCanaryHeaderValue(value); reason != "" {
		return reason
	}
	if _, err := regexp.Compile(value); err != nil {
		return fmt.Sprintf("is not a regular expression (%v)", err)
	}
	return pcreIncompatible(value)
}
