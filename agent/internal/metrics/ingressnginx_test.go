package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// fakeRequestLua is a Lua with request metrics.
type fakeRequestLua struct {
	fakeLua
	rm  luaapi.RequestMetrics
	err error
}

func (f *fakeRequestLua) RequestMetrics(context.Context) (luaapi.RequestMetrics, error) {
	return f.rm, f.err
}

// requestSeries builds one series as Lua reports it, with one bucket of
// each kind (time ≤ 0.1, length ≤ 100, size ≤ 1000): n requests of
// request time rt, connect time ct, request and response length len.
func luaSeries(labels []string, n, rt, ct, length float64) luaapi.RequestSeries {
	v := []float64{n}
	hist := func(value float64, bound float64, observed bool) {
		if !observed {
			v = append(v, 0, 0, 0)
			return
		}
		in := 0.0
		if value <= bound {
			in = n
		}
		v = append(v, n, n*value, in)
	}
	hist(rt, 0.1, true)
	hist(rt, 0.1, true) // response
	hist(ct, 0.1, true)
	hist(rt, 0.1, true) // header
	hist(length, 100, true)
	hist(length, 100, true)
	hist(length, 1000, true)
	return luaapi.RequestSeries{Labels: strings.Join(labels, "\x01"), Values: v}
}

func requestLua() *fakeRequestLua {
	return &fakeRequestLua{
		fakeLua: fakeLua{m: luaapi.LuaMetrics{Nginx: &luaapi.NginxProcess{Procs: 3, CPUSeconds: 1.5, ResidentBytes: 4096,
			Connections: map[string]float64{"active": 2, "reading": 0, "writing": 1, "waiting": 1}}}},
		rm: luaapi.RequestMetrics{
			Time: []float64{0.1}, Length: []float64{100}, Size: []float64{1000},
			Histograms: []string{"request_duration", "response_duration", "connect_duration", "header_duration", "request_size", "response_size", "bytes_sent"},
			Series: []luaapi.RequestSeries{
				luaSeries([]string{"shop", "web", "web", "/", "shop.test", "200", "GET", ""}, 10, 0.05, 0.001, 50),
				luaSeries([]string{"shop", "web", "web", "/", "shop.test", "503", "GET", ""}, 2, 0.2, 0.001, 500),
				luaSeries([]string{"shop", "web", "web", "/", "www.shop.test", "201", "POST", "shop/web-canary:80"}, 1, 0.05, 0.001, 50),
				// No route's host: left out with the host label, unless
				// per undefined host.
				luaSeries([]string{"", "", "", "", "", "404", "GET", ""}, 4, 0.001, 0, 10),
				// A label with a quote and a backslash: escaped, not broken.
				luaSeries([]string{"shop", "web", "web", `/a"b\c`, "shop.test", "200", "GET", ""}, 1, 0.05, 0.001, 50),
				// Malformed: too few labels, or values: skipped.
				{Labels: "shop\x01web", Values: []float64{1}},
			},
		},
	}
}

func newCompat(lua *fakeRequestLua, opts IngressNginx) *Metrics {
	opts.Class, opts.Namespace, opts.Pod = "restysync.io/ingress-controller", "ingress", "restysync-0"
	opts.Lua = lua
	return New(Options{Lua: lua, IngressNginx: &opts, State: func() syncer.State {
		return syncer.State{ConfigHash: "abcdef0123456789", Model: model.Model{Certificates: model.ListOf([]model.Certificate{
			{Name: "shop/tls", Hosts: []string{"*", "shop.test"}, NotAfter: time.Unix(2000000000, 0)},
		}...)}}
	}})
}

