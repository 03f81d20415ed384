package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
	"github.com/restysync/restysync/lua"
	"github.com/restysync/restysync/templates"
)

var update = flag.Bool("update", false, "rewrite testdata/*.conf from the current output")

// goldenSettings are the settings of every golden case but "load-modules".
var goldenSettings = Settings{
	SharedDir: "/srv/restysync",
	HTTPPort:  80,
	HTTPSPort: 443,
}

func loc(path string, pathType model.PathType, backend string) model.Location {
	return model.Location{Path: path, PathType: pathType, Backend: backend, Ingress: "default/web"}
}

// protocolSettings turn on HSTS with every directive, trust two proxy
// networks, and serve HTTPS on 8443 (so the redirect names the port).
var protocolSettings = Settings{
	SharedDir:             "/srv/restysync",
	HTTPPort:              8080,
	HTTPSPort:             8443,
	HSTS:                  true,
	HSTSMaxAge:            600,
	HSTSIncludeSubdomains: true,
	HSTSPreload:           true,
	TrustedProxies:        []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8"), netip.MustParsePrefix("fd00::/8")},
}

func withOptions(l model.Location, sslRedirect bool, protocol string) model.Location {
	l.SSLRedirect, l.Protocol = sslRedirect, protocol
	return l
}

func withTimeouts(l model.Location, connect, send, read int) model.Location {
	p := own(&l.Proxy)
	p.ConnectTimeout, p.SendTimeout, p.ReadTimeout = connect, send, read
	return l
}

type goldenCase struct {
	name     string
	model    model.Model
	settings Settings
}

