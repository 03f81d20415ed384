// Package model is the build stage of the pipeline: source → model → render → plan → apply.
//
// Build is a pure function of a Snapshot: no I/O, no clock, no logger. It turns
// Kubernetes objects into a Model that holds no Kubernetes API types, sorted so
// that the same Snapshot always yields the same Model (and so the same
// nginx.conf bytes). Anything invalid becomes a Problem naming the object and
// the reason; that part is left out and everything else is still served.
//
// Build runs a Builder with ordered Processors, one per front-end: the
// Ingress processor (ingress.go) and the Gateway API processor
// (gateway.go, httproute.go, gatewayhosts.go). Every processor writes into the one
// shared Builder (hosts, routes, backends, certificates, problems, the
// oldest-wins rule) so that there is one Model for both front-ends: the
// router, the profiles, the balancers and every push to nginx and Lua stay
// one, and a new front-end changes nothing in render, plan, apply or Lua.
//
// A check in this package returns a reason string, "" when the value is fine,
// never an error.
package model

import (
	"crypto/sha1"
	"encoding/hex"
	"iter"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ControllerName is the value of IngressClass.spec.controller that selects restysync.
const ControllerName = "restysync.io/ingress-controller"

// Snapshot is everything Build reads: the objects a source holds, plus the
// settings that decide which Ingresses are ours. Objects are read-only.
//
// Each kind's objects are a List, sorted by namespace and name, each name
// once (the sources hand them out so; Build takes any order, and
// Incremental falls back to an index by name for a list that is not).
// Why a List and not a slice: a source makes the next list from the last
// (Edited), sharing every chunk no change falls in, so a change to one of
// 50,000 objects costs a chunk and not a copy of the whole list (400 KB,
// the largest allocation of a change), and Incremental diffs two
// snapshots' lists skipping the chunks both share (CompareLists). Tests
// build them with ListOf.
type Snapshot struct {
	Ingresses      List[*networkingv1.Ingress]
	IngressClasses List[*networkingv1.IngressClass]
	// Services are what the stages read of each (Service, ServiceOf),
	// not the whole objects.
	Services       List[*Service]
	EndpointSlices List[*discoveryv1.EndpointSlice]
	Secrets        List[*corev1.Secret]
	// SliceServices names the Service of each EndpointSlice of
	// EndpointSlices whose source dropped its labels (nil: none did). A
	// slice belongs to the Service of its namespace that its
	// kubernetes.io/service-name label names; a source may keep that name
	// beside the slice instead of in a map of one label (some 300 bytes a
	// slice, 15 MB at 50,000), and answer here for every slice of this
	// Snapshot, for as long as the Snapshot is held, and never change its
	// answer for a slice (a slice moved to another Service is a new
	// object, as any change: Incremental compares slices by identity). A
	// slice that has labels is read by its label. ServiceOfSlice reads
	// both. Not encoded: a Snapshot written as JSON (the e2e hooks) gives
	// such slices their label back instead.
	SliceServices func(*discoveryv1.EndpointSlice) string `json:"-"`
	// SlicesOf, when set, is the source's index of EndpointSlices by
	// Service: the slices of EndpointSlices that belong (ServiceOfSlice)
	// to the Service namespace/name, in any order, read-only, for as long
	// as the Snapshot is held. Build then reads it instead of making an
	// index of its own (a map entry and a list per Service: 5 MB at
	// 50,000 beside the source's, which holds the same). nil: Build
	// makes its own. Not encoded, as SliceServices.
	SlicesOf func(namespace, service string) []*discoveryv1.EndpointSlice `json:"-"`

	// The Gateway API (gatewayapi.go): GatewayClasses of every controller
	// (Build takes those whose controllerName is GatewayController),
	// Gateways, HTTPRoutes, GRPCRoutes, TLSRoutes, ReferenceGrants, ListenerSets (more
	// listeners for a Gateway, listenerset.go), and Namespaces for
	// allowedRoutes' and allowedListeners' selectors. The Secrets listeners
	// name are in Secrets.
	GatewayClasses  List[*gatewayv1.GatewayClass]
	Gateways        List[*gatewayv1.Gateway]
	HTTPRoutes      List[*gatewayv1.HTTPRoute]
	GRPCRoutes      List[*gatewayv1.GRPCRoute]
	TLSRoutes       List[*gatewayv1.TLSRoute]
	ReferenceGrants List[*gatewayv1.ReferenceGrant]
	ListenerSets    List[*gatewayv1.ListenerSet]
	Namespaces      List[*corev1.Namespace]
	// BackendTLSPolicies say how nginx checks the TLS backends of Gateway
	// routes; the ConfigMaps they name are in ConfigMaps (backendtls.go).
	BackendTLSPolicies List[*gatewayv1.BackendTLSPolicy]
	// GatewayKindsNotServed are the kinds of the Gateway API ("TLSRoute",
	// …) the API server does not serve (their CRD is not installed):
	// GatewayClasses do not declare the features of those kinds. Empty
	// when every kind is read (the file source reads them all).
	GatewayKindsNotServed []string
	// GatewayController is the controllerName of the GatewayClasses we
	// serve (--gateway-controller-name).
	GatewayController string
	// GatewayAddresses is the pool of IP addresses Gateways without
	// spec.addresses are served on, one each (--gateway-addresses).
	GatewayAddresses []string
	// GatewayAddressesServed is each Gateway's ("namespace/name")
	// addresses as this agent's last build served them. A Gateway keeps
	// its pool address by them first, then by its status.addresses, which
	// is written after the sync: two Gateways created together would
	// otherwise swap addresses until their status caught up.
	GatewayAddressesServed map[string][]string
	// GatewayServices keeps a Service for each accepted Gateway
	// (--gateway-services, gatewayservice.go): the model says what each
	// should be (GatewayAPIStatus.Services), and the GatewayClasses
	// declare GatewayInfrastructure.
	GatewayServices bool

	// IngressClass is the name of the class we serve (--ingress-class).
	IngressClass string
	// WatchWithoutClass also takes Ingresses that name no class and have no
	// default IngressClass to fall back on.
	WatchWithoutClass bool
	// DefaultCertificate is the TLS Secret ("namespace/name") served to
	// clients without SNI and for names no other certificate covers
	// (--default-ssl-certificate); "" for the self-signed one.
	DefaultCertificate string
	// Now is the time certificates are checked against: one whose NotAfter
	// is before Now is not served. The zero time (the default) skips the
	// check, which keeps Build pure; the syncer sets it on every sync.
	Now time.Time
	// ConfigMap is the agent's ConfigMap (--configmap), nil when none is
	// named or it does not exist. Build does not read it: package
	// configmap does, for the syncer, which sets LoadBalance from it.
	ConfigMap *corev1.ConfigMap
	// LoadBalance is the algorithm of backends whose Ingress names none
	// (ConfigMap key load-balance): "" or AlgorithmRoundRobin for round
	// robin, or AlgorithmEWMA.
	LoadBalance string
	// ServiceUpstream is the default of the service-upstream annotation
	// (ConfigMap key service-upstream).
	ServiceUpstream bool
	// GlobalAuth is the external auth of every Ingress that names no
	// auth-url and does not set enable-global-auth "false" (ConfigMap keys
	// global-auth-*, read by GlobalAuth). GlobalAuthDenied, when not "",
	// makes those Ingresses fail closed instead: the global auth-url is
	// set but cannot be used.
	GlobalAuth       ExternalAuth
	GlobalAuthDenied string
	// SSLPassthrough honours the annotation ssl-passthrough
	// (--enable-ssl-passthrough; off, it is a Problem, as ingress-nginx
	// ignores it without its flag).
	SSLPassthrough bool
	// TCPServices and UDPServices are ingress-nginx's ConfigMaps of
	// services (--tcp-services-configmap, --udp-services-configmap): each
	// key a port, each value "namespace/service:port[:PROXY][:PROXY]"; nil
	// for none. ReservedPorts are the ports nginx listens on for HTTP,
	// HTTPS and its status server, which no such service may take.
	TCPServices, UDPServices *corev1.ConfigMap
	ReservedPorts            []int32
	// IngressPorts is where nginx's own servers listen: a Gateway
	// listener nginx cannot bind beside them is not accepted
	// (gatewayports.go). The zero value holds no port.
	IngressPorts IngressPorts
	// ConfigMaps are those Ingresses name by annotation
	// (auth-proxy-set-headers; ConfigMapRefs) and those BackendTLSPolicies
	// name as CAs (BackendTLSConfigMapRefs), read by name.
	ConfigMaps List[*corev1.ConfigMap]
	// ModSecurity is whether nginx has the ModSecurity module (the
	// agent's flags) and the ConfigMap's enable-modsecurity and
	// enable-owasp-modsecurity-crs (modsecurity.go). The zero value has no
	// module: a location that asks for ModSecurity answers 503.
	ModSecurity ModSecurityGlobal
	// SnippetAnnotationsOff refuses every snippet annotation
	// (--allow-snippet-annotations=false, or the ConfigMap's
	// allow-snippet-annotations "false"); by default they are read
	// (snippet.go).
	SnippetAnnotationsOff bool
	// GlobalSnippets are the ConfigMap's http-snippet, server-snippet and
	// location-snippet: their headers apply to every location (snippet.go).
	GlobalSnippets GlobalSnippets
	// HeadersMore says nginx has the headers-more module
	// (render.Settings.HeadersMore): snippets' more_set_headers and
	// more_clear_headers are written as themselves and may name Server,
	// Date and Content-Type; without it they are emulated (snippet.go).
	HeadersMore bool
	// Targets decide where nginx may connect: every URL nginx connects to
	// and every endpoint address goes through their check (target.go).
	// The zero value refuses loopback, link-local and unspecified
	// addresses and unix sockets.
	Targets Targets
	// Limits are the platform's maxima no Ingress may exceed (limits.go);
	// the zero value sets none.
	Limits Limits
}

// Model is what nginx should serve. It holds only plain values.
type Model struct {
	// Servers sorted by Host, each once. Exact hosts and wildcard hosts
	// ("*.example.com"). A List of pointers, so that a model one host
	// apart from the last (Incremental) shares all but a chunk of the
	// last one's list (List, Edited), not a copy of every server nor of
	// every pointer; a server a model holds is never changed after the
	// build, as its Locations.
	Servers List[*Server]
	// Default is the catch-all server for requests whose Host matches no Server:
	// host-less rules, and the default backend. Host is "".
	Default Server
	// Backends sorted by Name; one per (namespace, service, service port) that a
	// Location or default backend references. A List: a change of a few
	// (a new Service, the fast path's endpoints) makes the next model's
	// from this one, sharing the chunks it does not touch (list.go).
	Backends List[Backend]
	// Certificates sorted by Name; one per TLS Secret that spec.tls of one
	// of our Ingresses names and that won at least one host. They are not
	// part of the structure: adding, rotating or removing one needs no reload.
	// A List, as Backends: a new TLS Ingress or a rotated Secret makes the
	// next model's from this one, sharing the chunks it does not touch.
	Certificates List[Certificate]
	// AuthFiles sorted by Name: the htpasswd files of the locations with
	// basic auth. Like certificates they are not structure: nginx reads
	// them on every request, so a new content needs no reload.
	AuthFiles []AuthFile
	// Stream is what nginx's stream module serves: TLS passthrough and
	// TCP and UDP services (stream.go).
	Stream Stream
	// Listeners are the address:port pairs nginx listens on for
	// Gateways, sorted by Address then Port (gatewayapi.go).
	Listeners []Listener
	// GatewayAPI is what Build found about the Gateway API objects, for
	// the status writer and inspect (gatewayapi.go).
	GatewayAPI GatewayAPIStatus
	// GatewayRoutes are the routes of the Gateways' listeners, built
	// whole by the model (gateway.go): Host is FrontKey(front, hostname),
	// Ordered is set and every location has a Rule. Sorted by Host. They
	// need nothing in nginx.conf: render hands them to Lua as they are.
	// A List of pointers, as Servers: a model one route apart from the
	// last shares all but a chunk of its list, and a route a model holds
	// is never changed after the build.
	GatewayRoutes List[*Route]
	// BackendTLS are the settings of TLS to Gateway backends that some
	// route's share names, sorted by Name (backendtls.go): each is a
	// named location in every Gateway server.
	BackendTLS []BackendTLS
	// NotServed are the Ingresses restysync leaves to another controller
	// (class.go), sorted, with why: for inspect, not for nginx.
	NotServed []NotServed
}

// DefaultCertificateHost is the host under which a Certificate is the
// default one (Snapshot.DefaultCertificate): Lua serves it to clients
// without SNI and for names no other certificate covers.
const DefaultCertificateHost = "*"

// Certificate is a TLS Secret's certificate chain and key, and the SNI
// hosts it is served for.
type Certificate struct {
	// Name is the Secret, "namespace/name". It is the key Lua stores the
	// certificate under.
	Name string
	// Hosts sorted: exact lower-case names, one-label wildcards
	// ("*.example.com"), and DefaultCertificateHost for the default one. A host belongs to one certificate only: when
	// Ingresses disagree, the oldest wins, as for paths.
	Hosts []string
	// CertPEM is the chain, leaf first, re-encoded as PEM CERTIFICATE blocks
	// (anything else the Secret's tls.crt held is dropped); KeyPEM is the
	// key as a PKCS #8 PEM block. Both are empty when Invalid is set. A
	// text the Secret holds in that very form is the Secret's own bytes,
	// not a copy (sharedText): never change a Secret a Snapshot holds.
	CertPEM string
	KeyPEM  string
	// NotAfter is when the leaf expires; zero when Invalid is set.
	NotAfter time.Time
	// Invalid is why the Secret exists but cannot be served (a bad PEM, a
	// key that does not match, an expired leaf), or "" for a good one. The
	// syncer then keeps serving the content it last had for Name, if any.
	Invalid string
}

// Hash identifies the content Lua holds for c: the hex SHA-1 of CertPEM,
// a newline and KeyPEM. Lua computes the same over what it stores, so
// comparing hashes tells whether Lua holds this content.
func (c Certificate) Hash() string {
	h := sha1.New()
	h.Write([]byte(c.CertPEM))
	h.Write([]byte("\n"))
	h.Write([]byte(c.KeyPEM))
	return hex.EncodeToString(h.Sum(nil))
}

// Server is one virtual host.
type Server struct {
	// Host is an exact lower-case DNS name, a wildcard "*.example.com" that
	// matches exactly one label, or "" for the default server.
	Host string
	// Locations sorted by Path, then Exact before Prefix.
	Locations []Location
	// Aliases are more exact host names this server answers for, sorted
	// (annotation server-alias); nil when none.
	Aliases []string
	// WWWRedirect is the other name of Host, "www."+Host or Host without
	// its "www.", whose requests are redirected to Host (annotation
	// from-to-www-redirect; proxykeys.go); "" when none.
	WWWRedirect string
	// HTTPS says the host has TLS of its own: the default server always,
	// another only when a spec.tls of an Ingress with a rule for it names
	// it. Its locations redirect plain HTTP (ssl-redirect) and it may check
	// client certificates. Every host is served over HTTPS all the same: a
	// host without TLS by its own locations with the default certificate,
	// as ingress-nginx serves it (never by the default server's, which
	// another tenant's host-less rule may own).
	HTTPS bool
	// ClientTLS, when set (CAFile not ""), makes the host a server block of
	// its own that checks client certificates (clienttls.go). A pointer,
	// nil for none (read it through ClientTLSSettings), shared by the
	// hosts of the Ingress that set it and never written after the build:
	// inline, it was 72 of a Server's 160 bytes, on every host.
	ClientTLS *ClientTLS
}

// ClientTLSSettings are s's client certificate settings, the zero value
// for none.
func (s *Server) ClientTLSSettings() ClientTLS {
	if s.ClientTLS == nil {
		return ClientTLS{}
	}
	return *s.ClientTLS
}

// PathType is how a Location matches the request path.
type PathType string

const (
	// PathExact matches the path exactly, case-sensitive.
	PathExact PathType = "Exact"
	// PathPrefix matches element-wise on "/": "/foo" matches "/foo", "/foo/"
	// and "/foo/bar" but not "/foobar". Path never ends in "/" unless it is "/".
	PathPrefix PathType = "Prefix"
	// PathRegex matches when the regular expression Path matches the start
	// of the request path, case-insensitively: an ImplementationSpecific
	// path of an Ingress with use-regex, as ingress-nginx has it. nginx
	// (PCRE) is the judge of the syntax; the model checks it with RE2.
	PathRegex PathType = "Regex"
	// PathLiteralPrefix matches every path that starts with Path, byte by
	// byte, as nginx's prefix location does: a location block of a
	// server-snippet ("location /robots.txt"), never an Ingress path.
	PathLiteralPrefix PathType = "LiteralPrefix"
	// PathPriorityPrefix is PathLiteralPrefix that, when it is the longest
	// prefix a path matches, keeps the regexes from being tried (nginx's
	// "location ^~ /p").
	PathPriorityPrefix PathType = "PriorityPrefix"
)

// Location routes one path of one Server to a Backend.
type Location struct {
	Path     string
	PathType PathType
	// MatchReason says why PathType is not the pathType the Ingress
	// wrote ("Exact became Regex: use-regex on Ingress default/api makes
	// every path of the host a regex"); "" when it is. For inspect.
	MatchReason string
	// Backend is the Name of an entry in Model.Backends.
	Backend string
	// Ingress that owns this location ("namespace/name"): the object of
	// the front-end that emitted it, whose processor finishes it
	// (Processor.FinishRoute).
	Ingress string
	// SSLRedirect answers a plain-HTTP request with a 308 to the same URL
	// over HTTPS: by default on hosts with TLS of their own (annotation
	// ssl-redirect), on any host with force-ssl-redirect.
	SSLRedirect bool
	// Protocol nginx speaks to the backend: ProtocolHTTP (""), ProtocolHTTPS,
	// ProtocolGRPC, ProtocolGRPCS or ProtocolFCGI (annotation backend-protocol).
	Protocol string
	// Proxy are the proxy and routing settings of the owning Ingress
	// (rewrite, redirects, timeouts, buffering, retries; proxy.go).
	//
	// Proxy, Access and Snippet are pointers, nil when the settings are
	// all zero (read them through ProxySettings, AccessSettings and
	// SnippetSettings): the build gives every location of like settings
	// one shared copy (shareSettings), which is never written after the
	// build. They are most of a Location's size (1.2 of 1.4 KB), and
	// thousands of Ingresses share a few distinct settings.
	Proxy *ProxySettings
	// Access are the access-control settings of the owning Ingress
	// (source ranges, CORS, basic auth, rate limits, error pages; access.go).
	Access *AccessSettings
	// Snippet are the headers and settings the snippet annotations of the
	// owning Ingress, and the ConfigMap's snippets, give it (snippet.go).
	Snippet *SnippetSettings
	// Fixed, when set, makes this a location of a server-snippet: no
	// Backend, an answer of its own (snippet.go). A pointer, nil for
	// none (read it through FixedSettings), never written after the
	// build: inline, it was 64 of a Location's 192 bytes, on every
	// location.
	Fixed *FixedResponse
}

// FixedSettings is l's answer of its own, the zero value (Set false) for
// a location that has none.
func (l *Location) FixedSettings() FixedResponse {
	if l.Fixed == nil {
		return FixedResponse{}
	}
	return *l.Fixed
}

// Backend is a set of endpoints behind one service port.
type Backend struct {
	// Name is "namespace/service:port", with port as written in the Ingress
	// (number or name). It is the key the Lua balancer stores the backend under.
	// A backend whose Ingress sets a Policy of its own is a variant named
	// "namespace/service:port@namespace/ingress": two Ingresses may balance
	// one Service differently.
	Name string
	// Policy is how Lua balances it; it travels with the endpoints, so a
	// change of it is a push, not a reload. As Location.Proxy: nil when
	// zero (PolicyValue reads it), one copy shared by the backends of like
	// policy, never written after the build.
	Policy *Policy
	// Endpoints sorted by Address then Port; only ready ones. Empty means 503.
	Endpoints []Endpoint
}

// Endpoint is one address:port a request can go to.
type Endpoint struct {
	Address string `json:"address"`
	Port    int32  `json:"port"`
}

// Problem is invalid input that was left out of the Model.
type Problem struct {
	// Kind of the object: "Ingress", "Service", "Secret", ... or "File" for a
	// manifest the file source could not decode.
	Kind string
	// Namespace and Name of the object. For Kind "File", Name is the file path
	// and document number ("path/to/x.yaml#2").
	Namespace string
	Name      string
	// Reason is a sentence for a human: what is wrong and what was left out.
	Reason string
	// Missing names the object ("Secret ns/name") whose absence is the
	// whole problem, when it is; restysync check does not count such a
	// value against an Ingress moving from ingress-nginx.
	Missing string
	// Refused says the value is refused by design (a snippet directive
	// off the allowlist, or snippets turned off), not merely invalid:
	// restysync check reports the annotation as refused.
	Refused bool
}

// Object names the object as "Kind namespace/name".
func (p Problem) Object() string {
	if p.Namespace == "" {
		return p.Kind + " " + p.Name
	}
	return p.Kind + " " + p.Namespace + "/" + p.Name
}

func (p Problem) String() string { return p.Object() + ": " + p.Reason }

// AllLocations yields every location of the default server and of every
// server, in the model's order.
func (m Model) AllLocations() iter.Seq[*Location] {
	return func(yield func(*Location) bool) {
		for j := range m.Default.Locations {
			if !yield(&m.Default.Locations[j]) {
				return
			}
		}
		for srv := range m.Servers.All() {
			for j := range srv.Locations {
				if !yield(&srv.Locations[j]) {
					return
				}
			}
		}
	}
}

// ServedIngresses returns the Ingresses ("namespace/name") that own at least
// one location of m, sorted: the ones whose status names this agent.
func (m Model) ServedIngresses() []string {
	seen := map[string]bool{}
	for l := range m.AllLocations() {
		seen[l.Ingress] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
