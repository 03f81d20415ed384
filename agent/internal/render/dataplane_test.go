package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// The data plane tests run the rendered nginx.conf and the Lua modules in a
// real nginx, with Go HTTP servers as backends, and talk to the config API
// over its unix socket the way the agent does.

// echoBackend is an HTTP server on 127.0.0.1 that answers with its name.
type echoBackend struct {
	name string
	ep   model.Endpoint
}

func startEchoBackend(t *testing.T, name string) echoBackend {
	t.Helper()
	ep := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name)
	}))
	return echoBackend{name: name, ep: ep}
}

// startBackend serves h on 127.0.0.1 until the test ends.
func startBackend(t *testing.T, h http.Handler) model.Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return model.Endpoint{Address: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port)}
}

// dataPlane is a running nginx and the clients to reach it.
type dataPlane struct {
	settings Settings
	nginx    *nginxproc.Nginx
	port     int
	client   *http.Client // HTTP to nginx on 127.0.0.1:port, whatever the URL host
}

func startDataPlane(t *testing.T, m model.Model, edit func([]byte) []byte) (*dataPlane, Settings, Config) {
	t.Helper()
	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	port := nginxproc.FreePort(t)
	s := Settings{
		SharedDir:       prefix,
		HTTPPort:        port,
		HTTPSPort:       nginxproc.FreePort(t),
		StatusPort:      nginxproc.FreePort(t),
		ListenAddress:   "127.0.0.1",
		LoadModules:     nginxproc.DebianLoadModules(),
		WorkerProcesses: "1", // round robin counts are exact with one worker
	}
	cfg := writePrefix(t, prefix, m, s)
	if edit != nil {
		if err := os.WriteFile(filepath.Join(prefix, ConfigName), edit(cfg.Bytes), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dp := &dataPlane{
		nginx:    nginxproc.Start(t, prefix),
		port:     port,
		settings: s,
		client: &http.Client{
			Timeout: 5 * time.Second,
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
				},
				DisableKeepAlives: true,
			},
		},
	}
	dp.pushRoutes(t, m)
	return dp, s, cfg
}

// pushRoutes gives Lua the routes of m's hosts that nginx.conf leaves out,
// as the syncer does.
func (dp *dataPlane) pushRoutes(t *testing.T, m model.Model) {
	t.Helper()
	routes, err := Routes(m, dp.settings)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) == 0 {
		return
	}
	update := luaapi.RouteUpdate{Upserts: luaapi.RoutePayloads(routes)}
	body, err := json.Marshal(update)
	if err != nil {
		t.Fatal(err)
	}
	if code, reply := dp.api(t, http.MethodPost, "/routes", body); code != http.StatusOK {
		t.Fatalf("POST /routes: %d %s", code, reply)
	}
}

// get sends GET http://host/path to nginx and returns the status and body.
func (dp *dataPlane) get(t *testing.T, host, path string) (int, string) {
	t.Helper()
	resp, err := dp.client.Get("http://" + host + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", host, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s%s: %v", host, path, err)
	}
	return resp.StatusCode, string(body)
}

// api sends a request to the config API and returns the status and body.
func (dp *dataPlane) api(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://restysync"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := dp.nginx.API().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, reply
}

func (dp *dataPlane) push(t *testing.T, upserts []luaapi.BackendPayload, removes []string) int64 {
	t.Helper()
	body, err := json.Marshal(map[string]any{"upserts": upserts, "removes": removes})
	if err != nil {
		t.Fatal(err)
	}
	code, reply := dp.api(t, http.MethodPost, "/backends", body)
	if code != http.StatusOK {
		t.Fatalf("POST /backends: %d %s", code, reply)
	}
	var v struct{ Version int64 }
	if err := json.Unmarshal(reply, &v); err != nil {
		t.Fatalf("POST /backends answered %s: %v", reply, err)
	}
	return v.Version
}

