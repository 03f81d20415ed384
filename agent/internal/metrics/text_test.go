package metrics

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/render"
)

// Accept headers of Prometheus's scrapes. 2.42's was read from a real
// Prometheus 2.42.0 scraping a test server (Accept-Encoding: gzip); 3.x
// asks for text 1.0.0 with UTF-8 names unless its scrape_protocols say
// otherwise, and for protobuf first with native histograms.
const (
	acceptPrometheus2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
	acceptPrometheus3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4," +
		"text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
	acceptProtobuf = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6," + acceptPrometheus3
)

// hostileBackends are backend names a tenant's objects could make, or Lua
// send: what would close the label or the line, and bytes not UTF-8.
var hostileBackends = []luaapi.BackendMetrics{
	{Name: "ns/x\"} 1\nevil{backend=\"y\"} 2:80", Endpoints: 1, Requests: 2, Failures: 3},
	{Name: "ns/back\\slash\\:80", Endpoints: 0, Requests: -1, Failures: 1 << 62},
	{Name: "ns/\xff\xfe\u2028é:http", Endpoints: 5},
	{Name: "", Endpoints: 1},
	{Name: "ns/dup:1", Requests: 1},
	{Name: "ns/dup:1", Requests: 2},
	{Name: "a/first:1", Requests: 9007199254740993},
}

// Every scrape the text path takes is answered as promhttp answers it
// from the dto families (same status, headers and, unzipped, the same
// bytes but for the go_ and process_ series, which move between two
// gathers); the others are promhttp's.
func TestServeTextAsPromhttp(t *testing.T) {
	for _, opts := range []IngressNginx{
		{PerHost: true, PerUndefinedHost: true},
		{ReportStatusClasses: true, Exclude: []string{"nginx_ingress_controller_bytes_sent", "request_size"}},
		{PerHost: true, Exclude: []string{"requests", "ingress_upstream_latency_seconds"}},
	} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) { serveTextAsPromhttp(t, opts) })
	}
}

func serveTextAsPromhttp(t *testing.T, opts IngressNginx) {
	lua := requestLua()
	lua.m.Certificates = 2
	buckets := render.DefaultRequestMetrics()
	lua.rm.Time, lua.rm.Length, lua.rm.Size = buckets.Time, buckets.Length, buckets.Size
	lua.rm.Series = append(lua.rm.Series, hostileRequestSeries(buckets)...)
	opts.Class, opts.Namespace, opts.Pod, opts.Lua = "c\"lass", "n", "p\n", lua
	m := New(Options{Version: "v1", Commit: "abc", Lua: &lua.fakeLua, IngressNginx: &opts})
	h := m.Handler()
	want := promhttp.HandlerFor(m, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: m.reg})
	// The registry alone exports the request series as the collector
	// always did: the text path writes the same lines.
	registryText := func() string {
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, f := range families {
			if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
				t.Fatal(err)
			}
		}
		return b.String()
	}()
	if !strings.Contains(registryText, "_bucket{") || !strings.Contains(registryText, "ingress_upstream_latency_seconds_count{") && !slices.Contains(opts.Exclude, "ingress_upstream_latency_seconds") {
		t.Fatalf("the registry's text has no request series:\n%s", registryText)
	}
	for _, c := range []struct {
		accept, encoding, query string
		text                    bool // taken by serveText
	}{
		{"", "", "", true},
		{"text/plain", "", "", true},
		{acceptPrometheus2, "gzip", "", true},
		{acceptPrometheus3, "gzip", "", true},
		{acceptPrometheus3, "", "", true},
		{"*/*", "deflate, gzip, br, zstd", "", true},
		{"*/*", "br", "", true},
		{"*/*", "gzip", "foo=bar", true},
		{"*/*", "gzip", "name[]=restysync_lua_backend_requests_total", false},
		{"*/*", "identity, gzip", "", false},
		{"*/*", "gzip;q=0", "", false},
		{"*/*", "*", "", false},
		{"*/*", ", gzip", "", false},
		{"*/*", "gzip deflate", "", false},
		{acceptProtobuf, "gzip", "", false},
	} {
		lua.m.Backends = luaapi.BackendListOf(hostileBackends...)
		req := httptest.NewRequest(http.MethodGet, "/metrics?"+c.query, nil)
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		if c.encoding != "" {
			req.Header.Set("Accept-Encoding", c.encoding)
		}
		if _, _, ok := plainTextScrape(req); ok != c.text {
			t.Errorf("Accept %q, Accept-Encoding %q, query %q: taken by serveText: %v, want %v", c.accept, c.encoding, c.query, ok, c.text)
		}
		got := httptest.NewRecorder()
		h.ServeHTTP(got, req)
		lua.m.Backends = luaapi.BackendListOf(hostileBackends...)
		ref := httptest.NewRecorder()
		want.ServeHTTP(ref, req)
		name := c.accept + " | " + c.encoding + " | " + c.query
		if got.Code != ref.Code {
			t.Errorf("%s: %d, promhttp %d", name, got.Code, ref.Code)
		}
		for _, k := range []string{"Content-Type", "Content-Encoding", "Vary"} {
			if g, w := got.Header().Values(k), ref.Header().Values(k); !slices.Equal(g, w) {
				t.Errorf("%s: %s %q, promhttp %q", name, k, g, w)
			}
		}
		if expfmt.ResponseFormat(ref.Header()).FormatType() != expfmt.TypeTextPlain {
			continue
		}
		g, w := unzipped(t, got), unzipped(t, ref)
		if deterministic(g) != deterministic(w) {
			t.Errorf("%s: body differs from promhttp's:\n%s", name, diffLines(deterministic(w), deterministic(g)))
		}
		if c.query == "" && requestLines(g) != requestLines(registryText) {
			t.Errorf("%s: request series differ from the registry's:\n%s", name, diffLines(requestLines(registryText), requestLines(g)))
		}
		if c.query == "" && !strings.Contains(g, "restysync_lua_backend_failures_total{backend=\"ns/back\\\\slash\\\\:80\"} 4.611686018427388e+18\n") {
			t.Errorf("%s: no failures line for ns/back\\slash\\:80 in\n%s", name, g)
		}
	}
}

