package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// legacyClassAnnotation is the class annotation from before
// spec.ingressClassName; it is still honoured when the field is unset.
const legacyClassAnnotation = "kubernetes.io/ingress.class"

// Build computes what nginx should serve from the objects in s, following
// Ingress v1: class selection, hosts merged across Ingresses (the oldest
// Ingress wins a path both define), Exact and Prefix paths
// (ImplementationSpecific is Prefix), default backends, and ready endpoints
// from EndpointSlices, and TLS certificates from the Secrets spec.tls names
// (see addTLS; checked against s.Now). Anything invalid becomes a Problem and only that part
// is left out. A backend whose Service or port is missing is still emitted,
// with no endpoints, so its paths answer 503 instead of falling through to
// another location.
//
// The result is sorted and depends only on s: the same objects in any order
// give an identical Model and Problems. Backend.Endpoints is never nil (an
// empty list encodes as [] for Lua). s is only read.
func Build(s Snapshot) (Model, []Problem) {
	b := newBuilder(s)
	ours := b.withValidNames(ourIngresses(s))
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
	b.addDefaultCertificate(s.DefaultCertificate)
	b.addStreamServices(s.TCPServices, corev1.ProtocolTCP, s.ReservedPorts)
	b.addStreamServices(s.UDPServices, corev1.ProtocolUDP, s.ReservedPorts)
	return b.model(), b.sortedProblems()
}

type namespacedName struct{ namespace, name string }

type locationKey struct {
	path     string
	pathType PathType
}