// expectRefused POSTs body to path and wants a 400 whose reason holds reason.
func (dp *dataPlane) expectRefused(t *testing.T, path, body, reason string) {
	t.Helper()
	code, reply := dp.api(t, http.MethodPost, path, []byte(body))
	if code != http.StatusBadRequest {
		t.Fatalf("got %d %s, want 400", code, reply)
	}
	var e struct{ Error string }
	if err := json.Unmarshal(reply, &e); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
	if !strings.Contains(e.Error, reason) {
		t.Errorf("reason %q does not hold %q", e.Error, reason)
	}
}

func (dp *dataPlane) status(t *testing.T) luaapi.Status {
	t.Helper()
	code, reply := dp.api(t, http.MethodGet, "/status", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /status: %d %s", code, reply)
	}
	var st luaapi.Status
	if err := json.Unmarshal(reply, &st); err != nil {
		t.Fatalf("GET /status answered %s: %v", reply, err)
	}
	return st
}

func (dp *dataPlane) backends(t *testing.T) []luaapi.BackendPayload {
	t.Helper()
	code, reply := dp.api(t, http.MethodGet, "/backends", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /backends: %d %s", code, reply)
	}
	var body struct{ Backends []luaapi.BackendPayload }
	if err := json.Unmarshal(reply, &body); err != nil {
		t.Fatalf("GET /backends answered %s: %v", reply, err)
	}
	return body.Backends
}

// spread sends n requests and counts the answers by body.
func (dp *dataPlane) spread(t *testing.T, host, path string, n int) map[string]int {
	t.Helper()
	counts := make(map[string]int)
	for range n {
		code, body := dp.get(t, host, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s%s: %d %s", host, path, code, body)
		}
		counts[body]++
	}
	return counts
}

func dataPlaneModel() model.Model {
	return model.Model{
		Default: model.Server{Locations: []model.Location{
			loc("/healthz", model.PathExact, "default/health:80"),
		}},
		Servers: model.ListOf(
			&model.Server{Host: "*.example.com", Locations: []model.Location{
				loc("/", model.PathPrefix, "ns/wild:80"),
			}},
			&model.Server{Host: "app.example.com", HTTPS: true, Locations: []model.Location{
				loc("/", model.PathPrefix, "ns/web:80"),
				loc("/empty", model.PathPrefix, "ns/empty:80"),
				loc("/foo", model.PathExact, "ns/exact:80"),
				loc("/foo", model.PathPrefix, "ns/foo:80"),
				loc("/missing", model.PathPrefix, "ns/missing:80"),
				loc("/retry", model.PathPrefix, "ns/retry:80"),
				loc("/v6", model.PathPrefix, "ns/v6:80"),
			}},
		),
	}
}