func goldenCases() []goldenCase {
	withModules := goldenSettings
	withModules.LoadModules = []string{"/usr/share/nginx/modules/ndk_http_module.so", "/usr/share/nginx/modules/ngx_http_lua_module.so"}
	withModules.ListenAddress = "127.0.0.1"
	withModules.WorkerProcesses = "2"
	withResolvers := goldenSettings
	withResolvers.Resolvers = []string{"10.96.0.10", "[2001:db8::53]:53"}

	var many model.Model
	var manyList []*model.Server
	for i := range 50 {
		host := fmt.Sprintf("host-%02d.example.com", i)
		if i%10 == 0 {
			host = fmt.Sprintf("*.zone-%02d.example.com", i)
		}
		manyList = append(manyList, &model.Server{Host: host, Locations: []model.Location{
			loc("/", model.PathPrefix, fmt.Sprintf("ns-%02d/web:80", i)),
			loc("/api", model.PathPrefix, fmt.Sprintf("ns-%02d/api:8080", i)),
		}})
	}
	many.Servers = model.ListOf(manyList...)

	return []goldenCase{
		{name: "bootstrap", model: model.Model{}, settings: goldenSettings},
		{name: "one-host", settings: goldenSettings, model: model.Model{
			Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{
				loc("/", model.PathPrefix, "default/web:80"),
				withTimeouts(loc("/slow", model.PathPrefix, "default/slow:80"), 3, 30, 300),
			}}),
		}},
		{name: "wildcard-host", settings: goldenSettings, model: model.Model{
			Servers: model.ListOf(&model.Server{Host: "*.example.com", Locations: []model.Location{
				loc("/shop", model.PathPrefix, "default/shop:http"),
			}}),
		}},
		{name: "exact-and-prefix", settings: goldenSettings, model: model.Model{
			Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{
				loc("/", model.PathExact, "default/home:80"),
				loc("/foo", model.PathExact, "default/exact:80"),
				loc("/foo", model.PathPrefix, "default/prefix:80"),
				loc("/foo/", model.PathExact, "default/slash:80"),
				loc("/foo/bar", model.PathPrefix, "default/bar:80"),
			}}),
		}},
		{name: "default-backend", settings: goldenSettings, model: model.Model{
			Default: model.Server{Locations: []model.Location{
				loc("/", model.PathPrefix, "default/fallback:80"),
				loc("/health", model.PathExact, "default/health:80"),
			}},
			Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{
				loc("/app", model.PathPrefix, "default/app:80"),
			}}),
		}},
		{name: "regex-paths", settings: goldenSettings, model: model.Model{
			Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{
				loc("/", model.PathPrefix, "default/home:80"),
				loc("/api", model.PathExact, "default/exact:80"),
				loc("/api/v[0-9]+/(.*)$", model.PathRegex, "default/versioned:80"),
				loc(`/files/.+\.(png|jpe?g)$`, model.PathRegex, "default/images:80"),
				loc(`/q/"{2,3};`, model.PathRegex, "default/quoted:80"),
			}}),
		}},
		{name: "many-hosts", model: many, settings: goldenSettings},
		// Redirects, HSTS and backend protocols (backend-protocol,
		// ssl-redirect, force-ssl-redirect; --hsts*, --trusted-proxies).
		{name: "protocols", settings: protocolSettings, model: model.Model{
			Default: model.Server{Locations: []model.Location{
				withOptions(loc("/", model.PathPrefix, "default/fallback:80"), true, ""),
			}},
			Servers: model.ListOf(
				&model.Server{Host: "secure.example.com", HTTPS: true, Locations: []model.Location{
					withOptions(loc("/", model.PathPrefix, "default/web:80"), true, model.ProtocolHTTP),
					withOptions(loc("/api", model.PathPrefix, "default/api:443"), true, model.ProtocolHTTPS),
					withOptions(loc("/grpc.health.v1.Health/Check", model.PathExact, "default/grpc:50051"), false, model.ProtocolGRPC),
					withOptions(loc("/secure.v1.", model.PathRegex, "default/grpcs:50052"), true, model.ProtocolGRPCS),
				}},
				&model.Server{Host: "plain.example.com", Locations: []model.Location{
					withOptions(loc("/", model.PathPrefix, "default/plain:80"), false, model.ProtocolHTTP),
				}},
			),
		}},
		{name: "redirect-port-443", settings: goldenSettings, model: model.Model{
			Servers: model.ListOf(&model.Server{Host: "secure.example.com", HTTPS: true, Locations: []model.Location{
				withOptions(loc("/", model.PathPrefix, "default/web:80"), true, model.ProtocolHTTP),
			}}),
		}},
		{name: "load-modules", model: model.Model{}, settings: withModules},
		// Gateway listeners (gateway.go): plain HTTP and HTTPS, IPv4 and
		// IPv6, beside an Ingress host; their routes go to Lua.
		{name: "gateway-listeners", settings: goldenSettings, model: gatewayGoldenModel()},
		// Client certificates (auth-tls-*): one host a server block of its
		// own, its location sending the certificate and checking its subject.
		{name: "client-certificates", settings: goldenSettings, model: model.Model{
			Servers: model.ListOf(
				&model.Server{Host: "mtls.example.com", HTTPS: true, ClientTLS: &model.ClientTLS{CAFile: "auth/default_client-ca.0123456789ab.ca.crt",
					Verify: "on", Depth: 2, ErrorPage: "https://errors.example.com/cert"},
					Locations: []model.Location{withClientCert(loc("/", model.PathPrefix, "default/app:80"),
						model.ClientCert{Headers: true, PassCertificate: true, MatchCN: "CN=client1|CN=client2"})}},
				&model.Server{Host: "plain.example.com", HTTPS: true, Locations: []model.Location{loc("/", model.PathPrefix, "default/app:80")}},
			),
		}},
		// Tenant B's client-TLS wildcard "*.test" leaves the exact hosts
		// under it to the default server, which names them.
		{name: "client-certificates-wildcard", settings: goldenSettings, model: clientTLSWildcardModel()},
		// External authentication (auth-url and friends): two Ingresses
		// share one auth location, a third caches; DNS servers for names.
		{name: "external-auth", settings: withResolvers, model: model.Model{
			Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{
				withAuth(loc("/", model.PathPrefix, "default/app:80"), model.ExternalAuth{URL: "https://${host}/oauth2/auth",
					Signin:          "https://${host}/oauth2/start?rd=${restysync_escaped_request_uri}",
					ResponseHeaders: "X-Auth-Request-User,X-Auth-Request-Email"}),
				withAuth(loc("/admin", model.PathPrefix, "default/admin:80"), model.ExternalAuth{URL: "https://${host}/oauth2/auth",
					Method: "POST", AlwaysSetCookie: true, ProxySetHeaders: "X-Auth-Tenant: admins\nX-Original-Host: ${host}"}),
				withAuth(loc("/cached", model.PathPrefix, "default/app:80"), model.ExternalAuth{URL: "http://auth.auth.svc:4180/check",
					CacheKey: "${cookie__oauth2_proxy}", CacheDuration: "200 202 401 5m", RequestRedirect: "https://${restysync_forwarded_host}${request_uri}"}),
			}}),
		}},
	}
}