// The request series carry ingress-nginx's names and labels, with the
// controller's constant labels; per host by default, hosts of no route
// left out.
func TestIngressNginxRequestSeries(t *testing.T) {
	m := newCompat(requestLua(), IngressNginx{PerHost: true})
	base := map[string]string{"controller_class": "restysync.io/ingress-controller", "controller_namespace": "ingress", "controller_pod": "restysync-0"}
	with := func(kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	mustValue(t, m, "nginx_ingress_controller_requests", with("namespace", "shop", "ingress", "web", "service", "web", "path", "/",
		"host", "shop.test", "status", "200", "method", "GET", "canary", ""), 10)
	mustValue(t, m, "nginx_ingress_controller_requests", with("status", "201", "canary", "shop/web-canary:80", "host", "www.shop.test"), 1)
	mustValue(t, m, "nginx_ingress_controller_request_duration_seconds", with("status", "503"), 2)
	mustValue(t, m, "nginx_ingress_controller_response_size", with("status", "200", "path", "/"), 10)
	mustValue(t, m, "nginx_ingress_controller_requests", with("path", `/a"b\c`), 1)
	if _, ok := value(t, m, "nginx_ingress_controller_requests", with("status", "404")); ok {
		t.Error("a request of no route's host is exported without --metrics-per-undefined-host")
	}
	mustValue(t, m, "nginx_ingress_controller_nginx_process_connections", with("state", "active"), 2)
	mustValue(t, m, "nginx_ingress_controller_nginx_process_cpu_seconds_total", base, 1.5)
	mustValue(t, m, "nginx_ingress_controller_nginx_process_resident_memory_bytes", base, 4096)
	mustValue(t, m, "nginx_ingress_controller_config_last_reload_successful", base, 1)
	mustValue(t, m, "nginx_ingress_controller_ssl_expire_time_seconds", map[string]string{"host": "shop.test", "namespace": "ingress", "class": "restysync.io/ingress-controller"}, 2000000000)
	if _, ok := value(t, m, "nginx_ingress_controller_ssl_expire_time_seconds", map[string]string{"host": "*"}); ok {
		t.Error("the default certificate has an expiry series")
	}
	if v, _ := value(t, m, "nginx_ingress_controller_config_hash", base); v != float64(0xabcdef0123456) {
		t.Errorf("config_hash %v", v)
	}

	// Buckets are cumulative, the count and sum are Lua's; label values
	// keep their quotes and backslashes (the text format escapes them).
	families, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found, escaped := false, false
	for _, f := range families {
		if f.GetName() != "nginx_ingress_controller_request_size" {
			continue
		}
		for _, s := range f.GetMetric() {
			if hasLabels(s, with("path", `/a"b\c`)) {
				escaped = true
			}
			if !hasLabels(s, with("status", "503", "path", "/")) {
				continue
			}
			found = true
			h := s.GetHistogram()
			b := h.GetBucket()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 1000 || len(b) != 1 || b[0].GetUpperBound() != 100 || b[0].GetCumulativeCount() != 0 {
				t.Errorf("request_size of the 503s: %v", h)
			}
		}
	}
	if !found || !escaped {
		t.Errorf("request_size: the 503s' series found %v, the quoted path's %v", found, escaped)
	}

	// The deprecated summary: connect time per Ingress and canary.
	mustSummary := func(labels map[string]string, count uint64) {
		t.Helper()
		families, err := m.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "nginx_ingress_controller_ingress_upstream_latency_seconds" {
				continue
			}
			for _, s := range f.GetMetric() {
				if hasLabels(s, labels) && s.Summary != nil && s.Summary.GetSampleCount() == count {
					return
				}
			}
		}
		t.Errorf("no ingress_upstream_latency_seconds%v with count %d", labels, count)
	}
	mustSummary(with("ingress", "web", "canary", ""), 13)
	mustSummary(with("ingress", "web", "canary", "shop/web-canary:80"), 1)

	// Reloads.
	m.Reloaded(time.Millisecond, errors.New("nginx rejected the new config"))
	mustValue(t, m, "nginx_ingress_controller_config_last_reload_successful", base, 0)
	mustValue(t, m, "nginx_ingress_controller_errors", base, 1)
	m.Reloaded(time.Millisecond, nil)
	mustValue(t, m, "nginx_ingress_controller_config_last_reload_successful", base, 1)
	mustValue(t, m, "nginx_ingress_controller_success", base, 1)
	if v, _ := value(t, m, "nginx_ingress_controller_config_last_reload_successful_timestamp_seconds", base); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last reload timestamp %v", v)
	}
}

// Without --metrics-per-host the host label goes and the series that
// differed only by host add up; with --report-status-classes statuses
// become classes; excluded series are not exported; per undefined host,
// requests of no route's host are.
func TestIngressNginxFlags(t *testing.T) {
	m := newCompat(requestLua(), IngressNginx{ReportStatusClasses: true, Exclude: []string{"nginx_ingress_controller_bytes_sent", "response_size"}})
	mustValue(t, m, "nginx_ingress_controller_requests", map[string]string{"status": "2xx", "method": "GET", "path": "/"}, 10)
	mustValue(t, m, "nginx_ingress_controller_requests", map[string]string{"status": "4xx", "ingress": ""}, 4)
	families, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "nginx_ingress_controller_bytes_sent", "nginx_ingress_controller_response_size":
			t.Errorf("%s is exported though excluded", f.GetName())
		case "nginx_ingress_controller_requests":
			for _, s := range f.GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == "host" {
						t.Errorf("a host label without --metrics-per-host: %v", s.GetLabel())
					}
				}
			}
		}
	}

	m = newCompat(requestLua(), IngressNginx{PerHost: true, PerUndefinedHost: true})
	mustValue(t, m, "nginx_ingress_controller_requests", map[string]string{"status": "404", "host": ""}, 4)
}

