package main

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxGatewayControllerLen is the longest controllerName a GatewayClass
// may have.
const maxGatewayControllerLen = 253

// parseGatewayController checks --gateway-controller-name as the Gateway
// API checks a GatewayClass's spec.controllerName: a domain (a DNS
// subdomain), a slash and a path, at most 253 characters. Another value
// could never match a GatewayClass.
func parseGatewayController(name string) (string, error) {
	domain, path, ok := strings.Cut(name, "/")
	switch {
	case name == "":
		return "", fmt.Errorf("--gateway-controller-name: must not be empty")
	case len(name) > maxGatewayControllerLen:
		return "", fmt.Errorf("--gateway-controller-name %q: longer than %d characters", name, maxGatewayControllerLen)
	case !ok || path == "":
		return "", fmt.Errorf("--gateway-controller-name %q: want a domain-prefixed path, DOMAIN/PATH (e.g. example.com/gateway-controller)", name)
	case len(validation.IsDNS1123Subdomain(domain)) > 0:
		return "", fmt.Errorf("--gateway-controller-name %q: %q is not a lowercase DNS domain", name, domain)
	case strings.IndexFunc(path, notPathChar) >= 0:
		return "", fmt.Errorf("--gateway-controller-name %q: the path may hold only letters, digits and -._~%%!$&'()*+,;=:/", name)
	}
	return name, nil
}

// notPathChar says r may not be in the path of a controllerName.
func notPathChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("/-._~%!$&'()*+,;=:", r)
}

// parseGatewayAddresses checks --gateway-addresses: IP addresses, each
// once, in the order given. Each is one Gateway's address, on which nginx
// listens, so an address must be one a socket can be bound to for itself:
// not unspecified (0.0.0.0 is every address), multicast or with a zone.
// Ranges and CIDRs are not taken: a pool is a few addresses (the proxy
// Service's, or a handful of loopback ones in tests), and a CIDR would
// hand out its network and broadcast addresses.
func parseGatewayAddresses(values []string) ([]string, error) {
	var pool []string
	seen := map[netip.Addr]bool{}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		addr, err := netip.ParseAddr(v)
		if err != nil || addr.Zone() != "" {
			hint := ""
			if strings.ContainsAny(v, "/-") {
				hint = " (ranges and CIDRs are not taken: list each address)"
			}
			return nil, fmt.Errorf("--gateway-addresses %q: want an IP address%s", v, hint)
		}
		addr = addr.Unmap()
		if addr.IsUnspecified() || addr.IsMulticast() {
			return nil, fmt.Errorf("--gateway-addresses %q: want the address of one host, not an unspecified or multicast one", v)
		}
		if seen[addr] {
			return nil, fmt.Errorf("--gateway-addresses %q: listed twice", v)
		}
		seen[addr] = true
		pool = append(pool, addr.String())
	}
	return pool, nil
}
