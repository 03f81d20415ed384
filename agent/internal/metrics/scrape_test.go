package metrics

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/render"
)

// luaMetricsBody is GET /metrics of the Lua config API as
// lua/restysync/api.lua writes it, with n backends sorted by name.
func luaMetricsBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"backends":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tenant-%04d\/svc-%06d:http","endpoints":%d,"requests":%d,"failures":%d}`,
			i/100, i, 1+i%5, 1000+i*7, i%13)
	}
	b.WriteString(`],"balancer_rebuilds":17,"regex_failures":2,"certificates":40,"counting":true,"api_denied":1,"loop_refused":0,` +
		`"nginx":{"procs":3,"cpu_seconds":12.5,"resident_bytes":123456789,"connections":{"active":4,"reading":0,"writing":1,"waiting":3}}}`)
	return []byte(b.String())
}

// luaServer serves body as the Lua config API's GET /metrics on a unix
// socket, and returns a client of it.
func luaServer(tb testing.TB, body []byte) *apply.LuaClient {
	tb.Helper()
	sock := filepath.Join(tb.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/metrics":
			w.Write(body)
		case "/metrics/requests":
			w.Write([]byte(`{"time":[0.1],"length":[100],"size":[1000],"histograms":[],"dropped":0,"series":[]}`))
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return apply.NewLuaClient(sock)
}

// BenchmarkScrape is one Prometheus scrape of the agent's /metrics, through
// the real handler, with the Lua config API answering for n backends;
// ingress-nginx=true adds the ingress-nginx series on the same Lua, as the
// agent runs by default (--ingress-nginx-metrics). The scrape asks for
// text/plain, uncompressed; prometheus=true asks as Prometheus 2.42 does
// (its Accept header, gzip); protobuf=true asks for protobuf, as
// Prometheus does when told to.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1000, 50000} {
		for _, ingressNginx := range []bool{false, true} {
			b.Run(fmt.Sprintf("backends=%d/ingress-nginx=%v", n, ingressNginx), func(b *testing.B) {
				benchmarkScrape(b, n, ingressNginx, false, false)
			})
		}
	}
	b.Run("backends=50000/ingress-nginx=true/prometheus=true", func(b *testing.B) {
		benchmarkScrape(b, 50000, true, true, false)
	})
	b.Run("backends=50000/ingress-nginx=true/protobuf=true", func(b *testing.B) {
		benchmarkScrape(b, 50000, true, false, true)
	})
}

func benchmarkScrape(b *testing.B, n int, ingressNginx, prometheus, protobuf bool) {
	lua := luaServer(b, luaMetricsBody(n))
	opts := Options{Version: "v1", Commit: "abc", Lua: lua}
	if ingressNginx {
		opts.IngressNginx = &IngressNginx{Class: "k8s.io/ingress-nginx", Namespace: "ns", Pod: "pod", Lua: lua}
	}
	m := New(opts)
	h := m.Handler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	if prometheus {
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
		req.Header.Set("Accept-Encoding", "gzip")
	}
	if protobuf {
		req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	}
	var w discardWriter
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU(b)
	for range b.N {
		w = discardWriter{header: http.Header{}}
		h.ServeHTTP(&w, req)
		if w.code != http.StatusOK || !(w.luaUp || prometheus || protobuf) {
			b.Fatalf("GET /metrics: %d, lua_up 1 seen: %v", w.code, w.luaUp)
		}
	}
	size := w.size
	// The process's CPU (the Lua server's part, small, included):
	// on a shared machine ns/op is also the time spent waiting.
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(size), "bytes/scrape")
	if prometheus {
		b.StopTimer()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		if rec.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(rec.Body)
			if err != nil {
				b.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				b.Fatal(err)
			}
		}
		if !bytes.Contains(body, []byte("\nrestysync_lua_up 1\n")) {
			b.Fatalf("GET /metrics (%s): no lua_up 1", rec.Header().Get("Content-Encoding"))
		}
	}
}

