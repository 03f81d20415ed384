package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// fakeLua answers like the Lua config API, or fails with err.
type fakeLua struct {
	status   luaapi.Status
	backends map[string]model.Backend
	certs    []luaapi.HeldCertificate
	err      error
}

func (f *fakeLua) Status(context.Context) (luaapi.Status, error) { return f.status, f.err }
func (f *fakeLua) Backends(context.Context) (map[string]model.Backend, error) {
	return f.backends, f.err
}
func (f *fakeLua) Certificates(context.Context) ([]luaapi.HeldCertificate, error) {
	return f.certs, f.err
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestHealthz(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name  string
		state syncer.State
		want  int
	}{
		{"still listing", syncer.State{}, 200},
		{"first sync running", syncer.State{Synced: true}, 200},
		{"loop came round", syncer.State{Synced: true, LastLoop: now.Add(-time.Second)}, 200},
		{"loop stuck", syncer.State{Synced: true, LastLoop: now.Add(-31 * time.Second)}, 503},
		{"only a sync recorded, long ago", syncer.State{Synced: true, LastSync: now.Add(-time.Hour)}, 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(Options{State: func() syncer.State { return c.state }, Lua: &fakeLua{}, Now: func() time.Time { return now }})
			code, body := get(t, s.Handler(), "/healthz")
			if code != c.want {
				t.Errorf("GET /healthz: %d %s, want %d", code, body, c.want)
			}
		})
	}
}

func TestReadyz(t *testing.T) {
	up := luaapi.Status{ConfigHash: "aaa", BootID: "b1"}
	restarted := luaapi.Status{ConfigHash: "aaa", BootID: "b2"}
	restored := luaapi.Status{ConfigHash: "aaa", BootID: "b2", Restored: true}
	refused := syncer.State{Synced: true, ConfigHash: "aaa", LuaBoot: "b1", ConfigMapRefused: "nginx rejected the config: [emerg] invalid ssl_ciphers"}
	cases := []struct {
		name   string
		path   string
		state  syncer.State
		lua    *fakeLua
		want   int
		reason string
	}{
		{"source listing", "", syncer.State{}, &fakeLua{status: up}, 503, "listing"},
		{"nothing applied", "", syncer.State{Synced: true}, &fakeLua{status: up}, 503, "no config"},
		{"nginx down", "", syncer.State{Synced: true, ConfigHash: "aaa"}, &fakeLua{err: errors.New("connection refused")}, 503, "does not answer"},
		{"nginx runs another config", "", syncer.State{Synced: true, ConfigHash: "bbb"}, &fakeLua{status: up}, 503, "not the applied"},
		{"socket unusable", "", syncer.State{Synced: true, NginxUnreachable: "asking lua for /status: 500: module 'restysync.api' not found"},
			&fakeLua{status: up}, 503, "no config is confirmed running in nginx yet: nginx does not answer: asking lua for /status: 500: module"},
		{"workers cannot read", "", syncer.State{Synced: true, ConfigHash: "aaa", WorkerAccess: []string{"nginx workers cannot read /s/auth/x: Permission denied"}},
			&fakeLua{status: up}, 503, "nginx workers cannot read /s/auth/x: Permission denied"},
		{"ConfigMap refused", "", refused,
			&fakeLua{status: up}, 503, "ConfigMap is refused as it is; the last version nginx took serves, with the Ingress changes on top, until the ConfigMap changes: nginx rejected the config: [emerg] invalid ssl_ciphers"},
		// The readiness probe: the last good ConfigMap serves, the replica
		// stays in the Service.
		{"ConfigMap refused, serving", "/readyz?serving", refused, &fakeLua{status: up}, 200, "runs config aaa"},
		{"nginx down, serving", "/readyz?serving", syncer.State{Synced: true, ConfigHash: "aaa"}, &fakeLua{err: errors.New("connection refused")}, 503, "does not answer"},
		{"ready", "", syncer.State{Synced: true, ConfigHash: "aaa", LuaBoot: "b1"}, &fakeLua{status: up}, 200, "runs config aaa"},
		// A cold-started nginx is ready once it serves a state: the one
		// the agent saved, or the agent's pushes to the new boot.
		{"nginx restarted empty", "/readyz?serving", syncer.State{Synced: true, ConfigHash: "aaa", LuaBoot: "b1"}, &fakeLua{status: restarted}, 503, "without a saved state"},
		{"nginx restarted from the saved state", "/readyz?serving", syncer.State{Synced: true, ConfigHash: "aaa", LuaBoot: "b1"}, &fakeLua{status: restored}, 200, "runs config aaa"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(Options{State: func() syncer.State { return c.state }, Lua: c.lua})
			path := cmp.Or(c.path, "/readyz")
			code, body := get(t, s.Handler(), path)
			var h Health
			if err := json.Unmarshal([]byte(body), &h); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if code != c.want || h.OK != (c.want == 200) || !strings.Contains(h.Reason, c.reason) {
				t.Errorf("GET %s: %d %+v, want %d and a reason with %q", path, code, h, c.want, c.reason)
			}
		})
	}
}