func gatewayGoldenModel() model.Model {
	front := model.FrontName("127.29.50.1", 80)
	secure := model.FrontName("::1", 443)
	return model.Model{
		Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{loc("/", model.PathPrefix, "default/web:80")}}),
		Listeners: []model.Listener{
			{Address: "127.29.50.1", Port: 80, Front: front},
			{Address: "127.29.50.1", Port: 8443, HTTPS: true, Front: model.FrontName("127.29.50.1", 8443)},
			{Address: "::1", Port: 443, HTTPS: true, Front: secure},
		},
		GatewayRoutes: model.ListOf(
			&model.Route{Host: model.FrontKey(front, "app.example.com"), Ordered: true, Locations: []model.RouteLocation{
				{Path: "/exact", Exact: true, Backend: "default/exact:80", Rule: &model.RouteRule{Route: "HTTPRoute default/app"}},
				{Path: "/api", Rule: &model.RouteRule{Method: "POST", Headers: []model.ValueMatch{{Name: "Version", Value: "2"}},
					Query:          []model.ValueMatch{{Name: "q", Value: "^a+$", Regex: true}},
					RequestHeaders: &model.HeaderChanges{Set: []model.Header{{Name: "X-Set", Value: "a\"b"}}, Remove: []string{"X-Remove"}},
					Backends:       []model.WeightedBackend{{Backend: "default/api:80", Weight: 3}, {Weight: 1}}, Route: "HTTPRoute default/app"}},
				{Path: "^/v[0-9]+/", Regex: true, Rule: &model.RouteRule{CaseSensitive: true,
					Redirect: &model.Redirect{Scheme: "https", Path: "/new", ReplacePrefix: true, MatchedPrefix: "/old", Status: 301}}},
				{Path: "/", Backend: "default/web:80", Rule: &model.RouteRule{Rewrite: &model.Rewrite{Host: "internal.example.com"}}},
			}},
			&model.Route{Host: model.FrontKey(front, "_"), Ordered: true, Locations: []model.RouteLocation{{Path: "/", Rule: &model.RouteRule{Status: 500}}}},
			&model.Route{Host: model.FrontKey(secure, "*.example.com"), Ordered: true, Locations: []model.RouteLocation{{Path: "/", Backend: "default/web:80"}}},
		),
	}
}

func withClientCert(l model.Location, c model.ClientCert) model.Location {
	own(&l.Access).ClientCert = c
	return l
}

func withAuth(l model.Location, a model.ExternalAuth) model.Location {
	own(&l.Access).ExternalAuth = a
	return l
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Render(tc.model, tc.settings)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Render(tc.model, tc.settings)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(cfg.Bytes, again.Bytes) || cfg.Hash != again.Hash {
				t.Fatal("rendering the same input twice gave different bytes")
			}
			if !bytes.Contains(cfg.Bytes, []byte(`require("restysync").init("`+cfg.Hash+`", {`)) {
				t.Errorf("the hash %s is not in init_by_lua", cfg.Hash)
			}

			path := filepath.Join("testdata", tc.name+".conf")
			if *update {
				if err := os.WriteFile(path, cfg.Bytes, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(cfg.Bytes, want) {
				t.Errorf("nginx.conf differs from %s (go test -update rewrites it):\n%s", path, lineDiff(string(want), string(cfg.Bytes)))
			}
			checkRoutesGolden(t, tc.name, tc.model)
		})
	}
}

