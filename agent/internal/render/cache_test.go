package render

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// TestCacheRendersWhatChanged walks a Cache through changes whose effect
// on nginx.conf is known: a plain host and a host whose profile nginx
// already has are routes only (the conf is the last one, and a plan makes
// no reload of it); a new profile, a new largest body size, a host a
// client-certificate server names as its alias, new settings render
// nginx.conf again, and it differs, so the plan reloads. Every step
// equals Build.
func TestCacheRendersWhatChanged(t *testing.T) {
	settings := goldenSettings
	h := DefaultHTTP()
	h.ClientMaxBodySize = "100m"
	settings.HTTP = &h
	sized := func(host, size string) *model.Server {
		l := loc("/", model.PathPrefix, "default/"+host+":80")
		own(&l.Proxy).BodySize = size
		return &model.Server{Host: host, Locations: []model.Location{l}}
	}
	plain := func(host string) *model.Server {
		return &model.Server{Host: host, Locations: []model.Location{loc("/", model.PathPrefix, "default/"+host+":80")}}
	}
	a, b := sized("a.test", "8m"), sized("b.test", "8m")
	limited := func(host string) *model.Server {
		srv := sized(host, "8m")
		own(&srv.Locations[0].Access).RateLimit = model.RateLimit{RPS: 5}
		return srv
	}
	certsServer := *a
	certs := &certsServer
	certs.Host, certs.Aliases = "certs.test", []string{"alias.test"}
	certs.ClientTLS = &model.ClientTLS{CAFile: "ca.pem", Verify: "on", Depth: 1}
	c, d := limited("c.test"), limited("d.test")
	p, q, alias := plain("p.test"), plain("q.test"), plain("alias.test")
	steps := []struct {
		name    string
		servers []*model.Server
		s       Settings
		reused  bool // nginx.conf is the last one
		reload  bool // nginx.conf differs from the last one
		hosts   int  // servers made again
	}{
		{"first", []*model.Server{a}, settings, false, true, 2},
		{"a host of a profile nginx has", []*model.Server{a, b}, settings, true, false, 1},
		{"a plain host: the router's body size grows to the ConfigMap's", []*model.Server{a, b, p}, settings, false, true, 1},
		{"another plain host", []*model.Server{a, b, p, q}, settings, true, false, 1},
		{"a new profile", []*model.Server{a, b, p, q, sized("s.test", "4m")}, settings, false, true, 1},
		{"a rate limit: a zone and a profile", []*model.Server{a, b, c}, settings, false, true, 0},
		// A host that adds to the conf view renders it again, even when
		// what it adds is there (the cache does not count zones).
		{"the same limit on another host", []*model.Server{a, b, c, d}, settings, false, false, 1},
		{"a client-certificate server", []*model.Server{a, b, c, d, certs}, settings, false, true, 1},
		{"a host its alias names", []*model.Server{a, b, c, d, certs, alias}, settings, false, true, 1},
		// A client-certificate server names other hosts: the conf is
		// rendered again for any host.
		{"a host removed", []*model.Server{a, c, d, certs, alias}, settings, false, false, 0},
		{"new settings", []*model.Server{a, c, d, certs, alias}, goldenSettings, false, true, 6},
	}
	cache := NewCache()
	var last Config
	for i, step := range steps {
		m := model.Model{Servers: model.ListOf(step.servers...)}
		got, gotRoutes, err := cache.Build(m, step.s)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		want, wantRoutes, err := Build(m, step.s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotRoutes.Slice(), NewRouteList(wantRoutes).Slice()) {
			t.Fatalf("%s: the cached render differs from Build's:\n%s", step.name, lineDiff(string(want.Bytes), string(got.Bytes)))
		}
		stats := cache.Stats()
		if stats.ConfReused != step.reused {
			t.Errorf("%s: conf reused %v, want %v", step.name, stats.ConfReused, step.reused)
		}
		if i > 0 && (got.Hash != last.Hash) != step.reload {
			t.Errorf("%s: nginx.conf differs from the last %v, want %v", step.name, got.Hash != last.Hash, step.reload)
		}
		if step.hosts != 0 && stats.Hosts != step.hosts {
			t.Errorf("%s: %d hosts made again, want %d", step.name, stats.Hosts, step.hosts)
		}
		last = got
	}
}

