package render

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/templates"
)

func TestQuoteText(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"User-agent: *\nDisallow: /", `"User-agent: *\nDisallow: /"`, ""},
		{`[{"a": "b\c"}]`, `"[{\"a\": \"b\\c\"}]"`, ""},
		{"tab\tcr\r", `"tab\tcr\r"`, ""},
		{"https://${host}${request_uri}", `"https://${host}${request_uri}"`, ""},
		{"a$b", "", `"$"`},
		{"a\x01b", "", "control character"},
		{"\xff", "", "UTF-8"},
	}
	for _, tt := range tests {
		got, err := QuoteText(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("QuoteText(%q): %v, want an error with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("QuoteText(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// The standard request headers a snippet's profile repeats are the
// template's "proxy-headers", in order.
func TestStandardRequestHeadersMatchTemplate(t *testing.T) {
	define := regexp.MustCompile(`(?s)\{\{- define "proxy-headers"\}\}(.*?)\{\{- end\}\}`).FindStringSubmatch(templates.NginxConf)
	if define == nil {
		t.Fatal("no \"proxy-headers\" in the template")
	}
	line := regexp.MustCompile(`proxy_set_header (\S+) \$(\S+);`)
	var got []proxyHeaderView
	for _, m := range line.FindAllStringSubmatch(define[1], -1) {
		got = append(got, proxyHeaderView{Name: m[1], Value: "${" + m[2] + "}"})
	}
	if len(got) != len(standardRequestHeaders) {
		t.Fatalf("template %v\nstandardRequestHeaders %v", got, standardRequestHeaders)
	}
	for i := range got {
		if got[i] != standardRequestHeaders[i] {
			t.Errorf("header %d: template %v, standardRequestHeaders %v", i, got[i], standardRequestHeaders[i])
		}
	}
}

// snippetModel has a location with snippet headers, one with auth and an
// auth-snippet, and the locations of a server-snippet.
func snippetModel() model.Model {
	headers := loc("/", model.PathPrefix, "ns/web:80")
	headers.Snippet = &model.SnippetSettings{
		RequestHeaders:  "Host: ${host}\nX-Forwarded-For: ${proxy_add_x_forwarded_for}\nl5d-dst-override: web.ns.svc.cluster.local:80\nOrigin: ",
		ResponseHeaders: "X-Up: ${upstream_http_x_a}",
		AlwaysHeaders:   "Request-Id: ${restysync_request_id}\nX-Frame-Options: DENY",
		HideHeaders:     "Request-Id,l5d-remote-ip",
		ClearHeaders:    "X-Request-ID",
		PassHeaders:     "X-Accel-Buffering",
		ServerTokensOff: true,
	}
	auth := loc("/auth", model.PathPrefix, "ns/web:80")
	own(&auth.Access).ExternalAuth = model.ExternalAuth{URL: "http://127.0.0.1:1/validate",
		Signin: "https://login.example.com/?err=${restysync_set_1}"}
	// As many as an auth-snippet may set: nginx's variables hash holds them.
	sets := []string{"restysync_set_1 upstream_http_x_err", "restysync_set_2 upstream_status"}
	for i := 3; i <= 16; i++ {
		sets = append(sets, fmt.Sprintf("restysync_set_%d upstream_http_x_%d", i, i))
	}
	own(&auth.Snippet).AuthRequestSet = strings.Join(sets, "\n")
	robots := model.Location{Path: "/robots.txt", PathType: model.PathLiteralPrefix, Ingress: "ns/app",
		Fixed: &model.FixedResponse{Set: true, Code: 200, Text: "User-agent: *\nDisallow: /", DefaultType: "text/plain"}}
	blocked := model.Location{Path: "/(?-i)(ping|ready)", PathType: model.PathRegex, Ingress: "ns/app",
		Fixed:   &model.FixedResponse{Set: true, Code: 404, Rules: "deny all"},
		Snippet: &model.SnippetSettings{AlwaysHeaders: "X-Top: top", ServerTokensOff: true}}
	static := model.Location{Path: "/static/", PathType: model.PathPriorityPrefix, Ingress: "ns/app",
		Fixed: &model.FixedResponse{Set: true, Rules: "allow 10.0.0.0/8,deny all"}}
	redirect := model.Location{Path: "/old", PathType: model.PathExact, Ingress: "ns/app",
		Fixed: &model.FixedResponse{Set: true, Code: 301, Text: "https://${host}/new${request_uri}"}}
	return model.Model{Servers: model.ListOf(&model.Server{Host: "app.example.com",
		Locations: []model.Location{headers, auth, redirect, robots, static, blocked}})}
}

func TestSnippetProfiles(t *testing.T) {
	nginxproc.Binary(t)
	m := snippetModel()
	prefix := nginxproc.TempPrefix(t)
	s := Settings{SharedDir: prefix, HTTPPort: 18080, HTTPSPort: 18443, ListenAddress: "127.0.0.1",
		LoadModules: nginxproc.DebianLoadModules(), WorkerProcesses: "1", HSTS: true, HSTSMaxAge: 60}
	cfg := writePrefix(t, prefix, m, s)
	out, err := nginxproc.Test(t, prefix)
	if err != nil {
		t.Fatalf("%v\n%s", err, cfg.Bytes)
	}
	checkNoWarnings(t, out)
	conf := string(cfg.Bytes)
	for _, want := range []string{
		// The standard request headers, the snippet's in the place of theirs, then its own.
		`            proxy_set_header "Host" "${host}";
            proxy_set_header "X-Forwarded-Prefix" "${restysync_forwarded_prefix}";
            proxy_set_header "X-Real-IP" "${remote_addr}";
            proxy_set_header "X-Forwarded-For" "${proxy_add_x_forwarded_for}";`,
		`            proxy_set_header "Connection" "${connection_upgrade}";
            proxy_set_header "l5d-dst-override" "web.ns.svc.cluster.local:80";
            proxy_set_header "Origin" "";`,
		// The http block's hidden headers, then the snippet's.
		`            proxy_hide_header "X-Request-ID";
            proxy_hide_header "Strict-Transport-Security";
            proxy_hide_header "Request-Id";
            proxy_hide_header "l5d-remote-ip";
            proxy_pass_header "X-Accel-Buffering";`,
		// X-Request-ID is cleared: an empty value keeps the http block's out.
		`            add_header "X-Request-ID" "" always;
            add_header "Strict-Transport-Security" "${restysync_hsts}" always;
            add_header "X-Up" "${upstream_http_x_a}";
            add_header "Request-Id" "${restysync_request_id}" always;`,
		"            server_tokens off;",
		`            auth_request_set $restysync_set_1 $upstream_http_x_err;
            auth_request_set $restysync_set_2 $upstream_status;`,
		`return 302 "https://login.example.com/?err=${restysync_set_1}`,
		// The server-snippet's locations.
		`            default_type "text/plain";
            return 200 "User-agent: *\nDisallow: /";`,
		`            deny "all";
            return 404;`,
		`            allow "10.0.0.0/8";
            deny "all";
            content_by_lua_block { ngx.exit(ngx.HTTP_NOT_FOUND) }`,
		`            return 301 "https://${host}/new${request_uri}";`,
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks\n%s", want)
		}
	}
	if n := strings.Count(conf, `proxy_set_header "Host"`); n != 1 {
		t.Errorf("Host is set %d times in the profiles, want once", n)
	}

	routes, err := Routes(m, s)
	if err != nil {
		t.Fatal(err)
	}
	fixedPaths := map[string]bool{"/robots.txt": true, "/static/": true, "/old": true, "^/(?-i)(ping|ready)": true}
	for _, l := range routes[0].Locations {
		if fixedPaths[l.Path] != (l.Backend == "") || l.Profile == "" {
			t.Errorf("route %+v: a server-snippet location has a profile and no backend", l)
		}
		if l.NoRegex != (l.Path == "/static/") {
			t.Errorf("route %+v: noregex is for ^~ only", l)
		}
	}
}

// A location's custom-headers write the http block's response headers;
// the snippet's add only theirs.
func TestSnippetWithCustomHeaders(t *testing.T) {
	l := loc("/", model.PathPrefix, "ns/web:80")
	own(&l.Proxy).ResponseHeaders = "X-Custom: 1"
	own(&l.Snippet).AlwaysHeaders = "X-Snippet: 2"
	cfg, err := Render(model.Model{Servers: model.ListOf(&model.Server{Host: "a.example.com", Locations: []model.Location{l}})}, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(cfg.Bytes)
	if n := strings.Count(conf, "add_header X-Request-ID") + strings.Count(conf, `add_header "X-Request-ID"`); n != 2 {
		t.Errorf("X-Request-ID is added %d times (http block and profile), want 2:\n%s", n, conf)
	}
	if !strings.Contains(conf, `add_header "X-Snippet" "2" always;`) {
		t.Error("the snippet's header is missing")
	}
}

// FuzzSnippetAnnotations sets the snippet annotations to fuzzed text:
// whatever Build accepts of them, Render and Routes must take (every
// value it lets through is one nginx.conf or Lua can hold).
func FuzzSnippetAnnotations(f *testing.F) {
	f.Add(`more_set_headers "Request-Id: $req_id"; proxy_set_header X $service_name;`,
		"server_tokens off;\nlocation ~ ^/(ping|ready) { deny all; return 404; }\nlocation /r { return 200 \"a\\nb\"; }",
		"auth_request_set $e $upstream_http_x_err;", "https://login.test/?e=$e")
	f.Add("add_header X \"a\\r\\nb\";", "location ^~ /s/ { alias /; }", "", "")
	f.Add("proxy_buffers 2 4k; proxy_busy_buffers_size 8k; client_max_body_size 1g;", "location = /x { return 301 $scheme://$host/y; }",
		"auth_request_set $a $upstream_status;", "https://x.test/$a")
	// Characters no value may hold (package chars): issue 25's payload
	// and its kin.
	f.Add("add_header X-A \"a\u0085b\";", "location /x { return 200 \"a\u2028\"; }", "auth_request_set $a $upstream_http_x\u202e;", "https://x.test/\u2029")
	f.Add("proxy_set_header X \"\xed\xa0\x80\";", "location /\u2066 { return 404; }", "", "https://x.test/\xff")
	f.Add("more_set_headers \"X: \u200b\";", "add_header X \"\u009b\";", "", "https://x.test/a\u0085")
	f.Fuzz(func(t *testing.T, config, server, auth, signin string) {
		class := "restysync"
		prefix := networkingv1.PathTypePrefix
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{
				"nginx.ingress.kubernetes.io/configuration-snippet": config,
				"nginx.ingress.kubernetes.io/server-snippet":        server,
				"nginx.ingress.kubernetes.io/auth-snippet":          auth,
				"nginx.ingress.kubernetes.io/auth-url":              "http://127.0.0.1:9/auth",
				"nginx.ingress.kubernetes.io/auth-signin":           signin,
			}},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{
				Host: "app.test",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
					{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
				}}},
			}}},
		}
		m, _ := model.Build(model.Snapshot{
			Ingresses: model.ListOf(ing),
			IngressClasses: model.ListOf(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
				Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}}),
			IngressClass:   class,
			GlobalSnippets: model.GlobalSnippets{Location: config},
		})
		if _, err := Render(m, goldenSettings); err != nil {
			t.Fatalf("Render refused what Build kept: %v", err)
		}
		if _, err := Routes(m, Settings{}); err != nil {
			t.Fatalf("Routes refused what Build kept: %v", err)
		}
	})
}
