package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/podnet"
)

// No user URL and no endpoint points nginx into its own pod (issue 25,
// points 2 and 7), on real nginx: mirror-target and auth-url naming the
// Lua config API's unix socket or the agent's admin server are refused (a
// Problem, and check says refused and exits 1); the hostile POST of the
// attack through the mirror never reaches the config API (a.test keeps
// its backend); a refused auth-url fails its Ingress closed (503); an
// endpoint at nginx's own port or the admin port is left out of its slice
// with a Problem, the rest of the slice served. The file source keeps
// loopback backends (this test's own are on 127.0.0.231).
func TestTargetsIntoThePod(t *testing.T) {
	const ipMainT = "127.0.0.231"
	mainPort := nginxproc.FreePort(t)
	var hits atomic.Int64
	serve(t, ipMainT, mainPort, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "main")
	})
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("main", mainPort, ep(ipMainT)),
		"a.yaml":        ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "main")}}),
	})
	s.eventually("a.test serves", func() error { return s.expect("a.test", "/", "main") })

	socket := "http://unix:" + filepath.Join(s.shared, "restysync.sock") + ":"
	adminURL := s.admin + "/debug/state"
	hostile := map[string]map[string]string{
		"mirror-socket": {"nginx.ingress.kubernetes.io/mirror-target": socket + "/backends"},
		"mirror-upper":  {"nginx.ingress.kubernetes.io/mirror-target": strings.Replace(socket, "unix", "UNIX", 1) + "/backends"},
		"mirror-admin":  {"nginx.ingress.kubernetes.io/mirror-target": adminURL},
		"auth-socket":   {"nginx.ingress.kubernetes.io/auth-url": socket + "/status"},
		"auth-admin":    {"nginx.ingress.kubernetes.io/auth-url": adminURL},
	}
	for name, annotations := range hostile {
		s.writeFile(name+".yaml", ingress(name, ingressOpts{class: "restysync", host: name + ".test", paths: []path{prefix("/", "main")}, annotations: annotations}))
	}
	// Endpoints at nginx's own port (a loop) and at the admin server's,
	// beside a good one.
	adminPort := s.admin[strings.LastIndexByte(s.admin, ':')+1:]
	var loopPort, adminPortN int
	fmt.Sscan(adminPort, &adminPortN)
	loopPort = s.port
	s.writeFile("loop.yaml", service("loop", loopPort, ep("127.0.0.1"))+"---\n"+
		ingress("loop", ingressOpts{class: "restysync", host: "loop.test", paths: []path{prefix("/", "loop")}}))
	s.writeFile("admin-ep.yaml", service("adminep", adminPortN, ep("127.0.0.1"))+"---\n"+
		ingress("adminep", ingressOpts{class: "restysync", host: "adminep.test", paths: []path{prefix("/", "adminep")}}))

	s.eventually("every hostile Ingress is served", func() error {
		for _, host := range []string{"mirror-socket.test", "mirror-upper.test", "mirror-admin.test"} {
			if err := s.expect(host, "/", "main"); err != nil {
				return err
			}
		}
		for _, host := range []string{"auth-socket.test", "auth-admin.test", "loop.test", "adminep.test"} {
			if err := s.expect(host, "/", "503"); err != nil {
				return err
			}
		}
		return nil
	})

	// The attack: B's POST, mirrored to the config API, would move a.test's
	// backend. It is not mirrored anywhere.
	attack := `{"upserts":[{"name":"default/main:80","endpoints":[{"address":"127.0.0.232","port":9}]}]}`
	for _, host := range []string{"mirror-socket.test", "mirror-upper.test", "mirror-admin.test"} {
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/anything", s.port), strings.NewReader(attack))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, body := s.do(t, req)
		if resp.StatusCode != http.StatusOK || body != "main" {
			t.Errorf("POST %s: %d %q, want the main backend's answer", host, resp.StatusCode, body)
		}
	}
	for range 5 {
		if err := s.expect("a.test", "/", "main"); err != nil {
			t.Fatalf("a.test after the attack: %v", err)
		}
	}

	// Each refusal is a Problem naming the object and why.
	state := s.debugState()
	want := map[string]string{
		"Ingress default/mirror-socket":   "unix socket",
		"Ingress default/mirror-upper":    "unix socket",
		"Ingress default/mirror-admin":    "port " + adminPort,
		"Ingress default/auth-socket":     "unix socket",
		"Ingress default/auth-admin":      "port " + adminPort,
		"EndpointSlice default/loop-1":    fmt.Sprintf("port %d, where the ingress pod itself listens", loopPort),
		"EndpointSlice default/adminep-1": "port " + adminPort + ", where the ingress pod itself listens",
	}
	for object, reason := range want {
		found := false
		for _, p := range state.Problems {
			found = found || (p.Object == object && strings.Contains(p.Reason, reason))
		}
		if !found {
			t.Errorf("no problem of %s mentioning %q in %+v", object, reason, state.Problems)
		}
	}

	// check refuses each payload with its reason, and exits 1.
	out, err := exec.Command(agentBinary, "check", "--source", "file:"+s.manifests, "-o", "json").Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("check: %v, want exit 1", err)
	}
	var report struct {
		Ingresses []struct {
			Ingress     string `json:"ingress"`
			Annotations []struct{ Key, Status, Reason string }
		} `json:"ingresses"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("check output: %v\n%s", err, out)
	}
	refused := map[string]string{}
	for _, ing := range report.Ingresses {
		for _, a := range ing.Annotations {
			if a.Status == "refused" {
				refused[ing.Ingress] = a.Reason
			}
		}
	}
	for name := range hostile {
		if r := refused["default/"+name]; r == "" {
			t.Errorf("check: default/%s not refused: %s", name, out)
		}
	}
}

// From the Kubernetes source every endpoint address is checked after
// resolution (issue 25, point 7): an FQDN slice naming 127.0.0.1 and
// 169.254.169.254 (the API server validates FQDN slices as names, so they
// pass it) and an IPv4 slice naming the pod's own address (--pod-ip) are
// each a Problem on the slice; the Service's good pod is the only one that
// answers. A hostile slice added later takes the fast path and is checked
// there too.
func TestKubeEndpointsIntoThePod(t *testing.T) {
	podnet.Require(t)
	e := startKubeEnv(t)
	good := podnet.New(t, "target-good")
	const podIP = "10.244.250.7" // the agent's own pod, as the downward API gives it
	e.create(ingressClass("restysync", controllerRef))
	e.create(kubeService("web"))
	e.create(kubeSlice("web", good))
	own := kubeSlice("web")
	own.Name = "web-own"
	own.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{podIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}}
	e.create(own)
	e.create(fqdnKubeSlice("web-names", "web", "127.0.0.1", "169.254.169.254"))
	e.create(kubeIngress(appsNS, "web", "restysync", "web.test", map[string]string{"/": "web"}))

	s := &stack{t: t}
	s.start("--source", "kube", "--kubeconfig", e.kubeconfig, "--namespace", appsNS,
		"--publish-address", publishA, "--election-namespace", agentNS, "--pod-name", "agent-targets", "--pod-ip", podIP)
	s.eventually("web.test is served by its good pod alone", func() error { return onlyFrom(s, "web.test", "/", good.Name, 12) })
	want := map[string]string{
		"EndpointSlice apps/web-names": `"127.0.0.1" port 8080: refused: is 127.0.0.1, a loopback address`,
		"EndpointSlice apps/web-own":   `"10.244.250.7" port 8080: refused: is 10.244.250.7, an address of the ingress pod itself`,
	}
	checkProblems := func() error {
		problems := s.debugState().Problems
		for object, reason := range want {
			found := false
			for _, p := range problems {
				found = found || (p.Object == object && strings.Contains(p.Reason, reason))
			}
			if !found {
				return fmt.Errorf("no problem of %s with %q in %+v", object, reason, problems)
			}
		}
		return nil
	}
	s.eventually("each refused address is a Problem on its slice", checkProblems)
	want["EndpointSlice apps/web-names"] = `"169.254.169.254" port 8080: refused: is 169.254.169.254, a link-local address`
	s.eventually("the metadata address too", checkProblems)

	// Only the endpoints moved: the fast path.
	e.create(fqdnKubeSlice("web-later", "web", "0.0.0.0", "127.0.0.2"))
	want["EndpointSlice apps/web-later"] = `"127.0.0.2" port 8080: refused: is 127.0.0.2, a loopback address`
	s.eventually("a slice added later is checked on the fast path", checkProblems)
	if err := onlyFrom(s, "web.test", "/", good.Name, 12); err != nil {
		t.Error(err)
	}
}

// fqdnKubeSlice is an FQDN EndpointSlice of service naming names.
func fqdnKubeSlice(name, service string, names ...string) *discoveryv1.EndpointSlice {
	s := kubeSlice(service)
	s.Name, s.AddressType = name, discoveryv1.AddressTypeFQDN
	for _, n := range names {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{n}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	return s
}