// builder holds the indexes and the partial result of one Build.
type builder struct {
	services map[namespacedName]*corev1.Service
	// slices by namespace and the Service named in their kubernetes.io/service-name label.
	slices   map[namespacedName][]*discoveryv1.EndpointSlice
	resolved map[string]resolved
	// servers by host; "" is the default server.
	servers map[string]map[locationKey]Location
	// canaryBackends are backends only a canary split names.
	canaryBackends map[string]bool
	problems       []Problem

	now     time.Time
	secrets map[namespacedName]*corev1.Secret
	// checked Secrets by "namespace/name"; tlsHosts gives each TLS host
	// its certificate; certHosts lists the hosts each certificate won.
	checked map[string]*checkedSecret
	// annotatedDefaults by Ingress "namespace/name" (defaultBackendOf).
	annotatedDefaults map[string]annotatedDefault
	tlsHosts          map[string]tlsClaim
	certHosts         map[string][]string
	// httpsHosts are the hosts some spec.tls names, valid certificate or not.
	httpsHosts map[string]bool
	// locationOptions by Ingress ("namespace/name"), when not the defaults (protocol.go).
	locationOptions map[string]locationOptions
	// loadBalance is Snapshot.LoadBalance, "" for round robin (policy.go).
	loadBalance string
	// clientTLS are the client certificate settings by host (clienttls.go).
	clientTLS map[string]ClientTLS
	// secretFiles are the CA, CRL and certificate files of Secrets, by name
	// (proxyssl.go).
	secretFiles map[string]AuthFile
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
	// configMaps Ingresses name, by namespace and name (extauth.go).
	configMaps map[namespacedName]*corev1.ConfigMap
	// snippets are the snippet annotations and the ConfigMap's snippets
	// (snippet.go).
	snippets snippetState
	// modSecurity is Snapshot.ModSecurity (modsecurity.go).
	modSecurity ModSecurityGlobal
	// regexHosts are the hosts whose paths are all regexes, each with the
	// Ingress whose use-regex made them so; serviceUpstream and wwwKeys
	// are service-upstream and from-to-www-redirect by Ingress
	// (proxykeys.go).
	regexHosts      map[string]string
	serviceUpstream map[string]bool
	// serviceUpstreamDefault is Snapshot.ServiceUpstream.
	serviceUpstreamDefault bool
	wwwKeys                map[string]string
	// targets is Snapshot.Targets (target.go).
	targets Targets
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

func newBuilder(s Snapshot) *builder {
	b := &builder{
		services: make(map[namespacedName]*corev1.Service, len(s.Services)),
		slices:   make(map[namespacedName][]*discoveryv1.EndpointSlice, len(s.EndpointSlices)),
		resolved: make(map[string]resolved),
		servers:  make(map[string]map[locationKey]Location),

		canaryBackends: make(map[string]bool),

		now:     s.Now,
		secrets: make(map[namespacedName]*corev1.Secret, len(s.Secrets)),
		checked: make(map[string]*checkedSecret),

		annotatedDefaults: make(map[string]annotatedDefault),
		tlsHosts:          make(map[string]tlsClaim),
		certHosts:         make(map[string][]string),

		httpsHosts: make(map[string]bool),

		loadBalance:            s.LoadBalance,
		serviceUpstreamDefault: s.ServiceUpstream,
		globalAuth:             s.GlobalAuth,
		globalAuthDenied:       s.GlobalAuthDenied,

		stream: streamState{enabled: s.SSLPassthrough, passthrough: map[string]PassthroughHost{}, backends: map[string]StreamBackend{}},

		modSecurity: s.ModSecurity,
		targets:     s.Targets,
		limits:      s.Limits,

		snippets: newSnippetState(s),
	}
	b.checkGlobalAuth(s)
	if b.loadBalance == AlgorithmRoundRobin {
		b.loadBalance = ""
	}
	for _, secret := range s.Secrets {
		b.secrets[namespacedName{secret.Namespace, secret.Name}] = secret
	}
	b.configMaps = make(map[namespacedName]*corev1.ConfigMap, len(s.ConfigMaps))
	for _, cm := range s.ConfigMaps {
		b.configMaps[namespacedName{cm.Namespace, cm.Name}] = cm
	}
	for _, svc := range s.Services {
		b.services[namespacedName{svc.Namespace, svc.Name}] = svc
	}
	for _, slice := range s.EndpointSlices {
		service := slice.Labels[discoveryv1.LabelServiceName]
		if service == "" {
			continue
		}
		key := namespacedName{slice.Namespace, service}
		b.slices[key] = append(b.slices[key], slice)
	}
	return b
}

// ourIngresses returns the Ingresses of our class, oldest first (ties broken
// by namespace and name), so that "the oldest wins" is "the first wins".
func ourIngresses(s Snapshot) []*networkingv1.Ingress {
	isOurs := classFilter(s)
	ours := make([]*networkingv1.Ingress, 0, len(s.Ingresses))
	for _, ing := range s.Ingresses {
		if isOurs(ing) {
			ours = append(ours, ing)
		}
	}
	slices.SortFunc(ours, func(a, b *networkingv1.Ingress) int {
		return cmp.Or(
			a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace, b.Namespace),
			strings.Compare(a.Name, b.Name),
		)
	})
	return ours
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
// (classFilter).
func Serves(s Snapshot) func(*networkingv1.Ingress) bool { return classFilter(s) }

// classFilter decides which Ingresses are ours: those naming our class in
// spec.ingressClassName, when that IngressClass exists with our controller
// (as ingress-nginx has it, so deleting the class stops serving them), or,
// without the field, in the legacy annotation; and those naming no class
// when our IngressClass is the default one, or when WatchWithoutClass is
// set and no other IngressClass is the default.
func classFilter(s Snapshot) func(*networkingv1.Ingress) bool {
	var classExists, weAreDefault, otherIsDefault bool
	for _, class := range s.IngressClasses {
		isDefault := class.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"
		ourController := class.Spec.Controller == ControllerName
		switch {
		case class.Name == s.IngressClass && !ourController:
			otherIsDefault = otherIsDefault || isDefault
		case class.Name == s.IngressClass:
			classExists = true
			weAreDefault = isDefault
		case isDefault:
			otherIsDefault = true
		}
	}
	return func(ing *networkingv1.Ingress) bool {
		if name := ing.Spec.IngressClassName; name != nil && *name != "" {
			return *name == s.IngressClass && classExists
		}
		if annotation := ing.Annotations[legacyClassAnnotation]; annotation != "" {
			return annotation == s.IngressClass
		}
		if weAreDefault {
			return true
		}
		return s.WatchWithoutClass && !otherIsDefault
	}
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
	kind, pathType, err := matchType(p.PathType)
	if err != nil {
		b.ingressProblem(ing, fmt.Sprintf("%s.pathType %q: %v; path left out", field(), *p.PathType, err))
		return
	}
	pathType = b.pathMatch(ing, useRegex, host, p, kind, pathType)
	path, err := locationPath(p.Path, kind, pathType)
	if err != nil {
		b.ingressProblem(ing, fmt.Sprintf("%s.path %q: %v; path left out", field(), p.Path, err))
		return
	}
	ref, reason := parseBackend(ing.Namespace, &p.Backend, "backend")
	if reason != "" {
		b.ingressProblem(ing, field()+"."+reason+"; path left out")
		return
	}
	ref = b.withServiceUpstream(ref.withPolicy(policy, id), ing)
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
	locations[key] = Location{Path: path, PathType: pathType, Backend: ref.name, Ingress: id}
}

// addDefaultBackends gives "/" to the default server and to each host of an
// Ingress with a default backend, where no rule defines Prefix "/". They go
// oldest Ingress first, so the oldest default backend wins.
func (b *builder) addDefaultBackends(withDefault []defaultBackend) {
	root := locationKey{"/", PathPrefix}
	for _, d := range withDefault {
		for _, host := range append([]string{""}, d.hosts...) {
			locations := b.server(host)
			if _, taken := locations[root]; !taken {
				locations[root] = Location{Path: "/", PathType: PathPrefix, Backend: d.ref.name, Ingress: d.ingress}
			}
		}
	}
}

func (b *builder) server(host string) map[locationKey]Location {
	locations, ok := b.servers[host]
	if !ok {
		locations = make(map[locationKey]Location)
		b.servers[host] = locations
	}
	return locations
}

// model turns the servers into sorted lists and collects the backends the
// locations use.
func (b *builder) model() Model {
	var m Model
	used := make(map[string]bool)
	for host, locations := range b.servers {
		if len(locations) == 0 {
			continue
		}
		// A host that checks client certificates does so without
		// spec.tls too (the default certificate), as in ingress-nginx: its
		// HTTPS requests are routed by its own locations.
		server := Server{Host: host, Locations: make([]Location, 0, len(locations)), HTTPS: b.servesHTTPS(host),
			ClientTLS: b.clientTLS[host]}
		for _, loc := range locations {
			if !loc.Fixed.Set { // a server-snippet's location is finished as it is added
				loc = b.finishLocation(loc, server.HTTPS)
				loc = b.finishAccess(loc)
				loc = b.finishSnippet(loc, host)
			}
			server.Locations = append(server.Locations, loc)
			if loc.Backend != "" {
				used[loc.Backend] = true
			}
			if errors := loc.Access.Errors.Backend; errors != "" {
				used[errors] = true
			}
		}
		slices.SortFunc(server.Locations, compareLocations)
		if host == "" {
			m.Default = server
		} else {
			m.Servers = append(m.Servers, server)
		}
	}
	slices.SortFunc(m.Servers, func(a, b Server) int { return strings.Compare(a.Host, b.Host) })
	b.addServerAliases(&m)
	b.addWWWRedirects(&m)
	for name := range b.canaryBackends {
		used[name] = true
	}
	var fallbacks []string
	for name := range used {
		if fallback := b.resolved[name].backend.Policy.Fallback; fallback != "" {
			fallbacks = append(fallbacks, fallback)
		}
	}
	for _, name := range fallbacks {
		used[name] = true
	}
	for name := range used {
		backend := b.resolved[name].backend
		if backend.Policy.Algorithm == "" {
			backend.Policy.Algorithm = b.loadBalance // the ConfigMap's load-balance
		}
		m.Backends = append(m.Backends, backend)
	}
	slices.SortFunc(m.Backends, func(a, b Backend) int { return strings.Compare(a.Name, b.Name) })
	m.Certificates = b.certificates()
	m.AuthFiles = b.authFiles()
	m.Stream = b.streamModel()
	return m
}

// servesHTTPS says whether host has TLS of its own (Server.HTTPS; every
// host is served over HTTPS, one without it with the default
// certificate): when a spec.tls of an Ingress with a rule for host names
// it, or names a wildcard that covers it (markHTTPS). Another Ingress's
// wildcard does not: B's "*.test" must not redirect A's "a.test" to
// HTTPS. (The default server's "_" is always HTTPS; render sees to that.)
func (b *builder) servesHTTPS(host string) bool {
	return host != "" && b.httpsHosts[host]
}

// compareLocations orders by path, then Exact before Prefix.
func compareLocations(a, b Location) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(pathTypeRank(a.PathType), pathTypeRank(b.PathType)))
}

func pathTypeRank(t PathType) int {
	switch t {
	case PathExact:
		return 0
	case PathPrefix:
		return 1
	}
	return 2
}

func describeHost(host string) string {
	if host == "" {
		return "the default server"
	}
	return fmt.Sprintf("host %q", host)
}

func (b *builder) ingressProblem(ing *networkingv1.Ingress, reason string) {
	b.problem("Ingress", ing.Namespace, ing.Name, reason)
}

func (b *builder) problem(kind, namespace, name, reason string) {
	b.problems = append(b.problems, Problem{Kind: kind, Namespace: namespace, Name: name, Reason: clipReason(reason)})
}

// sortedProblems sorts by Kind, Namespace, Name and Reason, and drops
// duplicates (an EndpointSlice read for two ports reports its bad addresses twice).
func (b *builder) sortedProblems() []Problem {
	slices.SortFunc(b.problems, func(x, y Problem) int {
		return cmp.Or(
			strings.Compare(x.Kind, y.Kind),
			strings.Compare(x.Namespace, y.Namespace),
			strings.Compare(x.Name, y.Name),
			strings.Compare(x.Reason, y.Reason),
		)
	})
	return slices.Compact(b.problems)
}
