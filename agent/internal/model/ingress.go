package model

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// legacyClassAnnotation is the class annotation from before
// spec.ingressClassName; it is still honoured when the field is unset.
const legacyClassAnnotation = "kubernetes.io/ingress.class"

// builder is the Ingress processor: it emits the Ingresses of our class,
// their rules, paths, default backends, spec.tls and annotations (the
// family files: access.go, proxy.go, tls.go, …), and the stream services
// of the ingress-nginx ConfigMaps, into the Builder it embeds. Its fields
// are its settings, from the Snapshot, and what it reads while it
// emits; what every front-end shares is the Builder's.
type builder struct {
	*Builder
	// source is the Snapshot the Ingresses and their settings come from.
	source Snapshot

	// annotatedDefaults by Ingress "namespace/name" (defaultBackendOf).
	annotatedDefaults map[string]annotatedDefault
	// locationOptions by Ingress ("namespace/name"), when not the defaults (protocol.go).
	locationOptions map[string]locationOptions
	// clientTLS are the client certificate settings by host (clienttls.go).
	clientTLS map[string]*ClientTLS
	// globalAuth and globalAuthDenied are Snapshot's (extauth.go).
	globalAuth       ExternalAuth
	globalAuthDenied string
	// proxySettings by Ingress, when not the defaults; aliasClaims oldest
	// Ingress first (proxy.go).
	proxySettings map[string]ProxySettings
	aliasClaims   []aliasClaim
	// access by Ingress, when not the defaults (access.go).
	access map[string]accessState
	// stream is the passthrough hosts and TCP/UDP services (stream.go).
	stream streamState
	// snippets are the snippet annotations and the ConfigMap's snippets
	// (snippet.go).
	snippets snippetState
	// modSecurity is Snapshot.ModSecurity (modsecurity.go).
	modSecurity ModSecurityGlobal
	// regexHosts are the hosts whose paths are all regexes, each with the
	// Ingress whose use-regex made them so; serviceUpstream and wwwKeys
	// are service-upstream and from-to-www-redirect by Ingress
	// (proxykeys.go).
	regexHosts map[string]regexOwner
	// notServed are the Ingresses of another class, and why (class.go).
	notServed       []NotServed
	serviceUpstream map[string]bool
	// serviceUpstreamDefault is Snapshot.ServiceUpstream.
	serviceUpstreamDefault bool
	wwwKeys                map[string]string
	// shared are the locations' settings, one copy of each (settings.go).
	shared sharedSettings
	// limits is Snapshot.Limits; regexPaths counts the regex paths of
	// each host (limits.go).
	limits     Limits
	regexPaths map[string]int
}

// defaultBackend is the spec.defaultBackend of one of our Ingresses, with
// the valid hosts of its rules.
type defaultBackend struct {
	ingress string
	ref     backendRef
	hosts   []string
}

// newIngressProcessor returns the Ingress processor of s, ready to Process.
func newIngressProcessor(s Snapshot) *builder {
	b := &builder{
		source:            s,
		annotatedDefaults: make(map[string]annotatedDefault),

		serviceUpstreamDefault: s.ServiceUpstream,
		globalAuth:             s.GlobalAuth,
		globalAuthDenied:       s.GlobalAuthDenied,

		stream: streamState{enabled: s.SSLPassthrough, passthrough: map[string]PassthroughHost{}, backends: map[string]StreamBackend{}},

		modSecurity: s.ModSecurity,
		limits:      s.Limits,

		snippets: newSnippetState(s),
	}
	return b
}

