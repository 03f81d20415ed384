package metrics

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

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
		Backends: []luaapi.BackendMetrics{{Name: "default/web:80", Endpoints: 2, Requests: 5}},
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
