package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
)

// A real Prometheus (Debian's, as the e2e dashboards test runs it) scrapes
// the text the agent writes straight from Lua's answer, gzipped, and reads
// each hostile backend name back as the one label value it is. Without
// prometheus the test fails under CI=true and skips otherwise.
func TestPrometheusReadsHostileBackends(t *testing.T) {
	binary, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not installed (go tool task test-deps installs Debian's)")
		}
		t.Skip("prometheus is not installed (go tool task test-deps installs Debian's)")
	}
	m := New(Options{Lua: &fakeLua{m: luaapi.LuaMetrics{Backends: luaapi.BackendListOf(hostileBackends...)}}})
	var asked struct {
		sync.Mutex
		accept, encoding string
	}
	handler := m.Handler()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Lock()
		asked.accept, asked.encoding = r.Header.Get("Accept"), r.Header.Get("Accept-Encoding")
		asked.Unlock()
		handler.ServeHTTP(w, r)
	}))
	defer target.Close()

	dir := t.TempDir()
	config := fmt.Sprintf("scrape_configs:\n  - job_name: restysync\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: [%q]\n",
		target.Listener.Addr().String())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	var log bytes.Buffer
	cmd := exec.Command(binary, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()

	want := map[string]float64{}
	for b := range uniqueBackends(luaapi.BackendListOf(hostileBackends...)).All() {
		want[b.Name] = float64(b.Requests)
	}
	var got map[string]float64
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		got, err = promQuery("http://"+addr, "restysync_lua_backend_requests_total")
		if err == nil && len(got) >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus has %d of %d backends' series after 60s (%v)\n%s", len(got), len(want), err, log.String())
		}
	}
	asked.Lock()
	defer asked.Unlock()
	if asked.encoding != "gzip" {
		t.Errorf("Prometheus asked with Accept %q, Accept-Encoding %q", asked.accept, asked.encoding)
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("backend %q: %v (present: %v), want %v", name, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("prometheus holds %d backends' series, want %d: %v", len(got), len(want), got)
	}
	if n, err := promQuery("http://"+addr, `{__name__="evil"}`); err != nil || len(n) != 0 {
		t.Errorf("a backend's name made a series of its own: %v %v", n, err)
	}
}

// promQuery evaluates expr and returns each series' backend label and value.
func promQuery(base, expr string) (map[string]float64, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, body.Status)
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out[r.Metric["backend"]] = v
	}
	return out, nil
}

// freePort is a TCP port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
