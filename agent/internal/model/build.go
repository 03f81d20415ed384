package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

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
//
// Build runs two Processors in a Builder: the Ingress one (ingress.go),
// then the Gateway API one (gateway.go).
func Build(s Snapshot) (Model, []Problem) {
	return newBuilder(s).build(newIngressProcessor(s), newGatewayProcessor(s))
}

// Processor is one front-end of the model: it reads its own objects and
// emits hosts, routes, backends, certificates and problems into the
// Builder. It holds its settings as fields; the Builder holds what every
// front-end shares.
type Processor interface {
	// Process emits what the front-end serves into b. Processors run in
	// order; a route a processor emits on a path that an earlier route
	// holds is a conflict, and the earlier one wins (addRoute).
	Process(b *Builder)
	// FinishRoute completes loc, a route this processor emitted on host,
	// once every processor ran: https is the host's Server.HTTPS.
	FinishRoute(loc Location, host string, https bool) Location
	// FinishModel adds to m, the hosts sorted and their routes finished,
	// what only this front-end has (server aliases, stream services, …),
	// before the Builder collects the backends and certificates m uses.
	FinishModel(m *Model)
}

type namespacedName struct{ namespace, name string }

type locationKey struct {
	path     string
	pathType PathType
}

// Builder holds what every front-end shares in one build: the indexes of
// the Services, EndpointSlices and Secrets, the hosts and their routes,
// the backends, the certificates and the problems. Its processors emit
// into it, and it turns the result into the sorted Model.
type Builder struct {
	// objects are the Services, EndpointSlices, Secrets and ConfigMaps by
	// name; processors read them through service, serviceSlices, secret
	// and configMap, which note each read in reads when an incremental
	// build asks for it (incremental.go).
	objects *objectIndex
	reads   *readSet
	// islandOnly says the build is one island of an incremental build:
	// the snapshot-wide parts (the default certificate, the TCP and UDP
	// services) are the globals part's (incremental.go).
	islandOnly bool
	// expires is the earliest NotAfter of the certificates found valid, the
	// time after which this build's answer changes; zero for none.
	expires  time.Time
	resolved map[string]resolved
	// servers by host; "" is the default server.
	servers map[string]map[locationKey]Location
	// owners are the processors that emitted the routes, by
	// Location.Ingress: FinishRoute goes to the owner, so each front-end
	// must name its objects apart from the others'. running is the
	// processor Process runs now.
	owners  map[string]Processor
	running Processor
	// extraBackends are backends no Location names: a canary split's, a
	// Gateway route rule's.
	extraBackends map[string]bool
	problems      []Problem

	now time.Time
	// checked Secrets by "namespace/name"; tlsHosts gives each TLS host
	// its certificate; certHosts lists the hosts each certificate won.
	checked   map[string]*checkedSecret
	tlsHosts  map[string]tlsClaim
	certHosts map[string][]string
	// httpsHosts are the hosts some spec.tls names, valid certificate or not.
	httpsHosts map[string]bool
	// loadBalance is Snapshot.LoadBalance, "" for round robin (policy.go).
	loadBalance string
	// policies hold one copy of each backend Policy (settings.go).
	policies map[Policy]*Policy
	// targets is Snapshot.Targets (target.go).
	targets Targets
	// secretFiles are the CA, CRL and certificate files nginx reads, of
	// Ingresses' Secrets and Gateways' CA certificates, by name
	// (proxyssl.go); the Ingress processor's authFiles lists them.
	secretFiles map[string]AuthFile
}

func newBuilder(s Snapshot) *Builder {
	return newBuilderOf(s, newObjectIndex(s))
}

// newBuilderOf is newBuilder with the objects of s already indexed.
func newBuilderOf(s Snapshot, objects *objectIndex) *Builder {
	b := &Builder{
		objects:  objects,
		resolved: make(map[string]resolved),
		servers:  make(map[string]map[locationKey]Location),
		// A size hint: each Ingress owns its routes.
		owners: make(map[string]Processor, s.Ingresses.Len()),

		extraBackends: make(map[string]bool),

		now:     s.Now,
		checked: make(map[string]*checkedSecret),

		tlsHosts:  make(map[string]tlsClaim),
		certHosts: make(map[string][]string),

		httpsHosts: make(map[string]bool),

		loadBalance: s.LoadBalance,
		targets:     s.Targets,
	}
	if b.loadBalance == AlgorithmRoundRobin {
		b.loadBalance = ""
	}
	return b
}