func ep(addr string, port int32) model.Endpoint { return model.Endpoint{Address: addr, Port: port} }

func testModel() model.Model {
	return model.Model{
		Default: model.Server{Locations: []model.Location{
			{Path: "/", PathType: model.PathPrefix, Backend: "default/fallback:80", Ingress: "default/fb"},
		}},
		Servers: model.ListOf(
			&model.Server{Host: "a.test", HTTPS: true, Locations: []model.Location{
				{Path: "/", PathType: model.PathPrefix, Backend: "default/web:80", Ingress: "default/a"},
				{Path: "/api", PathType: model.PathExact, Backend: "default/api:http", Ingress: "default/a"},
			}},
		),
		Backends: model.ListOf([]model.Backend{
			{Name: "default/api:http"},
			{Name: "default/fallback:80", Endpoints: []model.Endpoint{ep("10.0.0.9", 80)}},
			{Name: "default/web:80", Endpoints: []model.Endpoint{ep("10.0.0.1", 8080), ep("fd00::1", 8080)}},
		}...),
		Certificates: model.ListOf([]model.Certificate{
			{Name: "default/a-tls", Hosts: []string{"a.test"}, CertPEM: "C", KeyPEM: "K", NotAfter: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Name: "default/bad-tls", Hosts: []string{"b.test"}, Invalid: "key does not match"},
		}...),
	}
}

func TestFromModel(t *testing.T) {
	problems := []model.Problem{{Kind: "Ingress", Namespace: "default", Name: "b", Reason: "path \"x\" must start with /"}}
	r := FromModel(testModel(), render.RouteList{}, problems)
	if len(r.Hosts) != 2 || r.Hosts[0].Host != "" || r.Hosts[1].Host != "a.test" {
		t.Fatalf("hosts %+v, want the default server then a.test", r.Hosts)
	}
	a := r.Hosts[1]
	if !a.HTTPS || a.Certificate != "default/a-tls" || len(a.Paths) != 2 {
		t.Errorf("a.test: %+v", a)
	}
	if got := a.Paths[0].Endpoints; !slices.Equal(got, []string{"10.0.0.1:8080", "[fd00::1]:8080"}) {
		t.Errorf("endpoints of /: %v", got)
	}
	if got := a.Paths[1]; got.PathType != "Exact" || got.Backend != "default/api:http" || got.Endpoints == nil || len(got.Endpoints) != 0 {
		t.Errorf("/api: %+v, want Exact with an empty (not null) endpoint list", got)
	}
	if len(r.Problems) != 1 || r.Problems[0].Object != "Ingress default/b" {
		t.Errorf("problems %+v", r.Problems)
	}
	if len(r.Certificates) != 2 || r.Certificates[0].NotAfter == nil || r.Certificates[1].Invalid == "" {
		t.Errorf("certificates %+v", r.Certificates)
	}
	if r.QuarantinedIngresses == nil || len(r.QuarantinedIngresses) != 0 {
		t.Errorf("quarantined %v, want an empty list", r.QuarantinedIngresses)
	}
}

