package render

import (
	mathrand "math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
)

// profileModel has hosts whose locations share one set of settings (basic
// auth with a realm, a rate limit, a body size) but not their Ingress or
// htpasswd file, and a wildcard host, an alias and a regex path.
func profileModel(hosts ...string) model.Model {
	var m model.Model
	var servers []*model.Server
	for _, h := range hosts {
		l := loc("/", model.PathPrefix, "ns/"+h+":80")
		l.Ingress = "ns/" + h
		own(&l.Proxy).BodySize = "2k"
		l.Access = &model.AccessSettings{
			BasicAuth: model.BasicAuth{File: "auth/ns_" + h, Realm: "team"},
			RateLimit: model.RateLimit{RPM: 60, BurstMultiplier: 1},
		}
		servers = append(servers, &model.Server{Host: h + ".example.com", Locations: []model.Location{l}})
		m.AuthFiles = append(m.AuthFiles, model.AuthFile{Name: "auth/ns_" + h, Content: h + ":{PLAIN}pw-" + h + "\n"})
	}
	re := loc("/v[0-9]+/items", model.PathRegex, "ns/a:80")
	m.Servers = model.ListOf(append(servers,
		&model.Server{Host: "*.wild.example.com", Locations: []model.Location{loc("/", model.PathPrefix, "ns/b:80")}},
		&model.Server{Host: "re.example.com", Aliases: []string{"alias.example.com"},
			Locations: []model.Location{loc("/", model.PathPrefix, "ns/b:80"), re}})...)
	return m
}

// Locations with the same settings share one profile in nginx.conf while
// each keeps what is its own (htpasswd file, rate-limit counters, backend);
// a new host with those settings is a routes push with the same nginx.conf.
// Wildcards, aliases and regex paths are routed too. (Real nginx.)
func TestDataPlaneProfiles(t *testing.T) {
	m := profileModel("a", "b")
	dp, settings, cfg := startDataPlane(t, m, nil)
	for _, f := range profileModel("a", "b", "c").AuthFiles {
		path := filepath.Join(settings.SharedDir, f.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(f.Content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var upserts []luaapi.BackendPayload
	for _, name := range []string{"a", "b", "c"} {
		upserts = append(upserts, luaapi.BackendPayload{Name: "ns/" + name + ":80", Endpoints: []model.Endpoint{startEchoBackend(t, name).ep}})
	}
	dp.push(t, upserts, nil)

	if n := strings.Count(string(cfg.Bytes), "location @restysync_p_"); n != 1 {
		t.Errorf("nginx.conf has %d profiles, want the one both hosts share", n)
	}
	for _, h := range []string{"a.example.com", "b.example.com", "wild.example.com"} {
		if strings.Contains(string(cfg.Bytes), h) {
			t.Errorf("nginx.conf names %s", h)
		}
	}

	get := func(host, path, user, password string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := dp.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body := make([]byte, 64)
		n, _ := resp.Body.Read(body)
		return resp.StatusCode, string(body[:n])
	}
	t.Run("each host its own htpasswd file", func(t *testing.T) {
		for _, c := range []struct {
			host, user, password string
			code                 int
			body                 string
		}{
			{"a.example.com", "a", "pw-a", 200, "a"},
			{"a.example.com", "b", "pw-b", 401, ""},
			{"b.example.com", "b", "pw-b", 200, "b"},
			{"b.example.com", "", "", 401, ""},
		} {
			if code, body := get(c.host, "/", c.user, c.password); code != c.code || (c.body != "" && body != c.body) {
				t.Errorf("GET %s as %q: %d %q, want %d %q", c.host, c.user, code, body, c.code, c.body)
			}
		}
	})
	t.Run("each Ingress its own rate-limit counter", func(t *testing.T) {
		// 60 r/m with a burst of 60: a's requests run out of a's counter
		// only; b, in the same zone, is still served.
		limited := false
		for range 80 {
			if code, _ := get("a.example.com", "/", "a", "pw-a"); code == http.StatusServiceUnavailable {
				limited = true
				break
			}
		}
		if !limited {
			t.Fatal("a was never limited")
		}
		if code, body := get("b.example.com", "/", "b", "pw-b"); code != 200 || body != "b" {
			t.Errorf("b after a ran out: %d %q, want 200 b", code, body)
		}
	})
	t.Run("the profile's body size, checked by Lua", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, "http://b.example.com/", strings.NewReader(strings.Repeat("x", 4096)))
		req.SetBasicAuth("b", "pw-b")
		resp, err := dp.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a 4 KiB body to a 2k location: %d, want 413", resp.StatusCode)
		}
	})
	t.Run("wildcard, alias and regex routes", func(t *testing.T) {
		for _, c := range []struct{ host, path, want string }{
			{"x.wild.example.com", "/", "b"},
			{"alias.example.com", "/v2/items", "a"},
			{"re.example.com", "/V10/ITEMS/more", "a"}, // case-insensitive, a prefix of the path
			{"re.example.com", "/v/items", "b"},
		} {
			if code, body := dp.get(t, c.host, c.path); code != 200 || body != c.want {
				t.Errorf("GET %s%s: %d %q, want 200 %q", c.host, c.path, code, body, c.want)
			}
		}
		if code, _ := dp.get(t, "x.y.wild.example.com", "/"); code != http.StatusNotFound {
			t.Errorf("a wildcard matched two labels: %d, want 404", code)
		}
	})
	t.Run("a new host with the same settings: a routes push, the same nginx.conf", func(t *testing.T) {
		next := profileModel("a", "b", "c")
		again, err := Render(next, settings)
		if err != nil {
			t.Fatal(err)
		}
		if again.Hash != cfg.Hash {
			t.Fatal("a third host with the same settings changed nginx.conf")
		}
		dp.pushRoutes(t, next)
		if code, body := get("c.example.com", "/", "c", "pw-c"); code != 200 || body != "c" {
			t.Errorf("c.example.com: %d %q, want 200 c", code, body)
		}
		if st := dp.status(t); st.ConfigHash != cfg.Hash {
			t.Errorf("nginx runs %s, want the same %s", st.ConfigHash, cfg.Hash)
		}
	})
}

// The profiler renders each set of settings once: what it hands out for a
// location is what rendering that location alone gives, for the models of
// the golden tests and for random snapshots.
func TestProfilerMatchesAFreshRender(t *testing.T) {
	models := []model.Model{accessModel(), proxyModel(), profileModel("a", "b", "c")}
	world := newRandomWorld()
	for seed := range int64(20) {
		m, _ := model.Build(world.snapshot(mathrand.New(mathrand.NewSource(seed))))
		models = append(models, m)
	}
	for i, m := range models {
		views, err := serverViews(m)
		if err != nil {
			t.Fatalf("model %d: %v", i, err)
		}
		shared := newProfiler()
		for _, sv := range views {
			for _, lv := range sv.Locations {
				name, body, err := shared.of(lv)
				if err != nil {
					t.Fatal(err)
				}
				freshName, freshBody, err := newProfiler().of(lv)
				if err != nil {
					t.Fatal(err)
				}
				if name != freshName || body != freshBody {
					t.Errorf("model %d, host %q, path %q: the profiler gave %s, a fresh render %s", i, sv.Host, lv.Path, name, freshName)
				}
			}
		}
	}
}