// objectIndex holds the Services, EndpointSlices (by the Service named in
// their kubernetes.io/service-name label: Snapshot.ServiceOfSlice),
// Secrets and ConfigMaps of a snapshot by namespace and name.
//
// The EndpointSlices by Service are the snapshot's SlicesOf when its
// source gives one (slicesOf), else the map slices.
//
// The Services are serviceList, the snapshot's; services indexes them by
// name only when that list is not ordered (isOrdered), else a Service is
// found by a binary search of the list (service). The sources hand their
// lists out sorted, and at 50,000 Services the map was 3 MB for a lookup
// per backend a build resolves.
type objectIndex struct {
	services    map[namespacedName]*Service
	serviceList List[*Service]
	slices      map[namespacedName][]*discoveryv1.EndpointSlice
	slicesOf    func(namespace, service string) []*discoveryv1.EndpointSlice
	secrets     map[namespacedName]*corev1.Secret
	configMaps  map[namespacedName]*corev1.ConfigMap
}

func newObjectIndex(s Snapshot) *objectIndex {
	x := &objectIndex{
		serviceList: s.Services,
		slicesOf:    s.SlicesOf,
		secrets:     make(map[namespacedName]*corev1.Secret, s.Secrets.Len()),
		configMaps:  make(map[namespacedName]*corev1.ConfigMap, s.ConfigMaps.Len()),
	}
	for secret := range s.Secrets.All() {
		x.secrets[namespacedName{secret.Namespace, secret.Name}] = secret
	}
	if !isOrdered(s.Services) {
		x.services, _ = indexNamed(s.Services)
	}
	if x.slicesOf == nil {
		x.slices = make(map[namespacedName][]*discoveryv1.EndpointSlice, s.EndpointSlices.Len())
		for slice := range s.EndpointSlices.All() {
			if key, ok := sliceService(s, slice); ok {
				x.slices[key] = append(x.slices[key], slice)
			}
		}
	}
	for cm := range s.ConfigMaps.All() {
		x.configMaps[namespacedName{cm.Namespace, cm.Name}] = cm
	}
	return x
}

// service is the Service named key, nil for none: by x.services, or while
// that is nil (serviceList is ordered) by a binary search of serviceList.
func (x *objectIndex) service(key namespacedName) *Service {
	if x.services != nil {
		return x.services[key]
	}
	svc, _ := findNamed(x.serviceList, key)
	return svc
}

// serviceSlices are the EndpointSlices of the Service key, read-only.
func (x *objectIndex) serviceSlices(key namespacedName) []*discoveryv1.EndpointSlice {
	if x.slicesOf != nil {
		return x.slicesOf(key.namespace, key.name)
	}
	return x.slices[key]
}

// sliceService is the Service an EndpointSlice of s belongs to: always
// one of the slice's own namespace.
func sliceService(s Snapshot, slice *discoveryv1.EndpointSlice) (namespacedName, bool) {
	service := s.ServiceOfSlice(slice)
	return namespacedName{slice.Namespace, service}, service != ""
}

// ServiceOfSlice is the name of the Service (of the slice's namespace)
// that slice, one of s's EndpointSlices, belongs to: its
// kubernetes.io/service-name label, or, when its source dropped its
// labels, what SliceServices says; "" for none.
func (s Snapshot) ServiceOfSlice(slice *discoveryv1.EndpointSlice) string {
	if slice.Labels != nil || s.SliceServices == nil {
		return slice.Labels[discoveryv1.LabelServiceName]
	}
	return s.SliceServices(slice)
}

func (b *Builder) service(namespace, name string) *Service {
	key := namespacedName{namespace, name}
	b.reads.add(readService, key)
	return b.objects.service(key)
}

func (b *Builder) serviceSlices(namespace, name string) []*discoveryv1.EndpointSlice {
	key := namespacedName{namespace, name}
	b.reads.add(readService, key)
	return b.objects.serviceSlices(key)
}

func (b *Builder) secret(namespace, name string) *corev1.Secret {
	key := namespacedName{namespace, name}
	b.reads.add(readSecret, key)
	return b.objects.secrets[key]
}

func (b *Builder) configMap(namespace, name string) *corev1.ConfigMap {
	key := namespacedName{namespace, name}
	b.reads.add(readConfigMap, key)
	return b.objects.configMaps[key]
}