// When Lua does not answer, the rest of the scrape is served and the
// failure counted.
func TestIngressNginxLuaDown(t *testing.T) {
	lua := requestLua()
	lua.err = errors.New("connection refused")
	lua.fakeLua.err = errors.New("connection refused")
	m := newCompat(lua, IngressNginx{PerHost: true})
	mustValue(t, m, "restysync_lua_request_metrics_scrape_errors_total", nil, 1)
	mustValue(t, m, "nginx_ingress_controller_config_last_reload_successful", nil, 1)
	if _, ok := value(t, m, "nginx_ingress_controller_requests", nil); ok {
		t.Error("request series without Lua")
	}
}

// nginx records a histogram only while an exported series reads it; the
// names are requests.lua's, which render checks against its own list.
func TestIngressNginxUnrecorded(t *testing.T) {
	for _, c := range []struct {
		exclude []string
		want    []string
	}{
		{nil, nil},
		{[]string{"nginx_ingress_controller_bytes_sent", "response_size", "header_duration_seconds"}, []string{"header_duration", "response_size", "bytes_sent"}},
		// the deprecated summary reads connect_duration
		{[]string{"connect_duration_seconds"}, nil},
		{[]string{"connect_duration_seconds", "ingress_upstream_latency_seconds"}, []string{"connect_duration"}},
		{[]string{"requests", "request_duration_seconds"}, []string{"request_duration"}},
	} {
		got := IngressNginx{Exclude: c.exclude}.Unrecorded()
		if !slices.Equal(got, c.want) {
			t.Errorf("exclude %v: unrecorded %v, want %v", c.exclude, got, c.want)
		}
		for _, h := range got {
			if !slices.Contains(render.RequestHistograms, h) {
				t.Errorf("%q is not one of render's histograms", h)
			}
		}
	}
	for i, h := range requestHistograms {
		if render.RequestHistograms[i] != h.lua {
			t.Errorf("histogram %d: %q here, %q in render", i, h.lua, render.RequestHistograms[i])
		}
	}
}

// Hostile label values (with --metrics-per-undefined-host the host is any
// client's Host header; route labels come from tenants' objects): quotes,
// backslashes, a newline, U+2028 and bytes that are not UTF-8 (Lua's
// cjson sends them raw; the agent's JSON decoding, as LuaClient's, makes
// them U+FFFD) are one escaped label each in the text format, and the
// scrape answers.
func TestIngressNginxHostileLabels(t *testing.T) {
	host := "a\"b\\c\u2028\xff\xfe.test"
	path := "/x\ny\"}"
	raw := luaSeries([]string{"shop", "web", "web", path, host, "200", "GET", ""}, 3, 0.05, 0.001, 50)
	body, err := json.Marshal(luaapi.RequestMetrics{Time: []float64{0.1}, Length: []float64{100}, Size: []float64{1000},
		Histograms: requestLua().rm.Histograms, Series: []luaapi.RequestSeries{raw}})
	if err != nil {
		t.Fatal(err)
	}
	// cjson writes the bytes as they are, not as Go's Marshal escapes them.
	body = bytes.ReplaceAll(body, []byte(`\ufffd\ufffd`), []byte("\xff\xfe"))
	if !bytes.Contains(body, []byte("\xff\xfe")) {
		t.Fatalf("the body lacks the raw bytes: %q", body)
	}
	lua := requestLua()
	lua.rm = luaapi.RequestMetrics{}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&lua.rm); err != nil {
		t.Fatal(err)
	}
	m := newCompat(lua, IngressNginx{PerHost: true, PerUndefinedHost: true})
	text := scrape(t, m)
	want := `nginx_ingress_controller_requests{canary="",controller_class="restysync.io/ingress-controller",controller_namespace="ingress",controller_pod="restysync-0",` +
		`host="a\"b\\c` + "\u2028\ufffd\ufffd" + `.test",ingress="web",method="GET",namespace="shop",path="/x\ny\"}",service="web",status="200"} 3`
	found := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "nginx_ingress_controller_requests{") {
			found = found || line == want
			if !utf8.ValidString(line) {
				t.Errorf("not UTF-8: %q", line)
			}
		}
	}
	if !found {
		t.Errorf("no line %q in\n%s", want, text)
	}
}
