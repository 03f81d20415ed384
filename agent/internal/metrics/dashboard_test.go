package metrics

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/syncer"
)

var metricName = regexp.MustCompile(`restysync_[a-z0-9_]+`)

// Every metric the chart's Grafana dashboard queries is one the agent
// exports: a renamed metric cannot leave an empty panel behind.
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", "restysync", "dashboards", "restysync.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}

	// Every series present: the syncer's calls made, Lua with a backend
	// and a certificate, a leader, objects and problems.
	m := New(Options{
		Version: "v1", Commit: "abc",
		State: func() syncer.State {
			return syncer.State{ConfigHash: "h", Problems: []model.Problem{{Kind: "Ingress", Namespace: "a", Name: "b", Reason: "r"}},
				CertificateNearestExpiry: time.Now().Add(time.Hour)}
		},
		Objects: func() map[string]int { return map[string]int{"Ingress": 1} },
		Leader:  func() bool { return true },
		Lua: &fakeLua{m: luaapi.LuaMetrics{
			Backends:     luaapi.BackendListOf(luaapi.BackendMetrics{Name: "default/web:80", Endpoints: 2, Requests: 5, Failures: 1}),
			Certificates: 1, BalancerRebuilds: 1,
		}},
	})
	m.Synced("fast", "push", time.Millisecond)
	m.Reloaded(time.Millisecond, nil)
	m.Reloaded(time.Millisecond, context.DeadlineExceeded)
	m.Pushed("backends", 100, time.Millisecond, nil)
	m.Pushed("backends", 100, time.Millisecond, context.DeadlineExceeded)
	m.Propagated(time.Millisecond)
	families, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
	}

	queried := 0
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			for _, name := range metricName.FindAllString(target.Expr, -1) {
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					base = strings.TrimSuffix(base, suffix)
				}
				queried++
				if !exported[base] && !exported[name] {
					t.Errorf("panel %q queries %s, which the agent does not export", p.Title, name)
				}
			}
		}
	}
	if queried < 15 {
		t.Errorf("the dashboard queries only %d metrics", queried)
	}
}