// noteExpiry records that the answer of this build holds until notAfter.
func (b *Builder) noteExpiry(notAfter time.Time) {
	if b.expires.IsZero() || notAfter.Before(b.expires) {
		b.expires = notAfter
	}
}

// build runs the processors in order and returns the Model and the
// Problems.
func (b *Builder) build(processors ...Processor) (Model, []Problem) {
	for _, p := range processors {
		b.running = p
		p.Process(b)
	}
	b.running = nil
	return b.model(processors), b.sortedProblems()
}

// server returns the routes of host, by path, creating the host on first
// use; a host left without routes serves nothing.
func (b *Builder) server(host string) map[locationKey]Location {
	locations, ok := b.servers[host]
	if !ok {
		locations = make(map[locationKey]Location)
		b.servers[host] = locations
	}
	return locations
}

// addRoute adds loc to the routes of host, owned by the running processor,
// unless a route holds its path already: the route emitted first wins, and
// addRoute returns it for the processor's Problem. Processors emit their
// objects oldest first, so the oldest object wins.
func (b *Builder) addRoute(host string, loc Location) (owner Location, added bool) {
	locations := b.server(host)
	key := locationKey{loc.Path, loc.PathType}
	if owner, taken := locations[key]; taken {
		return owner, false
	}
	locations[key] = loc
	if _, ok := b.owners[loc.Ingress]; !ok {
		b.owners[loc.Ingress] = b.running
	}
	return Location{}, true
}

// model turns the servers into sorted lists and collects the backends the
// locations use.
func (b *Builder) model(processors []Processor) Model {
	var m Model
	var servers []*Server
	used := make(map[string]bool)
	for host, locations := range b.servers {
		if len(locations) == 0 {
			continue
		}
		server := Server{Host: host, Locations: make([]Location, 0, len(locations)), HTTPS: b.servesHTTPS(host)}
		for _, loc := range locations {
			// A server-snippet's location is finished as it is added.
			if owner := b.owners[loc.Ingress]; owner != nil && !loc.FixedSettings().Set {
				loc = owner.FinishRoute(loc, host, server.HTTPS)
			}
			server.Locations = append(server.Locations, loc)
			if loc.Backend != "" {
				used[loc.Backend] = true
			}
			if errors := loc.AccessSettings().Errors.Backend; errors != "" {
				used[errors] = true
			}
		}
		slices.SortFunc(server.Locations, compareLocations)
		if host == "" {
			m.Default = server
		} else {
			servers = append(servers, &server)
		}
	}
	slices.SortFunc(servers, func(a, b *Server) int { return strings.Compare(a.Host, b.Host) })
	m.Servers = ListOf(servers...)
	for _, p := range processors {
		p.FinishModel(&m)
	}
	for name := range b.extraBackends {
		used[name] = true
	}
	var fallbacks []string
	for name := range used {
		if fallback := b.resolved[name].policy.Fallback; fallback != "" {
			fallbacks = append(fallbacks, fallback)
		}
	}
	for _, name := range fallbacks {
		used[name] = true
	}
	backends := make([]Backend, 0, len(used))
	for name := range used {
		r := b.resolved[name]
		if r.policy.Algorithm == "" {
			r.policy.Algorithm = b.loadBalance // the ConfigMap's load-balance
		}
		r.backend.Policy = shareSetting(&b.policies, r.policy)
		backends = append(backends, r.backend)
	}
	slices.SortFunc(backends, func(a, b Backend) int { return strings.Compare(a.Name, b.Name) })
	m.Backends = ListOf(backends...)
	m.Certificates = ListOf(b.certificates()...)
	return m
}

// servesHTTPS says whether host has TLS of its own (Server.HTTPS; every
// host is served over HTTPS, one without it with the default
// certificate): when a spec.tls of an Ingress with a rule for host names
// it, or names a wildcard that covers it (markHTTPS). Another Ingress's
// wildcard does not: B's "*.test" must not redirect A's "a.test" to
// HTTPS. (The default server's "_" is always HTTPS; render sees to that.)
func (b *Builder) servesHTTPS(host string) bool {
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

func (b *Builder) problem(kind, namespace, name, reason string) {
	b.problems = append(b.problems, Problem{Kind: kind, Namespace: namespace, Name: name, Reason: clipReason(reason)})
}

// sortedProblems sorts by Kind, Namespace, Name and Reason, and drops
// duplicates (an EndpointSlice read for two ports reports its bad addresses twice).
func (b *Builder) sortedProblems() []Problem {
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
