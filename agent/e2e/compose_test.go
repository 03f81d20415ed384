package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/restysync/restysync/agent/internal/testenv/dnsserver"
)

// composeAuthIngress is the demo's Ingress for another host, behind basic
// auth: the agent writes its htpasswd file into the shared volume.
const composeAuthIngress = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: private
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: users
spec:
  ingressClassName: restysync
  rules:
    - host: private.localhost
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: demo
                port:
                  name: http
`

// TestComposeTopology runs the docker-compose demo's topology without
// Docker: the agent on examples/compose/manifests (FQDN endpoints naming
// the compose services), nginx, three backends that answer like
// traefik/whoami, and a real DNS server answering for the service names as
// Docker's does. Only the backend port is moved off 80. The agent runs as
// the compose file's user with exactly the capabilities it grants
// (setpriv; the test fails under CI=true without it), as nginx runs as
// root with workers as nobody, and serves a basic-auth Ingress added to
// the demo's manifests: writing its htpasswd file for nobody's group is
// what needs CAP_CHOWN.
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
	s.writeFile("private.yaml", composeAuthIngress)
	s.writeFile("secret.yaml", secretYAML("users", htpasswdSHA("alice", "wonderland")))
	s.agentPrefix = composeAgentCapabilities(t)
	s.start("--source", "file:"+s.manifests, "--dns-server", dns.Addr)
	checkCapabilities(t, s.agent.cmd.Process.Pid, composeAgentCaps(t))

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

	s.eventually("private.localhost asks for credentials and lets alice in", func() error {
		for _, c := range []struct {
			user   string
			status int
		}{{"", http.StatusUnauthorized}, {"alice", http.StatusOK}} {
			req, err := http.NewRequest(http.MethodGet, "http://private.localhost/", nil)
			if err != nil {
				return err
			}
			if c.user != "" {
				req.SetBasicAuth(c.user, "wonderland")
			}
			resp, err := s.client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				return fmt.Errorf("user %q: status %d, want %d", c.user, resp.StatusCode, c.status)
			}
		}
		return nil
	})
}

// composeAgent is what the demo's docker-compose.yml says of the agent's
// user and capabilities.
type composeAgent struct {
	User    string   `yaml:"user"`
	CapDrop []string `yaml:"cap_drop"`
	CapAdd  []string `yaml:"cap_add"`
}

// composeAgentCaps reads the agent's capabilities from the compose file:
// every one dropped but those added, as root (the user nginx's master runs
// as in the stock image).
func composeAgentCaps(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "compose", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Services map[string]composeAgent `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	agent := file.Services["agent"]
	if agent.User != "0:0" || !slices.Equal(agent.CapDrop, []string{"ALL"}) {
		t.Fatalf("compose agent user %q cap_drop %v: this test emulates user 0:0 with cap_drop [ALL]", agent.User, agent.CapDrop)
	}
	if os.Geteuid() != 0 {
		if isCI() {
			t.Fatal("the compose agent runs as root: run this test as root (CI=true)")
		}
		t.Skip("skipping: the compose agent runs as root; this test is not root")
	}
	return agent.CapAdd
}

// composeAgentCapabilities returns the setpriv command that runs the agent
// with only the compose file's capabilities: the bounding set limits what
// root gets at exec, and no inheritable or ambient one is left.
func composeAgentCapabilities(t *testing.T) []string {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		missingTool(t, "setpriv (util-linux: runs the agent with the compose file's capabilities)")
	}
	bounding := "-all"
	for _, c := range composeAgentCaps(t) {
		bounding += ",+" + strings.ToLower(c)
	}
	return []string{setpriv, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=" + bounding, "--"}
}

// checkCapabilities fails the test unless process pid has exactly the
// capabilities named (as in cap_add: KILL, CHOWN) effective.
func checkCapabilities(t *testing.T, pid int, names []string) {
	t.Helper()
	numbers := map[string]uint{"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7, "NET_BIND_SERVICE": 10}
	var want uint64
	for _, n := range names {
		bit, ok := numbers[n]
		if !ok {
			t.Fatalf("capability %s: not one this test knows", n)
		}
		want |= 1 << bit
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			got, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil || got != want {
				t.Fatalf("agent's effective capabilities %s, want %#x (%v)", strings.TrimSpace(hex), want, names)
			}
			return
		}
	}
	t.Fatal("no CapEff in /proc/PID/status")
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
