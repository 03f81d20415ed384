package model

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Where nginx may connect. Every value a user writes that nginx connects
// to (auth-url, global-auth-url, mirror-target) goes through
// Targets.CheckURL, and every endpoint address (EndpointSlices, resolved
// FQDN slices, a Service's cluster IP) through Targets.checkEndpoint, so
// that no tenant can point nginx into its own pod: not at the Lua config
// API's unix socket, not at the agent's admin server, not at nginx's own
// ports (a loop), not at the node's metadata service. A Gateway API
// backend, when it comes, goes through checkEndpoint as well.
//
// The check refuses what an address is (loopback, link-local, unspecified,
// the pod's own), in every spelling nginx or a resolver reads as one
// ("127.1", "0x7f000001", "[::ffff:127.0.0.1]", "LOCALHOST."), and a URL
// whose host is a variable: nginx would take the host from the request at
// run time, and the client chooses it. A DNS name is checked as a name
// only: what it resolves to when nginx asks is beyond a pure model (see
// the README's "Multi-tenant safety").

// Targets are the settings of the check: what the pod is, and what the
// platform allows. The zero value is the strictest: no pod address known,
// nothing allowed, loopback refused.
type Targets struct {
	// PodAddresses are the pod's own addresses (--pod-ip, and the
	// addresses of its interfaces): refused as targets.
	PodAddresses []netip.Addr
	// PodPorts are the ports the pod listens on: nginx's HTTP, HTTPS and
	// status ports and the agent's admin ports. Loopback and the pod's
	// addresses at these ports are refused even where loopback is allowed
	// or a network is allowed: an endpoint there is a loop, or the admin
	// server.
	PodPorts []int32
	// Allowed are networks a platform lets through although they are
	// loopback, link-local or unspecified (--allow-internal-networks;
	// default none). A unix socket is never allowed.
	Allowed []netip.Prefix
	// Local says the source is a folder its own user writes (the file
	// source): loopback and the pod's addresses are allowed, except at
	// PodPorts, as the local demo runs its backends on 127.0.0.x.
	Local bool
}

// metadataAddresses are cloud metadata services outside link-local
// ranges (AWS's IPv6 one).
var metadataAddresses = []netip.Addr{netip.MustParseAddr("fd00:ec2::254")}

// thisNetwork is 0.0.0.0/8: "this host on this network"; Linux connects
// 0.0.0.0 to the host itself.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// CheckURL returns why nginx must not connect to url, or "": url is an
// http(s) URL as the model holds it, variables written "${name}". It
// refuses a unix socket, a variable in the host or port, user
// information, percent-encoding in the host, a host that is neither a DNS
// name nor an IP address, localhost names, and an address checkAddress
// refuses (at the URL's port).
//
// routedHost says every request that reaches the URL was routed by a host
// name of its Ingress (no rule without a host, no spec.defaultBackend):
// then the host may be "${host}" alone, as oauth2-proxy's documentation
// writes auth-url ("https://$host/oauth2/auth"). The router matches on
// $host, so $host is then one of the Ingress's names, which Build
// checked as DNS names; on the default server it is whatever the client
// sends ("127.0.0.1"), and is refused.
func (t Targets) CheckURL(url string, routedHost bool) string {
	scheme, rest, ok := strings.Cut(url, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return "is not an http or https URL"
	}
	// nginx's ngx_parse_url takes "unix:" (any case) after the scheme as
	// a socket path.
	if len(rest) >= 5 && strings.EqualFold(rest[:5], "unix:") {
		return "names a unix socket, which is inside the ingress pod (the Lua config API listens on one)"
	}
	// The authority ends at the path, the query, or a variable that
	// starts the path ($request_uri, $uri); any other variable before
	// that is part of the host or port.
	end := len(rest)
	for _, stop := range []string{"/", "?", "#", "${request_uri}", "${uri}"} {
		if i := strings.Index(rest, stop); i >= 0 && i < end {
			end = i
		}
	}
	authority := rest[:end]
	if after, ok := strings.CutPrefix(authority, "${host}"); ok && routedHost && !strings.Contains(after, "$") {
		if after == "" {
			return ""
		}
		if _, _, reason := splitAuthority("x"+after, scheme); reason != "" || !strings.HasPrefix(after, ":") {
			return cmp.Or(reason, "has characters after ${host} in its host")
		}
		return ""
	}
	switch {
	case strings.Contains(authority, "$"):
		return "has a variable in its host or port: nginx would connect where the client's request says, " +
			"which may be inside the ingress pod; write the host name (or $host alone, on an Ingress whose every rule names a host)"
	case strings.Contains(authority, "@"):
		return "has user information (\"@\") before its host"
	case strings.Contains(authority, "%"):
		return "has percent-encoding in its host"
	case authority == "":
		return "has no host"
	}
	host, port, reason := splitAuthority(authority, scheme)
	if reason != "" {
		return reason
	}
	return t.checkHost(host, port)
}

