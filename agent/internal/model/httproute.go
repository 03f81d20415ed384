package model

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// HTTPRoutes: which listeners each one attaches to (parentRefs,
// allowedRoutes, hostnames), and its rules compiled into ranked route
// locations once, whatever the number of listeners (gatewayhosts.go puts
// them under their hosts).

// Bounds on what one rule may hold, as the CRD has them; the file source
// has no API server to apply them.
const (
	maxParentRefs      = 32
	maxRouteHostnames  = 16
	maxRouteRules      = 16
	maxRuleFilters     = 16
	maxRuleBackends    = 16
	maxRouteMatches    = 64
	maxMatchConditions = 16
	maxHeaderChanges   = 16
	maxHeaderValue     = 4096
	maxBackendWeight   = 1_000_000
)

// httpMethods are the methods a match may name.
var httpMethods = []string{"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"}

// compiledRoute is one HTTPRoute with its rules compiled.
type compiledRoute struct {
	route     *gatewayv1.HTTPRoute
	kind      string // kindHTTPRoute, or kindGRPCRoute for one grpcroute.go converted
	id        string // "namespace/name"
	hostnames []string
	// locations of every valid rule, ranked (precedence's route-level keys set).
	locations []rankedLocation
	// resolved is the ResolvedRefs condition; partial the PartiallyInvalid
	// one when some rules are left out; invalid the Accepted one when
	// every rule is (nil otherwise).
	resolved Condition
	partial  *Condition
	invalid  *Condition
}

// rankedLocation is a route location with what orders it in the spec's
// precedence (compareRanked).
type rankedLocation struct {
	loc     RouteLocation
	kind    int // 0 Exact, 1 PathPrefix, 2 RegularExpression
	length  int // of the prefix
	method  bool
	headers int
	query   int
	created metav1.Time
	route   string // namespace/name
	rule    int
	match   int
	part    int
}

// compareRanked orders by the Gateway API's precedence: an exact path,
// then the longest prefix, then regexes; then a method match, the most
// header matches, the most query matches; then the oldest route, its
// namespace/name, and the rule's and match's order.
func compareRanked(a, b rankedLocation) int {
	return cmp.Or(
		cmp.Compare(a.kind, b.kind),
		cmp.Compare(b.length, a.length),
		cmp.Compare(boolRank(a.method), boolRank(b.method)),
		cmp.Compare(b.headers, a.headers),
		cmp.Compare(b.query, a.query),
		a.created.Compare(b.created.Time),
		strings.Compare(a.route, b.route),
		cmp.Compare(a.rule, b.rule),
		cmp.Compare(a.match, b.match),
		cmp.Compare(a.part, b.part),
	)
}

func boolRank(b bool) int {
	if b {
		return 0
	}
	return 1
}

// attachment is one route attached to one listener, with the hostnames it
// serves there: exact names, wildcards ("*.example.com", any number of
// labels), or "_" for every name.
type attachment struct {
	route    *compiledRoute
	gateway  *gatewayState
	listener *listenerState
	hosts    []string
}

// ruleError is why a rule is left out: the route condition's reason and
// a message.
type ruleError struct{ reason, msg string }

// routeKind is r's kind: HTTPRoute, or GRPCRoute for one grpcroute.go
// converted.
func (p *gatewayProcessor) routeKind(r *gatewayv1.HTTPRoute) string {
	if p.grpcRoutes[r] {
		return kindGRPCRoute
	}
	return kindHTTPRoute
}

func (p *gatewayProcessor) routeProblem(r *gatewayv1.HTTPRoute, reason string) {
	p.problem(p.routeKind(r), r.Namespace, r.Name, reason)
}

// processRoutes attaches every HTTPRoute and GRPCRoute (converted) that
// names one of our Gateways, oldest first, and records its status for
// each such parentRef.
func (p *gatewayProcessor) processRoutes() {
	if len(p.gateways) == 0 {
		return
	}
	routes := append(p.source.HTTPRoutes.Slice(), p.convertGRPCRoutes()...)
	slices.SortFunc(routes, compareObjects[*gatewayv1.HTTPRoute])
	for _, r := range routes {
		if !p.namesOurGateway(r) {
			continue
		}
		kind := p.routeKind(r)
		if len(validation.IsDNS1123Label(r.Namespace)) > 0 || len(validation.IsDNS1123Subdomain(r.Name)) > 0 {
			p.routeProblem(r, fmt.Sprintf("metadata: namespace %q or name %q is not a Kubernetes name; the %s is left out", clip(r.Namespace), clip(r.Name), kind))
			continue
		}
		c := p.compileRoute(r)
		st := RouteStatus{Kind: kind, Namespace: r.Namespace, Name: r.Name, Generation: r.Generation}
		attached := make(map[*listenerState]bool)
		if len(r.Spec.ParentRefs) > maxParentRefs {
			p.routeProblem(r, fmt.Sprintf("spec.parentRefs: has %d entries, more than %d; only the first %d are read", len(r.Spec.ParentRefs), maxParentRefs, maxParentRefs))
		}
		for i := range min(len(r.Spec.ParentRefs), maxParentRefs) {
			ref := &r.Spec.ParentRefs[i]
			g, set := p.ourParent(r, ref)
			if g == nil {
				continue
			}
			parent := RouteParentStatus{Namespace: g.gw.Namespace, Name: g.gw.Name}
			parentID := "Gateway " + g.id
			if set != nil {
				parent = RouteParentStatus{Kind: kindListenerSet, Namespace: set.ls.Namespace, Name: set.ls.Name}
				parentID = "ListenerSet " + set.id
			}
			if ref.SectionName != nil {
				parent.SectionName = string(*ref.SectionName)
			}
			if ref.Port != nil {
				parent.Port = *ref.Port
			}
			accepted := p.attach(c, g, set, ref, attached)
			if accepted.Status {
				for _, bp := range p.routePolicies[r] {
					bp.ancestors[g] = true
				}
			}
			parent.Conditions = []Condition{accepted, c.resolved}
			if c.partial != nil {
				parent.Conditions = append(parent.Conditions, *c.partial)
			}
			if !accepted.Status {
				p.routeProblem(r, fmt.Sprintf("spec.parentRefs[%d] (%s): not accepted (%s): %s", i, parentID, accepted.Reason, accepted.Message))
			}
			st.Parents = append(st.Parents, parent)
		}
		p.routeStatuses = append(p.routeStatuses, &st)
	}
}

