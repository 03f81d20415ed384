package render

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
)

// routedModel has hosts Lua routes (app, only-exact, secure, slow) and one
// nginx.conf renders (big: an annotation of its own), behind a default
// server whose "/" is a default backend.
func routedModel() model.Model {
	big := loc("/", model.PathPrefix, "ns/big:80")
	own(&big.Proxy).BodySize = "8m"
	impatient := loc("/", model.PathPrefix, "ns/slow:80")
	own(&impatient.Proxy).ReadTimeout = 1
	patient := loc("/patient", model.PathPrefix, "ns/slow:80")
	p := own(&patient.Proxy)
	p.ReadTimeout, p.ConnectTimeout = 5, 2
	return model.Model{
		Default: model.Server{Locations: []model.Location{loc("/", model.PathPrefix, "ns/fallback:80")}},
		Servers: model.ListOf(
			&model.Server{Host: "app.example.com", Locations: []model.Location{
				loc("/", model.PathPrefix, "ns/web:80"),
				loc("/foo", model.PathExact, "ns/exact:80"),
				loc("/foo", model.PathPrefix, "ns/foo:80"),
				loc("/foo/bar", model.PathPrefix, "ns/bar:80"),
			}},
			&model.Server{Host: "big.example.com", Locations: []model.Location{big}},
			&model.Server{Host: "only-exact.example.com", Locations: []model.Location{loc("/x", model.PathExact, "ns/exact:80")}},
			&model.Server{Host: "secure.example.com", HTTPS: true, Locations: []model.Location{
				withOptions(loc("/", model.PathPrefix, "ns/web:80"), true, model.ProtocolHTTP),
			}},
			&model.Server{Host: "slow.example.com", Locations: []model.Location{impatient, patient}},
		),
	}
}

