package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// withProxy gives l the proxy settings p.
func withProxy(l model.Location, p model.ProxySettings) model.Location {
	l.Proxy = &p
	return l
}

// proxyModel has one location per family of proxy and routing annotations,
// and a server with aliases (testdata/proxy.conf).
func proxyModel() model.Model {
	timeouts := model.ProxySettings{
		BodySize: "8m", ConnectTimeout: 3, SendTimeout: 30, ReadTimeout: 120,
		Buffering: "off", RequestBuffering: "off", BufferSize: "16k", HTTPVersion: "1.0",
		NextUpstream: "error timeout http_502 non_idempotent", NextUpstreamTimeout: 10,
	}
	grpc := timeouts
	return model.Model{Servers: model.ListOf(&model.Server{
		Host:    "app.example.com",
		Aliases: []string{"www.example.com", "app.example.org"},
		HTTPS:   true,
		Locations: []model.Location{
			withProxy(loc("/", model.PathPrefix, "default/home:80"), model.ProxySettings{AppRoot: "/app/"}),
			withProxy(loc("/api", model.PathPrefix, "default/api:80"), model.ProxySettings{RewriteTarget: "/", XForwardedPrefix: "/api"}),
			withProxy(loc("/old", model.PathExact, "default/old:80"), model.ProxySettings{RedirectURL: `https://new.example.com/a?b=c&d="e"`, RedirectCode: 308}),
			withProxy(loc("/tmp", model.PathPrefix, "default/tmp:80"), model.ProxySettings{RedirectURL: "http://other.example.com", RedirectCode: 302}),
			withProxy(loc("/slow", model.PathPrefix, "default/slow:80"), timeouts),
			withOptions(withProxy(loc("/grpc.v1.", model.PathRegex, "default/grpc:50051"), grpc), true, model.ProtocolGRPC),
			withProxy(loc("/something(/|$)(.*)", model.PathRegex, "default/rw:80"), model.ProxySettings{RewriteTarget: "/$2?from=$1", UpstreamVhost: "internal.svc:8080"}),
			withProxy(loc("/quiet", model.PathPrefix, "default/quiet:80"), model.ProxySettings{AccessLogOff: true}),
		},
	})}
}

// TestRenderProxyGolden renders every proxy and routing setting, compares
// with testdata/proxy.conf (-update rewrites it) and runs nginx -t on it.
func TestRenderProxyGolden(t *testing.T) {
	cfg, err := Render(proxyModel(), goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "proxy.conf")
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
	for _, line := range []string{
		`rewrite "(?i)^/api" "/" break;`,
		`rewrite "(?i)^/something(/|$)(.*)" "/$2?from=$1" break;`,
		`return 308 "https://new.example.com/a?b=c&d=\"e\"";`,
		`grpc_read_timeout 120s;`,
		`proxy_next_upstream "error" "timeout" "http_502" "non_idempotent";`,
	} {
		if !bytes.Contains(cfg.Bytes, []byte(line)) {
			t.Errorf("nginx.conf lacks %s", line)
		}
	}
	if bytes.Contains(cfg.Bytes, []byte("proxy_buffering \"off\";\n            grpc_pass")) {
		t.Error("a gRPC location has proxy_buffering")
	}

	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	s := goldenSettings
	s.SharedDir = prefix
	s.LoadModules = nginxproc.DebianLoadModules()
	writePrefix(t, prefix, proxyModel(), s)
	out, err := nginxproc.Test(t, prefix)
	if err != nil {
		t.Fatal(err)
	}
	checkNoWarnings(t, out)
}

// Without proxy settings no location gets a directive of its own.
func TestRenderProxyDefaultsEmitNothing(t *testing.T) {
	m := model.Model{Servers: model.ListOf(&model.Server{Host: "a.example.com", Locations: []model.Location{loc("/", model.PathPrefix, "ns/a:80")}})}
	cfg, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	_, location, _ := strings.Cut(string(cfg.Bytes), `server_name "a.example.com";`)
	for _, directive := range []string{"rewrite", "return", "_timeout", "client_max_body_size", "_buffer", "next_upstream", "access_log", "set $restysync_upstream_host", "set $restysync_forwarded_prefix"} {
		if strings.Contains(location, directive) {
			t.Errorf("a location without proxy settings has %q:\n%s", directive, location)
		}
	}
}

