package render

import (
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// A location's metric labels: namespace, owner, service, path, host; a
// route's owner drops its kind; the default server's host is empty;
// control characters (the separator) never reach Lua; Lua's bound holds.
func TestMetricLabels(t *testing.T) {
	for _, c := range []struct {
		owner, backend, path, host, want string
	}{
		{"shop/web", "shop/web-svc:80", "/api", "shop.test", "shop|web|web-svc|/api|shop.test"},
		{"HTTPRoute shop/route", "shop/svc:http", "^/v[0-9]+", "*.shop.test", "shop|route|svc|^/v[0-9]+|*.shop.test"},
		{"shop/web", "shop/web:80", "/", DefaultRoute, "shop|web|web|/|"},
		{"", "", "/", "", "|||/|"},
		{"shop/web", "shop/web:80", "/a\x01b\nc", "a.test", "shop|web|web|/abc|a.test"},
	} {
		got := strings.ReplaceAll(metricLabels(c.owner, c.backend, c.path, c.host), metricSeparator, "|")
		if got != c.want {
			t.Errorf("metricLabels(%q, %q, %q, %q) = %q, want %q", c.owner, c.backend, c.path, c.host, got, c.want)
		}
	}
	long := metricLabels("ns/name", "ns/svc:80", "/"+strings.Repeat("p", 2000), "a.test")
	if len(long) > maxMetricBytes || strings.Count(long, metricSeparator) != 4 || !strings.HasSuffix(long, metricSeparator+"a.test") {
		t.Errorf("a long path: %d bytes, %d separators", len(long), strings.Count(long, metricSeparator))
	}
}

// With the request metrics on, every route location carries its labels
// (Gateway routes' too, without touching the model's), the template gets
// the dict and the recorder with the bounds; off, neither.
func TestRequestMetricsRender(t *testing.T) {
	m := model.Model{
		Servers:  model.ListOf(&model.Server{Host: "shop.test", Locations: []model.Location{{Path: "/", PathType: model.PathPrefix, Backend: "shop/web:80", Ingress: "shop/web"}}}),
		Backends: model.ListOf([]model.Backend{{Name: "shop/web:80"}}...),
		GatewayRoutes: model.ListOf(&model.Route{Host: model.FrontKey("127.0.0.1:80", "gw.test"), Ordered: true,
			Locations: []model.RouteLocation{{Path: "/", Backend: "shop/gw:80", Rule: &model.RouteRule{Route: "HTTPRoute shop/gw"}}}}),
	}
	s := Settings{SharedDir: "/srv", HTTPPort: 80, HTTPSPort: 443}
	off, routes, err := Build(m, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		for _, l := range r.Locations {
			if l.Metric != "" {
				t.Errorf("metrics off: route %s has labels %q", r.Host, l.Metric)
			}
		}
	}
	if strings.Contains(string(off.Bytes), "restysync_requests") {
		t.Error("metrics off: nginx.conf has the requests dict")
	}

	rm := DefaultRequestMetrics()
	s.RequestMetrics = &rm
	on, routes, err := Build(m, s)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"shop.test": "shop|web|web|/|shop.test",
		model.FrontKey("127.0.0.1:80", "gw.test"): "shop|gw|gw|/|gw.test",
	}
	for _, r := range routes {
		if w, ok := want[r.Host]; ok {
			if got := strings.ReplaceAll(r.Locations[0].Metric, metricSeparator, "|"); got != w {
				t.Errorf("route %s: labels %q, want %q", r.Host, got, w)
			}
			delete(want, r.Host)
		}
	}
	if len(want) > 0 {
		t.Errorf("no routes for %v", want)
	}
	if m.GatewayRoutes.At(0).Locations[0].Metric != "" {
		t.Error("the model's Gateway route was changed")
	}
	for _, line := range []string{
		"lua_shared_dict restysync_requests 32m;",
		"time = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 },",
		"size = { 10, 100, 1000, 10000, 100000, 1e+06, 1e+07 },",
		"undefined_host = false,",
		"skip = {  },",
	} {
		if !strings.Contains(string(on.Bytes), line) {
			t.Errorf("metrics on: nginx.conf lacks %q", line)
		}
	}

	rm.Unrecorded = []string{"connect_duration", "header_duration"}
	if out, _, err := Build(m, s); err != nil || !strings.Contains(string(out.Bytes), "skip = { connect_duration = true, header_duration = true },") {
		t.Errorf("unrecorded histograms: %v", err)
	}
	rm.Unrecorded = []string{"x = true }; os.execute('id') --"}
	if _, _, err := Build(m, s); err == nil || !strings.Contains(err.Error(), "no histogram") {
		t.Errorf("an unknown histogram: %v", err)
	}
	rm.Unrecorded = nil

	rm.Time = []float64{1, 0.5}
	if _, _, err := Build(m, s); err == nil || !strings.Contains(err.Error(), "time buckets") {
		t.Errorf("decreasing buckets: %v", err)
	}
}

// A Gateway route's labels are set on copies of its locations: the
// options the model's locations hold (shared with the model) stay as
// they were, and the copies keep them besides the labels.
func TestGatewayRouteLabelsLeaveTheModelsOptions(t *testing.T) {
	loc := model.RouteLocation{Path: "/", Backend: "shop/web:80"}.WithOptions(model.RouteOptions{MaxBody: 1024})
	r := model.Route{Host: model.FrontKey("127.0.0.1:80", "gw.test"), Locations: []model.RouteLocation{loc}}
	out := gatewayRouteLabels(r)
	if got := r.Locations[0]; got.Options() != (model.RouteOptions{MaxBody: 1024}) || got.Metric != "" {
		t.Errorf("the model's location changed: %+v, %+v", got, got.Options())
	}
	if got := out.Locations[0]; got.Options().MaxBody != 1024 || got.Metric == "" {
		t.Errorf("labelled: %+v, options %+v, want MaxBody 1024 and labels", got, got.Options())
	}
}