// parentRefGateway returns the namespace and name of the Gateway ref
// names, or ok false when it names another kind.
func parentRefGateway(r *gatewayv1.HTTPRoute, ref *gatewayv1.ParentReference) (namespacedName, bool) {
	if ref.Group != nil && *ref.Group != gatewayGroup || ref.Kind != nil && *ref.Kind != kindGateway {
		return namespacedName{}, false
	}
	namespace := r.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		namespace = string(*ref.Namespace)
	}
	return namespacedName{namespace, string(ref.Name)}, true
}

func (p *gatewayProcessor) ourGateway(r *gatewayv1.HTTPRoute, ref *gatewayv1.ParentReference) *gatewayState {
	if key, ok := parentRefGateway(r, ref); ok {
		return p.byName[key]
	}
	return nil
}

// ourParent returns the Gateway of ours ref names, or the parent Gateway
// and the ListenerSet when it names one of ours; g is nil when ref names
// neither.
func (p *gatewayProcessor) ourParent(r *gatewayv1.HTTPRoute, ref *gatewayv1.ParentReference) (g *gatewayState, set *listenerSetState) {
	if ref.Group != nil && *ref.Group == gatewayGroup && ref.Kind != nil && *ref.Kind == kindListenerSet {
		namespace := r.Namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			namespace = string(*ref.Namespace)
		}
		if set = p.setByName[namespacedName{namespace, string(ref.Name)}]; set != nil {
			return set.gateway, set
		}
		return nil, nil
	}
	return p.ourGateway(r, ref), nil
}

func (p *gatewayProcessor) namesOurGateway(r *gatewayv1.HTTPRoute) bool {
	for i := range r.Spec.ParentRefs {
		if g, _ := p.ourParent(r, &r.Spec.ParentRefs[i]); g != nil {
			return true
		}
	}
	return false
}

// attach attaches c to the listeners of g that ref selects (sectionName,
// port), that allow it (namespaces, kinds) and whose hostname intersects
// its hostnames, and returns the Accepted condition for ref. ref names g,
// whose own listeners it selects among, or its ListenerSet set, whose
// listeners it selects among. attached are the listeners c attached to
// already (a route counts once per listener).
func (p *gatewayProcessor) attach(c *compiledRoute, g *gatewayState, set *listenerSetState, ref *gatewayv1.ParentReference, attached map[*listenerState]bool) Condition {
	parent := "the Gateway"
	if set != nil {
		parent = "the ListenerSet"
		if !set.accepted.Status {
			return condition(condAccepted, false, string(gatewayv1.RouteReasonNoMatchingParent), "the ListenerSet is not accepted: "+set.accepted.Message)
		}
	}
	var selected, allowed []*listenerState
	for _, l := range g.listeners {
		if l.set != set {
			continue
		}
		if ref.SectionName != nil && *ref.SectionName != l.spec.Name || ref.Port != nil && *ref.Port != l.spec.Port {
			continue
		}
		selected = append(selected, l)
		if l.attachable(c.kind) && p.allows(g, l, c.route.Namespace) {
			allowed = append(allowed, l)
		}
	}
	switch {
	case len(selected) == 0:
		return condition(condAccepted, false, string(gatewayv1.RouteReasonNoMatchingParent), "no listener of "+parent+" has the parentRef's sectionName and port")
	case len(allowed) == 0:
		return condition(condAccepted, false, string(gatewayv1.RouteReasonNotAllowedByListeners), "no listener of "+parent+" allows "+c.kind+"s from namespace "+c.route.Namespace)
	case c.invalid != nil:
		return *c.invalid
	}
	return attachToListeners(g, allowed, c.hostnames, attached, func(l *listenerState, hosts []string) {
		p.attachments = append(p.attachments, attachment{route: c, gateway: g, listener: l, hosts: hosts})
	})
}

// attachToListeners attaches a route with hostnames to each listener of
// allowed (of Gateway g) whose hostname they intersect, once per listener
// (attached: those the route attached to through its other parentRefs),
// and has serve serve the hostnames of each such listener that is
// programmed on a Gateway served. It returns the route's Accepted
// condition for this parent.
func attachToListeners(g *gatewayState, allowed []*listenerState, hostnames []string, attached map[*listenerState]bool, serve func(l *listenerState, hosts []string)) Condition {
	matched := false
	for _, l := range allowed {
		hosts := intersectHostnames(l.hostname, hostnames)
		if len(hosts) == 0 {
			continue
		}
		matched = true
		if attached[l] {
			continue
		}
		attached[l] = true
		l.attached++
		if l.programmed() && g.served() {
			serve(l, hosts)
		}
	}
	if !matched {
		return condition(condAccepted, false, string(gatewayv1.RouteReasonNoMatchingListenerHostname), "no listener's hostname matches the route's hostnames")
	}
	return condition(condAccepted, true, reasonAccepted, "")
}

