package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// value returns the value of the series name{labels} (counter, gauge, or a
// histogram's sample count) and whether it exists.
func value(t *testing.T, m *Metrics, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := m.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if !hasLabels(s, labels) {
				continue
			}
			switch {
			case s.Counter != nil:
				return s.Counter.GetValue(), true
			case s.Gauge != nil:
				return s.Gauge.GetValue(), true
			case s.Histogram != nil:
				return float64(s.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabels(s *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range s.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func mustValue(t *testing.T, m *Metrics, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := value(t, m, name, labels)
	if !ok {
		t.Errorf("%s%v: no such series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// The syncer's reports move the series the README lists.
func TestSyncerSeries(t *testing.T) {
	m := New(Options{Version: "v1", Commit: "abc"})
	m.Synced("full", "reload", 3*time.Millisecond)
	m.Synced("fast", "push", time.Millisecond)
	m.Synced("fast", "push", time.Millisecond)
	m.Synced("full", "error", time.Millisecond)
	m.Reloaded(60*time.Millisecond, nil)
	m.Reloaded(10*time.Second, errors.New("not confirmed"))
	m.Pushed("backends", 180, time.Millisecond, nil)
	m.Pushed("backends", 20, time.Millisecond, errors.New("lua answered 400"))
	m.Pushed("certificates", 3000, time.Millisecond, nil)
	m.Propagated(8 * time.Millisecond)
	m.ValidationFailed("agent")
	m.ValidationFailed("agent")
	m.ValidationFailed("nginx")

	mustValue(t, m, "restysync_syncs_total", map[string]string{"outcome": "push"}, 2)
	mustValue(t, m, "restysync_syncs_total", map[string]string{"outcome": "reload"}, 1)
	mustValue(t, m, "restysync_syncs_total", map[string]string{"outcome": "error"}, 1)
	mustValue(t, m, "restysync_syncs_total", map[string]string{"outcome": "nothing"}, 0)
	mustValue(t, m, "restysync_sync_duration_seconds", map[string]string{"path": "fast"}, 2)
	mustValue(t, m, "restysync_sync_duration_seconds", map[string]string{"path": "full"}, 2)
	mustValue(t, m, "restysync_reloads_total", nil, 2)
	mustValue(t, m, "restysync_reload_failures_total", nil, 1)
	mustValue(t, m, "restysync_reload_duration_seconds", nil, 2)
	mustValue(t, m, "restysync_lua_pushes_total", map[string]string{"kind": "backends"}, 2)
	mustValue(t, m, "restysync_lua_pushes_total", map[string]string{"kind": "certificates"}, 1)
	mustValue(t, m, "restysync_lua_push_failures_total", map[string]string{"kind": "backends"}, 1)
	mustValue(t, m, "restysync_lua_push_bytes_total", map[string]string{"kind": "backends"}, 200)
	mustValue(t, m, "restysync_lua_push_bytes_total", map[string]string{"kind": "certificates"}, 3000)
	mustValue(t, m, "restysync_lua_push_duration_seconds", map[string]string{"kind": "backends"}, 2)
	mustValue(t, m, "restysync_event_to_push_seconds", nil, 1)
	mustValue(t, m, "restysync_validation_failures_total", map[string]string{"validator": "agent"}, 2)
	mustValue(t, m, "restysync_validation_failures_total", map[string]string{"validator": "nginx"}, 1)
	if ts, _ := value(t, m, "restysync_last_reload_success_timestamp_seconds", nil); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("last reload success at %v, want about now", ts)
	}
	mustValue(t, m, "restysync_build_info", map[string]string{"version": "v1", "commit": "abc"}, 1)
	mustValue(t, m, "restysync_quarantined_ingresses", nil, 0)
	mustValue(t, m, "restysync_leader", nil, 0)
	if _, ok := value(t, m, "go_goroutines", nil); !ok {
		t.Error("no Go collector series")
	}
	if _, ok := value(t, m, "restysync_config_info", nil); ok {
		t.Error("config_info without a State")
	}
}

// State, object counts and the leader flag are read at scrape time.
func TestStateSeries(t *testing.T) {
	st := syncer.State{ConfigHash: "feedbeef", Problems: []model.Problem{
		{Kind: "Ingress", Namespace: "a", Name: "x", Reason: "bad path"},
		{Kind: "Ingress", Namespace: "a", Name: "y", Reason: "missing Service"},
		{Kind: "File", Name: "m.yaml#1", Reason: "unknown kind"},
	}}
	leader := false
	m := New(Options{
		State:   func() syncer.State { return st },
		Objects: func() map[string]int { return map[string]int{"Ingress": 4, "EndpointSlice": 7} },
		Leader:  func() bool { return leader },
	})
	mustValue(t, m, "restysync_config_info", map[string]string{"hash": "feedbeef"}, 1)
	mustValue(t, m, "restysync_problems", map[string]string{"kind": "Ingress"}, 2)
	mustValue(t, m, "restysync_problems", map[string]string{"kind": "File"}, 1)
	mustValue(t, m, "restysync_problems", map[string]string{"kind": "Secret"}, 0)
	mustValue(t, m, "restysync_objects", map[string]string{"kind": "Ingress"}, 4)
	mustValue(t, m, "restysync_objects", map[string]string{"kind": "EndpointSlice"}, 7)
	mustValue(t, m, "restysync_objects", map[string]string{"kind": "Service"}, 0)
	mustValue(t, m, "restysync_leader", nil, 0)
	leader = true
	st.ConfigHash = "c0ffee"
	mustValue(t, m, "restysync_leader", nil, 1)
	mustValue(t, m, "restysync_config_info", map[string]string{"hash": "c0ffee"}, 1)
	if _, ok := value(t, m, "restysync_config_info", map[string]string{"hash": "feedbeef"}); ok {
		t.Error("config_info still names the old hash")
	}
}

func TestCountObjects(t *testing.T) {
	got := CountObjects(model.Snapshot{
		Ingresses: model.ListOf(make([]*networkingv1.Ingress, 2)...),
		Services:  model.ListOf(make([]*model.Service, 3)...),
	})
	if got["Ingress"] != 2 || got["Service"] != 3 || got["Secret"] != 0 || len(got) != len(ObjectKinds) {
		t.Errorf("CountObjects = %v", got)
	}
}

type fakeLua struct {
	m   luaapi.LuaMetrics
	err error
}

func (f *fakeLua) Metrics(context.Context) (luaapi.LuaMetrics, error) { return f.m, f.err }

// The Lua collector exports what Lua reports; when Lua does not answer,
// the scrape still succeeds, with lua_up 0 and the error counted.
func TestLuaSeries(t *testing.T) {
	lua := &fakeLua{m: luaapi.LuaMetrics{
		Backends: luaapi.BackendListOf(
			luaapi.BackendMetrics{Name: "default/web:80", Endpoints: 3, Requests: 10, Failures: 1},
			luaapi.BackendMetrics{Name: "default/api:http", Endpoints: 0, Requests: 2, Failures: 2},
		),
		BalancerRebuilds: 4, Certificates: 2, Counting: true, APIDenied: 5, LoopRefused: 6,
	}}
	m := New(Options{Lua: lua})
	mustValue(t, m, "restysync_lua_up", nil, 1)
	mustValue(t, m, "restysync_lua_backend_endpoints", map[string]string{"backend": "default/web:80"}, 3)
	mustValue(t, m, "restysync_lua_backend_requests_total", map[string]string{"backend": "default/web:80"}, 10)
	mustValue(t, m, "restysync_lua_backend_failures_total", map[string]string{"backend": "default/api:http"}, 2)
	mustValue(t, m, "restysync_lua_balancer_rebuilds_total", nil, 4)
	mustValue(t, m, "restysync_lua_certificates", nil, 2)
	mustValue(t, m, "restysync_lua_api_denied_total", nil, 5)
	mustValue(t, m, "restysync_lua_loop_refused_total", nil, 6)
	mustValue(t, m, "restysync_lua_scrape_errors_total", nil, 0)

	lua.err = errors.New("dial unix: no such file")
	// Every gather is a scrape: each one counts its error.
	mustValue(t, m, "restysync_lua_scrape_errors_total", nil, 1)
	mustValue(t, m, "restysync_lua_up", nil, 0)
	mustValue(t, m, "restysync_lua_scrape_errors_total", nil, 3)
	if _, ok := value(t, m, "restysync_lua_backend_requests_total", nil); ok {
		t.Error("backend series exported while Lua does not answer")
	}
	mustValue(t, m, "restysync_syncs_total", map[string]string{"outcome": "push"}, 0)
}

// scrape is the body of GET /metrics from m's handler, which must answer 200.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	return string(body)
}

// The handler serves the text format, and every restysync series has HELP.
func TestHandler(t *testing.T) {
	m := New(Options{Version: "v1", State: func() syncer.State { return syncer.State{ConfigHash: "h"} },
		Lua: &fakeLua{err: errors.New("down")}})
	text := scrape(t, m)
	for _, want := range []string{
		"# HELP restysync_syncs_total ", "restysync_config_info{hash=\"h\"} 1", "restysync_lua_up 0",
		"restysync_build_info{", "process_start_time_seconds",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "restysync_") {
			name := strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				name = strings.TrimSuffix(name, suffix)
			}
			if !strings.Contains(text, "# HELP "+name+" ") {
				t.Errorf("%s has no HELP", name)
			}
		}
	}
}

func TestProblemReason(t *testing.T) {
	cases := map[string]model.Problem{
		"manifest":          {Kind: "File", Name: "x.yaml#1", Reason: "yaml: bad"},
		"tls":               {Kind: "Ingress", Reason: `spec.tls[0].secretName "c": Secret a/c not found; hosts get the default certificate`},
		"missing_reference": {Kind: "Ingress", Reason: `spec.rules[0].http.paths[0].backend.service.name "x": Service a/x not found; the path answers 503`},
		"conflict":          {Kind: "Ingress", Reason: `path "/" on host "a" is already served by Ingress a/b; path left out`},
		"dns":               {Kind: "EndpointSlice", Reason: `endpoints[0].addresses[0] "x": does not resolve: no such host`},
		"unsupported":       {Kind: "Ingress", Reason: `backend.resource: resource backends are not supported`},
		"invalid":           {Kind: "Ingress", Reason: `spec.rules[0].host "A_B": is not a valid DNS name; rule left out`},
	}
	for want, p := range cases {
		if got := ProblemReason(p); got != want {
			t.Errorf("ProblemReason(%q) = %s, want %s", p.Reason, got, want)
		}
	}
	m := New(Options{State: func() syncer.State { return syncer.State{Problems: []model.Problem{cases["tls"], cases["dns"]}} }})
	mustValue(t, m, "restysync_problems_by_reason", map[string]string{"reason": "tls"}, 1)
	mustValue(t, m, "restysync_problems_by_reason", map[string]string{"reason": "conflict"}, 0)
}
