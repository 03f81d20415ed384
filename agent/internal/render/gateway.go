package render

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// Gateway listeners (model.Listener): one server block per address:port,
// nothing else. Each holds the front in $restysync_front and one location
// whose access handler is restysync.router.route_front: the request's
// route is FrontKey(front, host), so the Gateway API's routes are pushed
// to Lua like an Ingress's and a new HTTPRoute never reloads nginx; only
// a listener that comes or goes does. The Gateway server calls its own
// handler rather than the default server's route(): an Ingress request
// then pays nothing for fronts (no variable read, no branch), which B3
// measures. A Gateway location never has a profile (the Gateway API has
// nothing a profile holds), so no profile is repeated in these servers.
// What nginx decides by a location's directives alone, the status codes
// a retry is for, gets a named location per distinct set in every
// Gateway server (gatewayRetryView), shared by every rule of that set.
//
// RequestMirror (model.RouteRule.Mirrors) is served by nginx's mirror
// module from locations every HTTP Gateway server holds whatever its
// routes: named locations @restysync_mirror_1 to _16 with that many
// "mirror" directives, and one internal location the copies enter, where
// Lua picks each copy's backend from what the router drew for the request
// (lua/restysync/router.lua). Mirrors are thus per-route data in Lua, so
// a route that adds, changes or drops one is a push and never a reload;
// nginx's own subrequests (rather than copies Lua sends itself) keep the
// body, the balancer, keepalive and the loop guard one code path, and a
// request that mirrors nothing pays nothing.

// gatewayServerView is one Gateway listener's server block.
type gatewayServerView struct {
	Listen string // "address:port"
	HTTPS  bool
	// Front is the listener's route key prefix (model.FrontName): the
	// template writes it through Quote only.
	Front string
	// GRPC: the front serves GRPCRoutes only (model.Listener.GRPC): HTTP/2
	// to clients, on a plaintext port too (h2c with prior knowledge; before
	// nginx 1.25.1 nothing else there), and grpc_pass to the backends.
	GRPC bool
	// AccessLog: the router sets $restysync_backend for the access log
	// (the HTTP settings', which render.go copies here).
	AccessLog bool
	// Mirrors are the named locations of RequestMirror, none on a gRPC
	// front (GRPCRoutes do not mirror); MirrorLocation the internal one
	// their copies enter.
	Mirrors        []gatewayMirrorView
	MirrorLocation string
	// ClientTLS: the server asks for client certificates and checks them
	// against the CA file (model.Listener.ClientTLS); nil: it does not.
	ClientTLS *gatewayClientTLSView
	// BackendTLS are the named locations of TLS to backends
	// (model.BackendTLS), each with this server's client certificate.
	BackendTLS []backendTLSView
}

// backendTLSView is one model.BackendTLS in one Gateway server: the
// router jumps to Name for a share proxied over TLS; nginx checks the
// backend's certificate against CAFile and ServerName, and presents
// CertFile (the Gateway's client certificate, "" for none). Upstream is
// an upstream block of its own for each (settings, client certificate),
// so that no idle connection made for one serves another.
type backendTLSView struct {
	Name, CAFile, ServerName, CertFile, KeyFile, Upstream string
	// GRPC: the server speaks gRPC to its backends (grpc_pass grpcs://).
	GRPC bool
}

// backendTLSName is the shape of a model.BackendTLS's Name, which the
// template writes unquoted (a named location cannot be quoted).
var backendTLSName = regexp.MustCompile(`^` + model.BackendTLSPrefix + `[0-9a-f]{24}$`)