// requestLines are the lines of the request families in text.
func requestLines(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.Contains(line, "nginx_ingress_controller_") && !strings.Contains(line, "nginx_process") && !strings.Contains(line, "config_") &&
			!strings.Contains(line, "_success") && !strings.Contains(line, "_errors") || strings.Contains(line, "request_series_dropped") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// hostileRequestSeries are request series whose labels a tenant or a
// client chose (a path, a Host header), at the buckets given, with values
// that make every histogram's counts and a fraction.
func hostileRequestSeries(buckets render.RequestMetrics) []luaapi.RequestSeries {
	width := 1
	for _, h := range requestHistograms {
		width += 2 + len(map[string][]float64{"time": buckets.Time, "length": buckets.Length, "size": buckets.Size}[h.bounds])
	}
	var out []luaapi.RequestSeries
	for i, labels := range [][]string{
		{"shop", "web", "web", "/x\ny\"}", "a\"b\\c\u2028\ufffd.test", "200", "GET", ""},
		{"shop", "web", "web", "/x\ny\"}", "a\"b\\c\u2028\ufffd.test", "204", "GET", ""},
		{"shop", "web", "web", "/", "", "404", "HEAD", "shop/canary:80"},
		{"a", "b", "c", "/z", "z.test", "500", "POST", ""},
		{"a", "b", "c", "/z", "y.test", "502", "POST", ""},
	} {
		v := make([]float64, width)
		for j := range v {
			v[j] = float64((i+1)*(j+3)%17) + 0.25*float64(j%2)
		}
		out = append(out, luaapi.RequestSeries{Labels: strings.Join(labels, "\x01"), Values: v})
	}
	return out
}

// unzipped is a recorded answer's body, gunzipped if it was gzipped.
func unzipped(t *testing.T, r *httptest.ResponseRecorder) string {
	t.Helper()
	if r.Header().Get("Content-Encoding") != "gzip" {
		return r.Body.String()
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// A hostile backend name is one label value of one series in each
// per-backend family: the text parses, with the names as Lua sent them
// (invalid UTF-8 made U+FFFD), each once, and no other series.
func TestServeTextHostileBackends(t *testing.T) {
	m := New(Options{Lua: &fakeLua{m: luaapi.LuaMetrics{Backends: luaapi.BackendListOf(hostileBackends...)}}})
	text := scrape(t, m)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	// Sorted by name once invalid UTF-8 is replaced (a run by one U+FFFD,
	// as strings.ToValidUTF8 does).
	want := []string{"", "a/first:1", "ns/back\\slash\\:80", "ns/dup:1", "ns/x\"} 1\nevil{backend=\"y\"} 2:80", "ns/\ufffd\u2028é:http"}
	for _, f := range perBackend {
		var got []string
		for _, s := range families[f.name].GetMetric() {
			if len(s.GetLabel()) != 1 || s.GetLabel()[0].GetName() != backendLabel {
				t.Errorf("%s: labels %v", f.name, s.GetLabel())
			}
			got = append(got, s.GetLabel()[0].GetValue())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: backends %q, want %q", f.name, got, want)
		}
	}
	if _, ok := families["evil"]; ok {
		t.Error("a backend's name made a series of its own")
	}
	if v := families[luaRequests.name].GetMetric()[3].GetCounter().GetValue(); v != 1 {
		t.Errorf("ns/dup:1 requests %v, want the first entry's 1", v)
	}
}

// appendFloat writes a value as expfmt does.
func TestAppendFloat(t *testing.T) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 2, 0.5, 1e21, 9007199254740993, -123456789, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64} {
		var want bytes.Buffer
		if _, err := expfmt.MetricFamilyToText(&want, luaUp.single(v)); err != nil {
			t.Fatal(err)
		}
		line := want.String()[strings.LastIndex(strings.TrimSuffix(want.String(), "\n"), "\n")+1:]
		if got := luaUp.name + " " + string(appendFloat(nil, v)) + "\n"; got != line {
			t.Errorf("%v: %q, expfmt %q", v, got, line)
		}
	}
}
