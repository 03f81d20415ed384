package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/restysync/restysync/agent/internal/luaapi"
)

// countingLua counts the reads of GET /metrics.
type countingLua struct {
	fakeRequestLua
	reads atomic.Int32
}

func (c *countingLua) Metrics(ctx context.Context) (luaapi.LuaMetrics, error) {
	c.reads.Add(1)
	return c.fakeRequestLua.Metrics(ctx)
}

// With the ingress-nginx series on the same Lua (as the agent runs), a
// scrape asks Lua for /metrics once, and both sets of series are served.
func TestScrapeReadsLuaOnce(t *testing.T) {
	lua := &countingLua{}
	lua.m = luaapi.LuaMetrics{
		Backends: luaapi.BackendListOf(luaapi.BackendMetrics{Name: "default/web:80", Endpoints: 2, Requests: 5}),
		Nginx:    &luaapi.NginxProcess{Procs: 3},
	}
	m := New(Options{Lua: lua, IngressNginx: &IngressNginx{Class: "c", Namespace: "n", Pod: "p", Lua: lua}})
	for i := 1; i <= 2; i++ {
		text := scrape(t, m)
		if got := lua.reads.Load(); got != int32(i) {
			t.Errorf("after %d scrapes, Lua read %d times", i, got)
		}
		for _, want := range []string{
			`restysync_lua_backend_requests_total{backend="default/web:80"} 5`,
			`nginx_ingress_controller_nginx_process_num_procs{controller_class="c",controller_namespace="n",controller_pod="p"} 3`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
	// The registry alone still reads Lua itself.
	if _, err := m.Registry().Gather(); err != nil {
		t.Fatal(err)
	}
	if got := lua.reads.Load(); got != 3 {
		t.Errorf("Registry().Gather: Lua read %d times in all, want 3", got)
	}
}

// gateLua answers once release is closed, and counts the reads.
type gateLua struct {
	countingLua
	asked   chan struct{} // a read has begun
	release chan struct{}
}

func (g *gateLua) Metrics(ctx context.Context) (luaapi.LuaMetrics, error) {
	g.asked <- struct{}{}
	<-g.release
	return g.countingLua.Metrics(ctx)
}

// Scrapes that arrive while a gather is under way share it: one read of
// Lua, the same series served to each (as text and as protobuf).
func TestConcurrentScrapesShareAGather(t *testing.T) {
	lua := &gateLua{asked: make(chan struct{}, 4), release: make(chan struct{})}
	lua.m = luaapi.LuaMetrics{Backends: luaapi.BackendListOf(luaapi.BackendMetrics{Name: "default/web:80", Endpoints: 2, Requests: 5})}
	m := New(Options{Lua: lua})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	bodies := make(chan string, 3)
	get := func(accept string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			bodies <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		bodies <- resp.Status + "\n" + string(body)
	}
	go get("text/plain")
	<-lua.asked // the first scrape's gather is reading Lua
	go get("text/plain")
	go get(string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	// Wait for the other two to join the gather under way.
	for deadline := time.Now().Add(5 * time.Second); scrapesWaiting(m) < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d scrapes wait for the gather, want 3", scrapesWaiting(m))
		}
	}
	if len(lua.asked) != 0 {
		t.Error("a scrape read Lua while a gather was under way")
	}
	close(lua.release)
	for range 3 {
		body := <-bodies
		if !strings.HasPrefix(body, "200 OK\n") || !strings.Contains(body, "default/web:80") {
			t.Errorf("scrape: %.200q", body)
		}
	}
	if got := lua.reads.Load(); got != 1 {
		t.Errorf("three scrapes together read Lua %d times, want 1", got)
	}
	// A scrape after them gathers anew.
	lua.release = make(chan struct{})
	close(lua.release)
	scrape(t, m)
	if got := lua.reads.Load(); got != 2 {
		t.Errorf("a later scrape: Lua read %d times in all, want 2", got)
	}
}

// scrapesWaiting is how many scrapes wait for the gather under way.
func scrapesWaiting(m *Metrics) int {
	m.inflightMu.Lock()
	defer m.inflightMu.Unlock()
	if m.inflight == nil {
		return 0
	}
	return m.inflight.scrapes
}