// A path shows its Service as people name it (the Lua key stays in
// backend), why its match type is not the one written, and what it sets
// apart from the defaults, its profile first.
func TestFromModelPathContext(t *testing.T) {
	slow := model.Location{Path: "/api", PathType: model.PathRegex, Backend: "default/api:80@default/api", Ingress: "default/api",
		MatchReason: "Exact became Regex: use-regex on Ingress default/web makes every path of the host a regex",
		Proxy:       &model.ProxySettings{ReadTimeout: 300, BodySize: "8m"},
		Access:      &model.AccessSettings{BasicAuth: model.BasicAuth{Realm: "staff"}}}
	m := model.Model{Servers: model.ListOf(&model.Server{Host: "a.test", Locations: []model.Location{
		slow, {Path: "/", PathType: model.PathPrefix, Backend: "default/web:80", Ingress: "default/web"},
	}})}
	routes, err := render.Routes(m, render.Settings{HTTPPort: 80, HTTPSPort: 443})
	if err != nil {
		t.Fatal(err)
	}
	paths := FromModel(m, render.NewRouteList(routes), nil).Hosts[0].Paths
	api, root := paths[0], paths[1]
	if api.Service != "Service default/api port 80" || api.Backend != "default/api:80@default/api" {
		t.Errorf("/api: service %q, backend %q; want Service default/api port 80 and the Lua key", api.Service, api.Backend)
	}
	if api.MatchReason != slow.MatchReason {
		t.Errorf("/api: match reason %q, want %q", api.MatchReason, slow.MatchReason)
	}
	if len(api.Settings) != 4 || !strings.HasPrefix(api.Settings[0], "profile @restysync_p_") ||
		!slices.Equal(api.Settings[1:], []string{"body-size 8m", "read-timeout 300", "basic-auth-realm staff"}) {
		t.Errorf("/api: settings %q, want its profile, body size, read timeout and realm", api.Settings)
	}
	if root.Settings != nil || root.MatchReason != "" || root.Service != "Service default/web port 80" {
		t.Errorf("/: %+v, want no settings, no match reason", root)
	}
}