// Process emits our Ingresses, oldest first, then their default backends
// and canaries, the server-snippets' locations, the default certificate
// and the TCP and UDP services.
func (b *builder) Process(shared *Builder) {
	b.Builder = shared
	s := b.source
	b.checkGlobalAuth(s)
	b.checkClasses(s)
	ours := b.withValidNames(b.ourIngresses(s))
	var withDefault []defaultBackend
	var canaries []*networkingv1.Ingress
	b.markRegexHosts(ours)
	for _, ing := range ours {
		b.checkAnnotationKeys(ing)
		if b.isCanary(ing) {
			canaries = append(canaries, ing)
			continue
		}
		if d, ok := b.addIngress(ing); ok {
			withDefault = append(withDefault, d)
		}
		b.addPassthrough(ing)
		if len(ing.Spec.Rules) > 0 || ing.Spec.DefaultBackend != nil {
			b.addTLS(ing, ing.Namespace+"/"+ing.Name)
		}
	}
	b.addDefaultBackends(withDefault)
	for _, ing := range canaries {
		b.addCanary(ing)
	}
	b.addSnippetLocations()
	if b.islandOnly {
		return
	}
	b.addDefaultCertificate(s.DefaultCertificate)
	b.addStreamServices(s.TCPServices, corev1.ProtocolTCP, s.ReservedPorts)
	b.addStreamServices(s.UDPServices, corev1.ProtocolUDP, s.ReservedPorts)
}

// FinishRoute applies to loc the annotations of its Ingress and the
// ConfigMap's snippets.
func (b *builder) FinishRoute(loc Location, host string, https bool) Location {
	var set locationSettings
	b.finishLocation(&loc, &set.proxy, https)
	set.access = b.access[loc.Ingress].settings
	b.finishSnippet(loc, &set, host)
	b.shared.shareSettings(&loc, &set)
	return loc
}

// FinishModel gives the hosts their client certificate settings, server
// aliases and www redirects, and m its htpasswd files and stream part.
// A host checks client certificates without spec.tls too (the default
// certificate), as in ingress-nginx: its HTTPS requests are routed by its
// own locations.
func (b *builder) FinishModel(m *Model) {
	for srv := range m.Servers.All() {
		srv.ClientTLS = b.clientTLS[srv.Host] // nil for none
	}
	b.addServerAliases(m)
	b.addWWWRedirects(m)
	m.AuthFiles = b.authFiles()
	m.Stream = b.streamModel()
	m.NotServed = b.notServed
}

// withValidNames returns the Ingresses of ours whose namespace is a DNS-1123
// label and name a DNS-1123 subdomain, and raises a Problem for each other
// one, left out. The API server checks both; the file source does not, and
// the names reach nginx.conf (custom-http-errors' headers) and Lua.
func (b *builder) withValidNames(ours []*networkingv1.Ingress) []*networkingv1.Ingress {
	return slices.DeleteFunc(ours, func(ing *networkingv1.Ingress) bool {
		if len(validation.IsDNS1123Label(ing.Namespace)) == 0 && len(validation.IsDNS1123Subdomain(ing.Name)) == 0 {
			return false
		}
		b.ingressProblem(ing, fmt.Sprintf("metadata: namespace %q or name %q is not a Kubernetes name; the Ingress is left out", clip(ing.Namespace), clip(ing.Name)))
		return true
	})
}

// Serves returns what decides which Ingresses of s restysync serves
// (DecideClass, class.go).
func Serves(s Snapshot) func(*networkingv1.Ingress) bool {
	decide := DecideClass(s)
	return func(ing *networkingv1.Ingress) bool { return decide(ing).Served }
}

