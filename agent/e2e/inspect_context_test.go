package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/admin"
)

// inspect shows, for each path, the Service as people name it, why its
// match type is not the one written (use-regex on another Ingress of the
// host), and what it sets apart from the defaults; JSON keeps the Lua
// key of the backend.
func TestInspectPathContext(t *testing.T) {
	dir := t.TempDir()
	s := &stack{t: t, manifests: dir}
	s.writeFile("class.yaml", "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: restysync\nspec:\n  controller: "+controllerRef+"\n")
	s.writeFile("web.yaml", service("web", 8080, readyTrue("10.0.0.1")))
	s.writeFile("regex.yaml", ingress("regex", ingressOpts{class: "restysync", host: "app.test",
		annotations: map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true"},
		paths:       []path{{"/v[0-9]+/", "ImplementationSpecific", "web", "80"}}}))
	s.writeFile("api.yaml", ingress("api", ingressOpts{class: "restysync", host: "app.test",
		annotations: map[string]string{
			"nginx.ingress.kubernetes.io/proxy-read-timeout": "300",
			"nginx.ingress.kubernetes.io/limit-rps":          "10",
			"nginx.ingress.kubernetes.io/load-balance":       "ewma",
		},
		paths: []path{exact("/health", "web")}}))

	out := inspectText(t, "--source", "file:"+dir)
	for _, want := range []string{
		"├── /health (Regex) → Service default/web port http  [Ingress default/api]\n" +
			"│   match: Exact became Regex: use-regex on Ingress default/regex makes every path of the host a regex\n" +
			"│   settings: profile @restysync_p_",
		"read-timeout 300, rate-limit-rps 10, rate-limit-burst-multiplier 5, algorithm ewma\n│   └── 10.0.0.1:8080\n",
		"└── /v[0-9]+/ (Regex) → Service default/web port 80  [Ingress default/regex]\n" +
			"    match: ImplementationSpecific with use-regex on this Ingress is a regex\n" +
			"    └── 10.0.0.1:8080\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect --source lacks\n%s\n---\n%s", want, out)
		}
	}

	data, err := exec.Command(agentBinary, "inspect", "--source", "file:"+filepath.Clean(dir), "-o", "json").Output()
	if err != nil {
		t.Fatalf("inspect -o json: %v", err)
	}
	var r admin.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("inspect -o json does not parse: %v\n%s", err, data)
	}
	if len(r.Hosts) != 1 || len(r.Hosts[0].Paths) != 2 {
		t.Fatalf("hosts %+v, want app.test with two paths", r.Hosts)
	}
	health := r.Hosts[0].Paths[0]
	if health.Backend != "default/web:http@default/api" || health.Service != "Service default/web port http" ||
		!strings.HasPrefix(health.MatchReason, "Exact became Regex") || len(health.Settings) == 0 {
		t.Errorf("/health in JSON: %+v; want the Lua key in backend, the Service, the match reason and the settings", health)
	}
}