// /debug/state compares what the agent wants with what Lua holds.
func TestDebugState(t *testing.T) {
	m := testModel()
	good := m.Certificates.At(0)
	st := syncer.State{Synced: true, Applied: true, ConfigHash: "aaa", WantedHash: "bbb", Model: m, Syncs: 3}
	lua := &fakeLua{
		status: luaapi.Status{ConfigHash: "aaa", BootID: "b1"},
		backends: map[string]model.Backend{
			"default/web:80":      {Endpoints: []model.Endpoint{ep("10.0.0.1", 8080)}}, // one endpoint short
			"default/fallback:80": {Endpoints: []model.Endpoint{ep("10.0.0.9", 80)}},
			"default/gone:80":     {Endpoints: []model.Endpoint{ep("10.0.0.7", 80)}},
			// default/api:http is missing
		},
		certs: []luaapi.HeldCertificate{
			{Name: good.Name, Hosts: good.Hosts, Hash: good.Hash()},
			{Name: "default/bad-tls", Hosts: []string{"b.test"}, Hash: "old"}, // invalid now: kept, not a difference
			{Name: "default/old-tls", Hosts: []string{"o.test"}, Hash: "x"},
		},
	}
	s := New(Options{State: func() syncer.State { return st }, Lua: lua})
	code, body := get(t, s.Handler(), "/debug/state")
	if code != 200 {
		t.Fatalf("GET /debug/state: %d %s", code, body)
	}
	var r Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if r.DryRun || r.Config == nil || r.Lua == nil || r.Sync == nil || r.Sync.Syncs != 3 {
		t.Fatalf("report lacks the live parts: %s", body)
	}
	c := r.Config
	if !c.NginxAnswering || !c.NginxRunsApplied || c.InStep || c.Running != "aaa" || c.Wanted != "bbb" {
		t.Errorf("config %+v: want nginx running the applied aaa, not the wanted bbb", c)
	}
	d := r.Lua
	if d.InStep || !slices.Equal(d.MissingBackends, []string{"default/api:http"}) ||
		!slices.Equal(d.ExtraBackends, []string{"default/gone:80"}) ||
		len(d.ChangedBackends) != 1 || d.ChangedBackends[0].Name != "default/web:80" ||
		len(d.ChangedBackends[0].Want) != 2 || len(d.ChangedBackends[0].Held) != 1 ||
		!slices.Equal(d.ExtraCertificates, []string{"default/old-tls"}) ||
		len(d.MissingCertificates) != 0 || len(d.ChangedCertificates) != 0 {
		t.Errorf("lua diff %+v", d)
	}

	// In step: Lua holds exactly what is wanted.
	lua.backends = map[string]model.Backend{}
	for _, b := range m.Backends.Slice() {
		lua.backends[b.Name] = b
	}
	lua.certs = lua.certs[:1]
	_, body = get(t, s.Handler(), "/debug/state")
	r = Report{}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Lua.InStep {
		t.Errorf("lua diff %+v, want in step", r.Lua)
	}

	// nginx down: the model is still reported.
	lua.err = errors.New("connection refused")
	_, body = get(t, s.Handler(), "/debug/state")
	r = Report{}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if r.Config.NginxAnswering || r.Config.Error == "" || len(r.Hosts) != 2 {
		t.Errorf("nginx down: config %+v, %d hosts", r.Config, len(r.Hosts))
	}
}

// Serve answers on its listener and stops when the context ends. The
// probes listener (--metrics-probes-address, the one the chart puts on the
// pod network) answers /metrics, /healthz and /readyz, and nothing else:
// /debug/state shows every tenant's configuration.
func TestServe(t *testing.T) {
	for _, c := range []struct {
		name  string
		serve func(*Server, context.Context, net.Listener) error
		want  map[string]int
	}{
		{"Serve", (*Server).Serve, map[string]int{"/metrics": 200, "/healthz": 200, "/readyz": 503, "/": 200, "/nope": 404}},
		{"ServeProbes", (*Server).ServeProbes, map[string]int{"/metrics": 200, "/healthz": 200, "/readyz": 503, "/debug/state": 404, "/": 404}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "restysync_up 1\n") })
			s := New(Options{Metrics: metrics, State: func() syncer.State { return syncer.State{} }, Lua: &fakeLua{}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.serve(s, ctx, ln) }()
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
			for path, want := range c.want {
				resp, err := client.Get("http://" + ln.Addr().String() + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s did not return after the context ended", c.name)
			}
		})
	}
}

// Go's profiles are served with Profiling alone, and never on the probes
// listener, which may face the pod network.
func TestProfiling(t *testing.T) {
	state := func() syncer.State { return syncer.State{} }
	for _, on := range []bool{false, true} {
		s := New(Options{State: state, Lua: &fakeLua{}, Profiling: on})
		if code, _ := get(t, s.Handler(), "/debug/pprof/heap"); (code == http.StatusOK) != on {
			t.Errorf("Profiling %v: /debug/pprof/heap answered %d", on, code)
		}
		if code, _ := get(t, s.ProbesHandler(), "/debug/pprof/heap"); code == http.StatusOK {
			t.Errorf("Profiling %v: the probes listener serves /debug/pprof/heap", on)
		}
	}
}