// backendTLSViews returns the named locations of m.BackendTLS for a
// server whose Gateway presents certFile and keyFile (gRPC to the
// backends when grpc), checked.
func backendTLSViews(m model.Model, certFile, keyFile string, grpc bool) ([]backendTLSView, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("Gateway listener: a client certificate %q without its key %q, or the other way", certFile, keyFile)
	}
	out := make([]backendTLSView, 0, len(m.BackendTLS))
	for _, t := range m.BackendTLS {
		if !backendTLSName.MatchString(t.Name) {
			return nil, fmt.Errorf("backend TLS %q: not a name render gives", t.Name)
		}
		for _, v := range []string{t.CAFile, t.ServerName, certFile, keyFile} {
			if _, err := Quote(v); err != nil {
				return nil, fmt.Errorf("backend TLS %s: %w", t.Name, err)
			}
		}
		if t.CAFile == "" || t.ServerName == "" {
			return nil, fmt.Errorf("backend TLS %s: no CA file or no server name", t.Name)
		}
		upstream := hashName(defaultUpstream+"_tls_", t.Name, certFile, keyFile)
		out = append(out, backendTLSView{Name: t.Name, CAFile: t.CAFile, ServerName: t.ServerName, CertFile: certFile, KeyFile: keyFile, Upstream: upstream, GRPC: grpc})
	}
	return out, nil
}

// gatewayTLSUpstreams returns the upstream blocks of the servers' backend
// TLS locations that upstreams lacks, with those, sorted.
func gatewayTLSUpstreams(servers []gatewayServerView, upstreams []upstreamView) []upstreamView {
	for _, s := range servers {
		for _, t := range s.BackendTLS {
			if !slices.ContainsFunc(upstreams, func(u upstreamView) bool { return u.Name == t.Upstream }) {
				upstreams = append(upstreams, upstreamView{Name: t.Upstream})
			}
		}
	}
	slices.SortFunc(upstreams, func(a, b upstreamView) int { return strings.Compare(a.Name, b.Name) })
	return upstreams
}

// gatewayBackendTLS returns the backend TLS locations every one of the
// servers holds: the first one's (they differ in client certificate
// only); nil for none.
func gatewayBackendTLS(servers []gatewayServerView) []backendTLSView {
	if len(servers) == 0 {
		return nil
	}
	return servers[0].BackendTLS
}

// backendTLSNames returns the names of locations (Config.BackendTLS).
func backendTLSNames(locations []backendTLSView) []string {
	var names []string // nil for none, as ReadBack gives
	for _, t := range locations {
		names = append(names, t.Name)
	}
	return names
}

// gatewayClientTLSView is how a Gateway server checks client
// certificates. Verify "on" refuses a request without a valid one by
// closing the connection (error_page 495 496 to a location that returns
// 444): the spec's AllowValidOnly accepts no connection from such a
// client, where nginx would answer 400. "optional_no_ca" asks for one and
// lets every client through (AllowInsecureFallback).
type gatewayClientTLSView struct {
	CAFile string
	Verify string
	Depth  int
}

// gatewayClientTLS checks a listener's client certificate settings.
func gatewayClientTLS(l model.Listener) (*gatewayClientTLSView, error) {
	c := l.ClientTLS
	if c == nil {
		return nil, nil
	}
	switch {
	case !l.HTTPS:
		return nil, fmt.Errorf("Gateway listener %s: client certificates on a plaintext port", l.Front)
	case c.Verify != "on" && c.Verify != "optional_no_ca", c.Depth < 1 || c.Depth > 100:
		return nil, fmt.Errorf("Gateway listener %s: client certificate settings %+v", l.Front, *c)
	case c.CAFile == "", c.CRLFile != "", c.ErrorPage != "":
		return nil, fmt.Errorf("Gateway listener %s: client certificates need a CA file and take no CRL or error page", l.Front)
	}
	if _, err := Quote(c.CAFile); err != nil {
		return nil, fmt.Errorf("Gateway listener %s: %w", l.Front, err)
	}
	return &gatewayClientTLSView{CAFile: c.CAFile, Verify: c.Verify, Depth: c.Depth}, nil
}

// gatewayMirrorView is one named location that sends a request's copies.
type gatewayMirrorView struct {
	Name   string   // "@restysync_mirror_<n>"
	Copies []string // n URIs of the internal location, "_restysync_mirror/<i>"
}

