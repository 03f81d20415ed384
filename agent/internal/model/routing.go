package model

import "reflect"

// Routing in Lua.
//
// A reload costs nginx time that grows with the config (about a second at
// 1,000 server blocks on Debian's lua-nginx-module, which builds an OpenSSL
// context per server and location), and a new or changed Ingress is the
// most common structural change. So every host is routed by Lua: the
// default server asks it for the request's host and path (render.Routes),
// and a location that needs nginx directives of its own goes on to a
// profile shared by every location with the same settings (see package
// render). TLS is no reason for a server block either: the default server
// listens for HTTPS too, with Lua's certificates by SNI, and Lua answers
// the HTTPS redirect and sets the proxy timeouts per request.

// Plain reports whether loc needs only the balancer and, perhaps, the
// HTTPS redirect and proxy timeouts, which Lua applies too: the router
// serves it with no profile.
func (loc Location) Plain() bool {
	proxy := loc.ProxySettings()
	timeouts := ProxySettings{ConnectTimeout: proxy.ConnectTimeout, SendTimeout: proxy.SendTimeout, ReadTimeout: proxy.ReadTimeout,
		PreserveTrailingSlash: proxy.PreserveTrailingSlash, FromToWWWRedirect: proxy.FromToWWWRedirect}
	return loc.Protocol == ProtocolHTTP && proxy == timeouts && loc.AccessSettings() == (AccessSettings{}) &&
		loc.SnippetSettings() == (SnippetSettings{}) && !loc.FixedSettings().Set
}

// Route is what Lua holds for one host: its locations in nginx's terms.
// Lua matches a request path as nginx matches locations: an exact location
// first, then the longest prefix is remembered, then the regexes are tried
// in order and the first that matches wins, else the longest prefix; no
// match is a 404.
type Route struct {
	// Host is an exact host, a wildcard "*.example.com" (one label), or
	// "_" for the default server's locations (render.DefaultRoute).
	Host      string
	Locations []RouteLocation
	// Listener is the hostname of the Gateway listener whose route this
	// is ("" for a listener without one, and an Ingress's): on HTTPS,
	// the router answers 421 when the TLS server name's route is another
	// listener's than the Host's (a misdirected request).
	Listener string `json:"listener,omitempty"`
	// HTTPS says the host has TLS of its own (Server.HTTPS). Lua routes
	// HTTPS requests by the host's locations either way (one without TLS
	// is served with the default certificate, as in ingress-nginx); the
	// HTTPS redirect is each location's SSLRedirect. It is held for the
	// agent's and /debug's view of the routes. It is beside Ordered: 64
	// bytes a route, not 72 (render's list and apply's hold one a host).
	HTTPS bool
	// Ordered: the locations are in the Gateway API's precedence, and the
	// first whose path and matches hold wins (gatewayapi.go); an
	// HTTPRoute's route sets it.
	Ordered bool `json:"ordered,omitempty"`
}

// Equal says l and o route alike (RouteLocation is compared by value,
// its options and Rule too).
func (l RouteLocation) Equal(o RouteLocation) bool {
	a, b := l.Rule, o.Rule
	if l.Options() != o.Options() {
		return false
	}
	l.Rule, o.Rule, l.RouteOptions, o.RouteOptions = nil, nil, nil, nil
	return l == o && (a == b || a != nil && b != nil && reflect.DeepEqual(*a, *b))
}

