package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

// Backend address of the dashboards test.
const ipDash = "127.0.0.241"

// dashboardsDir holds ingress-nginx's published dashboards, unchanged.
var dashboardsDir = filepath.Join("..", "..", "examples", "grafana", "ingress-nginx")

// ownDashboard is restysync's own dashboard.
var ownDashboard = filepath.Join("..", "..", "charts", "restysync", "dashboards", "restysync.json")

// TestIngressNginxDashboards runs a real Prometheus (Debian's prometheus)
// that scrapes the agent while real traffic goes through nginx, then
// evaluates every query of every panel (and annotation) of ingress-nginx's
// published dashboards nginx.json and request-handling-performance.json,
// and of restysync's own dashboard, through Prometheus's HTTP API, with
// the template variables set to match everything, and wants each to
// return data.
//
// The traffic covers what the panels count: 200s proxied to a backend
// (upstream times), 503s of a path without endpoints (error rates), POSTs
// with bodies (request sizes), a host with TLS (certificate expiry); and a
// reload nginx refuses (a ConfigMap's access-log-path that is a folder),
// which "Last Config Failed" counts: that panel is empty while the last
// reload succeeded, as in ingress-nginx.
func TestIngressNginxDashboards(t *testing.T) {
	prometheus := lookPrometheus(t)
	b := startBackends(t, ipDash)
	pair := newTLSKeyPair(t, 41, "dash.test")
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("dash", b.port, ep(ipDash)) + "---\n" + service("down", b.port),
		"tls.yaml":      tlsSecret("dash-tls", pair.cert, pair.key),
		"ingress.yaml": ingress("dash", ingressOpts{class: "restysync", host: "dash.test",
			paths:       []path{prefix("/", "dash"), prefix("/down", "down")},
			tls:         []ingressTLS{{secret: "dash-tls", hosts: []string{"dash.test"}}},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "false"}}),
		// An annotation of its own gives this Ingress a profile: its
		// labels cross the jump to the named location in a variable.
		"profiled.yaml": ingress("dash-profiled", ingressOpts{class: "restysync", host: "profiled.dash.test",
			paths:       []path{prefix("/", "dash")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}}),
		"configmap.yaml": configMap(nil),
	})
	s.eventually("dash.test served", func() error { return s.expect("dash.test", "/", ipDash) })
	s.eventually("dash.test/down answers 503", func() error { return s.expect("dash.test", "/down", "503") })

	prom := startPrometheus(t, prometheus, strings.TrimPrefix(s.admin, "http://"))

	// Traffic, while Prometheus scrapes every second: rate() over [1m]
	// and irate() over [2m] need two scrapes that saw it.
	traffic := func(d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); {
			for _, p := range []string{"/", "/a/b", "/down"} {
				if _, _, err := s.get("dash.test", p); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.expect("profiled.dash.test", "/", ipDash); err != nil {
				t.Fatal(err)
			}
			resp, _, err := s.request(http.MethodPost, "dash.test", "/", strings.NewReader(strings.Repeat("x", 300)), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			time.Sleep(50 * time.Millisecond)
		}
	}
	traffic(8 * time.Second)

	// A reload nginx refuses: "Last Config Failed" counts it.
	if err := os.Mkdir(filepath.Join(s.shared, "logs", "blocked"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.writeFile("configmap.yaml", configMap(map[string]string{"enable-access-log": "true", "access-log-path": "logs/blocked"}))
	s.metricAtLeast("the reload nginx refused is counted", "restysync_reload_failures_total", 1)
	traffic(8 * time.Second)
	prom.waitScraped(t, `nginx_ingress_controller_config_last_reload_successful == 0`)

	// Each request is counted under its Ingress, path and host.
	for _, expr := range []string{
		`nginx_ingress_controller_requests{namespace="default",ingress="dash",service="dash",path="/",host="dash.test",status="200",method="GET",canary=""}`,
		`nginx_ingress_controller_requests{namespace="default",ingress="dash",service="down",path="/down",host="dash.test",status="503",method="GET"}`,
		`nginx_ingress_controller_requests{ingress="dash",status="200",method="POST"}`,
		`nginx_ingress_controller_requests{ingress="dash-profiled",service="dash",path="/",host="profiled.dash.test",status="200"}`,
		`nginx_ingress_controller_response_duration_seconds_count{ingress="dash",path="/",method="GET"}`,
	} {
		if n, err := prom.query(expr); err != nil || n != 1 {
			t.Errorf("%s: %d series (%v), want 1", expr, n, err)
		}
	}

	vars := map[string]string{}
	for _, name := range []string{"controller_class", "controller", "namespace", "ingress", "exported_namespace", "job"} {
		vars[name] = ".*"
	}
	checked := 0
	for _, file := range []string{filepath.Join(dashboardsDir, "nginx.json"), filepath.Join(dashboardsDir, "request-handling-performance.json"), ownDashboard} {
		for _, q := range dashboardQueries(t, file) {
			checked++
			expr := expandVariables(q.expr, vars)
			n, err := prom.query(expr)
			switch {
			case err != nil:
				t.Errorf("%s: panel %q: %v\n%s", filepath.Base(file), q.panel, err, expr)
			case n == 0:
				t.Errorf("%s: panel %q returns nothing:\n%s", filepath.Base(file), q.panel, expr)
			default:
				t.Logf("%s: panel %q: %d series", filepath.Base(file), q.panel, n)
			}
		}
	}
	if checked < 35 {
		t.Errorf("only %d queries read from the dashboards", checked)
	}
	if t.Failed() {
		body, _, _ := s.adminGet("/metrics")
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "nginx_ingress_controller_") {
				lines = append(lines, l)
			}
		}
		t.Logf("the agent's nginx_ingress_controller_ series:\n%s", strings.Join(lines, "\n"))
		t.Logf("prometheus log:\n%s", prom.log.String())
	}
}

