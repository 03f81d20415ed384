package model

import (
	"slices"
	"strings"
)

// Hostnames of the Gateway API, and the routes of each listener's hosts.
//
// A Gateway wildcard "*.example.com" matches any number of labels in
// place of "*" ("a.example.com", "a.b.example.com"), never "example.com".
// The router looks a request up on its front by the exact host, then by
// "*." and each suffix of the host from the longest, then "_"; so the
// model emits, for each front, one route per host key that holds every
// location that serves that key's requests, and resolves listener
// isolation here: a request goes only to the routes of the most specific
// listener hostname that matches it.

// anyHost is the key of a route that serves every hostname of its front.
const anyHost = "_"

// wildcardMatches says whether the Gateway wildcard pattern "*.s" matches
// host, an exact name or a narrower wildcard.
func wildcardMatches(pattern, host string) bool {
	suffix, ok := strings.CutPrefix(pattern, "*")
	if !ok {
		return false
	}
	name := strings.TrimPrefix(host, "*")
	return strings.HasSuffix(name, suffix) && len(name) > len(suffix) || host != name && name == suffix
}

// intersectHostname returns the hostnames a request must carry to match
// both the listener's hostname ("" for any) and one of the route's, ""
// when none can.
func intersectHostname(listener, route string) string {
	switch {
	case listener == "" || listener == route:
		return route
	case wildcardMatches(listener, route):
		return route
	case wildcardMatches(route, listener):
		return listener
	}
	return ""
}

// intersectHostnames returns the hosts a route with hostnames serves on a
// listener with hostname listener, without duplicates; anyHost when both
// name none; nil when they do not intersect.
func intersectHostnames(listener string, hostnames []string) []string {
	if len(hostnames) == 0 {
		if listener == "" {
			return []string{anyHost}
		}
		return []string{listener}
	}
	var out []string
	for _, h := range hostnames {
		if host := intersectHostname(listener, h); host != "" && !slices.Contains(out, host) {
			out = append(out, host)
		}
	}
	return out
}

// covers says whether a route serving pattern (an exact name, a wildcard
// or anyHost) serves every request the router sends to key.
func covers(pattern, key string) bool {
	return pattern == anyHost || pattern == key || wildcardMatches(pattern, key)
}

// moreSpecific says whether listener hostname a is more specific than b:
// a name beats no name, an exact name beats a wildcard, a longer
// wildcard beats a shorter one.
func moreSpecific(a, b string) bool {
	switch {
	case a == "" || a == b:
		return false
	case b == "":
		return true
	}
	aWild, bWild := strings.HasPrefix(a, "*"), strings.HasPrefix(b, "*")
	if aWild != bWild {
		return !aWild
	}
	return len(a) > len(b)
}

// frontGroup is the listeners of one Gateway on one port: they share
// their fronts (one per address).
type frontGroup struct {
	gateway   *gatewayState
	port      int32
	https     bool
	listeners []*listenerState
	// attachments to those listeners, in route order.
	attachments []attachment
}

// emitRoutes builds the routes of every front from the attachments.
func (p *gatewayProcessor) emitRoutes() {
	var groups []*frontGroup
	find := func(g *gatewayState, port int32) *frontGroup {
		for _, fg := range groups {
			if fg.gateway == g && fg.port == port {
				return fg
			}
		}
		return nil
	}
	for _, g := range p.gateways {
		if !g.served() {
			continue
		}
		for _, l := range g.listeners {
			if !l.programmed() || l.stream() { // tlsroute.go's
				continue
			}
			fg := find(g, l.spec.Port)
			if fg == nil {
				fg = &frontGroup{gateway: g, port: l.spec.Port, https: l.https}
				groups = append(groups, fg)
			}
			fg.listeners = append(fg.listeners, l)
		}
	}
	for _, a := range p.attachments {
		if fg := find(a.gateway, a.listener.spec.Port); fg != nil {
			fg.attachments = append(fg.attachments, a)
		}
	}
	for _, fg := range groups {
		p.emitGroup(fg)
	}
}

// emitGroup emits the routes of one Gateway port on each of its addresses.
func (p *gatewayProcessor) emitGroup(fg *frontGroup) {
	type keyed struct {
		key       string
		listener  string
		locations []RouteLocation
	}
	var routes []keyed
	for _, l := range fg.listeners {
		// The listener's hosts, its own first (so that isolation holds
		// with no route on it), and its routes by the hosts they serve.
		var keys []string
		if l.hostname != "" {
			keys = append(keys, l.hostname)
		}
		byHost := make(map[string][]*compiledRoute)
		for _, a := range fg.attachments {
			if a.listener != l {
				continue
			}
			for _, h := range a.hosts {
				if _, seen := byHost[h]; !seen && h != l.hostname {
					keys = append(keys, h)
				}
				byHost[h] = append(byHost[h], a.route)
			}
		}
		for _, key := range keys {
			if isolated(key, l, fg.listeners) {
				continue
			}
			var ranked []rankedLocation
			added := make(map[*compiledRoute]bool)
			for _, host := range coveringHosts(key) {
				for _, r := range byHost[host] {
					if !added[r] {
						added[r] = true
						ranked = append(ranked, r.locations...)
					}
				}
			}
			slices.SortFunc(ranked, compareRanked)
			locations := make([]RouteLocation, len(ranked))
			for i, r := range ranked {
				locations[i] = r.loc
				for _, b := range r.loc.Rule.Backends {
					if b.Backend != "" {
						p.extraBackends[b.Backend] = true
					}
				}
				for _, m := range r.loc.Rule.Mirrors {
					p.extraBackends[m.Backend] = true
				}
			}
			routes = append(routes, keyed{key, l.hostname, locations})
		}
	}
	grpc := p.grpcOnly(fg)
	for _, address := range fg.gateway.addresses {
		front := FrontName(address, fg.port)
		p.grpcFronts[front] = grpc
		for _, r := range routes {
			p.routes = append(p.routes, &Route{Host: FrontKey(front, r.key), HTTPS: fg.https, Locations: r.locations, Ordered: true, Listener: r.listener})
		}
	}
}

// coveringHosts returns the hosts whose routes serve every request the
// router sends to key (those that cover it): key, the wildcards that
// match it, and anyHost.
func coveringHosts(key string) []string {
	out := []string{key}
	if key == anyHost {
		return out
	}
	name := strings.TrimPrefix(key, "*") // "a.b.c", or ".b.c" for "*.b.c"
	for i := 1; i < len(name); i++ {
		if name[i] == '.' {
			out = append(out, "*"+name[i:])
		}
	}
	return append(out, anyHost)
}

// isolated says whether key, a host of listener l, belongs to a more
// specific listener of the same front, which then takes all its requests.
func isolated(key string, l *listenerState, listeners []*listenerState) bool {
	for _, o := range listeners {
		if o != l && o.hostname != "" && moreSpecific(o.hostname, l.hostname) && covers(o.hostname, key) {
			return true
		}
	}
	return false
}