// RouteLocation is one nginx location: "= Path" when Exact, else the prefix
// Path (a Prefix "/p" of the Ingress is "= /p" and "/p/").
//
// What most locations leave empty is in RouteOptions, nil for none (read
// it with Options): at 50,000 Ingresses a location of every field was
// 9.6 MB (184 bytes, the 192-byte size class), and is 4.8 MB (88 bytes,
// the 96-byte class) without options; the bools side by side. The options are
// embedded so that the JSON Lua gets is the same, fields and values; the
// order of its fields is this struct's.
type RouteLocation struct {
	Path  string `json:"path"`
	Exact bool   `json:"exact,omitempty"`
	// Regex: Path is a regular expression anchored with "^", matched
	// case-insensitively (use-regex, as nginx's "location ~*").
	Regex bool `json:"regex,omitempty"`
	// NoRegex: a prefix that, when it is the longest one matched, keeps
	// the regexes from being tried (nginx's "location ^~"; a
	// server-snippet's PathPriorityPrefix).
	NoRegex bool `json:"noregex,omitempty"`
	// SSLRedirect is Location.SSLRedirect: a request that came over plain
	// HTTP gets a 308 to the same URL over HTTPS.
	SSLRedirect bool `json:"ssl_redirect,omitempty"`
	// PreserveTrailingSlash keeps the URI's trailing "/" in the HTTPS
	// redirect (ProxySettings.PreserveTrailingSlash); Lua drops it
	// otherwise, as ingress-nginx does.
	PreserveTrailingSlash bool `json:"preserve_trailing_slash,omitempty"`
	// LoopGuard: the location sends auth or mirror requests to a URL a
	// tenant chose (auth-url, global-auth-url, mirror-target), so Lua
	// answers 508 to a request that came back into nginx through such a
	// request (lua/restysync/loop.lua).
	LoopGuard bool `json:"loop_guard,omitempty"`
	// Backend is "" for a location that answers by itself (a
	// server-snippet's: Location.Fixed), which always has a Profile.
	Backend string `json:"backend,omitempty"`
	// Profile is the named location of the location's directives, "" when
	// the router serves it (Location.Plain).
	Profile string `json:"profile,omitempty"`
	// RouteOptions are the location's other settings, nil when all are
	// zero. Its fields are promoted, but reading one through a nil
	// pointer panics: read Options(), and set a new RouteOptions (a copy
	// of a location shares the pointer).
	*RouteOptions
	// Metric are the request metrics' labels of the location (render's
	// RequestMetrics, lua/restysync/requests.lua): namespace, owner name
	// (Ingress or route), service, path and host, joined by "\x01"; ""
	// with the request metrics off. Every location has its own when they
	// are on: here, not in RouteOptions, it costs a location 16 bytes
	// (88, the 96-byte class), where RouteOptions cost 96 more of each
	// (at 50,000 Ingresses, TestHeapAtScale -heap.metrics: live heap after
	// the first sync 180.0 → 176.0 MB).
	// After RouteOptions, so the order of the JSON's fields is as it was.
	Metric string `json:"metric,omitempty"`

	// Rule is what an HTTPRoute rule adds (gatewayapi.go); nil on an
	// Ingress's location.
	Rule *RouteRule `json:"rule,omitempty"`
}

// RouteOptions are the settings of a RouteLocation that most locations
// leave empty.
type RouteOptions struct {
	// Ingress is the owner, sent when its rate limits count per Ingress.
	Ingress string `json:"ingress,omitempty"`
	// AuthFile is the htpasswd file of its basic auth, under the shared dir.
	AuthFile string `json:"auth_file,omitempty"`
	// MaxBody is its client_max_body_size in bytes when it is less than
	// the router location's (0: the router's holds).
	MaxBody int64 `json:"max_body,omitempty"`
	// ConnectTimeout, SendTimeout and ReadTimeout are those of
	// Location.Proxy, in seconds; 0 keeps the default server's.
	ConnectTimeout int `json:"connect_timeout,omitempty"`
	SendTimeout    int `json:"send_timeout,omitempty"`
	ReadTimeout    int `json:"read_timeout,omitempty"`
	// RedirectHost answers every request with a 308 to the same URI on
	// this host (Server.WWWRedirect: from-to-www-redirect), keeping the
	// scheme and the port the client used.
	RedirectHost string `json:"redirect_host,omitempty"`
}

// Options are l's options; the zero RouteOptions for none.
func (l RouteLocation) Options() RouteOptions {
	if l.RouteOptions == nil {
		return RouteOptions{}
	}
	return *l.RouteOptions
}

// WithOptions returns l with o as its options (none when o is zero),
// leaving the options l had, which copies of l may share, as they were.
func (l RouteLocation) WithOptions(o RouteOptions) RouteLocation {
	l.RouteOptions = nil
	if o != (RouteOptions{}) {
		l.RouteOptions = &o
	}
	return l
}
