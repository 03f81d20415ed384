package render

import (
	"fmt"
	"net/netip"
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
	// ClientTLS: the server asks for client certificates and checks them
	// against the CA file (model.Listener.ClientTLS); nil: it does not.
	ClientTLS *gatewayClientTLSView
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
		out = append(out, gatewayServerView{Listen: ap.String(), HTTPS: l.HTTPS, Front: l.Front, GRPC: l.GRPC, ClientTLS: clientTLS})
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