// allows says whether listener l of g takes HTTPRoutes from namespace
// ("Same" is the namespace of the listener's Gateway or ListenerSet).
func (p *gatewayProcessor) allows(g *gatewayState, l *listenerState, namespace string) bool {
	from := gatewayv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		selector = ar.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSame:
		return namespace == l.namespace(g)
	case gatewayv1.NamespacesFromSelector:
		if selector == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(selector)
		return err == nil && s.Matches(labels.Set(p.namespaceLabelsOf(namespace)))
	}
	return false
}

// compileRoute checks r's hostnames and compiles its rules. A rule that
// is invalid or asks for what restysync does not support is left out
// (PartiallyInvalid); when every rule is, the route is not accepted.
func (p *gatewayProcessor) compileRoute(r *gatewayv1.HTTPRoute) *compiledRoute {
	c := &compiledRoute{route: r, kind: p.routeKind(r), id: r.Namespace + "/" + r.Name,
		resolved: condition(condResolvedRefs, true, reasonResolvedRefs, "")}
	if len(r.Spec.Hostnames) > maxRouteHostnames || len(r.Spec.Rules) > maxRouteRules {
		msg := fmt.Sprintf("spec: has %d hostnames and %d rules, more than %d and %d allowed", len(r.Spec.Hostnames), len(r.Spec.Rules), maxRouteHostnames, maxRouteRules)
		p.routeProblem(r, msg+"; the "+c.kind+" is left out")
		c.invalid = ptrTo(condition(condAccepted, false, reasonUnsupportedValue, msg))
		return c
	}
	for i, h := range r.Spec.Hostnames {
		if reason := validHost(string(h)); reason != "" {
			p.routeProblem(r, fmt.Sprintf("spec.hostnames[%d] %q: %s; hostname left out", i, clip(string(h)), reason))
			continue
		}
		if !slices.Contains(c.hostnames, string(h)) {
			c.hostnames = append(c.hostnames, string(h))
		}
	}
	if len(r.Spec.Hostnames) > 0 && len(c.hostnames) == 0 {
		msg := "spec.hostnames: none is a valid hostname"
		c.invalid = ptrTo(condition(condAccepted, false, reasonUnsupportedValue, msg))
		return c
	}
	rules := r.Spec.Rules
	if len(rules) == 0 {
		rules = []gatewayv1.HTTPRouteRule{{}} // the CRD's default: every path, no backend
	}
	var invalid []string
	firstInvalid := ""
	for ri := range rules {
		locs, resolvedErr, err := p.compileRule(r, c.id, ri, &rules[ri])
		if err != nil {
			msg := fmt.Sprintf("spec.rules[%d]: %s", ri, err.msg)
			p.routeProblem(r, msg+"; rule left out")
			invalid = append(invalid, msg)
			if firstInvalid == "" {
				firstInvalid = err.reason
			}
			continue
		}
		if resolvedErr != nil && c.resolved.Status {
			c.resolved = condition(condResolvedRefs, false, resolvedErr.reason, fmt.Sprintf("spec.rules[%d]: %s", ri, resolvedErr.msg))
		}
		c.locations = append(c.locations, locs...)
	}
	switch {
	case len(invalid) == len(rules):
		c.invalid = ptrTo(condition(condAccepted, false, firstInvalid, strings.Join(invalid, "; ")))
	case len(invalid) > 0:
		c.partial = ptrTo(condition(condPartiallyInvalid, true, firstInvalid, strings.Join(invalid, "; ")))
	}
	return c
}

func ptrTo[T any](v T) *T { return &v }

