package e2e

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

const (
	ipCMWeb     = "127.0.0.151"
	ipCMDefault = "127.0.0.152"
	// cmName is the ConfigMap the agent is given (--configmap).
	cmName = "default/restysync"
)

// configMap returns the agent's ConfigMap, default/restysync, with data.
func configMap(data map[string]string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: restysync\n  namespace: default\ndata:\n")
	if len(data) == 0 {
		b.WriteString("  {}\n")
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %q\n", k, data[k])
	}
	return b.String()
}

// newConfigMapStack starts the agent with --configmap default/restysync on
// files, and nginx.
func newConfigMapStack(t *testing.T, files map[string]string) *stack {
	t.Helper()
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range files {
		s.writeFile(name, content)
	}
	s.start("--source", "file:"+s.manifests, "--configmap", cmName)
	return s
}

// request sends method path to host with the headers given and returns the
// response with its body read (not decompressed).
func (s *stack) request(method, host, path string, body io.Reader, header map[string]string) (*http.Response, string, error) {
	req, err := http.NewRequest(method, "http://"+host+path, body)
	if err != nil {
		return nil, "", err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, string(b), err
}

// The agent's ConfigMap, through the file source and real nginx: each key
// changes what nginx does, a bad value is a Problem while the other keys
// apply, an nginx setting reloads and load-balance alone does not.
func TestConfigMap(t *testing.T) {
	port := nginxproc.FreePort(t)
	page := strings.Repeat("restysync compresses this line. ", 64) // 2 KiB of text/plain
	serve(t, ipCMWeb, port, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.Error(w, "the backend's own 404 page", http.StatusNotFound)
		case "/xff":
			io.WriteString(w, r.Header.Get("X-Forwarded-For"))
		default:
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, page)
		}
	})
	serve(t, ipCMDefault, port, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "custom error page: code %s for %s", r.Header.Get("X-Code"), r.Header.Get("X-Original-URI"))
	})
	data := map[string]string{
		"use-gzip":           "true",
		"gzip-types":         "text/plain",
		"gzip-level":         "42", // bad: a Problem, gzip still on at level 1
		"server-tokens":      "false",
		"proxy-body-size":    "1k",
		"custom-http-errors": "404",
		"enable-access-log":  "true",
		"access-log-path":    "logs/access.log",
		"brotli-level":       "4", // unknown: a Problem
	}
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"web.yaml":      service("web", port, ep(ipCMWeb)) + "---\n" + service("fallback", port, ep(ipCMDefault)),
		"ingress.yaml":  ingress("web", ingressOpts{class: "restysync", host: "cm.test", paths: []path{prefix("/", "web")}, defaultSvc: "fallback"}),
		"settings.yaml": configMap(data),
	})
	s.eventually("served", func() error {
		_, body, err := s.request("GET", "cm.test", "/", nil, nil)
		if err == nil && body != page {
			err = fmt.Errorf("body %.40q", body)
		}
		return err
	})

	t.Run("use-gzip", func(t *testing.T) {
		resp, body, err := s.request("GET", "cm.test", "/", nil, map[string]string{"Accept-Encoding": "gzip"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Content-Encoding %q, want gzip (headers %v)", resp.Header.Get("Content-Encoding"), resp.Header)
		}
		zr, err := gzip.NewReader(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil || string(plain) != page {
			t.Errorf("gunzipped body differs (%v)", err)
		}
		if len(body) >= len(page)/4 {
			t.Errorf("%d bytes compressed to %d", len(page), len(body))
		}
	})

	t.Run("server-tokens false", func(t *testing.T) {
		resp, _, err := s.request("GET", "cm.test", "/", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("Server"); got != "nginx" {
			t.Errorf("Server %q, want nginx without its version", got)
		}
	})

	t.Run("proxy-body-size", func(t *testing.T) {
		resp, _, err := s.request("POST", "cm.test", "/", strings.NewReader(strings.Repeat("x", 2048)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a 2 KiB body with proxy-body-size 1k: %d, want 413", resp.StatusCode)
		}
		resp, _, err = s.request("POST", "cm.test", "/", strings.NewReader(strings.Repeat("x", 512)), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("a 512 byte body: %v %v, want 200", resp, err)
		}
	})

	t.Run("custom-http-errors", func(t *testing.T) {
		resp, body, err := s.request("GET", "cm.test", "/missing", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNotFound || body != "custom error page: code 404 for /missing" {
			t.Errorf("GET /missing: %d %q, want 404 with the default backend's page", resp.StatusCode, body)
		}
	})

	t.Run("access log", func(t *testing.T) {
		s.eventually("the request is logged", func() error {
			log, err := os.ReadFile(filepath.Join(s.shared, "logs", "access.log"))
			if err != nil {
				return err
			}
			if !strings.Contains(string(log), `"GET /missing HTTP/1.1" 404`) || !strings.Contains(string(log), "[default/web:80]") {
				return fmt.Errorf("access log:\n%s", log)
			}
			return nil
		})
	})

	t.Run("a bad value is a Problem, the others apply", func(t *testing.T) {
		reason := s.problemOf("ConfigMap " + cmName)
		if reason == "" {
			t.Fatalf("no problem for the ConfigMap: %+v", s.debugState().Problems)
		}
		var keys []string
		for _, p := range s.debugState().Problems {
			if p.Object == "ConfigMap "+cmName {
				keys = append(keys, p.Reason)
			}
		}
		if len(keys) != 2 || !strings.Contains(strings.Join(keys, "\n"), "key gzip-level") ||
			!strings.Contains(strings.Join(keys, "\n"), "key brotli-level") {
			t.Errorf("problems %q, want gzip-level and brotli-level", keys)
		}
		if got := strings.Count(s.agent.log.String(), "key brotli-level"); got != 1 {
			t.Errorf("the unknown key was logged %d times, want once", got)
		}
	})

	t.Run("keep-alive and server-tokens changes reload", func(t *testing.T) {
		reloads := sum(s.metricAtLeast("metrics", "restysync_reloads_total", 0), "restysync_reloads_total")
		// A connection nginx keeps open is reused.
		resp, _, err := s.request("GET", "cm.test", "/", nil, nil)
		if err != nil || resp.Close {
			t.Fatalf("with the default keep-alive nginx closed the connection: %v", err)
		}
		data["server-tokens"] = "true"
		data["keep-alive"] = "0"
		data["use-forwarded-headers"] = "true"
		data["compute-full-forwarded-for"] = "false"
		s.writeFile("settings.yaml", configMap(data))
		s.eventually("nginx shows its version", func() error {
			resp, _, err := s.request("GET", "cm.test", "/", nil, nil)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(resp.Header.Get("Server"), "nginx/") {
				return fmt.Errorf("Server %q", resp.Header.Get("Server"))
			}
			return nil
		})
		resp, _, err = s.request("GET", "cm.test", "/", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Close {
			t.Errorf("keep-alive 0: nginx keeps the connection open (headers %v)", resp.Header)
		}
		_, xff, err := s.request("GET", "cm.test", "/xff", nil, map[string]string{"X-Forwarded-For": "203.0.113.7, 198.51.100.9"})
		if err != nil || xff != "198.51.100.9" {
			t.Errorf("X-Forwarded-For at the backend %q (%v), want the address the proxy reported", xff, err)
		}
		s.metricsWhere("a reload", func(m map[string]float64) error {
			if got := sum(m, "restysync_reloads_total"); got <= reloads {
				return fmt.Errorf("reloads %v, was %v", got, reloads)
			}
			return nil
		})
	})

	t.Run("load-balance alone is a push", func(t *testing.T) {
		s.settle()
		before := s.metricAtLeast("metrics", "restysync_reloads_total", 0)
		workers := s.steadyWorkers()
		data["load-balance"] = "ewma"
		s.writeFile("settings.yaml", configMap(data))
		api := s.nginx.API()
		s.eventually("Lua balances with EWMA", func() error {
			if body := getBody(t, api, "http://restysync/backends"); !strings.Contains(body, `"ewma"`) {
				return fmt.Errorf("backends %s", body)
			}
			return nil
		})
		time.Sleep(300 * time.Millisecond) // a reload would have happened by now
		after, err := s.scrape()
		if err != nil {
			t.Fatal(err)
		}
		if got, was := sum(after, "restysync_reloads_total"), sum(before, "restysync_reloads_total"); got != was {
			t.Errorf("reloads_total %v, was %v: a load-balance change must not reload", got, was)
		}
		s.noReload(t, workers, "ConfigMap load-balance round_robin → ewma")
		if _, body, err := s.request("GET", "cm.test", "/", nil, nil); err != nil || body != page {
			t.Errorf("after the push: %v %.40q", err, body)
		}
	})

	t.Run("removing the ConfigMap restores the defaults", func(t *testing.T) {
		s.removeFile("settings.yaml")
		s.eventually("gzip off", func() error {
			resp, _, err := s.request("GET", "cm.test", "/", nil, map[string]string{"Accept-Encoding": "gzip"})
			if err != nil {
				return err
			}
			if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Server") != "nginx" {
				return fmt.Errorf("Content-Encoding %q, Server %q", resp.Header.Get("Content-Encoding"), resp.Header.Get("Server"))
			}
			return nil
		})
		s.eventually("the missing ConfigMap is a Problem", func() error {
			if reason := s.problemOf("ConfigMap " + cmName); !strings.Contains(reason, "not found") {
				return fmt.Errorf("problem %q", reason)
			}
			return nil
		})
	})
}

// restysync check --configmap reports every key of the ConfigMap as
// supported, invalid, refused or unknown, in text and JSON, and exits 1
// unless all are supported.
func TestCheckConfigMap(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "settings.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(configMap(map[string]string{
		"use-gzip": "true", "proxy-body-size": "lots", "http-snippet": "deny all;", "enable-brotli": "true",
	}))
	out, err := exec.Command(agentBinary, "check", "--source", "file:"+dir, "--configmap", cmName, "-o", "json").Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("check with bad keys: %v, want exit code 1", err)
	}
	var report struct {
		ConfigMap struct {
			ConfigMap string `json:"configMap"`
			Found     bool   `json:"found"`
			Keys      []struct{ Key, Status, Reason string }
			Summary   map[string]int `json:"summary"`
		} `json:"configMap"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	got := map[string]string{}
	for _, k := range report.ConfigMap.Keys {
		got[k.Key] = k.Status
		if k.Status != "supported" && k.Reason == "" {
			t.Errorf("%s is %s without a reason", k.Key, k.Status)
		}
	}
	want := map[string]string{"use-gzip": "supported", "proxy-body-size": "invalid", "http-snippet": "refused", "enable-brotli": "unknown"}
	if !maps.Equal(got, want) || !report.ConfigMap.Found || report.ConfigMap.ConfigMap != cmName {
		t.Errorf("report %+v, want keys %v", report.ConfigMap, want)
	}
	if s := report.ConfigMap.Summary; s["supported"] != 1 || s["invalid"] != 1 || s["refused"] != 1 || s["unknown"] != 1 {
		t.Errorf("summary %v", s)
	}

	write(configMap(map[string]string{"use-gzip": "true", "load-balance": "ewma"}))
	// check fails on a source with no Ingress: give it one.
	if err := os.WriteFile(filepath.Join(dir, "ingress.yaml"),
		[]byte(ingress("web", ingressOpts{class: "restysync", host: "web.test", paths: []path{prefix("/", "web")}})), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := exec.Command(agentBinary, "check", "--source", "file:"+dir, "--configmap", cmName).CombinedOutput()
	if err != nil {
		t.Fatalf("check with supported keys only: %v\n%s", err, text)
	}
	if !strings.Contains(string(text), "ConfigMap default/restysync\n  keys: 2 supported, 0 invalid, 0 refused, 0 unknown") {
		t.Errorf("text report:\n%s", text)
	}

	out, err = exec.Command(agentBinary, "check", "--source", "file:"+dir, "--configmap", "default/other").CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "not found") {
		t.Errorf("check of a missing ConfigMap: %v\n%s", err, out)
	}
}

// restysync inspect --source --configmap reads the ConfigMap as the agent
// would: its bad and unknown keys are Problems in the dry run, and a
// ConfigMap that does not exist is one too.
func TestInspectConfigMap(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"classes.yaml":  ingressClasses,
		"web.yaml":      service("web", 8080, ep("127.0.0.159")),
		"ingress.yaml":  ingress("web", ingressOpts{class: "restysync", host: "inspect.test", paths: []path{prefix("/", "web")}}),
		"settings.yaml": configMap(map[string]string{"load-balance": "ewma", "gzip-level": "42", "brotli-level": "4"}),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inspect := func(args ...string) string {
		out, err := exec.Command(agentBinary, append([]string{"inspect", "--source", "file:" + dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("restysync inspect %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := inspect("--configmap", cmName)
	for _, want := range []string{"inspect.test", "ConfigMap default/restysync: key gzip-level", "ConfigMap default/restysync: key brotli-level"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect --configmap output lacks %q:\n%s", want, out)
		}
	}
	if out := inspect("--configmap", "default/missing"); !strings.Contains(out, "ConfigMap default/missing: not found") {
		t.Errorf("inspect --configmap default/missing does not report it missing:\n%s", out)
	}
	if out := inspect(); strings.Contains(out, "ConfigMap default/") {
		t.Errorf("inspect without --configmap reports the ConfigMap:\n%s", out)
	}
}