// addIngress adds the paths of ing to the servers of their hosts. It
// returns the Ingress's default backend, if it has a usable one.
func (b *builder) addIngress(ing *networkingv1.Ingress) (defaultBackend, bool) {
	id := ing.Namespace + "/" + ing.Name
	if len(ing.Spec.Rules) == 0 && ing.Spec.DefaultBackend == nil {
		b.ingressProblem(ing, "spec: has no rules and no default backend; nothing to serve")
		return defaultBackend{}, false
	}
	useRegex := b.useRegex(ing)
	policy := b.policyFor(ing)
	b.readLocationOptions(ing, id)
	b.recordProxy(ing, id)
	b.readSnippets(ing, id)
	b.capProxyLimits(ing, id)
	b.readAccess(ing, id)
	var hosts []string
	for ri := range ing.Spec.Rules {
		rule := &ing.Spec.Rules[ri]
		if rule.Host != "" {
			if reason := validHost(rule.Host); reason != "" {
				b.ingressProblem(ing, fmt.Sprintf("spec.rules[%d].host %q: %s; rule left out", ri, rule.Host, reason))
				continue
			}
			hosts = append(hosts, rule.Host)
		}
		locations := b.server(rule.Host)
		if rule.HTTP == nil {
			continue
		}
		for pi := range rule.HTTP.Paths {
			b.addPath(ing, id, locations, rule.Host, ri, pi, useRegex, policy)
		}
	}
	if ing.Spec.DefaultBackend == nil {
		return defaultBackend{}, false
	}
	ref, reason := parseBackend(ing.Namespace, ing.Spec.DefaultBackend, "spec.defaultBackend")
	if reason != "" {
		b.ingressProblem(ing, reason+"; default backend left out")
		return defaultBackend{}, false
	}
	ref = b.withServiceUpstream(ref.withPolicy(policy, id), ing)
	if r := b.resolve(ref); r.problem != "" {
		b.ingressProblem(ing, "spec.defaultBackend"+r.problem+"; requests sent to it answer 503")
	}
	return defaultBackend{ingress: id, ref: ref, hosts: hosts}, true
}

// addPath adds path pi of rule ri of ing to locations, the server of host,
// unless it is invalid or an older Ingress already serves it.
func (b *builder) addPath(ing *networkingv1.Ingress, id string, locations map[locationKey]Location, host string, ri, pi int, useRegex bool, policy Policy) {
	p := &ing.Spec.Rules[ri].HTTP.Paths[pi]
	// field names the path in problems; only they pay for formatting it.
	field := func() string { return fmt.Sprintf("spec.rules[%d].http.paths[%d]", ri, pi) }
	kind, pathType, reason := matchType(p.PathType)
	if reason != "" {
		b.ingressProblem(ing, fmt.Sprintf("%s.pathType %q: %s; path left out", field(), *p.PathType, reason))
		return
	}
	pathType, matchReason := b.pathMatch(ing, useRegex, host, p, kind, pathType)
	path, reason := locationPath(p.Path, kind, pathType)
	if reason != "" {
		b.ingressProblem(ing, fmt.Sprintf("%s.path %q: %s; path left out", field(), p.Path, reason))
		return
	}
	ref, reason := parseBackend(ing.Namespace, &p.Backend, "backend")
	if reason != "" {
		b.ingressProblem(ing, field()+"."+reason+"; path left out")
		return
	}
	ref = b.withServiceUpstream(ref.withPolicy(policy, id), ing)
	// The oldest-wins check comes before the regex limit, which counts
	// only the paths that are added; addRoute then always adds.
	key := locationKey{path, pathType}
	if owner, taken := locations[key]; taken {
		b.ingressProblem(ing, fmt.Sprintf("%s.path %q: path %q (%s) on %s is already served by Ingress %s; path left out",
			field(), p.Path, path, pathType, describeHost(host), owner.Ingress))
		return
	}
	if pathType == PathRegex && !b.regexPathAllowed(ing, host, field(), p.Path) {
		return
	}
	if r := b.resolve(ref); r.problem != "" {
		b.ingressProblem(ing, field()+".backend"+r.problem+"; the path answers 503")
	}
	b.addRoute(host, Location{Path: path, PathType: pathType, MatchReason: matchReason, Backend: ref.name, Ingress: id})
}

// addDefaultBackends gives "/" to the default server and to each host of an
// Ingress with a default backend, where no rule defines Prefix "/". They go
// oldest Ingress first, so the oldest default backend wins.
func (b *builder) addDefaultBackends(withDefault []defaultBackend) {
	for _, d := range withDefault {
		for _, host := range append([]string{""}, d.hosts...) {
			b.addRoute(host, Location{Path: "/", PathType: PathPrefix, Backend: d.ref.name, Ingress: d.ingress})
		}
	}
}

func (b *builder) ingressProblem(ing *networkingv1.Ingress, reason string) {
	b.problem("Ingress", ing.Namespace, ing.Name, reason)
}