// compileRule compiles rule ri of r into ranked locations. resolvedErr is
// the first backendRef that cannot be used (its share answers 500); err
// is why the whole rule is left out.
func (p *gatewayProcessor) compileRule(r *gatewayv1.HTTPRoute, id string, ri int, rule *gatewayv1.HTTPRouteRule) (locs []rankedLocation, resolvedErr, err *ruleError) {
	switch {
	case rule.SessionPersistence != nil:
		return nil, nil, &ruleError{reasonUnsupportedValue, "sessionPersistence is not supported"}
	case len(rule.Matches) > maxRouteMatches || len(rule.Filters) > maxRuleFilters || len(rule.BackendRefs) > maxRuleBackends:
		return nil, nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("has %d matches, %d filters and %d backendRefs, more than %d, %d and %d allowed",
			len(rule.Matches), len(rule.Filters), len(rule.BackendRefs), maxRouteMatches, maxRuleFilters, maxRuleBackends)}
	}
	template := RouteRule{Route: p.routeKind(r) + " " + id}
	mirrorErr, err := p.compileFilters(r, &template, rule.Filters)
	if err != nil {
		return nil, nil, err
	}
	var reason string
	if template.TimeoutMS, reason = compileTimeouts(rule.Timeouts); reason != "" {
		return nil, nil, &ruleError{reasonUnsupportedValue, reason}
	}
	if template.Retry, reason = compileRetry(rule.Retry); reason != "" {
		return nil, nil, &ruleError{reasonUnsupportedValue, reason}
	}
	if template.Redirect == nil {
		var err *ruleError
		template.Backends, resolvedErr, err = p.compileBackends(r, rule.BackendRefs)
		if err != nil {
			return nil, nil, err
		}
		total := 0
		for _, b := range template.Backends {
			total += int(b.Weight)
		}
		if total == 0 {
			template.Backends, template.Status = nil, 500
		}
	}
	if resolvedErr == nil {
		resolvedErr = mirrorErr
	}
	if template.Redirect != nil || template.Status != 0 {
		template.Mirrors = nil // the rule answers by itself: nothing is sent on
	}
	if len(template.Mirrors) > 0 && slices.ContainsFunc(template.Backends, func(b WeightedBackend) bool { return b.TLS != "" }) {
		// The request leaves for its backend TLS location before the
		// mirror location would send the copies (backendtls.go).
		p.routeProblem(r, fmt.Sprintf("spec.rules[%d]: mirrors are not supported with backends a BackendTLSPolicy applies to; the rule's mirrors are left out", ri))
		template.Mirrors = nil
	}
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gatewayv1.HTTPRouteMatch{{}}
	}
	for mi := range matches {
		ranked, err := compileMatch(&matches[mi], template)
		if err != nil {
			err.msg = fmt.Sprintf("matches[%d]: %s", mi, err.msg)
			return nil, nil, err
		}
		for part := range ranked {
			ranked[part].created, ranked[part].route, ranked[part].rule, ranked[part].match, ranked[part].part = r.CreationTimestamp, id, ri, mi, part
			if ranked[part].kind == 2 && p.grpcRoutes[r] {
				ranked[part].length = len(ranked[part].loc.Path) // grpcroute.go: a method match before none
			}
		}
		locs = append(locs, ranked...)
	}
	return locs, resolvedErr, nil
}

// compileFilters reads r's rule's filters into template. mirrorErr is
// the first RequestMirror whose backendRef cannot be used (that mirror is
// left out); err is why the whole rule is.
func (p *gatewayProcessor) compileFilters(r *gatewayv1.HTTPRoute, template *RouteRule, filters []gatewayv1.HTTPRouteFilter) (mirrorErr, err *ruleError) {
	seen := map[gatewayv1.HTTPRouteFilterType]bool{}
	for fi := range filters {
		f := &filters[fi]
		if seen[f.Type] && f.Type != gatewayv1.HTTPRouteFilterRequestMirror {
			return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("filters[%d]: a second %s filter", fi, clip(string(f.Type)))}
		}
		seen[f.Type] = true
		var reason string
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestMirror:
			var bad *ruleError
			bad, reason = p.compileMirror(r, template, fmt.Sprintf("filters[%d].requestMirror", fi), f.RequestMirror)
			if bad != nil && mirrorErr == nil {
				mirrorErr = bad
			}
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			template.RequestHeaders, reason = headerChanges(f.RequestHeaderModifier)
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			template.ResponseHeaders, reason = headerChanges(f.ResponseHeaderModifier)
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			template.Redirect, reason = compileRedirect(f.RequestRedirect)
		case gatewayv1.HTTPRouteFilterURLRewrite:
			template.Rewrite, reason = compileRewrite(f.URLRewrite)
		case gatewayv1.HTTPRouteFilterCORS:
			template.CORS, reason = compileCORS(f.CORS)
		default:
			reason = "is not supported"
		}
		if reason != "" {
			return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("filters[%d] (%s): %s", fi, clip(string(f.Type)), reason)}
		}
	}
	if template.Redirect != nil && template.Rewrite != nil {
		return nil, &ruleError{string(gatewayv1.RouteReasonIncompatibleFilters), "filters: RequestRedirect and URLRewrite cannot be used together"}
	}
	return mirrorErr, nil
}

// headerValueReason returns why v cannot be a header value, or "".
func headerValueReason(v string) string {
	return valueShape(v, maxHeaderValue)
}

func headerNameReason(name string) string {
	if len(validation.IsHTTPHeaderName(name)) > 0 || len(name) > 256 {
		return fmt.Sprintf("name %q is not an HTTP header name", clip(name))
	}
	return ""
}

// headerChanges checks a header modifier's edits.
func headerChanges(f *gatewayv1.HTTPHeaderFilter) (*HeaderChanges, string) {
	if f == nil {
		return nil, "has no settings"
	}
	if len(f.Set) > maxHeaderChanges || len(f.Add) > maxHeaderChanges || len(f.Remove) > maxHeaderChanges {
		return nil, fmt.Sprintf("more than %d headers in set, add or remove", maxHeaderChanges)
	}
	c := &HeaderChanges{}
	for _, list := range []struct {
		in  []gatewayv1.HTTPHeader
		out *[]Header
	}{{f.Set, &c.Set}, {f.Add, &c.Add}} {
		for _, h := range list.in {
			if reason := headerNameReason(string(h.Name)); reason != "" {
				return nil, reason
			}
			if reason := headerValueReason(h.Value); reason != "" {
				return nil, fmt.Sprintf("header %s: value %s", h.Name, reason)
			}
			*list.out = append(*list.out, Header{Name: string(h.Name), Value: h.Value})
		}
	}
	for _, name := range f.Remove {
		if reason := headerNameReason(name); reason != "" {
			return nil, reason
		}
		c.Remove = append(c.Remove, name)
	}
	return c, ""
}

