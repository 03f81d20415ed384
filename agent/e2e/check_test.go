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

// restysync check reads a folder of manifests, marks every annotation of
// every Ingress (whatever its class) supported, invalid, missing-object,
// refused, unknown or ignored-by-ingress-nginx, says which Ingresses move
// unchanged, and exits 1 when anything is not supported, 0 when all is.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("old.yaml", ingress("old", ingressOpts{class: "nginx", host: "old.test", paths: []path{prefix("/", "web")},
		annotations: map[string]string{
			"nginx.ingress.kubernetes.io/configuration-snippet": `more_set_headers "X: y"; alias /etc;`,
			"nginx.ingress.kubernetes.io/load-balance":          "ewma",
			"nginx.ingress.kubernetes.io/session-cookie-name":   "bad;name",
			"nginx.ingress.kubernetes.io/affinity":              "cookie",
			"nginx.ingress.kubernetes.io/influxdb-host":         "influx",
			"kubectl.kubernetes.io/last-applied-configuration":  "{}",
		}}))
	write("new.yaml", ingress("new", ingressOpts{class: "restysync", host: "new.test", paths: []path{prefix("/", "web")},
		annotations: map[string]string{"restysync.io/upstream-hash-by": "$request_uri"}}))
	// Moves: what ingress-nginx ignores too, and a Secret the folder lacks.
	write("moves.yaml", ingress("moves", ingressOpts{class: "nginx", host: "moves.test", paths: []path{prefix("/", "web")},
		annotations: map[string]string{
			"nginx.ingress.kubernetes.io/hsts":            "true",
			"nginx.ingress.kubernetes.io/proxy-body-sise": "8m",
			"nginx.ingress.kubernetes.io/auth-type":       "basic",
			"nginx.ingress.kubernetes.io/auth-secret":     "absent",
		}}))

	out, err := exec.Command(agentBinary, "check", "--source", "file:"+dir, "-o", "json").Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("check with refused and unknown annotations: %v, want exit code 1", err)
	}
	var report struct {
		Ingresses []struct {
			Ingress     string `json:"ingress"`
			Moves       bool   `json:"moves"`
			Annotations []struct {
				Key, Status, Reason string
			} `json:"annotations"`
		} `json:"ingresses"`
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	got := map[string]string{}
	reasons := map[string]string{}
	moves := map[string]bool{}
	for _, ing := range report.Ingresses {
		moves[ing.Ingress] = ing.Moves
		for _, a := range ing.Annotations {
			got[ing.Ingress+" "+a.Key] = a.Status
			reasons[ing.Ingress+" "+a.Key] = a.Reason
			if a.Status != "supported" && a.Reason == "" {
				t.Errorf("%s %s is %s without a reason", ing.Ingress, a.Key, a.Status)
			}
		}
	}
	want := map[string]string{
		"default/old nginx.ingress.kubernetes.io/configuration-snippet": "refused",
		"default/old nginx.ingress.kubernetes.io/load-balance":          "supported",
		"default/old nginx.ingress.kubernetes.io/session-cookie-name":   "invalid",
		"default/old nginx.ingress.kubernetes.io/affinity":              "supported",
		"default/old nginx.ingress.kubernetes.io/influxdb-host":         "unknown",
		"default/new restysync.io/upstream-hash-by":                     "supported",
		"default/moves nginx.ingress.kubernetes.io/hsts":                "ignored-by-ingress-nginx",
		"default/moves nginx.ingress.kubernetes.io/proxy-body-sise":     "typo",
		"default/moves nginx.ingress.kubernetes.io/auth-type":           "supported",
		"default/moves nginx.ingress.kubernetes.io/auth-secret":         "missing-object",
	}
	for key, status := range want {
		if got[key] != status {
			t.Errorf("%s: %q, want %q", key, got[key], status)
		}
	}
	if len(got) != len(want) {
		t.Errorf("annotations reported: %v, want exactly %v", got, want)
	}
	for key, part := range map[string]string{
		"default/moves nginx.ingress.kubernetes.io/hsts":                "ConfigMap",
		"default/moves nginx.ingress.kubernetes.io/proxy-body-sise":     "typo of proxy-body-size",
		"default/moves nginx.ingress.kubernetes.io/auth-secret":         "Secret default/absent not found",
		"default/old nginx.ingress.kubernetes.io/configuration-snippet": "alias (line 1): reads files outside the config (CVE-2021-25742)",
	} {
		if !strings.Contains(reasons[key], part) {
			t.Errorf("%s: reason %q, want it to say %q", key, reasons[key], part)
		}
	}
	if !moves["default/moves"] || !moves["default/new"] || moves["default/old"] {
		t.Errorf("moves %v, want default/moves and default/new only", moves)
	}
	if s := report.Summary; s["ingresses"] != 3 || s["moves"] != 2 || s["supported"] != 4 || s["invalid"] != 1 || s["refused"] != 1 ||
		s["unknown"] != 1 || s["missing_object"] != 1 || s["ignored_by_ingress_nginx"] != 1 || s["typo"] != 1 {
		t.Errorf("summary %v", s)
	}
	text, _ := exec.Command(agentBinary, "check", "--source", "file:"+dir).CombinedOutput()
	if !strings.Contains(string(text), "\n2 of 3 Ingresses move unchanged\n") {
		t.Errorf("text report without its closing count:\n%s", text)
	}

	os.Remove(filepath.Join(dir, "old.yaml"))
	os.Remove(filepath.Join(dir, "moves.yaml"))
	text, err = exec.Command(agentBinary, "check", "--source", "file:"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("check with only supported annotations: %v\n%s", err, text)
	}
	if !strings.Contains(string(text), "1 supported, 0 invalid, 0 missing-object, 0 refused, 0 unknown, 0 typo, 0 ignored-by-ingress-nginx") {
		t.Errorf("text report:\n%s", text)
	}
}