// BenchmarkCacheNewHost is B11's render: one new host among n (each with
// two locations, every tenth a wildcard), by a Cache that rendered the n
// before, and by Build for reference. The model alternates between the n
// and the n plus one; its other servers keep their Locations arrays, as
// model.Incremental hands them out.
func BenchmarkCacheNewHost(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		without := manyServers(n)
		with := without
		with.Servers = model.ListOf(append(without.Servers.Slice(), &model.Server{Host: "zzz-new.example.com",
			Locations: []model.Location{loc("/", model.PathPrefix, "default/new:80")}})...)
		b.Run(fmt.Sprintf("cache/hosts=%d", n), func(b *testing.B) {
			benchCacheChange(b, without, with, func(s CacheStats) bool { return s.Hosts <= 1 })
		})
		b.Run(fmt.Sprintf("build/hosts=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := Build(with, goldenSettings); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCacheNewRoute is B11-route's render: one new Gateway route
// among n (each with two locations and a route status), by a Cache that
// rendered the n before. The other routes keep their Locations arrays, as
// model.Incremental hands them out.
func BenchmarkCacheNewRoute(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		without, with := manyGatewayRoutes(n)
		b.Run(fmt.Sprintf("cache/routes=%d", n), func(b *testing.B) {
			benchCacheChange(b, without, with, func(s CacheStats) bool { return s.GatewayRoutes <= 1 })
		})
	}
}

// benchCacheChange renders with and without by turns with a Cache that
// rendered without first, and checks that each render reused nginx.conf
// and made again only what ok accepts.
func benchCacheChange(b *testing.B, without, with model.Model, ok func(CacheStats) bool) {
	cache := NewCache()
	if _, _, err := cache.Build(without, goldenSettings); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := with
		if i%2 == 1 {
			m = without
		}
		i++
		if _, _, err := cache.Build(m, goldenSettings); err != nil {
			b.Fatal(err)
		}
		if s := cache.Stats(); !s.ConfReused || !ok(s) {
			b.Fatalf("conf reused %v, stats %+v", s.ConfReused, s)
		}
	}
}

// manyGatewayRoutes is a model of one Gateway listener and n routes, and
// the same with one route more in the middle (new lists, as
// model.Incremental makes them; the other routes' arrays shared).
func manyGatewayRoutes(n int) (without, with model.Model) {
	front := model.FrontName("127.0.0.1", 80)
	route := func(name string) (*model.Route, *model.RouteStatus) {
		rule := &model.RouteRule{Route: "HTTPRoute default/" + name}
		backend := "default/" + name + ":80"
		return &model.Route{Host: model.FrontKey(front, name+".example.com"), Ordered: true, Locations: []model.RouteLocation{
				{Path: "/api", Backend: backend, Rule: rule}, {Path: "/", Backend: backend, Rule: rule}}},
			&model.RouteStatus{Kind: "HTTPRoute", Namespace: "default", Name: name, Generation: 1,
				Parents: []model.RouteParentStatus{{Namespace: "default", Name: "gw",
					Conditions: []model.Condition{{Type: "Accepted", Status: true, Reason: "Accepted"}}}}}
	}
	without.Listeners = []model.Listener{{Address: "127.0.0.1", Port: 80, Front: front}}
	without.GatewayAPI.Gateways = []model.GatewayStatus{{Namespace: "default", Name: "gw",
		Listeners: []model.ListenerStatus{{Name: "http", AttachedRoutes: int32(n)}}}}
	var routes []*model.Route
	var statuses []*model.RouteStatus
	for i := range n {
		r, st := route(fmt.Sprintf("app-%06d", 2*i))
		routes = append(routes, r)
		statuses = append(statuses, st)
	}
	without.GatewayRoutes = model.ListOf(routes...)
	without.GatewayAPI.Routes = model.ListOf(statuses...)
	with = without
	at := n / 2
	r, st := route(fmt.Sprintf("app-%06d", 2*at-1))
	with.GatewayRoutes = withRoute(without.GatewayRoutes, r)
	with.GatewayAPI.Routes = model.ListOf(slices.Insert(slices.Clone(statuses), at, st)...)
	with.GatewayAPI.Gateways = []model.GatewayStatus{{Namespace: "default", Name: "gw",
		Listeners: []model.ListenerStatus{{Name: "http", AttachedRoutes: int32(n + 1)}}}}
	return without, with
}

// withRoute is routes with r, in the place of the route of its host or
// added, made as model.Incremental makes its lists (model.Edited).
func withRoute(routes model.List[*model.Route], r *model.Route) model.List[*model.Route] {
	return model.Edited(routes, []model.ListEdit[string, *model.Route]{{Key: r.Host, Value: r}},
		func(r *model.Route, host string) int { return strings.Compare(r.Host, host) })
}

// TestCacheGatewayRoutes walks a Cache through Gateway route changes: a
// route that comes, goes or changes is checked again alone, is the one
// host ChangedRoutes names, and nginx.conf is the last one, but for a
// route with retry codes (a location of nginx.conf); routes not sorted by
// host are rendered by Build. Every step equals Build.
func TestCacheGatewayRoutes(t *testing.T) {
	without, with := manyGatewayRoutes(20)
	// changeRoute is m with a new route i, its first location changed.
	changeRoute := func(m model.Model, i int, change func(l *model.RouteLocation)) model.Model {
		r := *m.GatewayRoutes.At(i)
		r.Locations = slices.Clone(r.Locations)
		change(&r.Locations[0])
		m.GatewayRoutes = withRoute(m.GatewayRoutes, &r)
		return m
	}
	changed := changeRoute(with, 3, func(l *model.RouteLocation) { l.Path = "/changed" })
	retry := changeRoute(changed, 5, func(l *model.RouteLocation) {
		l.Rule = &model.RouteRule{Route: "HTTPRoute default/retry", Retry: &model.RouteRetry{Attempts: 2, Codes: []int{502, 503}}}
	})
	unsorted := changed
	swapped := changed.GatewayRoutes.Slice()
	swapped[0], swapped[1] = swapped[1], swapped[0]
	unsorted.GatewayRoutes = model.ListOf(swapped...)
	metrics := goldenSettings
	rm := DefaultRequestMetrics()
	metrics.RequestMetrics = &rm
	steps := []struct {
		name   string
		m      model.Model
		s      Settings
		reused bool // nginx.conf is the last one
		routes int  // Gateway routes checked again
		whole  bool
		hosts  int // hosts ChangedRoutes names; -1: it cannot say
	}{
		{"first", without, goldenSettings, false, 20, false, -1},
		{"a new route", with, goldenSettings, true, 1, false, 1},
		{"the route gone", without, goldenSettings, true, 0, false, 1},
		{"the route back", with, goldenSettings, true, 1, false, 1},
		{"a route changed", changed, goldenSettings, true, 1, false, 1},
		{"retry codes: a location of nginx.conf", retry, goldenSettings, false, 1, false, 1},
		{"retry codes gone", changed, goldenSettings, false, 1, false, 1},
		{"request metrics: every route labelled", changed, metrics, false, 21, false, -1},
		{"a route changed, labelled", with, metrics, true, 1, false, 1},
		{"routes out of order", unsorted, metrics, false, 0, true, -1},
		{"in order again", with, metrics, false, 21, false, -1},
	}
	cache := NewCache()
	for _, step := range steps {
		got, gotRoutes, err := cache.Build(step.m, step.s)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		want, wantRoutes, err := Build(step.m, step.s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotRoutes.Slice(), NewRouteList(wantRoutes).Slice()) {
			t.Fatalf("%s: the cached render differs from Build's:\n%s", step.name, lineDiff(string(want.Bytes), string(got.Bytes)))
		}
		stats := cache.Stats()
		if stats.ConfReused != step.reused || stats.Whole != step.whole || !step.whole && stats.GatewayRoutes != step.routes {
			t.Errorf("%s: conf reused %v, whole %v, %d routes checked again; want %v, %v, %d",
				step.name, stats.ConfReused, stats.Whole, stats.GatewayRoutes, step.reused, step.whole, step.routes)
		}
		if _, hosts, ok := cache.ChangedRoutes(); ok != (step.hosts >= 0) || ok && len(hosts) != step.hosts {
			t.Errorf("%s: ChangedRoutes names %v (ok %v), want %d hosts", step.name, hosts, ok, step.hosts)
		}
	}
}

// TestCacheHoldsTheModelsServers: an entry holds the model's server, not
// a copy of it (a copy per host was 8 MB at 50,000 hosts).
func TestCacheHoldsTheModelsServers(t *testing.T) {
	srv := &model.Server{Host: "a.test", Locations: []model.Location{loc("/", model.PathPrefix, "default/a:80")}}
	c := NewCache()
	if _, _, err := c.Build(model.Model{Servers: model.ListOf(srv)}, goldenSettings); err != nil {
		t.Fatal(err)
	}
	if e := c.hosts["a.test"]; e == nil || e.server != srv {
		t.Errorf("the entry of a.test holds %p, want the model's server %p", e.server, srv)
	}
}

// A render follows the model's server hint only when it is the hint of
// its model: a hint serves one render, and nil hosts (the model cannot
// say) leave the render walking every server.
func TestCacheServersChangedHintNotTaken(t *testing.T) {
	server := func(host, path string) *model.Server {
		return &model.Server{Host: host, Locations: []model.Location{loc(path, model.PathPrefix, "default/"+host+":80")}}
	}
	first := model.Model{Servers: model.ListOf(server("a.test", "/"), server("b.test", "/"))}
	second := model.Model{Servers: model.ListOf(first.Servers.At(0), server("b.test", "/b"))}
	third := model.Model{Servers: model.ListOf(server("a.test", "/a"), second.Servers.At(1))}
	fourth := model.Model{Servers: model.ListOf(third.Servers.At(0), server("b.test", "/4"))}
	cache := NewCache()
	steps := []struct {
		name   string
		m      model.Model
		hint   func()
		walked bool
	}{
		{"first", first, func() {}, true},
		{"the hint of its model", second, func() { cache.ServersChanged(first.Servers, map[string]bool{"b.test": true}) }, false},
		{"no hint: the last one is spent", third, func() {}, true},
		{"nil hosts", fourth, func() { cache.ServersChanged(third.Servers, nil) }, true},
	}
	for _, step := range steps {
		step.hint()
		_, got, err := cache.Build(step.m, goldenSettings)
		if err != nil {
			t.Fatal(err)
		}
		_, want, err := Build(step.m, goldenSettings)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Slice(), NewRouteList(want).Slice()) {
			t.Errorf("%s: routes %+v, want %+v", step.name, got.Slice(), want)
		}
		if stats := cache.Stats(); stats.Walked != step.walked && !stats.Whole {
			t.Errorf("%s: walked every server %v, want %v", step.name, stats.Walked, step.walked)
		}
	}
}

