package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 25, points 4 and 9: `restysync check` reports as invalid, with a
// reason, and exits 1 for tenant B's Ingress whose configuration-snippet
// holds a C1 control (`add_header X-A "a<U+0085>b";`, which once froze
// every tenant's config), for values nginx refuses at start
// (custom-http-errors 499), and for the ConfigMap's ssl-ciphers
// NOTACIPHER, while tenant A's Ingress moves.
func TestCheckRefusesUnrenderableValues(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"a.yaml": ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "web")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/configuration-snippet": `add_header X-A "ab";`}}),
		"b.yaml": ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: []path{prefix("/", "web")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/configuration-snippet": "add_header X-A \"a\u0085b\";",
				"nginx.ingress.kubernetes.io/mirror-target":         "http://mirror.default.svc/\u2028",
				"nginx.ingress.kubernetes.io/proxy-redirect-to":     "http://b.test/\u202e",
				"nginx.ingress.kubernetes.io/custom-http-errors":    "404,499",
				"nginx.ingress.kubernetes.io/default-backend":       "web",
			}}),
		"cm.yaml": namedConfigMap("restysync", map[string]string{"ssl-ciphers": "NOTACIPHER"}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(agentBinary, "check", "--source", "file:"+dir, "-o", "json", "--configmap", "default/restysync").Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("check: %v, want exit code 1\n%s", err, out)
	}
	var report struct {
		Ingresses []struct {
			Ingress     string
			Moves       bool
			Annotations []struct{ Key, Status, Reason string }
		}
		ConfigMap struct {
			Keys []struct{ Key, Status, Reason string }
		}
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]string{
		"default/b nginx.ingress.kubernetes.io/configuration-snippet": "contains the C1 control character U+0085",
		"default/b nginx.ingress.kubernetes.io/mirror-target":         "contains the line separator U+2028",
		"default/b nginx.ingress.kubernetes.io/proxy-redirect-to":     "contains the bidirectional control U+202E",
		"default/b nginx.ingress.kubernetes.io/custom-http-errors":    `"499" is not a status code from 400 to 599 that nginx's error_page takes`,
		"configmap ssl-ciphers":                                       `names "NOTACIPHER", which is not an OpenSSL cipher or alias`,
	}
	got := map[string][2]string{}
	moves := map[string]bool{}
	for _, ing := range report.Ingresses {
		moves[ing.Ingress] = ing.Moves
		for _, a := range ing.Annotations {
			got[ing.Ingress+" "+a.Key] = [2]string{a.Status, a.Reason}
		}
	}
	for _, k := range report.ConfigMap.Keys {
		got["configmap "+k.Key] = [2]string{k.Status, k.Reason}
	}
	for key, reason := range want {
		if g := got[key]; g[0] != "invalid" || !strings.Contains(g[1], reason) {
			t.Errorf("%s: %s %q, want invalid with %q", key, g[0], g[1], reason)
		}
	}
	if !moves["default/a"] || moves["default/b"] {
		t.Errorf("moves %v: want a to move and b not", moves)
	}
}
