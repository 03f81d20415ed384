package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// proxyKeysModel has a location per key of model/proxykeys.go, a server
// with a www redirect, and ConfigMap keys in proxyKeysSettings
// (testdata/proxykeys.conf, proxykeys.routes.json).
func proxyKeysModel() model.Model {
	return model.Model{Servers: model.ListOf(&model.Server{
		Host:        "app.example.com",
		WWWRedirect: "www.app.example.com",
		HTTPS:       true,
		Locations: []model.Location{
			withProxy(loc("/", model.PathPrefix, "default/home:80"), model.ProxySettings{PreserveTrailingSlash: true, FromToWWWRedirect: true}),
			withProxy(loc("/buffers", model.PathPrefix, "default/api:80"), model.ProxySettings{BufferSize: "256k", BuffersNumber: 4, BusyBuffersSize: "256k"}),
			withProxy(loc("/kong", model.PathPrefix, "default/api:80"), model.ProxySettings{BufferSize: "160k", BuffersNumber: 64, ClientBodyBufferSize: "160k"}),
			withProxy(loc("/notemp", model.PathPrefix, "default/api:80"), model.ProxySettings{BuffersNumber: 2, BusyBuffersSize: "4k", MaxTempFileSize: "0"}),
			withProxy(loc("/cookies", model.PathPrefix, "default/api:80"), model.ProxySettings{CookieDomain: "backend.internal app.example.com", CookiePath: "/app/ /"}),
			withProxy(loc("/nocookies", model.PathPrefix, "default/api:80"), model.ProxySettings{CookieDomain: "off", CookiePath: "off"}),
			withProxy(loc("/kiwix", model.PathPrefix, "default/api:80"), model.ProxySettings{RedirectFrom: "http://download.kiwix.org/", RedirectTo: "${scheme}://download.kiwix.org/"}),
			withProxy(loc("/noredirect", model.PathPrefix, "default/api:80"), model.ProxySettings{RedirectFrom: "off"}),
			withProxy(loc("/slow", model.PathPrefix, "default/api:80"), model.ProxySettings{LimitRate: "100k", LimitRateAfter: "1024k"}),
			withProxy(loc("/unlimited", model.PathPrefix, "default/api:80"), model.ProxySettings{LimitRate: "0"}),
			withProxy(loc("/moved", model.PathPrefix, "default/api:80"), model.ProxySettings{RedirectURL: "https://maintenance.example.com", RedirectCode: 307}),
			withProxy(loc("/vhost", model.PathPrefix, "default/api:80"), model.ProxySettings{UpstreamVhost: "${restysync_forwarded_host}"}),
			withProxy(loc("/linkerd", model.PathPrefix, "linkerd-viz/web:8084"), model.ProxySettings{UpstreamVhost: "web.linkerd-viz.svc.cluster.local:8084"}),
			{Path: "/either", PathType: model.PathPrefix, Backend: "default/api:80", Ingress: "default/web",
				Proxy:  &model.ProxySettings{SatisfyAny: true},
				Access: &model.AccessSettings{AllowSources: "10.0.0.0/8", BasicAuth: model.BasicAuth{File: "auth/default_basic", Realm: "x"}}},
			withOptions(withProxy(loc("/grpc", model.PathPrefix, "default/grpc:50051"), model.ProxySettings{BufferSize: "16k", BuffersNumber: 8, LimitRate: "10k"}), true, model.ProtocolGRPC),
		},
	})}
}

// proxyKeysSettings are the golden settings with the ConfigMap's keys.
func proxyKeysSettings() Settings {
	s := goldenSettings
	h := DefaultHTTP()
	h.ProxyBufferSize, h.ProxyBuffersNumber, h.ProxyBusyBuffersSize = "8k", 8, "16k"
	h.ClientBodyBufferSize = "32k"
	h.ProxyCookieDomain = "a.internal example.com"
	h.ProxyRedirectFrom, h.ProxyRedirectTo = "http://internal/", "${scheme}://${host}/"
	h.LimitRate = "500k"
	s.HTTP = &h
	return s
}

