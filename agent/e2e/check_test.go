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
// every Ingress (whatever its class) supported, invalid, refused or unknown,
// and exits 1 when anything is not supported, 0 when all is.
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
			"nginx.ingress.kubernetes.io/configuration-snippet": `more_set_headers "X: y";`,
			"nginx.ingress.kubernetes.io/load-balance":          "ewma",
			"nginx.ingress.kubernetes.io/session-cookie-name":   "bad;name",
			"nginx.ingress.kubernetes.io/affinity":              "cookie",
			"nginx.ingress.kubernetes.io/mirror-target":         "http://mirror",
			"kubectl.kubernetes.io/last-applied-configuration":  "{}",
		}}))
	write("new.yaml", ingress("new", ingressOpts{class: "restysync", host: "new.test", paths: []path{prefix("/", "web")},
		annotations: map[string]string{"restysync.io/upstream-hash-by": "$request_uri"}}))

	out, err := exec.Command(agentBinary, "check", "--source", "file:"+dir, "-o", "json").Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("check with refused and unknown annotations: %v, want exit code 1", err)
	}
	var report struct {
		Ingresses []struct {
			Ingress     string `json:"ingress"`
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
	for _, ing := range report.Ingresses {
		for _, a := range ing.Annotations {
			got[ing.Ingress+" "+a.Key] = a.Status
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
		"default/old nginx.ingress.kubernetes.io/mirror-target":         "unknown",
		"default/new restysync.io/upstream-hash-by":                     "supported",
	}
	for key, status := range want {
		if got[key] != status {
			t.Errorf("%s: %q, want %q", key, got[key], status)
		}
	}
	if len(got) != len(want) {
		t.Errorf("annotations reported: %v, want exactly %v", got, want)
	}
	if s := report.Summary; s["ingresses"] != 2 || s["supported"] != 3 || s["invalid"] != 1 || s["refused"] != 1 || s["unknown"] != 1 {
		t.Errorf("summary %v", s)
	}

	os.Remove(filepath.Join(dir, "old.yaml"))
	text, err := exec.Command(agentBinary, "check", "--source", "file:"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("check with only supported annotations: %v\n%s", err, text)
	}
	if !strings.Contains(string(text), "1 supported, 0 invalid, 0 refused, 0 unknown") {
		t.Errorf("text report:\n%s", text)
	}
}
