package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// accessModel has one location per access-control family, on two servers,
// and a location whose settings failed closed.
func accessModel() model.Model {
	with := func(l model.Location, ingress string, a model.AccessSettings) model.Location {
		l.Ingress, l.Access = ingress, &a
		return l
	}
	cors := model.CORS{Enabled: true, AllowOrigins: "http://*.wild.example.com:8080,https://app.example.com",
		AllowMethods: "GET, POST", AllowHeaders: model.DefaultCORSAllowHeaders, ExposeHeaders: "X-Total",
		AllowCredentials: true, MaxAge: 600}
	limits := model.RateLimit{RPS: 10, RPM: 300, BurstMultiplier: 5, Connections: 4, Exempt: "10.0.0.0/8,fd00::/8"}
	return model.Model{
		Servers: model.ListOf(
			&model.Server{Host: "access.example.com", Locations: []model.Location{
				with(loc("/", model.PathPrefix, "default/web:80"), "default/open", model.AccessSettings{}),
				with(loc("/admin", model.PathPrefix, "default/admin:80"), "default/admin", model.AccessSettings{
					AllowSources: "10.0.0.0/8,192.168.1.7/32", DenySources: "10.9.0.0/16",
					BasicAuth: model.BasicAuth{File: "auth/default_users", Realm: "Staff only"},
				}),
				with(loc("/api", model.PathPrefix, "default/api:http"), "default/api", model.AccessSettings{
					CORS: cors, RateLimit: limits,
					Errors: model.CustomErrors{Codes: "404,503", Backend: "default/errors:http"},
				}),
				with(loc("/broken", model.PathExact, "default/web:80"), "default/broken", model.AccessSettings{Denied: "auth-secret is not usable"}),
			}},
			&model.Server{Host: "any.example.com", Locations: []model.Location{
				with(loc("/", model.PathPrefix, "other/web:80"), "other/any", model.AccessSettings{
					CORS:      model.CORS{Enabled: true, AllowOrigins: "*", AllowMethods: model.DefaultCORSAllowMethods, AllowHeaders: "X-A", MaxAge: 0},
					RateLimit: model.RateLimit{RPS: 1, BurstMultiplier: 2},
					Errors:    model.CustomErrors{Codes: "404", Backend: "default/errors:http"},
				}),
			}},
		),
		AuthFiles: []model.AuthFile{{Name: "auth/default_users", Content: "alice:{PLAIN}secret\n"}},
	}
}

// TestRenderAccessGolden renders every access-control family into
// testdata/access.conf (go test -update rewrites it).
func TestRenderAccessGolden(t *testing.T) {
	m := accessModel()
	cfg, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Render(m, goldenSettings)
	if err != nil || !bytes.Equal(cfg.Bytes, again.Bytes) {
		t.Fatalf("rendering twice gave different bytes (%v)", err)
	}
	path := filepath.Join("testdata", "access.conf")
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
	// A location that failed closed answers 503 and holds nothing else of its Ingress.
	for _, fragment := range []string{"            }\n            # An access-control annotation is unusable: fail closed.\n            return 503;",
		"deny \"10.9.0.0/16\";\n            allow \"10.0.0.0/8\";\n            allow \"192.168.1.7/32\";\n            deny all;"} {
		if !strings.Contains(string(cfg.Bytes), fragment) {
			t.Errorf("nginx.conf lacks %q", fragment)
		}
	}
}

// TestRenderAccessNginxAccepts runs the real `nginx -t` on the access model,
// with the htpasswd file in place.
func TestRenderAccessNginxAccepts(t *testing.T) {
	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	s := goldenSettings
	s.SharedDir = prefix
	s.LoadModules = nginxproc.DebianLoadModules()
	m := accessModel()
	if err := os.MkdirAll(filepath.Join(prefix, "auth"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prefix, m.AuthFiles[0].Name), []byte(m.AuthFiles[0].Content), 0o644); err != nil {
		t.Fatal(err)
	}
	writePrefix(t, prefix, m, s)
	out, err := nginxproc.Test(t, prefix)
	if err != nil {
		t.Fatal(err)
	}
	checkNoWarnings(t, out)
}

// Settings the model never produces are refused, not rendered.
func TestRenderAccessRefuses(t *testing.T) {
	for name, a := range map[string]model.AccessSettings{
		"CIDR not masked":   {AllowSources: "10.1.0.0/8"},
		"CIDR with newline": {DenySources: "10.0.0.0/8\n"},
		"auth file outside": {BasicAuth: model.BasicAuth{File: "../etc/passwd"}},
		"auth file dotdot":  {BasicAuth: model.BasicAuth{File: "auth/a_..b"}},
		"realm off":         {BasicAuth: model.BasicAuth{File: "auth/a_b", Realm: "off"}},
		"origin with path":  {CORS: model.CORS{Enabled: true, AllowOrigins: "https://a.test/x"}},
		"header with $":     {CORS: model.CORS{Enabled: true, AllowOrigins: "*", AllowHeaders: "$host"}},
		"error code 200":    {Errors: model.CustomErrors{Codes: "200", Backend: "default/errors:80"}},
		"negative limit":    {RateLimit: model.RateLimit{RPS: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			l := loc("/", model.PathPrefix, "default/web:80")
			l.Access = &a
			m := model.Model{Servers: model.ListOf(&model.Server{Host: "a.example.com", Locations: []model.Location{l}})}
			if _, err := Render(m, goldenSettings); err == nil {
				t.Errorf("Render accepted %+v", a)
			}
		})
	}
}