// splitAuthority splits "host[:port]" or "[v6][:port]" and returns the
// port, the scheme's default when none is written.
func splitAuthority(authority, scheme string) (host string, port int32, reason string) {
	port = 80
	if scheme == "https" {
		port = 443
	}
	host, written := authority, ""
	if strings.HasPrefix(authority, "[") {
		close := strings.IndexByte(authority, ']')
		if close < 0 {
			return "", 0, "has an unclosed \"[\" in its host"
		}
		host, written = authority[:close+1], authority[close+1:]
		if written != "" && !strings.HasPrefix(written, ":") {
			return "", 0, "has characters after its bracketed address"
		}
		written = strings.TrimPrefix(written, ":")
		if written == "" && strings.HasSuffix(authority, ":") {
			return "", 0, "has an empty port"
		}
	} else if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		host, written = authority[:i], authority[i+1:]
		if written == "" {
			return "", 0, "has an empty port"
		}
	}
	if written != "" {
		n, err := strconv.Atoi(written)
		if err != nil || n < 1 || n > 65535 || !isDigits(written) {
			return "", 0, fmt.Sprintf("has the port %q, which is not 1..65535", clip(written))
		}
		port = int32(n)
	}
	return host, port, ""
}

// checkHost checks the host of a URL: an IP address (IPv6 in brackets), in
// any spelling a resolver reads as one, or a DNS name that is no
// localhost name.
func (t Targets) checkHost(host string, port int32) string {
	if inner, ok := strings.CutPrefix(host, "["); ok {
		addr, err := netip.ParseAddr(strings.TrimSuffix(inner, "]"))
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return fmt.Sprintf("has the host %q, which is not an IPv6 address", clip(host))
		}
		return t.checkAddress(addr, port)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if addr, ok := parseLooseIPv4(name); ok {
		return t.checkAddress(addr, port)
	}
	if looksNumeric(name) {
		return fmt.Sprintf("has the host %q, which is neither a DNS name nor an IP address", clip(host))
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return fmt.Sprintf("has the host %q, which is neither a DNS name nor an IP address", clip(host))
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") ||
		name == "ip6-localhost" || name == "ip6-loopback" || name == "localhost.localdomain" {
		if t.Local && !slices.Contains(t.PodPorts, port) {
			return ""
		}
		return fmt.Sprintf("has the host %q, a name of the loopback address, which is inside the ingress pod", clip(host))
	}
	return ""
}

// CheckEndpoint returns why nginx must not send requests to addr:port, an
// endpoint of a Service, or "".
func (t Targets) CheckEndpoint(addr netip.Addr, port int32) string {
	return t.checkAddress(addr, port)
}

// checkAddress returns why nginx must not connect to addr at port, or "".
func (t Targets) checkAddress(addr netip.Addr, port int32) string {
	addr = addr.WithZone("")
	// IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d)
	// addresses are checked as the IPv4 address they carry.
	shown := addr
	if addr.Is4In6() {
		addr = addr.Unmap()
	} else if b := addr.As16(); addr.Is6() && !addr.IsLoopback() && !addr.IsUnspecified() && isZero(b[:12]) {
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	pod := slices.ContainsFunc(t.PodAddresses, func(a netip.Addr) bool { return a.Unmap() == addr })
	inPod := addr.IsLoopback() || addr.IsUnspecified() || thisNetwork.Contains(addr) || pod
	if inPod && slices.Contains(t.PodPorts, port) {
		return fmt.Sprintf("is %s at port %d, where the ingress pod itself listens (nginx or the agent's admin server)", shown, port)
	}
	allowed := slices.ContainsFunc(t.Allowed, func(p netip.Prefix) bool { return p.Contains(addr) })
	switch {
	case addr.IsMulticast() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Sprintf("is %s, not a unicast address", shown)
	case allowed:
		return ""
	case addr.IsUnspecified() || thisNetwork.Contains(addr):
		return fmt.Sprintf("is %s, an unspecified address, which reaches the ingress pod itself", shown)
	case addr.IsLinkLocalUnicast():
		return fmt.Sprintf("is %s, a link-local address (the cloud metadata service answers on 169.254.169.254)", shown)
	case slices.Contains(metadataAddresses, addr):
		return fmt.Sprintf("is %s, a cloud metadata service", shown)
	case t.Local:
		return ""
	case addr.IsLoopback():
		return fmt.Sprintf("is %s, a loopback address, which is inside the ingress pod", shown)
	case pod:
		return fmt.Sprintf("is %s, an address of the ingress pod itself", shown)
	}
	return ""
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// parseLooseIPv4 parses an IPv4 address as inet_aton does, the way a
// resolver (glibc, Go's) may read a host name: one to four parts, each
// decimal, octal (leading 0) or hex (0x), the last filling the remaining
// bytes: "127.1", "0x7f000001", "2130706433" and "0177.0.0.1" are all
// 127.0.0.1.
func parseLooseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if s == "" || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var values []uint64
	for _, p := range parts {
		v, ok := parseInetPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		values = append(values, v)
	}
	last := values[len(values)-1]
	if last >= 1<<(8*(5-len(values))) {
		return netip.Addr{}, false
	}
	n := last
	for i, v := range values[:len(values)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// parseInetPart parses one part of an inet_aton address.
func parseInetPart(p string) (uint64, bool) {
	base, digits := 10, p
	switch {
	case len(p) > 1 && (strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X")):
		base, digits = 16, p[2:]
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	if digits == "" || len(digits) > 11 {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, base, 64)
	return v, err == nil && v <= 0xffffffff
}

// looksNumeric says whether a host name's last label is a number (or a hex
// "0x…"): no top-level domain is, and a resolver may take the name for an
// address it cannot parse here.
func looksNumeric(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		return true
	}
	return isDigits(last)
}

// targetRefused reports the annotation key of ing, whose value names a
// target CheckURL refused for reason; what follows says what is served
// instead.
func (b *builder) targetRefused(ing *networkingv1.Ingress, key, value, reason, instead string) {
	b.problems = append(b.problems, Problem{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name, Refused: true,
		Reason: clipReason(fmt.Sprintf("annotation %s: refused: %q %s; %s", key, clip(value), reason, instead))})
}

// endpointRefused reports an endpoint address of the object kind
// namespace/name that CheckEndpoint refused: a Problem marked Refused, so
// that restysync check names the object and fails.
func (b *Builder) endpointRefused(kind, namespace, name, reason string) {
	b.problems = append(b.problems, Problem{Kind: kind, Namespace: namespace, Name: name, Refused: true, Reason: clipReason(reason)})
}

// checkGlobalAuth refuses the ConfigMap's global-auth-url when CheckURL
// does: every Ingress under the global auth then fails closed.
func (b *builder) checkGlobalAuth(s Snapshot) {
	if s.GlobalAuth.URL == "" || s.GlobalAuthDenied != "" {
		return
	}
	reason := b.targets.CheckURL(s.GlobalAuth.URL, true)
	if reason == "" {
		return
	}
	b.globalAuth, b.globalAuthDenied = ExternalAuth{}, "global-auth-url is refused"
	p := Problem{Kind: "ConfigMap", Name: "(global-auth-url)", Refused: true,
		Reason: clipReason(fmt.Sprintf("key global-auth-url: refused: %q %s; the Ingresses under the global auth answer 503 until it is fixed",
			clip(s.GlobalAuth.URL), reason))}
	if s.ConfigMap != nil {
		p.Namespace, p.Name = s.ConfigMap.Namespace, s.ConfigMap.Name
	}
	b.problems = append(b.problems, p)
}

// routedByHost says whether every request ing's locations get was routed
// by one of its host names: it has no rule without a host and no
// spec.defaultBackend, either of which the default server serves for any
// Host (CheckURL's routedHost).
func routedByHost(ing *networkingv1.Ingress) bool {
	if ing.Spec.DefaultBackend != nil {
		return false
	}
	for _, rule := range ing.Spec.Rules {
		if rule.Host == "" {
			return false
		}
	}
	return true
}
