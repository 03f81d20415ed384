package model

import (
	"net"
	"strconv"
)

// The Gateway API front-end's part of the Model: the listeners nginx
// serves Gateways on, the fields of a route location only HTTPRoutes set,
// and the status Build found. The processor that fills them (gateway.go)
// writes into the same Builder as the Ingress processor.
//
// Each Gateway has an address of its own (spec.addresses, or one from the
// pool), so a request's local address:port says which Gateway it came in
// on: that pair is the route's Front, and the Lua router looks a request's
// route up under FrontKey(front, host). An Ingress route has no front, so
// both front-ends share one route table, one push and one router without
// ever seeing each other's hosts.

// GatewayControllerName is the default controllerName of the
// GatewayClasses restysync serves (--gateway-controller-name).
const GatewayControllerName = "restysync.io/gateway-controller"

// Listener is one address:port nginx listens on for Gateways: render
// writes one server block for it, and the router looks its requests up
// under Front.
type Listener struct {
	Address string `json:"address"` // an IP address
	Port    int32  `json:"port"`
	// HTTPS terminates TLS: the certificate is picked by SNI among the
	// Certificates whose Hosts hold FrontKey(Front, name).
	HTTPS bool `json:"https,omitempty"`
	// Front is the listener's route key prefix (FrontName).
	Front string `json:"front"`
	// GRPC: the front serves GRPCRoutes and no HTTPRoute: nginx speaks
	// HTTP/2 to clients on it (h2c on a plaintext port) and gRPC to the
	// backends (grpcroute.go says why a front is one or the other).
	GRPC bool `json:"grpc,omitempty"`
	// ClientTLS: an HTTPS front checks client certificates with these
	// (the Gateway's spec.tls.frontend for the port; CAFile, Verify "on"
	// or "optional_no_ca" and Depth only); nil: it asks for none.
	ClientTLS *ClientTLS `json:"client_tls,omitempty"`
	// BackendCertFile and BackendKeyFile are the Gateway's client
	// certificate to TLS backends (spec.tls.backend), files under the
	// shared dir (Model.AuthFiles); "" for none.
	BackendCertFile string `json:"backend_cert_file,omitempty"`
	BackendKeyFile  string `json:"backend_key_file,omitempty"`
}

// FrontName is the Front of the listener on address:port.
func FrontName(address string, port int32) string {
	return net.JoinHostPort(address, strconv.Itoa(int(port)))
}

// FrontKey is the key of host's route (or certificate) on front: host
// itself without a front (an Ingress's), else front, a space and host
// (no host name holds a space). The default route of a front is
// FrontKey(front, "_"), its default certificate FrontKey(front, "*").
func FrontKey(front, host string) string {
	if front == "" {
		return host
	}
	return front + " " + host
}

// RouteRule is what an HTTPRoute rule adds to a RouteLocation (its Rule).
// A Route whose Ordered is set holds its locations in the spec's
// precedence (exact path, longest prefix, regex; then method, most header
// matches, most query matches, the oldest route, its namespace/name, the
// rule's order): the router takes the first location whose path and
// matches all hold.
type RouteRule struct {
	// CaseSensitive: a Regex Path matches case-sensitively.
	CaseSensitive bool `json:"case_sensitive,omitempty"`
	// Method, Headers and Query must hold besides the path.
	Method  string       `json:"method,omitempty"`
	Headers []ValueMatch `json:"headers,omitempty"`
	Query   []ValueMatch `json:"query,omitempty"`
	// RequestHeaders and ResponseHeaders are edited on the way; Redirect
	// answers by itself; Rewrite changes what the backend is sent.
	RequestHeaders  *HeaderChanges `json:"request_headers,omitempty"`
	ResponseHeaders *HeaderChanges `json:"response_headers,omitempty"`
	Redirect        *Redirect      `json:"redirect,omitempty"`
	Rewrite         *Rewrite       `json:"rewrite,omitempty"`
	// Backends: the request goes to one of them by weight, in place of
	// the location's Backend; Status answers by itself (500 for a rule
	// with no usable backend).
	Backends []WeightedBackend `json:"backends,omitempty"`
	Status   int               `json:"status,omitempty"`
	// TimeoutMS is the smaller of the rule's timeouts.request and
	// timeouts.backendRequest, in milliseconds (0: neither, or "0s"):
	// the balancer bounds each upstream phase of the request by it
	// (connect, send, each read), in place of the proxy timeouts.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// CORS answers preflight requests and adds the Access-Control-*
	// headers to the answers of allowed origins.
	CORS *RouteCORS `json:"cors,omitempty"`
	// Retry tries a request again (HTTPRouteRetry): nil keeps the
	// balancer's own tries.
	Retry *RouteRetry `json:"retry,omitempty"`
	// Mirrors are the rule's RequestMirror filters: a copy of the request
	// as its backend gets it goes to each, whose answer is ignored.
	Mirrors []RouteMirror `json:"mirrors,omitempty"`
	// Route is the owner ("HTTPRoute namespace/name"), for logs and
	// /debug.
	Route string `json:"route,omitempty"`
}