// TestRenderProxyKeysGolden renders every key, compares with the golden
// files (-update rewrites them) and runs nginx -t on the result: what the
// model lets through, nginx takes.
func TestRenderProxyKeysGolden(t *testing.T) {
	cfg, routes, err := Build(proxyKeysModel(), proxyKeysSettings())
	if err != nil {
		t.Fatal(err)
	}
	routesJSON, err := json.MarshalIndent(routes, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"proxykeys.conf": cfg.Bytes, "proxykeys.routes.json": append(routesJSON, '\n')} {
		path := filepath.Join("testdata", name)
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
			t.Errorf("%s differs (go test -update rewrites it):\n%s", path, lineDiff(string(want), string(got)))
		}
	}
	for _, line := range []string{
		`proxy_buffers 4 "256k";`, `proxy_busy_buffers_size "256k";`, `proxy_buffers 64 "160k";`, `proxy_busy_buffers_size "320k";`,
		`proxy_max_temp_file_size "0";`, `client_body_buffer_size "160k";`,
		`proxy_cookie_domain "backend.internal" "app.example.com";`, `proxy_cookie_path "/app/" "/";`, `proxy_cookie_domain "off";`,
		`proxy_redirect "http://download.kiwix.org/" "${scheme}://download.kiwix.org/";`, `proxy_redirect off;`,
		`limit_rate "100k";`, `limit_rate_after "1024k";`, `limit_rate "0";`, `return 307 "https://maintenance.example.com";`,
		`set $restysync_upstream_host "${restysync_forwarded_host}";`,
		`set $restysync_upstream_host "web.linkerd-viz.svc.cluster.local:8084";`,
		"satisfy any;\n            rewrite_by_lua_block { require(\"restysync.balancer\").access() }",
		`grpc_buffer_size "16k";`,
		// the ConfigMap's, in the servers of Ingresses
		"        proxy_buffers 8 \"8k\";", "        client_body_buffer_size \"32k\";", "        limit_rate \"500k\";",
		"        proxy_redirect \"http://internal/\" \"${scheme}://${host}/\";",
	} {
		if !bytes.Contains(cfg.Bytes, []byte(line)) {
			t.Errorf("nginx.conf lacks %s", line)
		}
	}
	if bytes.Contains(cfg.Bytes, []byte("grpc_buffers")) || bytes.Contains(cfg.Bytes, []byte("proxy_buffers 8 \"16k\"")) {
		t.Error("a gRPC location has proxy buffers")
	}
	api := bytes.Index(cfg.Bytes, []byte("listen \"unix:"))
	if end := bytes.Index(cfg.Bytes[api:], []byte("\n    }")); bytes.Contains(cfg.Bytes[api:api+end], []byte("limit_rate")) {
		t.Error("the config API's server is rate limited")
	}
	var www, root *model.RouteLocation
	for i, r := range routes {
		switch r.Host {
		case "www.app.example.com":
			www = &routes[i].Locations[0]
		case "app.example.com":
			root = &routes[i].Locations[0]
		}
	}
	if www == nil || www.Options().RedirectHost != "app.example.com" || root == nil || !root.PreserveTrailingSlash || root.Profile != "" {
		t.Errorf("routes: www %+v, root %+v", www, root)
	}

	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	s := proxyKeysSettings()
	s.SharedDir = prefix
	s.LoadModules = nginxproc.DebianLoadModules()
	writePrefix(t, prefix, proxyKeysModel(), s)
	if err := os.MkdirAll(filepath.Join(prefix, "auth"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := nginxproc.Test(t, prefix)
	if err != nil {
		t.Fatal(err)
	}
	checkNoWarnings(t, out)
}

// Settings nginx would refuse are errors of the render stage too.
func TestRenderProxyKeysErrors(t *testing.T) {
	for name, p := range map[string]model.ProxySettings{
		"busy too large":  {BufferSize: "4k", BusyBuffersSize: "1m"},
		"one buffer":      {BuffersNumber: 1},
		"g size":          {BufferSize: "1g"},
		"rate":            {LimitRate: "1g"},
		"cookie":          {CookieDomain: "a;b c"},
		"redirect":        {RedirectFrom: "http://a/"},
		"redirect dollar": {RedirectFrom: "http://a/", RedirectTo: "$x"},
		"vhost":           {UpstreamVhost: "a$b"},
	} {
		m := model.Model{Servers: model.ListOf(&model.Server{Host: "a.example.com", Locations: []model.Location{withProxy(loc("/", model.PathPrefix, "ns/a:80"), p)}})}
		if _, err := Render(m, goldenSettings); err == nil {
			t.Errorf("%s: rendered", name)
		} else if strings.Contains(err.Error(), "template:") && !strings.Contains(err.Error(), "quote") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