// TestCacheGatewayRoutesChangedHint: with the model's hint of its changed
// Gateway routes (GatewayRoutesChanged) relative to the routes the cache
// rendered last, a render looks at those routes alone; a hint serves one
// render, and one relative to other routes, or nil hosts, walk them all.
// Every step equals Build.
func TestCacheGatewayRoutesChangedHint(t *testing.T) {
	without, with := manyGatewayRoutes(20)
	added := ""
	for r := range with.GatewayRoutes.All() {
		if !slices.Contains(without.GatewayRoutes.Slice(), r) {
			added = r.Host
		}
	}
	hint := map[string]bool{added: true}
	cache := NewCache()
	steps := []struct {
		name   string
		m      model.Model
		hint   func()
		walked bool
		looked int // the routes checked again (CacheStats.GatewayRoutes)
	}{
		{"first", without, func() {}, true, 20},
		{"a new route, hinted", with, func() { cache.GatewayRoutesChanged(without.GatewayRoutes, hint) }, false, 1},
		{"the route gone, hinted", without, func() { cache.GatewayRoutesChanged(with.GatewayRoutes, hint) }, false, 0},
		{"no hint: the last one is spent", with, func() {}, true, 1},
		{"a hint relative to other routes", without, func() { cache.GatewayRoutesChanged(without.GatewayRoutes, hint) }, true, 0},
		{"nil hosts", with, func() { cache.GatewayRoutesChanged(without.GatewayRoutes, nil) }, true, 1},
		{"a hint naming a route the same in both", without, func() {
			cache.GatewayRoutesChanged(with.GatewayRoutes, map[string]bool{added: true, without.GatewayRoutes.At(3).Host: true})
		}, false, 0},
	}
	for _, step := range steps {
		step.hint()
		_, got, err := cache.Build(step.m, goldenSettings)
		if err != nil {
			t.Fatal(err)
		}
		_, want, err := Build(step.m, goldenSettings)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Slice(), NewRouteList(want).Slice()) {
			t.Errorf("%s: routes %+v, want %+v", step.name, got.Slice(), want)
		}
		stats := cache.Stats()
		if stats.GatewayWalked != step.walked || stats.GatewayRoutes != step.looked {
			t.Errorf("%s: walked every Gateway route %v, checked %d again; want %v, %d", step.name, stats.GatewayWalked, stats.GatewayRoutes, step.walked, step.looked)
		}
		if _, hosts, ok := cache.ChangedRoutes(); step.name != "first" && (!ok || len(hosts) > 1 || len(hosts) == 1 && !hosts[added]) {
			t.Errorf("%s: ChangedRoutes %v %v, want at most %q", step.name, hosts, ok, added)
		}
	}
}

