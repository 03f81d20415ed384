package model

import (
	networkingv1 "k8s.io/api/networking/v1"
	"testing"
)

// routedHosts builds s and returns the hosts Lua routes and whether the
// model routes in Lua at all.
func routedHosts(t *testing.T, s Snapshot) ([]string, bool) {
	t.Helper()
	m, problems := Build(s)
	for _, p := range problems {
		t.Log(p) // a TLS Secret that is missing still makes the host HTTPS
	}
	var hosts []string
	for _, srv := range m.LuaRoutedServers() {
		hosts = append(hosts, srv.Host)
	}
	rendered := 0
	for _, srv := range m.RenderedServers() {
		if m.RoutesInLua() && srv.RoutedInLua() {
			t.Errorf("host %s is both rendered and routed in Lua", srv.Host)
		}
		rendered++
	}
	if rendered+len(hosts) != len(m.Servers) {
		t.Errorf("%d rendered + %d routed servers, want the %d of the model", rendered, len(hosts), len(m.Servers))
	}
	return hosts, m.RoutesInLua()
}

func TestRoutedInLua(t *testing.T) {
	plain := newIngress("default", "plain", rule("plain.example.com", prefix("/", "web", 80), exact("/x", "web", 80)))
	tests := []struct {
		name      string
		ingresses []*networkingv1.Ingress
		want      []string
		routing   bool
	}{
		{"plain host", []*networkingv1.Ingress{plain}, []string{"plain.example.com"}, true},
		{"balancing annotations stay in Lua", []*networkingv1.Ingress{
			plain,
			newIngress("default", "ewma", annotation("nginx.ingress.kubernetes.io/load-balance", "ewma"), annotation("nginx.ingress.kubernetes.io/affinity", "cookie"),
				rule("ewma.example.com", prefix("/", "web", 80))),
		}, []string{"ewma.example.com", "plain.example.com"}, true},
		{"proxy timeouts stay in Lua", []*networkingv1.Ingress{
			newIngress("default", "slow", annotation("nginx.ingress.kubernetes.io/proxy-read-timeout", "120"),
				annotation("nginx.ingress.kubernetes.io/proxy-connect-timeout", "3"), annotation("nginx.ingress.kubernetes.io/proxy-send-timeout", "30"),
				rule("slow.example.com", prefix("/", "web", 80))),
		}, []string{"slow.example.com"}, true},
		{"a timeout with another proxy annotation renders the host", []*networkingv1.Ingress{
			newIngress("default", "slow", annotation("nginx.ingress.kubernetes.io/proxy-read-timeout", "120"),
				annotation("nginx.ingress.kubernetes.io/proxy-buffering", "off"), rule("slow.example.com", prefix("/", "web", 80))),
		}, nil, true},
		{"a proxy annotation renders the host", []*networkingv1.Ingress{
			plain,
			newIngress("default", "big", annotation("nginx.ingress.kubernetes.io/proxy-body-size", "8m"), rule("big.example.com", prefix("/", "web", 80))),
		}, []string{"plain.example.com"}, true},
		{"an access annotation renders the host", []*networkingv1.Ingress{
			newIngress("default", "lan", annotation("nginx.ingress.kubernetes.io/whitelist-source-range", "10.0.0.0/8"), rule("lan.example.com", prefix("/", "web", 80))),
		}, nil, true},
		{"TLS and the HTTPS redirect stay in Lua", []*networkingv1.Ingress{
			newIngress("default", "tls", withTLS("cert", "tls.example.com"), rule("tls.example.com", prefix("/", "web", 80))),
			newIngress("default", "forced", annotation("nginx.ingress.kubernetes.io/force-ssl-redirect", "true"),
				rule("forced.example.com", prefix("/", "web", 80))),
		}, []string{"forced.example.com", "tls.example.com"}, true},
		{"a host-less root with force-ssl-redirect stops routing", []*networkingv1.Ingress{
			plain,
			newIngress("default", "hostless", annotation("nginx.ingress.kubernetes.io/force-ssl-redirect", "true"), rule("", prefix("/", "web", 80))),
		}, nil, false},
		{"a wildcard host is rendered", []*networkingv1.Ingress{
			newIngress("default", "wild", rule("*.example.com", prefix("/", "web", 80))),
		}, nil, true},
		{"regex paths render the host", []*networkingv1.Ingress{
			newIngress("default", "re", annotation("nginx.ingress.kubernetes.io/use-regex", "true"),
				rule("re.example.com", httpPath(pathTypeOf("ImplementationSpecific"), "/a[0-9]+", backend("web", 80)))),
		}, nil, true},
		{"a backend protocol renders the host", []*networkingv1.Ingress{
			newIngress("default", "grpc", annotation("nginx.ingress.kubernetes.io/backend-protocol", "GRPC"), rule("grpc.example.com", prefix("/", "web", 80))),
		}, nil, true},
		{"a default backend alone keeps routing", []*networkingv1.Ingress{
			plain,
			newIngress("default", "fallback", defaultBackendTo(backend("web", 80))),
		}, []string{"plain.example.com"}, true},
		{"a host-less path stops routing", []*networkingv1.Ingress{
			plain,
			newIngress("default", "hostless", rule("", prefix("/api", "web", 80))),
		}, nil, false},
		{"a host-less root with an annotation stops routing", []*networkingv1.Ingress{
			plain,
			newIngress("default", "hostless", annotation("nginx.ingress.kubernetes.io/proxy-read-timeout", "120"), rule("", prefix("/", "web", 80))),
		}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hosts, routing := routedHosts(t, snapshotOf(tc.ingresses...))
			if routing != tc.routing {
				t.Errorf("RoutesInLua = %v, want %v", routing, tc.routing)
			}
			if len(hosts) != len(tc.want) {
				t.Fatalf("routed hosts %v, want %v", hosts, tc.want)
			}
			for i := range hosts {
				if hosts[i] != tc.want[i] {
					t.Fatalf("routed hosts %v, want %v", hosts, tc.want)
				}
			}
		})
	}
}

// RenderedServers hands back the model's own slice when it leaves nothing
// out: the syncer's same-slice shortcuts rely on it.
func TestRenderedServersKeepsTheSlice(t *testing.T) {
	m := Model{Default: Server{Locations: []Location{{Path: "/api", PathType: PathPrefix, Backend: "a"}}},
		Servers: []Server{{Host: "a.example.com", Locations: []Location{{Path: "/", PathType: PathPrefix, Backend: "a"}}}}}
	if got := m.RenderedServers(); &got[0] != &m.Servers[0] {
		t.Error("RenderedServers copied the servers although none is routed")
	}
	m.Default = Server{}
	if got := m.RenderedServers(); len(got) != 0 {
		t.Errorf("RenderedServers = %v, want none: the only host is routed", got)
	}
}