// dashboardQuery is one query of a dashboard: a panel's target or an
// annotation.
type dashboardQuery struct {
	panel, expr string
}

// dashboardQueries reads every query of a Grafana dashboard: each panel's
// targets (rows' nested panels too) and the annotations'.
func dashboardQueries(t *testing.T, file string) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []dashboardQuery
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out = append(out, dashboardQuery{panel: "annotation " + a.Name, expr: a.Expr})
		}
	}
	var walk func([]json.RawMessage)
	walk = func(panels []json.RawMessage) {
		for _, raw := range panels {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, target := range p.Targets {
				if target.Expr != "" {
					out = append(out, dashboardQuery{panel: p.Title, expr: target.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// expandVariables replaces Grafana's $name and ${name} by vars[name],
// longest names first ($controller_class before $controller); Grafana's
// own $__interval and $__rate_interval become 1m.
func expandVariables(expr string, vars map[string]string) string {
	expr = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "${__rate_interval}", "1m", "${__interval}", "1m").Replace(expr)
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	// Longest first.
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if len(names[j]) > len(names[i]) {
				names[i], names[j] = names[j], names[i]
			}
		}
	}
	for _, name := range names {
		expr = strings.ReplaceAll(expr, "${"+name+"}", vars[name])
		expr = strings.ReplaceAll(expr, "$"+name, vars[name])
	}
	return expr
}

// lookPrometheus finds Debian's prometheus; without it the test fails
// under CI=true (go tool task test-deps installs it) and skips otherwise.
func lookPrometheus(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("prometheus")
	if err != nil {
		if isCI() {
			t.Fatal("prometheus is not installed (go tool task test-deps installs Debian's)")
		}
		t.Skip("prometheus is not installed (go tool task test-deps installs Debian's)")
	}
	return path
}

// promServer is a Prometheus started for one test.
type promServer struct {
	url string
	log *syncbuf.Buffer
}

// startPrometheus runs prometheus scraping target (HOST:PORT, /metrics)
// every second, with its data in a temporary folder, and stops it when the
// test ends.
func startPrometheus(t *testing.T, binary, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: restysync
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(nginxproc.FreePort(t))
	p := &promServer{url: "http://" + addr, log: &syncbuf.Buffer{}}
	cmd := exec.Command(binary,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30s: %v\n%s", err, p.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.waitScraped(t, `up{job="restysync"} == 1`)
	return p
}

// waitScraped waits until expr returns data.
func (p *promServer) waitScraped(t *testing.T, expr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := p.query(expr)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s returned nothing within 30s (%v)\n%s", expr, err, p.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// query evaluates expr now and returns how many series (or 1 for a
// scalar) it returned.
func (p *promServer) query(expr string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("prometheus: %s", r.Error)
	}
	switch r.Data.ResultType {
	case "scalar", "string":
		return 1, nil
	}
	var series []json.RawMessage
	if err := json.Unmarshal(r.Data.Result, &series); err != nil {
		return 0, err
	}
	return len(series), nil
}