// checkRoutesGolden compares the routes Lua gets for m (the hosts left out
// of nginx.conf) with testdata/<name>.routes.json, when there are any.
func checkRoutesGolden(t *testing.T, name string, m model.Model) {
	t.Helper()
	routes, err := Routes(m, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".routes.json")
	if len(routes) == 0 {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s exists, but Lua routes no host of this case", path)
		}
		return
	}
	got, err := json.MarshalIndent(routes, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("routes differ from %s (go test -update rewrites it):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// TestRenderNginxAccepts runs the real `nginx -t` on every golden case,
// rendered into a prefix of its own with the Lua modules in place.
func TestRenderNginxAccepts(t *testing.T) {
	nginxproc.Binary(t)
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			prefix := nginxproc.TempPrefix(t)
			s := tc.settings
			s.SharedDir = prefix
			s.LoadModules = nginxproc.DebianLoadModules()
			writePrefix(t, prefix, tc.model, s)
			// The CAs of client certificates: nginx -t reads them.
			for srv := range tc.model.Servers.All() {
				if f := srv.ClientTLSSettings().CAFile; f != "" {
					ca, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
					os.MkdirAll(filepath.Join(prefix, filepath.Dir(f)), 0o755)
					if err := os.WriteFile(filepath.Join(prefix, f), []byte(ca), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			out, err := nginxproc.Test(t, prefix)
			if err != nil {
				t.Fatal(err)
			}
			checkNoWarnings(t, out)
		})
	}
}

// TestRenderNginxAcceptsManyHosts checks that nginx takes 10,000 hosts with
// the longest names DNS allows, without hash warnings.
func TestRenderNginxAcceptsManyHosts(t *testing.T) {
	nginxproc.Binary(t)
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + ".example.com"
	m := manyServers(10_000)
	m.Servers.At(0).Host = long // sorted order does not matter to Render
	prefix := nginxproc.TempPrefix(t)
	s := goldenSettings
	s.SharedDir = prefix
	s.LoadModules = nginxproc.DebianLoadModules()
	writePrefix(t, prefix, m, s)
	out, err := nginxproc.Test(t, prefix)
	if err != nil {
		t.Fatal(err)
	}
	checkNoWarnings(t, out)
}

func writePrefix(t testing.TB, prefix string, m model.Model, s Settings) Config {
	t.Helper()
	cfg, err := Render(m, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := lua.WriteTo(prefix, os.WriteFile); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFallbackCertificate(prefix); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prefix, ConfigName), cfg.Bytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// checkNoWarnings fails on nginx warnings but the one about the open file
// limit, which depends on the machine.
func checkNoWarnings(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "[warn]") && !strings.Contains(line, "open file resource limit") {
			t.Errorf("nginx -t warned: %s", line)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	oneServer := func(host string, locs ...model.Location) model.Model {
		return model.Model{Servers: model.ListOf(&model.Server{Host: host, Locations: locs})}
	}
	settings := func(change func(*Settings)) Settings {
		s := goldenSettings
		change(&s)
		return s
	}
	tests := []struct {
		name     string
		model    model.Model
		settings Settings
		want     string // in the error
	}{
		{"dollar in backend", oneServer("a.example.com", loc("/", model.PathPrefix, "ns/x$y:80")), goldenSettings, `"ns/x$y:80": contains "$"`},
		{"newline in path", oneServer("a.example.com", loc("/a\nb", model.PathExact, "ns/a:80")), goldenSettings, `control character U+000A`},
		{"bad host", oneServer("a b.example.com", loc("/", model.PathPrefix, "ns/a:80")), goldenSettings, `host "a b.example.com"`},
		{"upper-case host", oneServer("A.example.com", loc("/", model.PathPrefix, "ns/a:80")), goldenSettings, `host "A.example.com"`},
		{"deep wildcard", oneServer("*.*.example.com", loc("/", model.PathPrefix, "ns/a:80")), goldenSettings, `host "*.*.example.com"`},
		{"empty host", oneServer("", loc("/", model.PathPrefix, "ns/a:80")), goldenSettings, `host ""`},
		{"relative path", oneServer("a.example.com", loc("a", model.PathPrefix, "ns/a:80")), goldenSettings, `must start with "/"`},
		{"prefix ends in slash", oneServer("a.example.com", loc("/a/", model.PathPrefix, "ns/a:80")), goldenSettings, `must not end in "/"`},
		{"unknown path type", oneServer("a.example.com", loc("/a", "Glob", "ns/a:80")), goldenSettings, `unknown path type "Glob"`},
		{"duplicate location", oneServer("a.example.com", loc("/a", model.PathPrefix, "ns/a:80"), loc("/a", model.PathPrefix, "ns/b:80")), goldenSettings, `rendered twice`},
		{"duplicate host", model.Model{Servers: model.ListOf(&model.Server{Host: "a.example.com"}, &model.Server{Host: "a.example.com"})}, goldenSettings, `host appears twice`},
		{"relative shared dir", model.Model{}, settings(func(s *Settings) { s.SharedDir = "srv" }), `absolute`},
		{"shared dir with semicolon", model.Model{}, settings(func(s *Settings) { s.SharedDir = "/srv/a;b" }), `';'`},
		{"shared dir too long", model.Model{}, settings(func(s *Settings) { s.SharedDir = "/" + strings.Repeat("d", 100) }), `at most 107`},
		{"no port", model.Model{}, settings(func(s *Settings) { s.HTTPPort = 0 }), `HTTP port 0`},
		{"same ports", model.Model{}, settings(func(s *Settings) { s.HTTPSPort = 80 }), `both 80`},
		{"bad listen address", model.Model{}, settings(func(s *Settings) { s.ListenAddress = "localhost" }), `listen address "localhost"`},
		{"bad workers", model.Model{}, settings(func(s *Settings) { s.WorkerProcesses = "02" }), `worker processes "02"`},
		{"lua dict too small", model.Model{}, settings(func(s *Settings) { s.LuaDictMB = 8 }), `lua dict size 8 MB`},
		{"module with dollar", model.Model{}, settings(func(s *Settings) { s.LoadModules = []string{"/x/$y.so"} }), `contains "$"`},
		{"bad redirect port", model.Model{}, settings(func(s *Settings) { s.HTTPSRedirectPort = 70000 }), `HTTPS redirect port 70000`},
		{"status port is the HTTP port", model.Model{}, settings(func(s *Settings) { s.StatusPort = s.HTTPPort }), `status port`},
		{"status port out of range", model.Model{}, settings(func(s *Settings) { s.StatusPort = 70000 }), `status port 70000`},
		{"negative HSTS max-age", model.Model{}, settings(func(s *Settings) { s.HSTS, s.HSTSMaxAge = true, -1 }), `HSTS max-age -1`},
		{"invalid trusted proxy", model.Model{}, settings(func(s *Settings) { s.TrustedProxies = []netip.Prefix{{}} }), `trusted proxy`},
		{"unknown protocol", oneServer("a.example.com", withOptions(loc("/", model.PathPrefix, "ns/a:80"), false, "AJP")), goldenSettings, `unknown backend protocol "AJP"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A plain host is routed by Lua, not rendered: Routes checks it.
			_, err := Render(tc.model, tc.settings)
			if err == nil {
				_, err = Routes(tc.model, Settings{})
			}
			if err == nil {
				t.Fatalf("Render and Routes succeeded, want an error holding %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not hold %q", err, tc.want)
			}
		})
	}
}

func TestRenderListen(t *testing.T) {
	tests := []struct {
		address string
		want    string
	}{
		{"", `listen "8080" default_server reuseport;`},
		{"127.0.0.1", `listen "127.0.0.1:8080" default_server reuseport;`},
		{"::1", `listen "[::1]:8080" default_server reuseport;`},
	}
	for _, tc := range tests {
		t.Run(tc.address, func(t *testing.T) {
			s := goldenSettings
			s.HTTPPort, s.ListenAddress = 8080, tc.address
			cfg, err := Render(model.Model{}, s)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(cfg.Bytes, []byte(tc.want)) {
				t.Errorf("nginx.conf lacks %s", tc.want)
			}
		})
	}
}

// The redirect names --https-redirect-port when set (a Service maps 443 to
// nginx's 8443), else the HTTPS port; 443 is left out.
// Lua answers the redirect for every host: it gets the port as the
// argument of route(), and nginx.conf holds no redirect of its own.
func TestRenderRedirectPort(t *testing.T) {
	redirected := withOptions(loc("/", model.PathPrefix, "ns/a:80"), true, "")
	m := model.Model{Servers: model.ListOf(
		&model.Server{Host: "a.example.com", HTTPS: true, Aliases: []string{"b.example.com"}, Locations: []model.Location{redirected}},
		&model.Server{Host: "r.example.com", HTTPS: true, Locations: []model.Location{redirected}},
	)}
	for _, tc := range []struct {
		https, redirect int
		want, wantLua   string
	}{
		{8443, 0, "return 308 https://$host:8443$request_uri;", `route(":8443", false)`},
		{8443, 443, "return 308 https://$host$request_uri;", `route("", false)`},
		{443, 0, "return 308 https://$host$request_uri;", `route("", false)`},
		{443, 9443, "return 308 https://$host:9443$request_uri;", `route(":9443", false)`},
	} {
		s := goldenSettings
		s.HTTPSPort, s.HTTPSRedirectPort = tc.https, tc.redirect
		cfg, err := Render(m, s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(cfg.Bytes, []byte(tc.wantLua)) {
			t.Errorf("HTTPS port %d, redirect port %d: nginx.conf lacks %s", tc.https, tc.redirect, tc.wantLua)
		}
		if bytes.Contains(cfg.Bytes, []byte(tc.want)) {
			t.Errorf("HTTPS port %d, redirect port %d: nginx.conf redirects itself (%s)", tc.https, tc.redirect, tc.want)
		}
	}
}

// TestTemplatePrintsOnlyQuoted guards the rule that the template cannot emit
// an unquoted user string: every action that prints goes through quote or
// serverName, or prints a value render computes itself.
func TestTemplatePrintsOnlyQuoted(t *testing.T) {
	computed := map[string]bool{".ConfigHash": true, ".ServerNamesHashBucketSize": true, ".ServerNamesHashMaxSize": true,
		"$.RedirectPort": true, ".RedirectPort": true,
		// a profile's name (a hash) and body, which "location-body" rendered
		// through these same rules (profiles.go)
		".Name": true, ".Body": true,
		// ints of model.ProxySettings
		".RedirectCode": true, ".ConnectTimeout": true, ".SendTimeout": true, ".ReadTimeout": true, ".NextUpstreamTimeout": true,
		// ints, checked tokens and names render makes of Settings.HTTP (http.go)
		".HTTP.MaxWorkerConnections": true, ".HTTP.WorkerOpenFiles": true, ".HTTP.KeepAlive": true, ".HTTP.KeepAliveRequests": true, ".HTTP.GzipLevel": true,
		".HTTP.GzipMinLength": true, ".HTTP.ProxyConnectTimeout": true, ".HTTP.ProxyReadTimeout": true, ".HTTP.ProxySendTimeout": true,
		".HTTP.UpstreamKeepaliveConnections": true, ".HTTP.UpstreamKeepaliveTimeout": true, ".HTTP.ForwardedForVariable": true,
		".HTTP.SSLProtocolList": true, ".Code": true, ".Location": true,
		// ints, and zone, variable and location names render makes of hashes (access.go)
		".GeoVar": true, ".KeyVar": true, ".ZoneKey": true, ".ZoneName": true, ".ZoneRate": true, ".ErrorCode": true,
		".ErrorLocation": true, ".CORSMaxAge": true, ".ConnZone": true, ".ConnLimit": true, ".LimitZone": true,
		".LimitBurst": true, ".PageCode": true, ".PageLocation": true,
		// external auth (extauth.go): checked method, duration tokens and
		// resolver addresses; variable and location names render makes
		".Method": true, ".CacheDuration": true, "$.Resolvers": true, ".Var": true, ".Upstream": true, ".Signin": true,
		// backend TLS (proxy.go): a checked depth
		".SSL.VerifyDepth": true, ".Proxy.Upstream": true, "$.HTTP.UpstreamKeepaliveConnections": true,
		"$.HTTP.UpstreamKeepaliveTimeout": true,
		// client certificates (clienttls.go): checked mode and depth
		".Verify": true, ".Depth": true,
		// the stream block (stream.go): a computed size, upstream names
		".MapHashBucketSize": true,
		// the Gateway TLS fronts (stream.go): variable and upstream names render makes
		".Variable": true, ".Default": true,
		// the module prefix of a location's directives (fcgimirror.go)
		".Module": true, "$.Module": true,
		// the number of proxy buffers, an int model.ProxyBuffers.Check bounds (proxykeys.go)
		".Number": true,
		// a Gateway retry location's codes, ints render checked (gateway.go),
		// and the Gateway server a retry location is in (a variable: prints nothing)
		".Next": true, "$server := .": true,
		// the request metrics (requestmetrics.go): a constant size, bounds
		// CheckBuckets checked and strconv printed, a bool, histogram names
		// of a fixed list (RequestHistograms); the access
		// log's checked escape token (http.go)
		".DictSize": true, ".Time": true, ".Length": true, ".Size": true, ".UndefinedHost": true,
		".Skip": true, ".HTTP.LogEscape": true,
		// Lua's shared dict size, an int checkSettings bounds (render.go)
		".LuaDictMB": true}
	action := regexp.MustCompile(`\{\{-?\s*(.*?)\s*-?\}\}`)
	for _, m := range action.FindAllStringSubmatch(templates.NginxConf, -1) {
		body := m[1]
		first := strings.Fields(body)[0]
		switch {
		case first == "quote" || first == "quoteRegex" || first == "quoteRewrite" || first == "quoteVars" || first == "quoteText" || first == "serverName" || first == "logFormat":
		case first == "range" || first == "if" || first == "with" || first == "end" || first == "else" || first == "define" || first == "template":
		case computed[body]:
		default:
			t.Errorf("template action {{%s}} prints without quote", body)
		}
	}
}

func manyServers(n int) model.Model {
	var m model.Model
	servers := make([]*model.Server, 0, n)
	for i := range n {
		host := fmt.Sprintf("host-%05d.example.com", i)
		if i%10 == 9 {
			host = fmt.Sprintf("*.zone-%05d.example.com", i)
		}
		backend := fmt.Sprintf("ns-%05d/web:80", i)
		servers = append(servers, &model.Server{Host: host, Locations: []model.Location{
			loc("/", model.PathPrefix, backend),
			loc("/api", model.PathPrefix, backend),
		}})
	}
	m.Servers = model.ListOf(servers...)
	return m
}

// BenchmarkRender renders n hosts that each have a server block (an
// annotation of their own: the worst case, as no host is routed in Lua).
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		m := manyServers(n)
		for srv := range m.Servers.All() {
			for j := range srv.Locations {
				own(&srv.Locations[j].Proxy).BodySize = "8m"
			}
		}
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			var size int
			for b.Loop() {
				cfg, err := Render(m, goldenSettings)
				if err != nil {
					b.Fatal(err)
				}
				size = len(cfg.Bytes)
			}
			b.ReportMetric(float64(size), "bytes/conf")
		})
	}
}

// BenchmarkRoutes makes the routes of n hosts, plain or each with a
// location setting (proxy-body-size, one profile for all).
func BenchmarkRoutes(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		for _, annotated := range []bool{false, true} {
			m := manyServers(n)
			if annotated {
				for srv := range m.Servers.All() {
					for j := range srv.Locations {
						own(&srv.Locations[j].Proxy).BodySize = "8m"
					}
				}
			}
			benchmarkRoutes(b, fmt.Sprintf("hosts=%d/annotated=%v", n, annotated), m)
		}
	}
}

func benchmarkRoutes(b *testing.B, name string, m model.Model) {
	{
		b.Run(name, func(b *testing.B) {
			var routes int
			for b.Loop() {
				r, err := Routes(m, Settings{})
				if err != nil {
					b.Fatal(err)
				}
				routes = len(r)
			}
			b.ReportMetric(float64(routes), "routes")
		})
	}
}

// lineDiff shows the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

// own gives a test's location its own copy of a setting (&loc.Proxy,
// &loc.Access or &loc.Snippet) and returns it to write: a built model
// shares them between locations.
func own[T any](setting **T) *T {
	var v T
	if *setting != nil {
		v = **setting
	}
	*setting = &v
	return &v
}

// Lua's shared dict is 64 MB unless Settings.LuaDictMB says otherwise.
func TestLuaDictSize(t *testing.T) {
	for mb, want := range map[int]string{0: "lua_shared_dict restysync 64m;", 256: "lua_shared_dict restysync 256m;"} {
		s := goldenSettings
		s.LuaDictMB = mb
		cfg, err := Render(model.Model{}, s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg.Bytes), want) {
			t.Errorf("LuaDictMB %d: the config has no %q", mb, want)
		}
	}
}