// maxGatewayMirrors is how many mirrors a rule may have: Lua's
// MAX_MIRRORS (lua/restysync/gateway.lua), and the model's filters per
// rule.
const maxGatewayMirrors = 16

// gatewayMirrorLocation is the internal location mirrors' copies enter.
// Its URI does not start with "/", as no client's request does: no route
// of a tenant can ever be taken by it.
const gatewayMirrorLocation = "_restysync_mirror/"

// gatewayMirrors are the named locations of every HTTP Gateway server.
var gatewayMirrors = func() []gatewayMirrorView {
	out := make([]gatewayMirrorView, maxGatewayMirrors)
	for n := range out {
		out[n].Name = fmt.Sprintf("@restysync_mirror_%d", n+1)
		for i := range n + 1 {
			out[n].Copies = append(out[n].Copies, fmt.Sprintf("%s%d", gatewayMirrorLocation, i+1))
		}
	}
	return out
}()

// gatewayServers returns the server blocks of m's listeners, in the
// model's order, or why one cannot be served.
func gatewayServers(m model.Model, s Settings) ([]gatewayServerView, error) {
	if len(m.Listeners) == 0 {
		return nil, nil
	}
	own := make(map[netip.AddrPort]string)
	if s.ListenAddress != "" {
		a := netip.MustParseAddr(s.ListenAddress) // checkSettings checked it
		own[netip.AddrPortFrom(a, uint16(s.HTTPPort))] = "the HTTP port"
		own[netip.AddrPortFrom(a, uint16(s.HTTPSPort))] = "the HTTPS port"
		if s.StatusPort != 0 {
			own[netip.AddrPortFrom(a, uint16(s.StatusPort))] = "the status port"
		}
	}
	out := make([]gatewayServerView, 0, len(m.Listeners))
	seen := make(map[netip.AddrPort]bool, len(m.Listeners))
	for _, l := range m.Listeners {
		a, err := netip.ParseAddr(l.Address)
		if err != nil || a.Zone() != "" || a.String() != l.Address {
			return nil, fmt.Errorf("Gateway listener %q: want an IP address in its canonical form, without zone", l.Address)
		}
		if a.IsUnspecified() {
			return nil, fmt.Errorf("Gateway listener %s: the unspecified address is the default server's", l.Address)
		}
		if l.Port < 1 || l.Port > 65535 {
			return nil, fmt.Errorf("Gateway listener %s port %d: must be 1..65535", l.Address, l.Port)
		}
		if want := model.FrontName(l.Address, l.Port); l.Front != want {
			return nil, fmt.Errorf("Gateway listener %s: front %q, want %q", want, l.Front, want)
		}
		ap := netip.AddrPortFrom(a, uint16(l.Port))
		if seen[ap] {
			return nil, fmt.Errorf("Gateway listener %s appears twice", l.Front)
		}
		seen[ap] = true
		if what, taken := own[ap]; taken {
			return nil, fmt.Errorf("Gateway listener %s: is %s of the Ingress servers", l.Front, what)
		}
		if s.SSLPassthrough && int(l.Port) == s.HTTPSPort && (s.ListenAddress == "" || s.ListenAddress == l.Address) {
			return nil, fmt.Errorf("Gateway listener %s: the stream module holds port %d for TLS passthrough", l.Front, l.Port)
		}
		if _, err := Quote(l.Front); err != nil {
			return nil, fmt.Errorf("Gateway listener: %w", err)
		}
		clientTLS, err := gatewayClientTLS(l)
		if err != nil {
			return nil, err
		}
		backendTLS, err := backendTLSViews(m, l.BackendCertFile, l.BackendKeyFile, l.GRPC)
		if err != nil {
			return nil, fmt.Errorf("Gateway listener %s: %w", l.Front, err)
		}
		v := gatewayServerView{Listen: ap.String(), HTTPS: l.HTTPS, Front: l.Front, GRPC: l.GRPC, ClientTLS: clientTLS, BackendTLS: backendTLS}
		if !l.GRPC {
			v.Mirrors, v.MirrorLocation = gatewayMirrors, gatewayMirrorLocation
		}
		out = append(out, v)
	}
	return out, nil
}

