package render

import (
	"fmt"
	"reflect"
	"slices"
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
	sized := func(host, size string) model.Server {
		l := loc("/", model.PathPrefix, "default/"+host+":80")
		own(&l.Proxy).BodySize = size
		return model.Server{Host: host, Locations: []model.Location{l}}
	}
	plain := func(host string) model.Server {
		return model.Server{Host: host, Locations: []model.Location{loc("/", model.PathPrefix, "default/"+host+":80")}}
	}
	a, b := sized("a.test", "8m"), sized("b.test", "8m")
	limited := func(host string) model.Server {
		srv := sized(host, "8m")
		own(&srv.Locations[0].Access).RateLimit = model.RateLimit{RPS: 5}
		return srv
	}
	certs := a
	certs.Host, certs.Aliases = "certs.test", []string{"alias.test"}
	certs.ClientTLS = model.ClientTLS{CAFile: "ca.pem", Verify: "on", Depth: 1}
	c, d := limited("c.test"), limited("d.test")
	p, q, alias := plain("p.test"), plain("q.test"), plain("alias.test")
	steps := []struct {
		name    string
		servers []model.Server
		s       Settings
		reused  bool // nginx.conf is the last one
		reload  bool // nginx.conf differs from the last one
		hosts   int  // servers made again
	}{
		{"first", []model.Server{a}, settings, false, true, 2},
		{"a host of a profile nginx has", []model.Server{a, b}, settings, true, false, 1},
		{"a plain host: the router's body size grows to the ConfigMap's", []model.Server{a, b, p}, settings, false, true, 1},
		{"another plain host", []model.Server{a, b, p, q}, settings, true, false, 1},
		{"a new profile", []model.Server{a, b, p, q, sized("s.test", "4m")}, settings, false, true, 1},
		{"a rate limit: a zone and a profile", []model.Server{a, b, c}, settings, false, true, 0},
		// A host that adds to the conf view renders it again, even when
		// what it adds is there (the cache does not count zones).
		{"the same limit on another host", []model.Server{a, b, c, d}, settings, false, false, 1},
		{"a client-certificate server", []model.Server{a, b, c, d, certs}, settings, false, true, 1},
		{"a host its alias names", []model.Server{a, b, c, d, certs, alias}, settings, false, true, 1},
		// A client-certificate server names other hosts: the conf is
		// rendered again for any host.
		{"a host removed", []model.Server{a, c, d, certs, alias}, settings, false, false, 0},
		{"new settings", []model.Server{a, c, d, certs, alias}, goldenSettings, false, true, 6},
	}
	cache := NewCache()
	var last Config
	for i, step := range steps {
		m := model.Model{Servers: step.servers}
		got, gotRoutes, err := cache.Build(m, step.s)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		want, wantRoutes, err := Build(m, step.s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotRoutes, wantRoutes) {
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
		with.Servers = append(slices.Clone(without.Servers), model.Server{Host: "zzz-new.example.com",
			Locations: []model.Location{loc("/", model.PathPrefix, "default/new:80")}})
		b.Run(fmt.Sprintf("cache/hosts=%d", n), func(b *testing.B) {
			cache := NewCache()
			if _, _, err := cache.Build(without, goldenSettings); err != nil {
				b.Fatal(err)
			}
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
				if s := cache.Stats(); s.Hosts > 1 || !s.ConfReused {
					b.Fatalf("made %d hosts again, conf reused %v", s.Hosts, s.ConfReused)
				}
			}
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