// ValueMatch is one header or query parameter condition: the request's
// value of Name equals Value, or matches it as a regular expression
// (PCRE, anchored at neither end, case-sensitive) when Regex. Header
// names match case-insensitively, query parameter names exactly.
type ValueMatch struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Regex bool   `json:"regex,omitempty"`
}

// HeaderChanges are a RequestHeaderModifier's or ResponseHeaderModifier's
// edits, applied in the order Set, Add, Remove.
type HeaderChanges struct {
	Set    []Header `json:"set,omitempty"`
	Add    []Header `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// Header is one header name and value.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Redirect is a RequestRedirect filter: the location answers Status with
// a Location built from the request, each field that is set replacing its
// part. Port 0 keeps the request's port (or drops it when Scheme changes
// the default port, as the spec says). Path replaces the whole path, or
// only the matched prefix (MatchedPrefix) when ReplacePrefix.
type Redirect struct {
	Scheme        string `json:"scheme,omitempty"`
	Host          string `json:"host,omitempty"`
	Port          int32  `json:"port,omitempty"`
	Path          string `json:"path,omitempty"`
	ReplacePrefix bool   `json:"replace_prefix,omitempty"`
	MatchedPrefix string `json:"matched_prefix,omitempty"`
	Status        int    `json:"status"`
}

// Rewrite is a URLRewrite filter: the Host header and the path sent to
// the backend, as Redirect's Host and Path (an empty field keeps the
// request's).
type Rewrite struct {
	Host          string `json:"host,omitempty"`
	Path          string `json:"path,omitempty"`
	ReplacePrefix bool   `json:"replace_prefix,omitempty"`
	MatchedPrefix string `json:"matched_prefix,omitempty"`
}

// RouteCORS is a CORS filter (an HTTPRoute rule's). AllowOrigins are "*" (any) or
// scheme://host[:port] in lower case, whose host may start with "*"
// (any name ending in the rest, as "https://*.example.com"); AllowMethods
// and AllowHeaders may be ["*"] (the request's are echoed). MaxAge is in
// seconds (5 unless set).
type RouteCORS struct {
	AllowOrigins     []string `json:"allow_origins,omitempty"`
	AllowMethods     []string `json:"allow_methods,omitempty"`
	AllowHeaders     []string `json:"allow_headers,omitempty"`
	ExposeHeaders    []string `json:"expose_headers,omitempty"`
	AllowCredentials bool     `json:"allow_credentials,omitempty"`
	MaxAge           int32    `json:"max_age"`
}

// RouteMirror is one RequestMirror filter: Numerator of every
// Denominator requests (each request drawn on its own) are copied to
// Backend, a backend of the model like a rule's. Numerator equals
// Denominator for every request; a mirror of none is left out.
type RouteMirror struct {
	Backend     string `json:"backend"`
	Numerator   int32  `json:"numerator"`
	Denominator int32  `json:"denominator"`
}

// WeightedBackend is one backendRef of a rule: a request goes to one of
// the rule's by weight. Backend "" is a ref that cannot be used (a
// missing Service or port, a refused cross-namespace ref): its share
// answers 500, as the spec says.
type WeightedBackend struct {
	Backend string `json:"backend,omitempty"`
	Weight  int32  `json:"weight"`
	// RequestHeaders are the backendRef's RequestHeaderModifier, applied
	// after the rule's when this share is picked.
	RequestHeaders *HeaderChanges `json:"request_headers,omitempty"`
	// TLS is the BackendTLS (its Name) the share is proxied through, ""
	// for plain HTTP (backendtls.go).
	TLS string `json:"tls,omitempty"`
}

// GatewayAPIStatus is what Build found about the Gateway API objects it
// read: the status the leader writes (conditions without times; the
// writer sets observedGeneration from Generation and keeps a condition's
// lastTransitionTime while its status holds), and what inspect shows.
// Programmed here means the model serves it; the writer says Programmed
// only once nginx confirmed the config and routes that serve it.
type GatewayAPIStatus struct {
	Classes  []GatewayClassStatus `json:"classes,omitempty"`
	Gateways []GatewayStatus      `json:"gateways,omitempty"`
	// Routes are sorted by namespace, name and kind. A List of pointers,
	// as Model.Servers: a model one route apart from the last shares all
	// but a chunk of the last one's list (Incremental: editedList), and a
	// status a model holds is never changed after the build. Written as
	// JSON as the slice of them, none left out.
	Routes List[*RouteStatus] `json:"routes,omitzero"`
	// ListenerSets are those whose parentRef names one of our Gateways,
	// each as a Gateway's status without addresses and
	// attachedListenerSets.
	ListenerSets []GatewayStatus `json:"listener_sets,omitempty"`
	// Services are the Services the leader keeps for our accepted
	// Gateways (Snapshot.GatewayServices; gatewayservice.go).
	Services []GatewayService `json:"services,omitempty"`
}

// Condition is one status condition as the spec names it.
type Condition struct {
	Type    string `json:"type"`
	Status  bool   `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// GatewayClassStatus is one of our GatewayClasses' status.
type GatewayClassStatus struct {
	Name              string      `json:"name"`
	Generation        int64       `json:"generation"`
	Conditions        []Condition `json:"conditions"`
	SupportedFeatures []string    `json:"supported_features,omitempty"`
}

// GatewayStatus is one of our Gateways' status, or a ListenerSet's.
type GatewayStatus struct {
	Namespace  string           `json:"namespace"`
	Name       string           `json:"name"`
	Generation int64            `json:"generation"`
	Addresses  []string         `json:"addresses,omitempty"` // IP addresses
	Conditions []Condition      `json:"conditions"`
	Listeners  []ListenerStatus `json:"listeners,omitempty"`
	// AttachedListenerSets counts the accepted ListenerSets of a Gateway
	// whose spec.allowedListeners is set (nil otherwise).
	AttachedListenerSets *int32 `json:"attached_listener_sets,omitempty"`
}

// ListenerStatus is one listener's status within its Gateway's.
type ListenerStatus struct {
	Name           string      `json:"name"`
	SupportedKinds []string    `json:"supported_kinds"` // route kinds of group gateway.networking.k8s.io
	AttachedRoutes int32       `json:"attached_routes"`
	Conditions     []Condition `json:"conditions"`
}

// RouteStatus is one route's status: one entry per parentRef that names
// one of our Gateways (only those are ours to write).
type RouteStatus struct {
	Kind       string              `json:"kind"` // "HTTPRoute"
	Namespace  string              `json:"namespace"`
	Name       string              `json:"name"`
	Generation int64               `json:"generation"`
	Parents    []RouteParentStatus `json:"parents"`
}

// RouteParentStatus is a route's status for one parentRef.
type RouteParentStatus struct {
	// The parentRef as written (Namespace filled in from the route's);
	// Kind is "ListenerSet" for one, "" for a Gateway.
	Kind        string      `json:"kind,omitempty"`
	Namespace   string      `json:"namespace"`
	Name        string      `json:"name"`
	SectionName string      `json:"section_name,omitempty"`
	Port        int32       `json:"port,omitempty"`
	Conditions  []Condition `json:"conditions"`
}

// RouteRetry is a rule's retry (HTTPRouteRetry, experimental channel): a
// request is sent up to Attempts+1 times, to the next endpoint when there
// is one, again after a connection error or a timeout and after an answer
// whose status is one of Codes (sorted, each one of RetryCodes). nginx
// decides on a status by the location's proxy_next_upstream, so a rule
// with Codes is served in the Gateway server's named location of those
// codes (RetryLocation), one per distinct set; Attempts is per request
// data the balancer reads.
type RouteRetry struct {
	Attempts int   `json:"attempts"`
	Codes    []int `json:"codes,omitempty"`
}

// RetryCodes are the answers nginx can retry on (proxy_next_upstream's
// http_403 ... http_504), in order.
var RetryCodes = []int{403, 404, 429, 500, 502, 503, 504}

// RetryLocation is the named location of a Gateway server whose
// proxy_next_upstream names codes: "@restysync_retry_500_503"; "" for
// none (the server's own location retries errors and timeouts).
// lua/restysync/router.lua builds the same name from a rule's codes.
func RetryLocation(codes []int) string {
	if len(codes) == 0 {
		return ""
	}
	name := "@restysync_retry"
	for _, c := range codes {
		name += "_" + strconv.Itoa(c)
	}
	return name
}
