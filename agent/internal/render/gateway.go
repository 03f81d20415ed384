package render

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
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

// backendTLSNames returns the names of the backend TLS locations the
// servers hold (Config.BackendTLS).
func backendTLSNames(servers []gatewayServerView) []string {
	var names []string // nil for none, as ReadBack gives
	if len(servers) > 0 {
		for _, t := range servers[0].BackendTLS {
			names = append(names, t.Name)
		}
	}
	return names
}

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
		tls, err := backendTLSViews(m, l.BackendCertFile, l.BackendKeyFile, l.GRPC)
		if err != nil {
			return nil, fmt.Errorf("Gateway listener %s: %w", l.Front, err)
		}
		out = append(out, gatewayServerView{Listen: ap.String(), HTTPS: l.HTTPS, Front: l.Front, GRPC: l.GRPC, BackendTLS: tls})
	}
	return out, nil
}

// gatewayRoutes returns m.GatewayRoutes, the Gateway API's routes, checked: each
// host is a front and a host name, present once, and no location has a
// profile, which the Gateway servers do not hold. Lua checks the rest
// of what it is pushed.
func gatewayRoutes(m model.Model, hosts map[string]bool) ([]model.Route, error) {
	for _, r := range m.GatewayRoutes {
		front, host, ok := strings.Cut(r.Host, " ")
		if !ok || front == "" || host == "" {
			return nil, fmt.Errorf("Gateway route %q: want FrontKey(front, host)", r.Host)
		}
		if hosts[r.Host] {
			return nil, fmt.Errorf("Gateway route %q appears twice", r.Host)
		}
		hosts[r.Host] = true
		for i, l := range r.Locations {
			if l.Profile != "" {
				return nil, fmt.Errorf("Gateway route %q: location %d (%s) has a profile; Gateway servers hold none", r.Host, i, l.Path)
			}
		}
	}
	return m.GatewayRoutes, nil
}
