package model

import (
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// validHost checks an Ingress rule host the way the API server does: a
// lower-case DNS-1123 subdomain, or "*." followed by one. IP addresses are
// not hosts. The file source has no API server in front of it, so Build
// repeats the check. It returns "" when host is valid, or why it is not.
func validHost(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return "is an IP address, but the Ingress API allows only DNS names"
	}
	errs := dnsNameErrors(host)
	if len(errs) == 0 {
		return ""
	}
	if lower := strings.ToLower(host); lower != host && len(dnsNameErrors(lower)) == 0 {
		return "must be lower case"
	}
	return strings.Join(errs, "; ")
}

func dnsNameErrors(host string) []string {
	if strings.HasPrefix(host, "*.") {
		return validation.IsWildcardDNS1123Subdomain(host)
	}
	return validation.IsDNS1123Subdomain(host)
}