// pathModifier checks a redirect's or rewrite's path.
func pathModifier(m *gatewayv1.HTTPPathModifier) (path string, replacePrefix bool, reason string) {
	if m == nil {
		return "", false, ""
	}
	var value *string
	switch m.Type {
	case gatewayv1.FullPathHTTPPathModifier:
		value = m.ReplaceFullPath
	case gatewayv1.PrefixMatchHTTPPathModifier:
		value, replacePrefix = m.ReplacePrefixMatch, true
	default:
		return "", false, fmt.Sprintf("path.type %q is not supported", clip(string(m.Type)))
	}
	if value == nil {
		return "", false, "path: names no value"
	}
	if r := validPath(*value); r != "" {
		return "", false, fmt.Sprintf("path %q: %s", clip(*value), r)
	}
	return *value, replacePrefix, ""
}

func preciseHostname(h *gatewayv1.PreciseHostname) (string, string) {
	if h == nil {
		return "", ""
	}
	if strings.HasPrefix(string(*h), "*") {
		return "", fmt.Sprintf("hostname %q: must not be a wildcard", clip(string(*h)))
	}
	if reason := validHost(string(*h)); reason != "" {
		return "", fmt.Sprintf("hostname %q: %s", clip(string(*h)), reason)
	}
	return string(*h), ""
}

func compileRedirect(f *gatewayv1.HTTPRequestRedirectFilter) (*Redirect, string) {
	if f == nil {
		return nil, "has no settings"
	}
	r := &Redirect{Status: 302}
	if f.Scheme != nil {
		if *f.Scheme != "http" && *f.Scheme != "https" {
			return nil, fmt.Sprintf("scheme %q: only http and https are supported", clip(*f.Scheme))
		}
		r.Scheme = *f.Scheme
	}
	var reason string
	if r.Host, reason = preciseHostname(f.Hostname); reason != "" {
		return nil, reason
	}
	if f.Port != nil {
		if *f.Port < 1 || *f.Port > 65535 {
			return nil, fmt.Sprintf("port %d is not a port number", *f.Port)
		}
		r.Port = *f.Port
	}
	if r.Path, r.ReplacePrefix, reason = pathModifier(f.Path); reason != "" {
		return nil, reason
	}
	if f.StatusCode != nil {
		if !slices.Contains([]int{301, 302, 303, 307, 308}, *f.StatusCode) {
			return nil, fmt.Sprintf("statusCode %d: only 301, 302, 303, 307 and 308 are supported", *f.StatusCode)
		}
		r.Status = *f.StatusCode
	}
	return r, ""
}

func compileRewrite(f *gatewayv1.HTTPURLRewriteFilter) (*Rewrite, string) {
	if f == nil {
		return nil, "has no settings"
	}
	r := &Rewrite{}
	var reason string
	if r.Host, reason = preciseHostname(f.Hostname); reason != "" {
		return nil, reason
	}
	if r.Path, r.ReplacePrefix, reason = pathModifier(f.Path); reason != "" {
		return nil, reason
	}
	return r, ""
}

// corsOrigin is the CRD's pattern of a CORS origin.
var corsOrigin = regexp.MustCompile(`^(\*|https?://((\*\.)?([a-zA-Z0-9-]+\.)*[a-zA-Z0-9-]+|\*)(:[0-9]{1,5})?)$`)

// maxCORSItems bounds each list of a CORS filter, as the CRD does.
const maxCORSItems = 64

// compileCORS checks a CORS filter as the CRD would: origins of its
// pattern, methods of the enum, header names; "*" only alone in a list.
func compileCORS(f *gatewayv1.HTTPCORSFilter) (*RouteCORS, string) {
	if f == nil {
		return nil, "has no settings"
	}
	c := &RouteCORS{MaxAge: 5, AllowCredentials: f.AllowCredentials != nil && *f.AllowCredentials}
	if f.MaxAge != 0 {
		if f.MaxAge < 1 {
			return nil, fmt.Sprintf("maxAge %d: must be at least 1", f.MaxAge)
		}
		c.MaxAge = f.MaxAge
	}
	lists := []struct {
		field string
		in    []string
		out   *[]string
		valid func(string) bool
	}{
		{"allowOrigins", stringsOf(f.AllowOrigins), &c.AllowOrigins, func(v string) bool { return len(v) <= 253 && corsOrigin.MatchString(v) }},
		{"allowMethods", stringsOf(f.AllowMethods), &c.AllowMethods, func(v string) bool { return slices.Contains(httpMethods, v) }},
		{"allowHeaders", stringsOf(f.AllowHeaders), &c.AllowHeaders, func(v string) bool { return headerNameReason(v) == "" }},
		{"exposeHeaders", stringsOf(f.ExposeHeaders), &c.ExposeHeaders, func(v string) bool { return headerNameReason(v) == "" }},
	}
	for _, l := range lists {
		if len(l.in) > maxCORSItems {
			return nil, fmt.Sprintf("%s: has %d entries, more than %d", l.field, len(l.in), maxCORSItems)
		}
		for i, v := range l.in {
			switch {
			case v == "*" && len(l.in) > 1 && l.field != "exposeHeaders":
				return nil, fmt.Sprintf("%s: \"*\" must be the only entry", l.field)
			case v != "*" && !l.valid(v):
				return nil, fmt.Sprintf("%s[%d] %q: is not valid there", l.field, i, clip(v))
			}
			if l.field == "allowOrigins" {
				v = strings.ToLower(v)
			}
			if !slices.Contains(*l.out, v) {
				*l.out = append(*l.out, v)
			}
		}
	}
	// exposeHeaders may hold "*" beside names (the CRD allows it, Lua
	// takes "*" only alone): "*" exposes them all, but not to a request
	// with credentials, which gets the names.
	if len(c.ExposeHeaders) > 1 && slices.Contains(c.ExposeHeaders, "*") {
		if c.AllowCredentials {
			c.ExposeHeaders = slices.DeleteFunc(c.ExposeHeaders, func(h string) bool { return h == "*" })
		} else {
			c.ExposeHeaders = []string{"*"}
		}
	}
	return c, ""
}