// BenchmarkScrapeRequestSeries is one text scrape with the ingress-nginx
// request metrics at their most, 4,096 series (requests.lua's MAX_SERIES
// of one worker), each with every histogram at ingress-nginx's default
// buckets: the cost of a scrape while traffic reaches many Ingresses.
func BenchmarkScrapeRequestSeries(b *testing.B) {
	lua := requestLua()
	buckets := render.DefaultRequestMetrics()
	lua.rm.Time, lua.rm.Length, lua.rm.Size = buckets.Time, buckets.Length, buckets.Size
	width := 1
	for _, h := range requestHistograms {
		width += 2 + len(map[string][]float64{"time": buckets.Time, "length": buckets.Length, "size": buckets.Size}[h.bounds])
	}
	lua.rm.Series = nil
	for i := range 4096 {
		v := make([]float64, width)
		for j := range v {
			v[j] = float64(i + j)
		}
		labels := []string{fmt.Sprintf("ns-%d", i/10), fmt.Sprintf("web-%d", i), fmt.Sprintf("svc-%d", i), "/", fmt.Sprintf("h-%d.test", i), "200", "GET", ""}
		lua.rm.Series = append(lua.rm.Series, luaapi.RequestSeries{Labels: strings.Join(labels, "\x01"), Values: v})
	}
	h := New(Options{Lua: lua, IngressNginx: &IngressNginx{Class: "c", Namespace: "n", Pod: "p", Lua: lua}}).Handler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	b.ReportAllocs()
	var w discardWriter
	for range b.N {
		w = discardWriter{header: http.Header{}}
		h.ServeHTTP(&w, req)
		if w.code != http.StatusOK {
			b.Fatalf("GET /metrics: %d", w.code)
		}
	}
	b.ReportMetric(float64(w.size), "bytes/scrape")
}

// processCPU is the user and system CPU time this process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardWriter is the client of a scrape: it counts the body and looks
// for lua_up 1 without keeping it.
type discardWriter struct {
	header http.Header
	code   int
	size   int
	luaUp  bool
}

func (w *discardWriter) Header() http.Header  { return w.header }
func (w *discardWriter) WriteHeader(code int) { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.size += len(p)
	w.luaUp = w.luaUp || bytes.Contains(p, []byte("\nrestysync_lua_up 1\n"))
	return len(p), nil
}

var updateGolden = flag.Bool("update", false, "rewrite testdata/scrape.golden from this build")

// deterministic keeps the lines of a text exposition that do not depend
// on the process or the runtime (go_*, process_*).
func deterministic(text string) string {
	var out []string
	for _, line := range strings.SplitAfter(text, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "")
}

// goldenLua is a fixed Lua answer with names a scrape must carry through
// unchanged: escapes, non-ASCII, a duplicate, out of order.
const goldenLua = `{"backends":[` +
	`{"name":"default\/web:80","endpoints":3,"requests":10,"failures":1},` +
	`{"name":"a\/quote\"back\\slash\nnl:80","endpoints":1,"requests":2,"failures":0},` +
	`{"name":"b\/\u00e9t\u00e9:https","endpoints":0,"requests":0,"failures":0},` +
	"{\"name\":\"bad\\/\xff\xfe:1\",\"endpoints\":2,\"requests\":9007199254740993,\"failures\":-1}," +
	`{"name":"default\/api:http","endpoints":2,"requests":2,"failures":2},` +
	`{"name":"default\/api:http","endpoints":2,"requests":2,"failures":2},` +
	`{"failures":5,"requests":6,"endpoints":7,"name":"z\/reordered:1"},` +
	`{"name":"z\/extra:1","endpoints":1,"requests":1,"failures":1,"weight":3},` +
	`{"name":"z\/null:1","endpoints":null,"requests":1,"failures":0, "Failures" : 4 }` +
	`],"balancer_rebuilds":4,"regex_failures":3,"certificates":2,"counting":true,"api_denied":5,"loop_refused":6,"nginx":null}`

