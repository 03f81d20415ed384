package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/dnsserver"
)

const (
	ipNamedA = "127.0.0.61"
	ipNamedB = "127.0.0.62"
	ipNamedC = "127.0.0.63"
)

// fqdnSlice is an EndpointSlice that names its endpoints, as the compose
// demo names its backend services.
func fqdnSlice(service string, port int, names ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-names
  namespace: default
  labels:
    kubernetes.io/service-name: %[1]s
addressType: FQDN
ports:
  - name: http
    port: %[2]d
endpoints:
`, service, port)
	for _, n := range names {
		fmt.Fprintf(&b, "  - addresses: [%q]\n", n)
	}
	return b.String()
}

// FQDN endpoints are resolved through a real DNS server, and a DNS change
// moves traffic without a reload.
func TestFQDNEndpoints(t *testing.T) {
	dns := dnsserver.Start(t)
	dns.Set("backend-a.demo.test", ipNamedA)
	dns.Set("backend-b.demo.test", ipNamedB)
	b := startBackends(t, ipNamedA, ipNamedB, ipNamedC)

	s := &stack{t: t, manifests: t.TempDir()}
	s.writeFile("classes.yaml", ingressClasses)
	s.writeFile("named.yaml", strings.Join([]string{
		service("named", b.port),
		fqdnSlice("named", b.port, "backend-a.demo.test", "backend-b.demo.test", "backend-gone.demo.test"),
		ingress("named", ingressOpts{class: "restysync", host: "named.test", paths: []path{prefix("/", "named")}}),
	}, "---\n"))
	s.start("--source", "file:"+s.manifests, "--dns-server", dns.Addr, "--dns-refresh-interval", "200ms")

	s.eventually("both named backends serve", func() error {
		seen := map[string]bool{}
		for range 8 {
			_, body, err := s.get("named.test", "/")
			if err != nil {
				return err
			}
			seen[body] = true
		}
		if !seen[ipNamedA] || !seen[ipNamedB] || len(seen) != 2 {
			return errorf("answers from %v", seen)
		}
		return nil
	})
	if !strings.Contains(s.agent.log.String(), "backend-gone.demo.test") {
		t.Error("the name that does not resolve is not reported")
	}

	workers := s.steadyWorkers()
	dns.Set("backend-b.demo.test", ipNamedC)
	s.eventually("the new address of backend-b serves", func() error { return seen(s, "named.test", ipNamedC, 8) })
	for range 8 {
		if _, body, _ := s.get("named.test", "/"); body == ipNamedB {
			t.Fatalf("%s still answers after DNS moved backend-b", ipNamedB)
		}
	}
	if now := s.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
		t.Errorf("a DNS change reloaded nginx: workers %v, before %v", now, workers)
	}
}