// stringsOf converts a list of a string type.
func stringsOf[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

// compileBackends turns the rule's backendRefs into weighted backends: a
// ref that cannot be used keeps its weight with Backend "", so its share
// answers 500, and resolvedErr says why (the first one).
func (p *gatewayProcessor) compileBackends(r *gatewayv1.HTTPRoute, refs []gatewayv1.HTTPBackendRef) (out []WeightedBackend, resolvedErr, err *ruleError) {
	for bi := range refs {
		ref := &refs[bi]
		field := fmt.Sprintf("backendRefs[%d]", bi)
		headers, reason := backendFilters(ref.Filters)
		if reason != "" {
			return nil, nil, &ruleError{reasonUnsupportedValue, field + ".filters" + reason}
		}
		weight := int32(1)
		if ref.Weight != nil {
			weight = *ref.Weight
		}
		if weight < 0 || weight > maxBackendWeight {
			return nil, nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("%s.weight %d: must be from 0 to %d", field, weight, maxBackendWeight)}
		}
		name, bad := p.backendOf(p.routeKind(r), r.Namespace, &ref.BackendObjectReference, field)
		if bad != nil && resolvedErr == nil {
			resolvedErr = bad
		}
		if bad != nil {
			p.routeProblem(r, fmt.Sprintf("%s; its share answers 500", bad.msg))
		}
		share := WeightedBackend{Backend: name, Weight: weight, RequestHeaders: headers}
		if name != "" {
			namespace := r.Namespace
			if ref.Namespace != nil && *ref.Namespace != "" {
				namespace = string(*ref.Namespace)
			}
			p.routePolicies[r] = append(p.routePolicies[r], p.applyBackendTLS(&share, namespace, string(ref.Name), *ref.Port)...)
		}
		out = append(out, share)
	}
	return out, resolvedErr, nil
}

// backendFilters reads a backendRef's filters: a RequestHeaderModifier
// (at most one) is all restysync applies per backend. The reason, if
// any, starts with the filter's index.
func backendFilters(filters []gatewayv1.HTTPRouteFilter) (*HeaderChanges, string) {
	if len(filters) > maxRuleFilters {
		return nil, fmt.Sprintf(": has %d filters, more than %d", len(filters), maxRuleFilters)
	}
	var headers *HeaderChanges
	for fi := range filters {
		f := &filters[fi]
		if f.Type != gatewayv1.HTTPRouteFilterRequestHeaderModifier {
			return nil, fmt.Sprintf("[%d] (%s): is not supported on a backendRef", fi, clip(string(f.Type)))
		}
		if headers != nil {
			return nil, fmt.Sprintf("[%d]: a second %s filter", fi, f.Type)
		}
		var reason string
		if headers, reason = headerChanges(f.RequestHeaderModifier); reason != "" {
			return nil, fmt.Sprintf("[%d] (%s): %s", fi, f.Type, reason)
		}
	}
	return headers, ""
}

// maxGatewayTimeout bounds a rule's timeouts: nginx's timers hold
// milliseconds in 32 bits, and a day is long enough for any request.
const maxGatewayTimeout = 24 * time.Hour

// gatewayDuration is the Gateway API's Duration (GEP-2257): one to four
// numbers of up to five digits, each with its unit.
var gatewayDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

// compileTimeouts reads a rule's timeouts into the one upstream timeout
// the router sets (RouteRule.TimeoutMS): the smaller of request and
// backendRequest that is set and not "0s" (which disables it; the proxy
// timeouts then hold, nginx having no unbounded one). A backendRequest
// longer than a request is invalid, as the spec says.
func compileTimeouts(t *gatewayv1.HTTPRouteTimeouts) (int64, string) {
	if t == nil {
		return 0, ""
	}
	var ms [2]int64
	for i, field := range []struct {
		name  string
		value *gatewayv1.Duration
	}{{"request", t.Request}, {"backendRequest", t.BackendRequest}} {
		if field.value == nil {
			continue
		}
		v := string(*field.value)
		d, err := time.ParseDuration(v)
		if !gatewayDuration.MatchString(v) || err != nil {
			return 0, fmt.Sprintf("timeouts.%s %q: is not a Gateway API duration (such as 500ms, 10s, 1h30m)", field.name, clip(v))
		}
		if d > maxGatewayTimeout {
			return 0, fmt.Sprintf("timeouts.%s %s: longer than %s is not supported", field.name, v, maxGatewayTimeout)
		}
		ms[i] = d.Milliseconds()
		if d > 0 && ms[i] == 0 {
			ms[i] = 1
		}
	}
	request, backend := ms[0], ms[1]
	switch {
	case request > 0 && backend > request:
		return 0, fmt.Sprintf("timeouts.backendRequest %s: must not be longer than timeouts.request %s", *t.BackendRequest, *t.Request)
	case backend > 0:
		return backend, ""
	}
	return request, ""
}

// Retries of a rule (compileRetry).
const (
	// defaultRetryAttempts is the retries of a retry without attempts
	// (implementation-specific): three tries, as the balancer's default.
	defaultRetryAttempts = 2
	// maxRetryAttempts bounds attempts: the balancer tries at most 20
	// endpoints for one request.
	maxRetryAttempts = 10
)