// Hosts Lua routes are served with nginx's location semantics, and a new
// one is a push to the config API that needs no reload.
func TestDataPlaneRoutedHosts(t *testing.T) {
	names := []string{"web", "exact", "foo", "bar", "big", "fallback"}
	var upserts []luaapi.BackendPayload
	for _, name := range names {
		upserts = append(upserts, luaapi.BackendPayload{Name: "ns/" + name + ":80", Endpoints: []model.Endpoint{startEchoBackend(t, name).ep}})
	}
	upserts = append(upserts, luaapi.BackendPayload{Name: "ns/slow:80", Endpoints: []model.Endpoint{startSlowBackend(t, "slow", 2*time.Second).ep}})
	m := routedModel()
	dp, settings, cfg := startDataPlane(t, m, nil)
	dp.push(t, upserts, nil)

	if bytes.Contains(cfg.Bytes, []byte("app.example.com")) || bytes.Contains(cfg.Bytes, []byte("big.example.com")) ||
		!bytes.Contains(cfg.Bytes, []byte(`client_max_body_size "8m"`)) {
		t.Fatal("nginx.conf should hold no host, and big.example.com's body size in a profile")
	}
	expect := func(t *testing.T, want map[string]string) {
		t.Helper()
		for url, body := range want {
			host, path, _ := strings.Cut(url, "/")
			code, got := dp.get(t, host, "/"+path)
			if body == "404" {
				if code != http.StatusNotFound {
					t.Errorf("GET %s: %d %q, want 404", url, code, got)
				}
				continue
			}
			if code != http.StatusOK || got != body {
				t.Errorf("GET %s: %d %q, want 200 %q", url, code, got, body)
			}
		}
	}

	t.Run("paths as nginx matches them", func(t *testing.T) {
		expect(t, map[string]string{
			"app.example.com/":            "web",
			"app.example.com/foo":         "exact",
			"app.example.com/foo/":        "foo",
			"app.example.com/foo/x":       "foo",
			"app.example.com/foobar":      "web", // Prefix matches element-wise
			"app.example.com/foo/bar":     "bar",
			"app.example.com/foo/bar/baz": "bar",
			"app.example.com/foo/barx":    "foo",
			"APP.example.com/foo":         "exact", // nginx lower-cases $host
			"only-exact.example.com/x":    "exact",
			"only-exact.example.com/y":    "404", // no "/": as a server block's 404
			"big.example.com/":            "big",
			"unknown.example.com/foo":     "fallback",
		})
	})

	t.Run("a location's proxy timeouts", func(t *testing.T) {
		// The backend answers after 2 s: past the read timeout of 1 s of
		// "/", within the 5 s of "/patient"; the default server's is 60 s.
		start := time.Now()
		if code, body := dp.get(t, "slow.example.com", "/"); code != http.StatusGatewayTimeout {
			t.Errorf("GET slow.example.com/ (read timeout 1 s, backend 2 s late): %d %q after %s, want 504", code, body, time.Since(start))
		}
		if code, body := dp.get(t, "slow.example.com", "/patient"); code != http.StatusOK || body != "slow" {
			t.Errorf("GET slow.example.com/patient (read timeout 5 s, backend 2 s late): %d %q, want 200", code, body)
		}
	})

	t.Run("a host without TLS is served over HTTPS by its own routes", func(t *testing.T) {
		// As ingress-nginx serves it (with the default certificate), never
		// by the default server's "_", which another tenant may own; a host
		// with no route of its own gets "_" over HTTPS as over HTTP.
		for _, tc := range []struct{ host, path, want string }{
			{"app.example.com", "/foo", "exact"},
			{"app.example.com", "/foo/bar", "bar"},
			{"unknown.example.com", "/foo", "fallback"},
		} {
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: tc.host},
			}}
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", settings.HTTPSPort, tc.path), nil)
			req.Host = tc.host
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != tc.want {
				t.Errorf("https://%s%s answered %d %q, want 200 %q", tc.host, tc.path, resp.StatusCode, body, tc.want)
			}
		}
	})

	t.Run("a TLS host: HTTPS served, plain HTTP redirected", func(t *testing.T) {
		client := &http.Client{Timeout: 5 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "secure.example.com"}}}
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/a/b?c=d", settings.HTTPPort), nil)
		req.Host = "secure.example.com"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := fmt.Sprintf("https://secure.example.com:%d/a/b?c=d", settings.HTTPSPort)
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
			t.Errorf("http://secure.example.com/a/b?c=d: %d Location %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
		req, _ = http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/a", settings.HTTPSPort), nil)
		req.Host = "secure.example.com"
		if resp, err = client.Do(req); err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "web" {
			t.Errorf("https://secure.example.com/a: %d %q, want 200 web", resp.StatusCode, body)
		}
	})

	t.Run("a new host is a push, not a reload", func(t *testing.T) {
		before := dp.status(t)
		next := m
		next.Servers = model.ListOf(append([]*model.Server{{Host: "new.example.com", Locations: []model.Location{
			loc("/api", model.PathPrefix, "ns/foo:80"),
		}}}, m.Servers.Slice()...)...)
		again, err := Render(next, settings)
		if err != nil {
			t.Fatal(err)
		}
		if again.Hash != cfg.Hash {
			t.Fatal("a new routed host changed nginx.conf")
		}
		expect(t, map[string]string{"new.example.com/api": "fallback"})
		dp.pushRoutes(t, next)
		expect(t, map[string]string{"new.example.com/api/v1": "foo", "new.example.com/": "404"})
		if st := dp.status(t); st.ConfigHash != before.ConfigHash || st.BootID != before.BootID {
			t.Errorf("status moved from %+v to %+v", before, st)
		}

		body := `{"removes":["new.example.com"]}`
		if code, reply := dp.api(t, http.MethodPost, "/routes", []byte(body)); code != http.StatusOK {
			t.Fatalf("POST /routes %s: %d %s", body, code, reply)
		}
		expect(t, map[string]string{"new.example.com/api": "fallback", "app.example.com/foo": "exact"})
	})

	t.Run("GET /routes lists what Lua holds", func(t *testing.T) {
		want, err := Routes(m, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		code, reply := dp.api(t, http.MethodGet, "/routes", nil)
		if code != http.StatusOK {
			t.Fatalf("GET /routes: %d %s", code, reply)
		}
		var got struct {
			Routes []struct {
				Name      string
				HTTPS     bool
				Locations []model.RouteLocation
			}
		}
		if err := json.Unmarshal(reply, &got); err != nil {
			t.Fatalf("GET /routes answered %s: %v", reply, err)
		}
		if len(got.Routes) != len(want) {
			t.Fatalf("GET /routes: %s, want %+v", reply, want)
		}
		for i, r := range want {
			g := got.Routes[i]
			if g.Name != r.Host || g.HTTPS != r.HTTPS || !slices.EqualFunc(g.Locations, r.Locations, model.RouteLocation.Equal) {
				t.Errorf("GET /routes [%d]: %+v, want %+v", i, g, r)
			}
		}
	})

	t.Run("bad updates are refused whole", func(t *testing.T) {
		_, before := dp.api(t, http.MethodGet, "/routes", nil)
		version := dp.status(t).Version
		good := `{"name":"ok.example.com","locations":[{"path":"/","backend":"ns/web:80"}]}`
		with := func(route string) string { return `{"upserts":[` + good + `,` + route + `]}` }
		profile := "@restysync_p_" + strings.Repeat("0123456789abcdef", 2)
		withProfile := func(name string) string {
			return with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","profile":"` + name + `"}]}`)
		}
		tests := []struct{ name, body, reason string }{
			{"not JSON", `{"upserts":`, "body: is not valid JSON"},
			{"unknown field", `{"hosts":[]}`, "hosts: unknown field"},
			{"host upper case", with(`{"name":"X.example.com","locations":[{"path":"/","backend":"b"}]}`), "upserts[1].name: must be a lower-case DNS name"},
			{"host wildcard of two labels", with(`{"name":"*.*.example.com","locations":[{"path":"/","backend":"b"}]}`), "upserts[1].name: must be a lower-case DNS name"},
			{"host wildcard inside a label", with(`{"name":"a*.example.com","locations":[{"path":"/","backend":"b"}]}`), "upserts[1].name: must be a lower-case DNS name"},
			{"host with port", with(`{"name":"x.example.com:80","locations":[{"path":"/","backend":"b"}]}`), "upserts[1].name: must be"},
			{"host twice", with(good), `upserts[1].name: "ok.example.com" is also upserts[0]`},
			{"locations missing", with(`{"name":"x.example.com"}`), "upserts[1].locations: must be an array"},
			{"locations empty", with(`{"name":"x.example.com","locations":[]}`), "upserts[1].locations: must not be empty"},
			{"location field unknown", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","root":"/etc"}]}`), "upserts[1].locations[0].root: unknown field"},
			{"regex not anchored", with(`{"name":"x.example.com","locations":[{"path":"/a.*","regex":true,"backend":"b"}]}`), `upserts[1].locations[0].path: a regex must start with "^/"`},
			{"regex PCRE refuses", with(`{"name":"x.example.com","locations":[{"path":"^/a(","regex":true,"backend":"b"}]}`), "upserts[1].locations[0].path: not a regex PCRE compiles"},
			{"regex and exact", with(`{"name":"x.example.com","locations":[{"path":"^/a","regex":true,"exact":true,"backend":"b"}]}`), "must not be both exact and a regex"},
			{"profile not ours", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","profile":"@evil"}]}`), "upserts[1].locations[0].profile: must be @restysync_p_"},
			{"profile a path", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","profile":"/etc/passwd"}]}`), "upserts[1].locations[0].profile: must be @restysync_p_"},
			{"profile of 48 bits", withProfile(profile[:len(profile)-20]), "upserts[1].locations[0].profile: must be @restysync_p_ and 32 hex digits"},
			{"profile of 33 hex digits", withProfile(profile + "0"), "upserts[1].locations[0].profile: must be @restysync_p_ and 32 hex digits"},
			{"profile in upper case", withProfile("@restysync_p_" + strings.Repeat("0123456789ABCDEF", 2)), "upserts[1].locations[0].profile: must be @restysync_p_"},
			{"auth file outside", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","profile":"` + profile + `","auth_file":"../etc/shadow"}]}`), "upserts[1].locations[0].auth_file: must be auth/"},
			{"auth file dot dot", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","profile":"` + profile + `","auth_file":"auth/a_..x"}]}`), "upserts[1].locations[0].auth_file: must be auth/"},
			{"auth file without profile", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","auth_file":"auth/a_b"}]}`), "ingress and auth_file need a profile"},
			{"max body zero", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","max_body":0}]}`), "upserts[1].locations[0].max_body: must be a whole number of bytes"},
			{"max body a string", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","max_body":"1m"}]}`), "upserts[1].locations[0].max_body: must be a whole number of bytes"},
			{"relative path", with(`{"name":"x.example.com","locations":[{"path":"a","backend":"b"}]}`), `upserts[1].locations[0].path: must start with "/"`},
			{"path with newline", with(`{"name":"x.example.com","locations":[{"path":"/a\nb","backend":"b"}]}`), "upserts[1].locations[0].path: must not contain control characters"},
			{"path too long", with(`{"name":"x.example.com","locations":[{"path":"/` + strings.Repeat("a", 5000) + `","backend":"b"}]}`), "upserts[1].locations[0].path: is 5001 bytes long"},
			{"exact not a boolean", with(`{"name":"x.example.com","locations":[{"path":"/","exact":"yes","backend":"b"}]}`), "upserts[1].locations[0].exact: must be true or false"},
			{"ssl_redirect not a boolean", with(`{"name":"x.example.com","locations":[{"path":"/","ssl_redirect":1,"backend":"b"}]}`), "upserts[1].locations[0].ssl_redirect: must be true or false"},
			{"timeout zero", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","read_timeout":0}]}`), "upserts[1].locations[0].read_timeout: must be a whole number of seconds from 1 to 86400"},
			{"timeout a fraction", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","send_timeout":1.5}]}`), "upserts[1].locations[0].send_timeout: must be a whole number"},
			{"timeout a string", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","connect_timeout":"5s"}]}`), "upserts[1].locations[0].connect_timeout: must be a whole number"},
			{"timeout too long", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","read_timeout":86401}]}`), "upserts[1].locations[0].read_timeout: must be a whole number"},
			{"timeout negative", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","read_timeout":-1}]}`), "upserts[1].locations[0].read_timeout: must be a whole number"},
			{"timeout huge", with(`{"name":"x.example.com","locations":[{"path":"/","backend":"b","read_timeout":1e309}]}`), "upserts[1].locations[0].read_timeout: must be a whole number"},
			{"https not a boolean", with(`{"name":"x.example.com","https":"on","locations":[{"path":"/","backend":"b"}]}`), "upserts[1].https: must be true or false"},
			{"backend missing", with(`{"name":"x.example.com","locations":[{"path":"/"}]}`), "upserts[1].locations[0].backend: must be a string"},
			{"path twice", with(`{"name":"x.example.com","locations":[{"path":"/a","backend":"b"},{"path":"/a","backend":"c"}]}`), `upserts[1].locations[1]: prefix "/a" is also upserts[1].locations[0]`},
			{"upsert and remove", `{"upserts":[` + good + `],"removes":["ok.example.com"]}`, `removes[0]: "ok.example.com" is also upserts[0]`},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) { dp.expectRefused(t, "/routes", tc.body, tc.reason) })
		}
		if _, after := dp.api(t, http.MethodGet, "/routes", nil); !bytes.Equal(after, before) {
			t.Errorf("GET /routes changed after rejected updates:\n got %s\nwant %s", after, before)
		}
		if v := dp.status(t).Version; v != version {
			t.Errorf("version moved from %d to %d after rejected updates", version, v)
		}
		expect(t, map[string]string{"app.example.com/foo": "exact", "ok.example.com/": "fallback"})
	})
}
