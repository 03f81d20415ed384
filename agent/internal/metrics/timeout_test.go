package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
)

// slowLua answers when the scrape's context ends.
type slowLua struct{}

func (slowLua) Metrics(ctx context.Context) (luaapi.LuaMetrics, error) {
	<-ctx.Done()
	return luaapi.LuaMetrics{}, ctx.Err()
}

// A scrape whose gathering takes longer than the scrape timeout answers
// 503 in time, as promhttp's Timeout did.
func TestScrapeTimeout(t *testing.T) {
	m := New(Options{Lua: slowLua{}, LuaTimeout: 5 * time.Second})
	m.scrapeTimeout = 50 * time.Millisecond
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	start := time.Now()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "Exceeded configured timeout of 50ms") {
		t.Errorf("GET /metrics: %s %q, want 503", resp.Status, body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %v", d)
	}
}