// gatewayRoutes returns m.GatewayRoutes, the Gateway API's routes, checked: each
// host is a front and a host name, present once, and no location has a
// profile, which the Gateway servers do not hold. Lua checks the rest
// of what it is pushed.
func gatewayRoutes(m model.Model, hosts map[string]bool) ([]model.Route, error) {
	out := make([]model.Route, 0, m.GatewayRoutes.Len())
	for r := range m.GatewayRoutes.All() {
		if err := checkGatewayRoute(*r); err != nil {
			return nil, err
		}
		if hosts[r.Host] {
			return nil, fmt.Errorf("Gateway route %q appears twice", r.Host)
		}
		hosts[r.Host] = true
		out = append(out, *r)
	}
	return out, nil
}

// checkGatewayRoute is gatewayRoutes' check of one route, the "appears
// twice" aside.
func checkGatewayRoute(r model.Route) error {
	front, host, ok := strings.Cut(r.Host, " ")
	if !ok || front == "" || host == "" {
		return fmt.Errorf("Gateway route %q: want FrontKey(front, host)", r.Host)
	}
	for i, l := range r.Locations {
		if l.Profile != "" {
			return fmt.Errorf("Gateway route %q: location %d (%s) has a profile; Gateway servers hold none", r.Host, i, l.Path)
		}
	}
	return nil
}

// hasRetries says whether a location of r has retry codes, which name a
// location of nginx.conf (gatewayRetries).
func hasRetries(r model.Route) bool {
	for _, l := range r.Locations {
		if l.Rule != nil && l.Rule.Retry != nil && len(l.Rule.Retry.Codes) > 0 {
			return true
		}
	}
	return false
}

// gatewayRetryView is one named location of retry codes
// (model.RetryLocation): the Gateway server's location again, with
// proxy_next_upstream (or grpc_next_upstream) naming the codes too. The
// router jumps there for a rule with those codes (restysync.router
// .route_front), and routes the request again there: nginx decides on
// an answer's status by the location's directive, and ngx.ctx, which
// holds what the router found, does not survive the jump. A new set of
// codes is a reload; a route with a set nginx has is a push.
type gatewayRetryView struct {
	Location string // "@restysync_retry_500_503": digits and "_" only
	Next     string // "http_500 http_503"
}

// gatewayRetries returns the retry locations m's Gateway routes name,
// sorted by name, or why one cannot be served.
func gatewayRetries(m model.Model) ([]gatewayRetryView, error) {
	seen := map[string]bool{}
	var out []gatewayRetryView
	for r := range m.GatewayRoutes.All() {
		for _, l := range r.Locations {
			if l.Rule == nil || l.Rule.Retry == nil || len(l.Rule.Retry.Codes) == 0 {
				continue
			}
			codes := l.Rule.Retry.Codes
			name := model.RetryLocation(codes)
			if seen[name] {
				continue
			}
			if !slices.IsSorted(codes) {
				return nil, fmt.Errorf("Gateway route %q: retry codes %v: want them sorted", r.Host, codes)
			}
			view := gatewayRetryView{Location: name}
			for i, c := range codes {
				if !slices.Contains(model.RetryCodes, c) || i > 0 && codes[i-1] == c {
					return nil, fmt.Errorf("Gateway route %q: retry code %d: want each once, one of %v", r.Host, c, model.RetryCodes)
				}
				view.Next = strings.TrimSpace(view.Next + " http_" + strconv.Itoa(c))
			}
			seen[name] = true
			out = append(out, view)
		}
	}
	slices.SortFunc(out, func(a, b gatewayRetryView) int { return strings.Compare(a.Location, b.Location) })
	return out, nil
}
