package model

import "strings"

// Servers routed in Lua.
//
// A reload costs nginx time that grows with the config (about a second at
// 1,000 hosts on Debian's lua-nginx-module, which builds an OpenSSL context
// per server and location), while a new Ingress is the most common
// structural change. So a host whose locations need nothing but the
// balancer is left out of nginx.conf: the default server asks Lua, which
// holds the host's paths (pushed like backends), and a new such Ingress is
// a push, not a reload. A host that needs any nginx directive of its own
// (annotations of access control, proxying or rewriting; aliases; a
// wildcard; regex paths) keeps its server block. TLS is no reason: the
// default server listens for HTTPS too, with Lua's certificates by SNI,
// and Lua answers the HTTPS redirect. Nor are the proxy timeouts, among
// the most common annotations: the balancer sets them per request.

// RoutesInLua reports whether m leaves its routable servers (RoutedInLua)
// to Lua. The default server answers for them, so it must hold nothing
// but a plain "/" (or no location): a host-less rule's location would
// catch the routed hosts' requests before Lua sees them.
func (m Model) RoutesInLua() bool {
	d := m.Default
	if len(d.Aliases) > 0 {
		return false
	}
	switch len(d.Locations) {
	case 0:
		return true
	case 1:
		loc := d.Locations[0]
		return loc.Path == "/" && loc.PathType == PathPrefix && plainLocation(loc) && loc.Proxy == (ProxySettings{}) && !loc.SSLRedirect
	}
	return false
}

// RoutedInLua reports whether s can be served by Lua's routing in the
// default server, with no server block of its own: an exact host without
// aliases whose locations are Exact or Prefix paths to HTTP backends with
// no per-location nginx settings but the HTTPS redirect and the proxy
// timeouts. Whether it is
// depends on m.RoutesInLua too.
func (s Server) RoutedInLua() bool {
	if s.Host == "" || strings.HasPrefix(s.Host, "*.") || len(s.Aliases) > 0 || len(s.Locations) == 0 {
		return false
	}
	for _, loc := range s.Locations {
		if !plainLocation(loc) {
			return false
		}
	}
	return true
}

// plainLocation says whether loc needs only the balancer and, perhaps, the
// HTTPS redirect and proxy timeouts, which Lua applies too.
func plainLocation(loc Location) bool {
	timeouts := ProxySettings{ConnectTimeout: loc.Proxy.ConnectTimeout, SendTimeout: loc.Proxy.SendTimeout, ReadTimeout: loc.Proxy.ReadTimeout}
	return (loc.PathType == PathExact || loc.PathType == PathPrefix) &&
		loc.Protocol == ProtocolHTTP &&
		loc.Proxy == timeouts && loc.Access == (AccessSettings{})
}

// RenderedServers returns the servers nginx.conf holds a server block for:
// all of m.Servers, or, when m.RoutesInLua, those not RoutedInLua. It
// returns m.Servers itself when no server is left out.
func (m Model) RenderedServers() []Server {
	if !m.RoutesInLua() {
		return m.Servers
	}
	first := -1
	for i, s := range m.Servers {
		if s.RoutedInLua() {
			first = i
			break
		}
	}
	if first < 0 {
		return m.Servers
	}
	out := make([]Server, first, len(m.Servers))
	copy(out, m.Servers[:first])
	for _, s := range m.Servers[first:] {
		if !s.RoutedInLua() {
			out = append(out, s)
		}
	}
	return out
}

// LuaRoutedServers returns the servers Lua routes, in Host order: none
// unless m.RoutesInLua.
func (m Model) LuaRoutedServers() []Server {
	if !m.RoutesInLua() {
		return nil
	}
	var out []Server
	for _, s := range m.Servers {
		if s.RoutedInLua() {
			out = append(out, s)
		}
	}
	return out
}

// Route is what Lua holds for one host it routes: the locations nginx
// would have for it, in nginx's terms. Lua matches a request path as nginx
// does: an Exact location first, then the longest prefix; no match is a 404.
type Route struct {
	Host string
	// HTTPS says the host is served over HTTPS too (Server.HTTPS); else an
	// HTTPS request for it gets the default server's answer, as a server
	// block without TLS would.
	HTTPS     bool
	Locations []RouteLocation
}

// RouteLocation is one nginx location: "= Path" when Exact, else the prefix
// Path (a Prefix "/p" of the Ingress is "= /p" and "/p/").
type RouteLocation struct {
	Path    string `json:"path"`
	Exact   bool   `json:"exact,omitempty"`
	Backend string `json:"backend"`
	// SSLRedirect is Location.SSLRedirect: a request that came over plain
	// HTTP gets a 308 to the same URL over HTTPS.
	SSLRedirect bool `json:"ssl_redirect,omitempty"`
	// ConnectTimeout, SendTimeout and ReadTimeout are those of
	// Location.Proxy, in seconds; 0 keeps the default server's.
	ConnectTimeout int `json:"connect_timeout,omitempty"`
	SendTimeout    int `json:"send_timeout,omitempty"`
	ReadTimeout    int `json:"read_timeout,omitempty"`
}