func TestDataPlane(t *testing.T) {
	web := []echoBackend{startEchoBackend(t, "web-1"), startEchoBackend(t, "web-2"), startEchoBackend(t, "web-3")}
	foo, exact, wild, health := startEchoBackend(t, "foo"), startEchoBackend(t, "exact"), startEchoBackend(t, "wild"), startEchoBackend(t, "health")
	dead := model.Endpoint{Address: "127.0.0.1", Port: int32(nginxproc.FreePort(t))} // nothing listens here

	m := dataPlaneModel()
	dp, settings, cfg := startDataPlane(t, m, nil)

	t.Run("status server for probes", func(t *testing.T) {
		for path, want := range map[string]int{"/healthz": http.StatusOK, "/": http.StatusNotFound, "/metrics": http.StatusNotFound} {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", settings.StatusPort, path))
			if err != nil {
				t.Fatalf("GET %s on the status port: %v", path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || (want == http.StatusOK && string(body) != "ok\n") {
				t.Errorf("GET %s on the status port: %d %q, want %d", path, resp.StatusCode, body, want)
			}
		}
	})

	initial := []luaapi.BackendPayload{
		{Name: "default/health:80", Endpoints: []model.Endpoint{health.ep}},
		{Name: "ns/empty:80", Endpoints: []model.Endpoint{}},
		{Name: "ns/exact:80", Endpoints: []model.Endpoint{exact.ep}},
		{Name: "ns/foo:80", Endpoints: []model.Endpoint{foo.ep}},
		{Name: "ns/retry:80", Endpoints: []model.Endpoint{dead, web[0].ep}},
		{Name: "ns/v6:80", Endpoints: []model.Endpoint{{Address: "::1", Port: dead.Port}}},
		{Name: "ns/web:80", Endpoints: []model.Endpoint{web[0].ep, web[1].ep, web[2].ep}},
		{Name: "ns/wild:80", Endpoints: []model.Endpoint{wild.ep}},
	}

	var bootID string
	// startDataPlane pushed the routes: version 1.
	t.Run("status before any push", func(t *testing.T) {
		st := dp.status(t)
		if st.ConfigHash != cfg.Hash {
			t.Errorf("config_hash %q, want the rendered %q", st.ConfigHash, cfg.Hash)
		}
		if len(st.BootID) != 32 {
			t.Errorf("boot_id %q, want 32 hex digits", st.BootID)
		}
		if st.Version != 1 || st.Backends != 0 {
			t.Errorf("version %d, backends %d; want 1 (the routes), 0", st.Version, st.Backends)
		}
		bootID = st.BootID
	})

	t.Run("push", func(t *testing.T) {
		// Pushed in reverse to see GET /backends sort them.
		reversed := slices.Clone(initial)
		slices.Reverse(reversed)
		if v := dp.push(t, reversed, nil); v != 2 {
			t.Errorf("version %d after the first push, want 2", v)
		}
		if got := dp.backends(t); !equalBackends(got, initial) {
			t.Errorf("GET /backends = %+v, want %+v", got, initial)
		}
		if st := dp.status(t); st.Version != 2 || st.Backends != len(initial) {
			t.Errorf("status %+v, want version 2 and %d backends", st, len(initial))
		}
	})

	t.Run("round robin", func(t *testing.T) {
		got := dp.spread(t, "app.example.com", "/", 30)
		want := map[string]int{"web-1": 10, "web-2": 10, "web-3": 10}
		if !maps.Equal(got, want) {
			t.Errorf("30 requests went %v, want %v", got, want)
		}
	})

	t.Run("routing", func(t *testing.T) {
		tests := []struct {
			host, path string
			code       int
			body       string // "" for any
		}{
			{"app.example.com", "/foo", 200, "exact"}, // Exact beats Prefix
			{"app.example.com", "/foo/", 200, "foo"},
			{"app.example.com", "/foo/bar", 200, "foo"},
			{"app.example.com", "/foobar", 200, "web-"}, // not the /foo prefix
			{"app.example.com", "/missing", 503, ""},    // backend never pushed
			{"app.example.com", "/empty/x", 503, ""},    // backend without endpoints
			{"app.example.com", "/v6", 502, ""},         // [::1] was accepted as a peer; nothing listens
			{"a.example.com", "/any", 200, "wild"},
			{"a.b.example.com", "/", 404, ""}, // a wildcard matches one label only
			{"example.com", "/", 404, ""},
			{"other.test", "/healthz", 200, "health"},
			{"other.test", "/", 404, ""},
		}
		for _, tc := range tests {
			t.Run(tc.host+tc.path, func(t *testing.T) {
				code, body := dp.get(t, tc.host, tc.path)
				if code != tc.code || !strings.HasPrefix(body, tc.body) {
					t.Errorf("got %d %q, want %d %q", code, body, tc.code, tc.body)
				}
			})
		}
	})

	t.Run("retry goes to the next endpoint", func(t *testing.T) {
		got := dp.spread(t, "app.example.com", "/retry", 10)
		if !maps.Equal(got, map[string]int{"web-1": 10}) {
			t.Errorf("10 requests went %v, want all to web-1", got)
		}
	})

	t.Run("update without reload", func(t *testing.T) {
		workers := dp.nginx.WorkerPIDs()
		dp.push(t, []luaapi.BackendPayload{{Name: "ns/web:80", Endpoints: []model.Endpoint{web[0].ep, web[2].ep}}}, []string{"ns/foo:80"})
		got := dp.spread(t, "app.example.com", "/", 20)
		if want := map[string]int{"web-1": 10, "web-3": 10}; !maps.Equal(got, want) {
			t.Errorf("20 requests went %v, want %v", got, want)
		}
		if code, _ := dp.get(t, "app.example.com", "/foo/bar"); code != 503 {
			t.Errorf("removed backend answered %d, want 503", code)
		}
		if after := dp.nginx.WorkerPIDs(); !slices.Equal(workers, after) {
			t.Errorf("workers changed from %v to %v: nginx reloaded", workers, after)
		}
		dp.push(t, initial, nil) // back to the initial state
	})

	t.Run("rejected updates change nothing", func(t *testing.T) {
		before := dp.backends(t)
		version := dp.status(t).Version
		good := `{"name":"ns/web:80","endpoints":[{"address":"127.0.0.1","port":1}]}`
		upsert := func(endpoints string) string {
			return `{"upserts":[` + good + `,{"name":"ns/new:80","endpoints":[` + endpoints + `]}]}`
		}
		many := strings.Repeat(`{"address":"10.0.0.1","port":80},`, 10_001)
		tests := []struct {
			name, body, reason string
		}{
			{"empty body", ``, "body: is empty"},
			{"not JSON", `{"upserts":`, "body: is not valid JSON"},
			{"not an object", `"upserts"`, "body: must be a JSON object"},
			{"unknown field", `{"upsert":[]}`, "upsert: unknown field"},
			{"upserts not an array", `{"upserts":{"name":"x"}}`, "upserts: must be an array"},
			{"backend not an object", `{"upserts":[` + good + `,5]}`, "upserts[1]: must be an object"},
			{"name missing", `{"upserts":[{"endpoints":[]}]}`, "upserts[0].name: must be a string"},
			{"name not a string", `{"upserts":[{"name":5,"endpoints":[]}]}`, "upserts[0].name: must be a string"},
			{"name empty", `{"upserts":[{"name":"","endpoints":[]}]}`, "upserts[0].name: must not be empty"},
			{"name too long", `{"upserts":[{"name":"` + strings.Repeat("n", 513) + `","endpoints":[]}]}`, "upserts[0].name: is 513 bytes long, longer than 512"},
			{"endpoints missing", `{"upserts":[` + good + `,{"name":"x"}]}`, "upserts[1].endpoints: is missing"},
			{"endpoints not an array", `{"upserts":[{"name":"x","endpoints":"x"}]}`, "upserts[0].endpoints: must be an array"},
			{"endpoint not an object", upsert(`"10.0.0.1:80"`), "upserts[1].endpoints[0]: must be an object"},
			{"endpoint field unknown", upsert(`{"address":"10.0.0.1","port":80,"weight":1}`), "upserts[1].endpoints[0].weight: unknown field"},
			{"port zero", upsert(`{"address":"10.0.0.1","port":0}`), "upserts[1].endpoints[0].port: must be an integer 1..65535"},
			{"port too big", upsert(`{"address":"10.0.0.1","port":65536}`), "upserts[1].endpoints[0].port: must be an integer 1..65535"},
			{"port fraction", upsert(`{"address":"10.0.0.1","port":80.5}`), "upserts[1].endpoints[0].port: must be an integer 1..65535"},
			{"port string", upsert(`{"address":"10.0.0.1","port":"80"}`), "upserts[1].endpoints[0].port: must be an integer 1..65535"},
			{"port missing", upsert(`{"address":"10.0.0.1"}`), "upserts[1].endpoints[0].port: must be an integer 1..65535"},
			{"second endpoint bad", upsert(`{"address":"10.0.0.1","port":80},{"address":"10.0.0.2","port":-1}`), "upserts[1].endpoints[1].port: must be an integer 1..65535"},
			{"address host name", upsert(`{"address":"localhost","port":80}`), "upserts[1].endpoints[0].address: must be an IPv4 or IPv6 address"},
			{"address octet too big", upsert(`{"address":"10.0.0.256","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address leading zero", upsert(`{"address":"10.0.0.01","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address three octets", upsert(`{"address":"10.0.1","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address with port", upsert(`{"address":"10.0.0.1:80","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address bad IPv6", upsert(`{"address":"fd00::g","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address two ::", upsert(`{"address":"1::2::3","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address nine groups", upsert(`{"address":"1:2:3:4:5:6:7:8:9","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address bracketed", upsert(`{"address":"[::1]","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address with zone", upsert(`{"address":"fe80::1%eth0","port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"address number", upsert(`{"address":167772161,"port":80}`), "upserts[1].endpoints[0].address: must be"},
			{"too many endpoints", upsert(strings.TrimSuffix(many, ",")), "upserts[1].endpoints: has 10001 endpoints, more than 10000"},
			{"duplicate upsert", `{"upserts":[` + good + `,` + good + `]}`, `upserts[1].name: "ns/web:80" is also upserts[0]`},
			{"upsert and remove", `{"upserts":[` + good + `],"removes":["ns/web:80"]}`, `removes[0]: "ns/web:80" is also upserts[0]`},
			{"removes not an array", `{"removes":"ns/web:80"}`, "removes: must be an array"},
			{"remove not a string", `{"removes":["ns/web:80",5]}`, "removes[1]: must be a string"},
			{"nested too deep", `{"upserts":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`, "body: is not valid JSON"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) { dp.expectRefused(t, "/backends", tc.body, tc.reason) })
		}
		if after := dp.backends(t); !equalBackends(after, before) {
			t.Errorf("GET /backends changed after rejected updates:\n got %+v\nwant %+v", after, before)
		}
		if after := dp.status(t).Version; after != version {
			t.Errorf("version moved from %d to %d after rejected updates", version, after)
		}
	})

	t.Run("null lists", func(t *testing.T) {
		// Go encodes nil slices as null.
		code, reply := dp.api(t, http.MethodPost, "/backends", []byte(`{"upserts":[{"name":"ns/null:80","endpoints":null}],"removes":null}`))
		if code != http.StatusOK {
			t.Fatalf("got %d %s, want 200", code, reply)
		}
		dp.push(t, nil, []string{"ns/null:80"})
	})

	t.Run("other requests", func(t *testing.T) {
		tests := []struct {
			method, path string
			code         int
		}{
			{http.MethodGet, "/", 404},
			{http.MethodGet, "/backends/x", 404},
			{http.MethodDelete, "/backends", 405},
			{http.MethodPut, "/status", 405},
			{http.MethodHead, "/status", 200},
		}
		for _, tc := range tests {
			t.Run(tc.method+tc.path, func(t *testing.T) {
				if code, reply := dp.api(t, tc.method, tc.path, nil); code != tc.code {
					t.Errorf("got %d %s, want %d", code, reply, tc.code)
				}
			})
		}
	})

	t.Run("large body spills to a file", func(t *testing.T) {
		big := bigBackends(4)
		dp.push(t, big, nil) // ~1.5 MB, more than client_body_buffer_size
		// A [warn]: on nginx's stderr, not in ErrorLogName (error only).
		if !strings.Contains(dp.nginx.Logs(), "a client request body is buffered to a temporary file") {
			t.Error("the body did not spill to a file; this test no longer tests reading it from one")
		}
		got := dp.backends(t)
		for _, b := range big {
			i := slices.IndexFunc(got, func(g luaapi.BackendPayload) bool { return g.Name == b.Name })
			if i < 0 || !slices.Equal(got[i].Endpoints, b.Endpoints) {
				t.Errorf("backend %s was not stored whole", b.Name)
			}
		}
		dp.push(t, nil, []string{"big/b0:80", "big/b1:80", "big/b2:80", "big/b3:80"})
	})

	t.Run("reload keeps boot id and backends", func(t *testing.T) {
		next := dataPlaneModel()
		next.Servers = model.ListOf(append(next.Servers.Slice(), &model.Server{Host: "new.example.com", Locations: []model.Location{loc("/", model.PathPrefix, "ns/wild:80")}})...)
		nextCfg := writePrefix(t, dp.nginx.Prefix, next, settings)
		dp.nginx.Reload(t)
		st := dp.status(t)
		if st.ConfigHash != nextCfg.Hash {
			t.Errorf("config_hash %q after reload, want %q", st.ConfigHash, nextCfg.Hash)
		}
		if st.BootID != bootID {
			t.Errorf("boot_id changed on reload: %q, was %q", st.BootID, bootID)
		}
		if got := dp.backends(t); !equalBackends(got, initial) {
			t.Errorf("backends after reload %+v, want %+v", got, initial)
		}
		if code, body := dp.get(t, "new.example.com", "/"); code != 200 || body != "wild" {
			t.Errorf("new host answered %d %q, want 200 wild", code, body)
		}
	})

	t.Run("cold restart gets a new boot id", func(t *testing.T) {
		dp.nginx.Stop(t)
		dp.nginx = nginxproc.Start(t, dp.nginx.Prefix)
		st := dp.status(t)
		if st.BootID == bootID || len(st.BootID) != 32 {
			t.Errorf("boot_id %q after a cold start, was %q", st.BootID, bootID)
		}
		if st.Version != 0 || st.Backends != 0 {
			t.Errorf("status %+v after a cold start, want nothing stored", st)
		}
		// Routes are lost with the rest: until the agent pushes them
		// again, no host is known.
		if code, _ := dp.get(t, "app.example.com", "/"); code != 404 {
			t.Errorf("got %d before any push, want 404", code)
		}
		dp.pushRoutes(t, m)
		if code, _ := dp.get(t, "app.example.com", "/"); code != 503 {
			t.Errorf("got %d with routes but no backends, want 503", code)
		}
	})
}

// TestDataPlaneDictFull fills a small shared dict: the update that does not
// fit is refused with 507 and leaves the stored backends as they were.
func TestDataPlaneDictFull(t *testing.T) {
	shrink := func(conf []byte) []byte {
		small := bytes.Replace(conf, []byte("lua_shared_dict restysync 64m;"), []byte("lua_shared_dict restysync 1m;"), 1)
		if bytes.Equal(small, conf) {
			t.Fatal("no lua_shared_dict line to shrink")
		}
		return small
	}
	dp, _, _ := startDataPlane(t, model.Model{}, shrink)
	keep := []luaapi.BackendPayload{{Name: "ns/keep:80", Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: 80}}}}
	dp.push(t, keep, nil)
	before := dp.status(t)

	body, err := json.Marshal(map[string]any{"upserts": bigBackends(4), "removes": []string{"ns/keep:80"}})
	if err != nil {
		t.Fatal(err)
	}
	code, reply := dp.api(t, http.MethodPost, "/backends", body)
	if code != http.StatusInsufficientStorage || !bytes.Contains(reply, []byte("no memory")) || !bytes.Contains(reply, []byte("nothing was changed")) {
		t.Fatalf("got %d %s, want 507 naming no memory and nothing changed", code, reply)
	}
	if got := dp.backends(t); !equalBackends(got, keep) {
		t.Errorf("backends after the refused update %+v, want %+v", got, keep)
	}
	after := dp.status(t)
	if after.Backends != before.Backends || after.BootID != before.BootID {
		t.Errorf("status %+v after the refused update, was %+v", after, before)
	}
	// The dict is usable again, and the next version is a new number.
	if v := dp.push(t, []luaapi.BackendPayload{{Name: "ns/other:80", Endpoints: []model.Endpoint{{Address: "10.0.0.2", Port: 80}}}}, nil); v <= after.Version {
		t.Errorf("version %d after the refused update, want more than %d", v, after.Version)
	}
}

// bigBackends returns n backends of 10,000 endpoints each.
func bigBackends(n int) []luaapi.BackendPayload {
	var big []luaapi.BackendPayload
	for i := range n {
		b := luaapi.BackendPayload{Name: fmt.Sprintf("big/b%d:80", i)}
		for j := range 10_000 {
			b.Endpoints = append(b.Endpoints, model.Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", i, j/256, j%256), Port: 8080})
		}
		big = append(big, b)
	}
	return big
}

func equalBackends(a, b []luaapi.BackendPayload) bool {
	return slices.EqualFunc(a, b, func(x, y luaapi.BackendPayload) bool {
		return x.Name == y.Name && slices.Equal(x.Endpoints, y.Endpoints)
	})
}