// compileRetry reads a rule's retry into RouteRetry, or says why it
// cannot be served: a code nginx cannot retry on, more attempts than
// maxRetryAttempts, or a backoff, since nginx retries at once and the
// spec says a retry MUST NOT come before the backoff.
func compileRetry(r *gatewayv1.HTTPRouteRetry) (*RouteRetry, string) {
	if r == nil {
		return nil, ""
	}
	out := &RouteRetry{Attempts: defaultRetryAttempts}
	if r.Attempts != nil {
		if *r.Attempts < 1 || *r.Attempts > maxRetryAttempts {
			return nil, fmt.Sprintf("retry.attempts %d: must be from 1 to %d", *r.Attempts, maxRetryAttempts)
		}
		out.Attempts = *r.Attempts
	}
	if r.Backoff != nil {
		v := string(*r.Backoff)
		d, err := time.ParseDuration(v)
		if !gatewayDuration.MatchString(v) || err != nil {
			return nil, fmt.Sprintf("retry.backoff %q: is not a Gateway API duration (such as 500ms, 10s, 1h30m)", clip(v))
		}
		if d > 0 {
			return nil, fmt.Sprintf("retry.backoff %s: is not supported (nginx retries at once)", v)
		}
	}
	for i, c := range r.Codes {
		if !slices.Contains(RetryCodes, int(c)) {
			return nil, fmt.Sprintf("retry.codes[%d] %d: is not supported (nginx retries on %s only)", i, c, retryCodesText)
		}
		if !slices.Contains(out.Codes, int(c)) {
			out.Codes = append(out.Codes, int(c))
		}
	}
	slices.Sort(out.Codes)
	return out, ""
}

// retryCodesText lists RetryCodes for a Problem.
var retryCodesText = func() string {
	var parts []string
	for _, c := range RetryCodes {
		parts = append(parts, strconv.Itoa(c))
	}
	return strings.Join(parts, ", ")
}()

// backendOf resolves one backendRef of a route of kind in namespace
// routeNamespace to a Backend name, or says why it cannot be used.
func (p *gatewayProcessor) backendOf(kind, routeNamespace string, ref *gatewayv1.BackendObjectReference, field string) (string, *ruleError) {
	group, refKind := "", "Service"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		refKind = string(*ref.Kind)
	}
	namespace := routeNamespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		namespace = string(*ref.Namespace)
	}
	name := string(ref.Name)
	switch {
	case group != "" || refKind != "Service":
		return "", &ruleError{string(gatewayv1.RouteReasonInvalidKind), fmt.Sprintf("%s: %s/%s is not a Service", field, clip(group), clip(refKind))}
	case len(validation.IsDNS1123Label(namespace)) > 0:
		return "", &ruleError{string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("%s.namespace %q: is not a namespace name", field, clip(namespace))}
	case namespace != routeNamespace && !p.granted(gatewayGroup, kind, routeNamespace, "", "Service", namespace, name):
		return "", &ruleError{string(gatewayv1.RouteReasonRefNotPermitted), fmt.Sprintf("%s: Service %s/%s is in another namespace and no ReferenceGrant there allows it", field, namespace, clip(name))}
	case len(validation.IsDNS1035Label(name)) > 0:
		return "", &ruleError{string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("%s.name %q: is not a Service name", field, clip(name))}
	case ref.Port == nil || *ref.Port < 1 || *ref.Port > 65535:
		return "", &ruleError{string(gatewayv1.RouteReasonBackendNotFound), field + ".port: a Service backendRef needs a port number"}
	}
	b := backendRef{namespace: namespace, service: name, port: networkingv1.ServiceBackendPort{Number: *ref.Port},
		name: fmt.Sprintf("%s/%s:%d", namespace, name, *ref.Port)}
	if res := p.resolve(b); res.problem != "" {
		return "", &ruleError{string(gatewayv1.RouteReasonBackendNotFound), field + res.problem}
	}
	return b.name, nil
}