// The text exposition of a fixed input is byte for byte what it was before
// the Lua series were built without the registry (testdata/scrape.golden,
// written by the commit before).
func TestScrapeGolden(t *testing.T) {
	for file, body := range map[string]string{
		"scrape.golden": goldenLua,
		// Only what Lua writes: the agent's own reader takes it all.
		"scrape-lua.golden": strings.NewReplacer(
			`{"failures":5,"requests":6,"endpoints":7,"name":"z\/reordered:1"},`, "",
			`,"weight":3`, "",
			`,"endpoints":null,"requests":1,"failures":0, "Failures" : 4 }`, `,"endpoints":0,"requests":1,"failures":4}`,
			`"nginx":null`, `"nginx":{"procs":3,"cpu_seconds":12.5,"resident_bytes":1,"connections":{"active":4}}`,
		).Replace(goldenLua),
		// A number that is no integer fails the whole answer: lua_up 0.
		"scrape-float.golden": strings.Replace(goldenLua, `"requests":10,`, `"requests":1e3,`, 1),
	} {
		t.Run(file, func(t *testing.T) { golden(t, file, body) })
	}
}

func golden(t *testing.T, file, body string) {
	m := New(Options{Version: "v1", Commit: "abc", Lua: luaServer(t, []byte(body))})
	got := deterministic(scrape(t, m))
	path := filepath.Join("testdata", file)
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("exposition differs from %s:\n%s", path, diffLines(string(want), got))
	}
}

// diffLines names the lines of want missing from got and the other way.
func diffLines(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	if b.Len() == 0 {
		return "(same lines, another order)"
	}
	return b.String()
}

// The protobuf exposition (what Prometheus asks for first) parses, and
// carries the per-backend series of the text one: each name once, sorted.
func TestScrapeProtobuf(t *testing.T) {
	m := New(Options{Version: "v1", Lua: luaServer(t, []byte(goldenLua))})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || expfmt.ResponseFormat(resp.Header).FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("GET /metrics: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	got := map[string][]string{}
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding the protobuf exposition: %v", err)
		}
		for _, s := range f.GetMetric() {
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = s.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = s.GetGauge().GetValue()
			default:
				continue
			}
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[f.GetName()] = append(got[f.GetName()], fmt.Sprintf("%s %v", strings.Join(labels, ","), v))
		}
	}
	want := []string{
		"backend=a/quote\"back\\slash\nnl:80 2",
		"backend=b/été:https 0",
		"backend=bad/\uFFFD\uFFFD:1 9.007199254740992e+15",
		"backend=default/api:http 2",
		"backend=default/web:80 10",
		"backend=z/extra:1 1",
		"backend=z/null:1 1",
		"backend=z/reordered:1 6",
	}
	if g := got["restysync_lua_backend_requests_total"]; !slices.Equal(g, want) {
		t.Errorf("restysync_lua_backend_requests_total:\n got %q\nwant %q", g, want)
	}
	if g := got["restysync_lua_up"]; !slices.Equal(g, []string{" 1"}) {
		t.Errorf("restysync_lua_up: %q", g)
	}
	if len(got["restysync_lua_backend_endpoints"]) != len(want) || len(got["restysync_lua_backend_failures_total"]) != len(want) {
		t.Errorf("endpoints %q, failures %q", got["restysync_lua_backend_endpoints"], got["restysync_lua_backend_failures_total"])
	}
}

// A backend Lua names twice, or out of order, does not fail the scrape:
// one series per name, the first. Lua's answer is the caller's: a second
// scrape of the same answer serves the same.
func TestScrapeDuplicateBackend(t *testing.T) {
	m := New(Options{Lua: &fakeLua{m: luaapi.LuaMetrics{Backends: luaapi.BackendListOf(
		luaapi.BackendMetrics{Name: "b/x:1", Endpoints: 1, Requests: 5},
		luaapi.BackendMetrics{Name: "a/x:1", Endpoints: 2, Requests: 6},
		luaapi.BackendMetrics{Name: "b/x:1", Endpoints: 3, Requests: 7},
	)}}})
	text := scrape(t, m)
	if again := scrape(t, m); deterministic(again) != deterministic(text) {
		t.Errorf("a second scrape of the same answer differs:\n%s", diffLines(deterministic(text), deterministic(again)))
	}
	for _, want := range []string{
		"restysync_lua_backend_endpoints{backend=\"a/x:1\"} 2\nrestysync_lua_backend_endpoints{backend=\"b/x:1\"} 1\n# HELP",
		"restysync_lua_backend_requests_total{backend=\"a/x:1\"} 6\nrestysync_lua_backend_requests_total{backend=\"b/x:1\"} 5\n",
		"promhttp_metric_handler_errors_total{cause=\"gathering\"} 0\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
}
