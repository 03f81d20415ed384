package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/dnsserver"
)

// TestComposeTopology runs the docker-compose demo's topology without
// Docker: the agent on examples/compose/manifests (FQDN endpoints naming
// the compose services), nginx, three backends that answer like
// traefik/whoami, and a real DNS server answering for the service names as
// Docker's does. Only the backend port is moved off 80.
func TestComposeTopology(t *testing.T) {
	dns := dnsserver.Start(t)
	addrs := map[string]string{"backend-1": "127.0.0.71", "backend-2": "127.0.0.72", "backend-3": "127.0.0.73"}
	for name, ip := range addrs {
		dns.Set(name, ip)
	}
	b := startWhoami(t, addrs)

	s := &stack{t: t, manifests: t.TempDir()}
	for _, name := range []string{"ingress.yaml", "service.yaml", "endpointslice.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", "compose", "manifests", name))
		if err != nil {
			t.Fatal(err)
		}
		content := string(data)
		if name == "endpointslice.yaml" {
			content = strings.Replace(content, "port: 80", "port: "+strconv.Itoa(b), 1)
		}
		s.writeFile(name, content)
	}
	s.start("--source", "file:"+s.manifests, "--dns-server", dns.Addr)

	s.eventually("the three compose backends answer in turn", func() error {
		seen := map[string]bool{}
		for range 9 {
			_, body, err := s.get("demo.localhost", "/")
			if err != nil {
				return err
			}
			for _, line := range strings.Split(body, "\n") {
				if host, ok := strings.CutPrefix(line, "Hostname: "); ok {
					seen[host] = true
				}
			}
		}
		for name := range addrs {
			if !seen[name] {
				return errorf("%s did not answer: %v", name, seen)
			}
		}
		return nil
	})
}

// startWhoami serves "Hostname: NAME" on each address, on one port, the
// way traefik/whoami answers in the compose demo, and returns the port.
func startWhoami(t *testing.T, addrs map[string]string) int {
	t.Helper()
	ips := make([]string, 0, len(addrs))
	byIP := map[string]string{}
	for name, ip := range addrs {
		ips = append(ips, ip)
		byIP[ip] = name
	}
	b := startBackendsWith(t, func(ip string) string { return "Hostname: " + byIP[ip] + "\nIP: " + ip + "\n" }, ips...)
	return b.port
}