// A model whose servers were made from the last model's (model.Edited,
// as model.Incremental makes them), given with no hint, is diffed by
// CompareLists: only the chunks the two lists do not share are looked
// at, not every server, and each render equals Build's. Lists made
// apart are walked.
func TestCacheComparesServersMadeFromTheLast(t *testing.T) {
	server := func(host, path string) *model.Server {
		return &model.Server{Host: host, Locations: []model.Location{loc(path, model.PathPrefix, "default/"+host+":80")}}
	}
	var servers []*model.Server
	for i := range 1000 {
		servers = append(servers, server(fmt.Sprintf("h%04d.test", i), "/"))
	}
	edit := func(m model.Model, host string, srv *model.Server) model.Model {
		m.Servers = model.Edited(m.Servers, []model.ListEdit[string, *model.Server]{{Key: host, Value: srv, Remove: srv == nil}},
			func(s *model.Server, host string) int { return strings.Compare(s.Host, host) })
		return m
	}
	first := model.Model{Servers: model.ListOf(servers...)}
	added := edit(first, "h0500a.test", server("h0500a.test", "/"))
	changed := edit(added, "h0100.test", server("h0100.test", "/other"))
	removed := edit(changed, "h0900.test", nil)
	apart := model.Model{Servers: model.ListOf(removed.Servers.Slice()...)}
	steps := []struct {
		name   string
		m      model.Model
		walked bool
		hosts  int
	}{
		{"first", first, true, 1001},
		{"a host added", added, false, 1},
		{"a host changed", changed, false, 1},
		{"a host removed", removed, false, 0},
		{"a list made apart", apart, true, 0},
	}
	cache := NewCache()
	for _, step := range steps {
		gotCfg, got, err := cache.Build(step.m, goldenSettings)
		if err != nil {
			t.Fatal(err)
		}
		wantCfg, want, err := Build(step.m, goldenSettings)
		if err != nil {
			t.Fatal(err)
		}
		if gotCfg.Hash != wantCfg.Hash || !reflect.DeepEqual(got.Slice(), NewRouteList(want).Slice()) {
			t.Errorf("%s: the cached render differs from Build's", step.name)
		}
		stats := cache.Stats()
		if stats.Whole || stats.Walked != step.walked || stats.Hosts != step.hosts {
			t.Errorf("%s: stats %+v; want walked %v, %d hosts made again", step.name, stats, step.walked, step.hosts)
		}
	}
}