// compileMatch turns one match into its ranked locations (a PathPrefix
// "/p" is the exact "/p" and the prefix "/p/"), each with its own copy of
// the rule.
func compileMatch(m *gatewayv1.HTTPRouteMatch, template RouteRule) ([]rankedLocation, *ruleError) {
	pathType, value := gatewayv1.PathMatchPathPrefix, "/"
	if m.Path != nil {
		if m.Path.Type != nil {
			pathType = *m.Path.Type
		}
		if m.Path.Value != nil {
			value = *m.Path.Value
		}
	}
	rule := template
	if m.Method != nil {
		if !slices.Contains(httpMethods, string(*m.Method)) {
			return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("method %q is not an HTTP method", clip(string(*m.Method)))}
		}
		rule.Method = string(*m.Method)
	}
	var err *ruleError
	if rule.Headers, err = headerMatches(m.Headers); err != nil {
		return nil, err
	}
	if rule.Query, err = queryMatches(m.QueryParams); err != nil {
		return nil, err
	}
	if (rule.Redirect != nil && rule.Redirect.ReplacePrefix || rule.Rewrite != nil && rule.Rewrite.ReplacePrefix) && pathType != gatewayv1.PathMatchPathPrefix {
		return nil, &ruleError{reasonUnsupportedValue, "a ReplacePrefixMatch path needs a PathPrefix match"}
	}
	base := rankedLocation{method: rule.Method != "", headers: len(rule.Headers), query: len(rule.Query)}
	withRule := func(loc RouteLocation, matchedPrefix string) RouteLocation {
		r := rule
		if r.Redirect != nil {
			redirect := *r.Redirect
			if redirect.ReplacePrefix {
				redirect.MatchedPrefix = matchedPrefix
			}
			r.Redirect = &redirect
		}
		if r.Rewrite != nil {
			rewrite := *r.Rewrite
			if rewrite.ReplacePrefix {
				rewrite.MatchedPrefix = matchedPrefix
			}
			r.Rewrite = &rewrite
		}
		loc.Rule = &r
		return loc
	}
	switch pathType {
	case gatewayv1.PathMatchExact:
		if reason := validPath(value); reason != "" {
			return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("path %q: %s", clip(value), reason)}
		}
		base.kind, base.loc = 0, withRule(RouteLocation{Path: value, Exact: true}, "")
		return []rankedLocation{base}, nil
	case gatewayv1.PathMatchPathPrefix:
		if reason := validPath(value); reason != "" {
			return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("path %q: %s", clip(value), reason)}
		}
		prefix := trimPrefixPath(value)
		base.kind, base.length = 1, len(prefix)
		if prefix == "/" {
			base.loc = withRule(RouteLocation{Path: "/"}, "/")
			return []rankedLocation{base}, nil
		}
		exact, sub := base, base
		exact.loc = withRule(RouteLocation{Path: prefix, Exact: true}, prefix)
		sub.loc = withRule(RouteLocation{Path: prefix + "/"}, prefix)
		return []rankedLocation{exact, sub}, nil
	case gatewayv1.PathMatchRegularExpression:
		if reason := gatewayRegexReason(value); reason != "" {
			return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("path %q: %s", clip(value), reason)}
		}
		rule.CaseSensitive = true
		base.kind, base.loc = 2, withRule(RouteLocation{Path: anchoredRegex(value), Regex: true}, "")
		return []rankedLocation{base}, nil
	}
	return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("path.type %q is not supported", clip(string(pathType)))}
}

// anchoredRegex anchors a RegularExpression path at the start, as the
// router wants it (a regex path starts with "^"): one that does not is
// wrapped whole, so that an alternation stays one ("^(?:/a|/b)").
func anchoredRegex(re string) string {
	if strings.HasPrefix(re, "^") {
		return re
	}
	return "^(?:" + re + ")"
}

// gatewayRegexReason returns why re cannot be a regex of a match (PCRE,
// as nginx's and Lua's ngx.re have it), or "".
func gatewayRegexReason(re string) string {
	if re == "" {
		return "is empty"
	}
	if reason := valueShape(re, maxPathLength); reason != "" {
		return reason
	}
	if _, err := regexp.Compile(re); err != nil {
		return fmt.Sprintf("is not a valid regular expression: %v", err)
	}
	return pcreIncompatible(re)
}

// matchCondition is a header or query parameter condition as written.
type matchCondition struct {
	typ         *string // "Exact" (nil) or "RegularExpression"
	name, value string
}

// headerMatches checks a match's headers; of several with one name (in
// any case), the first counts, as the spec says.
func headerMatches(in []gatewayv1.HTTPHeaderMatch) ([]ValueMatch, *ruleError) {
	conditions := make([]matchCondition, len(in))
	for i, h := range in {
		conditions[i] = matchCondition{(*string)(h.Type), string(h.Name), h.Value}
	}
	return valueMatches("headers", conditions, strings.EqualFold)
}

// queryMatches checks a match's query parameters; of several with one
// name (exactly), the first counts.
func queryMatches(in []gatewayv1.HTTPQueryParamMatch) ([]ValueMatch, *ruleError) {
	conditions := make([]matchCondition, len(in))
	for i, q := range in {
		conditions[i] = matchCondition{(*string)(q.Type), string(q.Name), q.Value}
	}
	return valueMatches("queryParams", conditions, func(a, b string) bool { return a == b })
}

// valueMatches checks the conditions of field (headers, queryParams):
// names are HTTP tokens, values safe, regexes PCRE's; of two with the
// same name, the first counts.
func valueMatches(field string, in []matchCondition, sameName func(a, b string) bool) ([]ValueMatch, *ruleError) {
	if len(in) > maxMatchConditions {
		return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("has %d %s matches, more than %d", len(in), field, maxMatchConditions)}
	}
	var out []ValueMatch
	for i, c := range in {
		regex := false
		if c.typ != nil {
			switch *c.typ {
			case string(gatewayv1.HeaderMatchExact):
			case string(gatewayv1.HeaderMatchRegularExpression):
				regex = true
			default:
				return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("%s[%d].type %q is not supported", field, i, clip(*c.typ))}
			}
		}
		if reason := headerNameReason(c.name); reason != "" {
			return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("%s[%d]: %s", field, i, reason)}
		}
		if reason := matchValueReason(c.value, regex); reason != "" {
			return nil, &ruleError{reasonUnsupportedValue, fmt.Sprintf("%s[%d].value: %s", field, i, reason)}
		}
		if slices.ContainsFunc(out, func(v ValueMatch) bool { return sameName(v.Name, c.name) }) {
			continue
		}
		out = append(out, ValueMatch{Name: c.name, Value: c.value, Regex: regex})
	}
	return out, nil
}

func matchValueReason(v string, regex bool) string {
	if regex {
		return gatewayRegexReason(v)
	}
	return headerValueReason(v)
}
