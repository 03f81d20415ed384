package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/admin"
	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// Backend addresses of the observability test.
const (
	ipObs1 = "127.0.0.51"
	ipObs2 = "127.0.0.52"
	ipObs3 = "127.0.0.53"
)

const obsBackend = "default/obs:80"

// scrape reads the agent's /metrics into series → value, keyed as the text
// format prints them: `name{label="value",...}` (labels sorted by name).
func (s *stack) scrape() (map[string]float64, error) {
	body, code, err := s.adminGet("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", code)
	}
	series := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series, nil
}

// sum adds up every series of a metric name, whatever its labels.
func sum(series map[string]float64, name string) float64 {
	var total float64
	for k, v := range series {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

func (s *stack) adminGet(path string) (string, int, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(s.admin + path)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return string(body), resp.StatusCode, err
}

// expectAdmin checks that the admin path answers code.
func (s *stack) expectAdmin(path string, code int) error {
	body, got, err := s.adminGet(path)
	if err != nil {
		return err
	}
	if got != code {
		return fmt.Errorf("GET %s: %d %s, want %d", path, got, strings.TrimSpace(body), code)
	}
	return nil
}

// metricsWhere scrapes until check passes and returns that scrape.
func (s *stack) metricsWhere(what string, check func(m map[string]float64) error) map[string]float64 {
	s.t.Helper()
	var last map[string]float64
	s.eventually(what, func() error {
		m, err := s.scrape()
		if err != nil {
			return err
		}
		last = m
		return check(m)
	})
	return last
}

// metricAtLeast waits until the series is at least min.
func (s *stack) metricAtLeast(what, series string, min float64) map[string]float64 {
	s.t.Helper()
	return s.metricsWhere(what, func(m map[string]float64) error {
		if v, ok := m[series]; !ok || v < min {
			return fmt.Errorf("%s = %v (present %v), want at least %v", series, v, ok, min)
		}
		return nil
	})
}

// rose says which of the series did not rise from before to m.
func rose(before, m map[string]float64, series ...string) error {
	for _, k := range series {
		if m[k] <= before[k] {
			return fmt.Errorf("%s = %v, was %v: want it to rise", k, m[k], before[k])
		}
	}
	return nil
}

func obsFiles(port int, endpoints []endpoint, paths ...path) map[string]string {
	return map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("obs", port, endpoints...),
		"ingress.yaml": ingress("obs", ingressOpts{class: "restysync", host: "obs.test", paths: paths}),
	}
}

// TestObservability runs the agent with its admin server beside a real
// nginx and checks that health, readiness, metrics and `restysync inspect`
// tell the truth as the manifests change.
func TestObservability(t *testing.T) {
	b := startBackends(t, ipObs1, ipObs2, ipObs3)
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range obsFiles(b.port, []endpoint{ep(ipObs1), ep(ipObs2)}, prefix("/", "obs")) {
		s.writeFile(name, content)
	}
	s.startAgentOnly("--source", "file:"+s.manifests)
	t.Cleanup(func() {
		if t.Failed() && s.nginx == nil {
			t.Logf("agent log:\n%s", s.agent.log.String())
		}
	})

	t.Run("before nginx: alive, not ready", func(t *testing.T) {
		s.eventually("/healthz answers 200", func() error { return s.expectAdmin("/healthz", http.StatusOK) })
		s.metricAtLeast("a sync waits for nginx", `restysync_syncs_total{outcome="wait-for-nginx"}`, 1)
		if err := s.expectAdmin("/readyz", http.StatusServiceUnavailable); err != nil {
			t.Error(err)
		}
		m, err := s.scrape()
		if err != nil {
			t.Fatal(err)
		}
		if m["restysync_lua_up"] != 0 || m["restysync_lua_scrape_errors_total"] < 1 {
			t.Errorf("Lua is down: lua_up %v, scrape errors %v", m["restysync_lua_up"], m["restysync_lua_scrape_errors_total"])
		}
	})

	s.startNginx()
	servedByOneOf := func(host, path string, want ...string) error {
		status, body, err := s.get(host, path)
		if err != nil {
			return err
		}
		if status != http.StatusOK || !slicesContains(want, body) {
			return fmt.Errorf("%s%s: %d %q, want one of %v", host, path, status, body, want)
		}
		return nil
	}
	s.eventually("obs.test is served", func() error { return servedByOneOf("obs.test", "/", ipObs1, ipObs2) })

	t.Run("ready once nginx runs the config", func(t *testing.T) {
		s.eventually("/readyz answers 200", func() error { return s.expectAdmin("/readyz", http.StatusOK) })
		if err := s.expectAdmin("/healthz", http.StatusOK); err != nil {
			t.Error(err)
		}
		m := s.metricAtLeast("Lua holds the backend", `restysync_lua_backend_endpoints{backend="`+obsBackend+`"}`, 2)
		for series, want := range map[string]float64{
			`restysync_objects{kind="Ingress"}`:       1,
			`restysync_objects{kind="IngressClass"}`:  2,
			`restysync_objects{kind="Service"}`:       1,
			`restysync_objects{kind="EndpointSlice"}`: 1,
			`restysync_problems{kind="Ingress"}`:      0,
			`restysync_quarantined_ingresses`:         0,
			`restysync_leader`:                        0,
			`restysync_lua_up`:                        1,
			`restysync_lua_certificates`:              0,
			`restysync_lua_api_denied_total`:          0,
		} {
			if got, ok := m[series]; !ok || got != want {
				t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
			}
		}
		if sum(m, "restysync_config_info") != 1 || sum(m, "restysync_build_info") != 1 {
			t.Errorf("config_info %v, build_info %v: want one series of each", sum(m, "restysync_config_info"), sum(m, "restysync_build_info"))
		}
		if m["process_start_time_seconds"] == 0 || m["go_goroutines"] == 0 {
			t.Error("no process or Go collector series")
		}
	})

	t.Run("endpoint change: a push, no reload", func(t *testing.T) {
		before, err := s.scrape()
		if err != nil {
			t.Fatal(err)
		}
		s.writeFile("service.yaml", service("obs", b.port, ep(ipObs1), ep(ipObs2), ep(ipObs3)))
		// The sync is recorded just after its push lands: wait for both.
		after := s.metricsWhere("the push is recorded", func(m map[string]float64) error {
			if got := m[`restysync_lua_backend_endpoints{backend="`+obsBackend+`"}`]; got != 3 {
				return fmt.Errorf("Lua holds %v endpoints, want 3", got)
			}
			for _, name := range []string{"restysync_syncs_total", "restysync_sync_duration_seconds_count"} {
				if got, was := sum(m, name), sum(before, name); got <= was {
					return fmt.Errorf("%s %v, was %v: want it to rise", name, got, was)
				}
			}
			return rose(before, m, `restysync_lua_push_bytes_total{kind="backends"}`, `restysync_lua_pushes_total{kind="backends"}`,
				"restysync_event_to_push_seconds_count", `restysync_lua_push_duration_seconds_count{kind="backends"}`)
		})
		if got, was := after["restysync_reloads_total"], before["restysync_reloads_total"]; got != was {
			t.Errorf("reloads_total %v, was %v: an endpoint change must not reload", got, was)
		}
		if got := after[`restysync_lua_push_failures_total{kind="backends"}`]; got != 0 {
			t.Errorf("lua_push_failures_total %v, want 0", got)
		}
		s.eventually("the new endpoint answers", func() error {
			for range 6 {
				if _, body, err := s.get("obs.test", "/"); err == nil && body == ipObs3 {
					return nil
				}
			}
			return fmt.Errorf("%s never answered", ipObs3)
		})
	})

	t.Run("new path of a host Lua routes: a push, no reload", func(t *testing.T) {
		before, err := s.scrape()
		if err != nil {
			t.Fatal(err)
		}
		s.writeFile("ingress.yaml", ingress("obs", ingressOpts{class: "restysync", host: "obs.test",
			paths: []path{prefix("/", "obs"), exact("/two", "obs")}}))
		after := s.metricsWhere("a routes push", func(m map[string]float64) error {
			return rose(before, m, `restysync_lua_pushes_total{kind="routes"}`, `restysync_lua_push_bytes_total{kind="routes"}`)
		})
		if after["restysync_reloads_total"] != before["restysync_reloads_total"] {
			t.Errorf("reloads_total went from %v to %v for a path Lua routes", before["restysync_reloads_total"], after["restysync_reloads_total"])
		}
		s.eventually("the new path answers", func() error { return s.expect("obs.test", "/two", ipObs3) })
	})

	t.Run("Ingress change: a reload", func(t *testing.T) {
		before, err := s.scrape()
		if err != nil {
			t.Fatal(err)
		}
		// An annotation of its own gives the host a server block.
		s.writeFile("ingress.yaml", ingress("obs", ingressOpts{class: "restysync", host: "obs.test",
			annotations: map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"},
			paths:       []path{prefix("/", "obs"), exact("/two", "obs")}}))
		after := s.metricsWhere("a reload", func(m map[string]float64) error {
			return rose(before, m, "restysync_reloads_total", "restysync_reload_duration_seconds_count",
				"restysync_last_reload_success_timestamp_seconds")
		})
		if after["restysync_reload_failures_total"] != 0 {
			t.Errorf("reload_failures_total %v, want 0", after["restysync_reload_failures_total"])
		}
		// The sync log line names the Ingress and why nginx reloaded.
		s.eventually("the sync log line names the change and the reload's reason", func() error {
			for _, line := range strings.Split(s.agent.log.String(), "\n") {
				if strings.Contains(line, "msg=sync action=reload") && strings.Contains(line, ` changed="Ingress default/obs"`) &&
					strings.Contains(line, ` reason="1 new profile`) {
					return nil
				}
			}
			return fmt.Errorf("no such line")
		})
		s.eventually("the new config hash is the info series", func() error {
			m, err := s.scrape()
			if err != nil {
				return err
			}
			for k := range m {
				if strings.HasPrefix(k, "restysync_config_info{") {
					if _, was := before[k]; was {
						return fmt.Errorf("config_info still %s", k)
					}
					return nil
				}
			}
			return fmt.Errorf("no config_info")
		})
	})

	t.Run("requests are counted per backend by Lua", func(t *testing.T) {
		key := `restysync_lua_backend_requests_total{backend="` + obsBackend + `"}`
		before, err := s.scrape()
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if err := servedByOneOf("obs.test", "/", ipObs1, ipObs2, ipObs3); err != nil {
				t.Fatal(err)
			}
		}
		after := s.metricAtLeast("five more requests counted", key, before[key]+5)
		if f := after[`restysync_lua_backend_failures_total{backend="`+obsBackend+`"}`]; f != 0 {
			t.Errorf("failures %v, want 0", f)
		}
		if after["restysync_lua_balancer_rebuilds_total"] < 1 {
			t.Errorf("balancer_rebuilds_total %v, want at least 1", after["restysync_lua_balancer_rebuilds_total"])
		}
	})

	t.Run("problems", func(t *testing.T) {
		s.writeFile("broken.yaml", ingress("broken", ingressOpts{class: "restysync", host: "broken.test",
			paths: []path{{path: "/", pathType: "Prefix", service: "obs", port: "9999"}}}))
		s.metricAtLeast("the broken Ingress is a Problem", `restysync_problems{kind="Ingress"}`, 1)
		s.metricAtLeast("and a validation failure of the agent", `restysync_validation_failures_total{validator="agent"}`, 1)
	})

	t.Run("inspect a running agent", func(t *testing.T) {
		out, err := exec.Command(agentBinary, "inspect", "--admin", s.admin).CombinedOutput()
		if err != nil {
			t.Fatalf("restysync inspect: %v\n%s", err, out)
		}
		text := string(out)
		for _, want := range []string{
			"obs.test", "/ (Prefix) → Service default/obs port 80", "/two (Exact) → Service default/obs port http",
			"│   settings: profile @restysync_p_", "body-size 8m",
			ipObs3 + ":" + strconv.Itoa(b.port), "Problems (1)", "Ingress default/broken",
			"Quarantined Ingresses: none", "the applied config, up to date", "in step",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("inspect output lacks %q:\n%s", want, text)
			}
		}

		out, err = exec.Command(agentBinary, "inspect", "--admin", strings.TrimPrefix(s.admin, "http://"), "-o", "json").Output()
		if err != nil {
			t.Fatalf("restysync inspect -o json: %v\n%s", err, out)
		}
		var r admin.Report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("inspect -o json does not parse: %v\n%s", err, out)
		}
		if r.DryRun || r.Config == nil || !r.Config.NginxRunsApplied || !r.Config.InStep || r.Lua == nil || !r.Lua.InStep {
			t.Errorf("report of a running agent in step: %s", out)
		}
		if len(r.Hosts) != 2 || r.Hosts[0].Host != "broken.test" || r.Hosts[1].Host != "obs.test" || len(r.Hosts[1].Paths) != 2 ||
			len(r.Hosts[1].Paths[0].Endpoints) != 3 || len(r.Problems) != 1 {
			t.Errorf("hosts %+v problems %+v", r.Hosts, r.Problems)
		} else if p := r.Hosts[1].Paths[0]; p.Backend != obsBackend || p.Service != "Service default/obs port 80" {
			t.Errorf("path /: backend %q, service %q; want the Lua key %s and its Service", p.Backend, p.Service, obsBackend)
		}
		state, code, err := s.adminGet("/debug/state")
		if err != nil || code != http.StatusOK || !strings.Contains(state, `"obs.test"`) {
			t.Errorf("GET /debug/state: %d %v\n%s", code, err, state)
		}
	})

	t.Run("inspect --source without an agent", func(t *testing.T) {
		out, err := exec.Command(agentBinary, "inspect", "--source", "file:"+s.manifests, "--admin", "127.0.0.1:1").CombinedOutput()
		if err != nil {
			t.Fatalf("restysync inspect --source: %v\n%s", err, out)
		}
		for _, want := range []string{"dry run", "obs.test", ipObs1 + ":" + strconv.Itoa(b.port), "Ingress default/broken"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("inspect --source output lacks %q:\n%s", want, out)
			}
		}
		out, err = exec.Command(agentBinary, "inspect", "--source", "file:"+s.manifests, "-o", "json").Output()
		if err != nil {
			t.Fatalf("restysync inspect --source -o json: %v", err)
		}
		var r admin.Report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("inspect --source -o json does not parse: %v\n%s", err, out)
		}
		if !r.DryRun || r.Config != nil || len(r.Hosts) != 2 {
			t.Errorf("dry-run report: %s", out)
		}
	})

	t.Run("inspect without an agent fails", func(t *testing.T) {
		out, err := exec.Command(agentBinary, "inspect", "--admin", "127.0.0.1:1").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--source") {
			t.Errorf("inspect with no agent: %v\n%s", err, out)
		}
	})
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// nginx's error log where people look: its lines reach nginx's stderr
// (the container's log) at the ConfigMap's error-log-level, notice by
// default; the file the agent reads rejections from holds error lines
// only, and the agent empties it once it passes apply.MaxErrorLogSize.
func TestNginxErrorLog(t *testing.T) {
	const ip = "127.0.0.202"
	deadPort := nginxproc.FreePort(t) // nothing listens there
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", deadPort, ep(ip)),
		"cm.yaml":       configMap(nil),
		"dead.yaml":     appIngress("dead", "dead.test", nil),
	})
	s.eventually("dead.test answers 502", func() error { return s.expect("dead.test", "/", "502") })
	logPath := filepath.Join(s.shared, render.ErrorLogName)
	// An error reading it leaves "": the checks below fail.
	readFile := func() string { data, _ := os.ReadFile(logPath); return string(data) }
	// nginx's stderr is copied by the test from a pipe: read it until the
	// lines are there.
	onStderr := func(what string, check func(stderr string) error) {
		t.Helper()
		s.eventually(what, func() error { return check(s.nginx.Stderr()) })
	}
	workersLogged := func(stderr string) error {
		for _, pid := range s.nginx.WorkerPIDs() {
			if !strings.Contains(stderr, fmt.Sprintf("start worker process %d\n", pid)) {
				return errorf("no notice line of worker %d's start", pid)
			}
		}
		return nil
	}
	onStderr("nginx's stderr has the notice lines of its workers' start", workersLogged)
	onStderr("nginx's stderr has the failed connection", func(stderr string) error {
		if !strings.Contains(stderr, "connect() failed") {
			return errorf("no connect() failed line")
		}
		return nil
	})
	if file := readFile(); !strings.Contains(file, "connect() failed") || strings.Contains(file, "[notice]") {
		t.Errorf("the error log file should hold the error lines only:\n%s", file)
	}

	// A file past the limit is emptied by the agent, and nginx goes on
	// writing at its start.
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(bytes.Repeat([]byte("padding\n"), apply.MaxErrorLogSize/8+1))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	s.eventually("the agent empties the error log file", func() error {
		if info, err := os.Stat(logPath); err != nil || info.Size() > apply.MaxErrorLogSize {
			return errorf("the error log file: %v, %v", info.Size(), err)
		}
		return nil
	})
	s.expect("dead.test", "/", "502")
	if file := readFile(); !strings.HasPrefix(file, "20") || strings.Contains(file, "padding") || !strings.Contains(file, "connect() failed") {
		t.Errorf("after the agent emptied it, the error log file holds:\n%q", file)
	}

	// error-log-level error: the workers of the reload to it start
	// without a notice line; errors still reach stderr.
	oldWorkers := s.nginx.WorkerPIDs()
	failures := strings.Count(s.nginx.Stderr(), "connect() failed")
	s.writeFile("cm.yaml", configMap(map[string]string{"error-log-level": "error"}))
	lua := apply.NewLuaClient(filepath.Join(s.shared, render.SocketName))
	s.eventually("nginx runs with error-log-level error", func() error {
		conf, _ := os.ReadFile(filepath.Join(s.shared, render.ConfigName))
		if !strings.Contains(string(conf), `error_log stderr "error";`) {
			return errorf("nginx.conf has not got the level yet")
		}
		st, err := lua.Status(context.Background())
		if err != nil || !strings.Contains(string(conf), `init("`+st.ConfigHash+`"`) {
			return errorf("nginx runs %q (%v), not the nginx.conf with the level yet", st.ConfigHash, err)
		}
		return nil
	})
	s.expect("dead.test", "/", "502")
	onStderr("a new failed connection on nginx's stderr at level error", func(stderr string) error {
		if strings.Count(stderr, "connect() failed") <= failures {
			return errorf("no new connect() failed line")
		}
		return nil
	})
	stderr := s.nginx.Stderr()
	newWorkers := 0
	for _, pid := range s.nginx.WorkerPIDs() {
		if slices.Contains(oldWorkers, pid) {
			continue // still draining
		}
		newWorkers++
		if strings.Contains(stderr, fmt.Sprintf("start worker process %d\n", pid)) {
			t.Errorf("error-log-level error: nginx logged the start of worker %d at notice", pid)
		}
	}
	if newWorkers == 0 {
		t.Errorf("no worker of the reload to error-log-level error among %v (before: %v)", s.nginx.WorkerPIDs(), oldWorkers)
	}
}
