package model

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// A location is plain (served by the router, no profile) when it needs only
// the balancer, the HTTPS redirect and the proxy timeouts.
func TestLocationPlain(t *testing.T) {
	tests := []struct {
		name    string
		ingress *networkingv1.Ingress
		plain   bool
	}{
		{"no annotation", newIngress("default", "plain", rule("plain.example.com", prefix("/", "web", 80))), true},
		{"balancing annotations", newIngress("default", "ewma", annotation("nginx.ingress.kubernetes.io/load-balance", "ewma"),
			annotation("nginx.ingress.kubernetes.io/affinity", "cookie"), rule("ewma.example.com", prefix("/", "web", 80))), true},
		{"proxy timeouts", newIngress("default", "slow", annotation("nginx.ingress.kubernetes.io/proxy-read-timeout", "120"),
			annotation("nginx.ingress.kubernetes.io/proxy-connect-timeout", "3"), rule("slow.example.com", prefix("/", "web", 80))), true},
		{"force-ssl-redirect", newIngress("default", "forced", annotation("nginx.ingress.kubernetes.io/force-ssl-redirect", "true"),
			rule("forced.example.com", prefix("/", "web", 80))), true},
		{"a wildcard host", newIngress("default", "wild", rule("*.example.com", prefix("/", "web", 80))), true},
		{"regex paths", newIngress("default", "re", annotation("nginx.ingress.kubernetes.io/use-regex", "true"),
			rule("re.example.com", httpPath(pathTypeOf("ImplementationSpecific"), "/a[0-9]+", backend("web", 80)))), true},
		{"a timeout and another proxy annotation", newIngress("default", "slow", annotation("nginx.ingress.kubernetes.io/proxy-read-timeout", "120"),
			annotation("nginx.ingress.kubernetes.io/proxy-buffering", "on"), rule("slow.example.com", prefix("/", "web", 80))), false},
		{"proxy-body-size", newIngress("default", "big", annotation("nginx.ingress.kubernetes.io/proxy-body-size", "8m"),
			rule("big.example.com", prefix("/", "web", 80))), false},
		{"an access annotation", newIngress("default", "lan", annotation("nginx.ingress.kubernetes.io/whitelist-source-range", "10.0.0.0/8"),
			rule("lan.example.com", prefix("/", "web", 80))), false},
		{"a backend protocol", newIngress("default", "grpc", annotation("nginx.ingress.kubernetes.io/backend-protocol", "GRPC"),
			rule("grpc.example.com", prefix("/", "web", 80))), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := Build(snapshotOf(tc.ingress))
			if m.Servers.Len() != 1 || len(m.Servers.At(0).Locations) == 0 {
				t.Fatalf("model %+v: want one server", m)
			}
			for _, loc := range m.Servers.At(0).Locations {
				if loc.Plain() != tc.plain {
					t.Errorf("%s: Plain() = %v, want %v", loc.Path, loc.Plain(), tc.plain)
				}
			}
		})
	}
}