// Render refuses what the model would never produce, rather than write it;
// so does Routes, for a host Lua routes (one with only timeouts).
func TestRenderProxyErrors(t *testing.T) {
	for name, p := range map[string]model.ProxySettings{
		"redirect code":     {RedirectURL: "https://x.example.com", RedirectCode: 200},
		"negative timeout":  {ReadTimeout: -1},
		"dollar in target":  {RewriteTarget: "/$host"},
		"dollar in URL":     {RedirectURL: "https://x.example.com/$request_uri", RedirectCode: 301},
		"newline in prefix": {XForwardedPrefix: "/a\n;evil"},
		"vhost variable":    {UpstreamVhost: "$http_x"},
	} {
		t.Run(name, func(t *testing.T) {
			m := model.Model{Servers: model.ListOf(&model.Server{Host: "a.example.com", Locations: []model.Location{
				withProxy(loc("/", model.PathPrefix, "ns/a:80"), p),
			}})}
			_, err := Render(m, goldenSettings)
			if err == nil {
				_, err = Routes(m, Settings{})
			}
			if err == nil {
				t.Errorf("Render and Routes took %+v", p)
			}
		})
	}
	bad := model.Model{Servers: model.ListOf(&model.Server{Host: "a.example.com", Aliases: []string{"x y"}, Locations: []model.Location{loc("/", model.PathPrefix, "ns/a:80")}})}
	if _, err := Render(bad, goldenSettings); err == nil {
		t.Error("Render took an alias with a space")
	}
}

func TestQuoteRewrite(t *testing.T) {
	for in, want := range map[string]string{
		"/":            `"/"`,
		"/$1":          `"/$1"`,
		"/a/$2?x=$1":   `"/a/$2?x=$1"`,
		`/q"\`:         `"/q\"\\"`,
		"/$9/$1$2/end": `"/$9/$1$2/end"`,
	} {
		got, err := QuoteRewrite(in)
		if err != nil || got != want {
			t.Errorf("QuoteRewrite(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"/$", "/$0", "/$host", "/${1}", "/a$", "/\n", "/$1\x00"} {
		if got, err := QuoteRewrite(in); err == nil {
			t.Errorf("QuoteRewrite(%q) = %q, want an error", in, got)
		}
	}
}

// proxyKeys are the proxy and routing annotations FuzzProxyAnnotations sets.
var proxyKeys = []string{"rewrite-target", "app-root", "permanent-redirect", "permanent-redirect-code",
	"temporal-redirect", "proxy-body-size", "proxy-connect-timeout", "proxy-send-timeout", "proxy-read-timeout",
	"proxy-buffering", "proxy-buffer-size", "proxy-request-buffering", "proxy-next-upstream",
	"proxy-next-upstream-timeout", "proxy-http-version", "upstream-vhost", "x-forwarded-prefix",
	"server-alias", "enable-access-log", "backend-protocol"}

// FuzzProxyAnnotations sets every proxy and routing annotation to fuzzed
// values: whatever Build keeps, Render and Routes must take (every value it
// lets through is one nginx.conf or Lua can hold, so no Ingress can break
// the render).
func FuzzProxyAnnotations(f *testing.F) {
	f.Add("/$1", "https://x.example.com/", "8m", "error timeout", "a.test,b.test", uint8(0))
	f.Add("/a;\n}", "http://x$y", "0", "off", "*.x.test", uint8(3))
	f.Add("/", "/app", "10", "1.0", "internal.svc:80", uint8(7))
	// Characters no value may hold (package chars).
	f.Add("/a\u0085", "https://x.example.com/\u2028", "8\u202em", "error\u2029", "a\xed\xa0\x80.test", uint8(1))
	f.Add("/\u2066$1", "http://x/\u200b", "\xff", "\u009b", "internal.svc:80\ufeff", uint8(2))
	f.Fuzz(func(t *testing.T, a, b, c, d, e string, shift uint8) {
		values := []string{a, b, c, d, e}
		annotations := map[string]string{}
		for i, key := range proxyKeys {
			prefix := []string{"restysync.io/", "nginx.ingress.kubernetes.io/"}[(i+int(shift))%2]
			annotations[prefix+key] = values[(i+int(shift))%len(values)]
		}
		class := "restysync"
		impl := networkingv1.PathTypeImplementationSpecific
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: annotations},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{
				Host: "app.test",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
					{Path: "/r(/|$)(.*)", PathType: &impl, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
				}}},
			}}},
		}
		m, _ := model.Build(model.Snapshot{
			Ingresses: model.ListOf(ing),
			IngressClasses: model.ListOf(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
				Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}}),
			IngressClass: class,
		})
		if _, err := Render(m, goldenSettings); err != nil {
			t.Fatalf("Render refused what Build kept: %v", err)
		}
		if _, err := Routes(m, Settings{}); err != nil {
			t.Fatalf("Routes refused what Build kept: %v", err)
		}
	})
}
