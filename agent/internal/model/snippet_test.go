package model

import (
	"strings"
	"testing"
)

const ngx = "nginx.ingress.kubernetes.io/"

// locationOf returns the location of host at path and type, or fails.
func locationOf(t *testing.T, m Model, host, path string, pathType PathType) Location {
	t.Helper()
	for _, s := range append([]*Server{&m.Default}, m.Servers.Slice()...) {
		if s.Host != host {
			continue
		}
		for _, l := range s.Locations {
			if l.Path == path && l.PathType == pathType {
				return l
			}
		}
	}
	t.Fatalf("no location %s %q on %q in %s", pathType, path, host, dump(m))
	return Location{}
}

// snippetProblem returns the problem whose reason holds text.
func snippetProblem(problems []Problem, text string) (Problem, bool) {
	for _, p := range problems {
		if strings.Contains(p.Reason, text) {
			return p, true
		}
	}
	return Problem{}, false
}

func TestSnippetHeaders(t *testing.T) {
	ing := newIngress("default", "app",
		annotation(ngx+"configuration-snippet", "more_set_headers \"Request-Id: $req_id\";\n"+
			"proxy_set_header l5d-dst-override $service_name.$namespace.svc.cluster.local:$service_port;\n"+
			"proxy_set_header Host $host;\nproxy_hide_header l5d-remote-ip;\nadd_header X-Up $upstream_http_x_a;\n"+
			"more_clear_headers X-Request-ID;"),
		annotation(ngx+"server-snippet", "proxy_set_header Host $best_http_host;\nproxy_set_header X-Server $server_name;\nserver_tokens off;"),
		rule("app.example.com", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(ing))
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	got := locationOf(t, m, "app.example.com", "/", PathPrefix).SnippetSettings()
	want := SnippetSettings{
		// configuration-snippet's Host wins over server-snippet's.
		RequestHeaders:  "Host: ${host}\nX-Server: app.example.com\nl5d-dst-override: web.default.svc.cluster.local:http",
		ResponseHeaders: "X-Up: ${upstream_http_x_a}",
		AlwaysHeaders:   "Request-Id: ${restysync_request_id}",
		HideHeaders:     "Request-Id,l5d-remote-ip,X-Request-ID",
		ClearHeaders:    "X-Request-ID",
		ServerTokensOff: true,
	}
	if got != want {
		t.Errorf("snippet settings\n got %+v\nwant %+v", got, want)
	}
	if l := locationOf(t, m, "app.example.com", "/", PathPrefix); l.Plain() {
		t.Error("a location with snippet headers is plain")
	}
}

// With the headers-more module (Snapshot.HeadersMore), more_set_headers
// goes to SetHeaders, replacing an add_header of its name from a lower
// layer, and may name Server; without it Server is a Problem on the
// Ingress.
func TestSnippetHeadersMore(t *testing.T) {
	ing := newIngress("default", "app",
		annotation(ngx+"server-snippet", "add_header X-Frame-Options SAMEORIGIN always;\nadd_header X-Up up;"),
		annotation(ngx+"configuration-snippet", "more_set_headers \"Server: edge\" \"X-Frame-Options: DENY\";\nmore_clear_headers Date;"),
		rule("app.example.com", prefix("/", "web", "http")))
	snap := snapshotOf(ing)
	snap.HeadersMore = true
	m, problems := Build(snap)
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	got := locationOf(t, m, "app.example.com", "/", PathPrefix).SnippetSettings()
	want := SnippetSettings{
		ResponseHeaders: "X-Up: up",
		SetHeaders:      "Server: edge\nX-Frame-Options: DENY",
		HideHeaders:     "Server,X-Frame-Options,Date",
		ClearHeaders:    "Date",
		HeadersMore:     true,
	}
	if got != want {
		t.Errorf("snippet settings\n got %+v\nwant %+v", got, want)
	}

	_, problems = Build(snapshotOf(ing))
	if p, ok := snippetProblem(problems, "Server is written by nginx itself"); !ok || p.Name != "app" || !strings.Contains(p.Reason, "headers-more") {
		t.Errorf("without headers-more: problems %v, want one on default/app naming headers-more", problems)
	}
}

func TestSnippetRefusedLeavesTheRestServed(t *testing.T) {
	ing := newIngress("default", "app",
		annotation(ngx+"server-snippet", "location ^~ /test {\n  alias /var/run;\n}"),
		annotation(ngx+"configuration-snippet", "add_header X-A \"a\\r\\nSet-Cookie: x\";"),
		annotation(ngx+"proxy-read-timeout", "30"),
		rule("app.example.com", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(ing))
	l := locationOf(t, m, "app.example.com", "/", PathPrefix)
	if l.SnippetSettings() != (SnippetSettings{}) || l.ProxySettings().ReadTimeout != 30 {
		t.Errorf("location %+v", l)
	}
	for _, want := range []string{
		"annotation " + ngx + "server-snippet: refused: alias (line 2): reads files outside the config (CVE-2021-25742)",
		"annotation " + ngx + "configuration-snippet: refused: add_header (line 1): X-A: the value holds a CR or LF",
	} {
		p, ok := snippetProblem(problems, want)
		if !ok || !p.Refused {
			t.Errorf("no refused problem %q in %v", want, problems)
		}
	}
	if m.Servers.Len() != 1 || len(m.Servers.At(0).Locations) != 1 {
		t.Errorf("servers %s", dump(m.Servers))
	}
}

func TestSnippetsTurnedOff(t *testing.T) {
	ing := newIngress("default", "app",
		annotation(ngx+"configuration-snippet", "add_header X-A b;"),
		rule("app.example.com", prefix("/", "web", "http")))
	s := snapshotOf(ing)
	s.SnippetAnnotationsOff = true
	m, problems := Build(s)
	if l := locationOf(t, m, "app.example.com", "/", PathPrefix); l.SnippetSettings() != (SnippetSettings{}) {
		t.Errorf("snippet applied: %+v", l.SnippetSettings())
	}
	if p, ok := snippetProblem(problems, "snippet annotations are turned off"); !ok || !p.Refused {
		t.Errorf("problems %v", problems)
	}
}

func TestSnippetProxySettings(t *testing.T) {
	ing := newIngress("default", "app",
		annotation(ngx+"server-snippet", "proxy_read_timeout 90;\nproxy_http_version 1.0;\nproxy_ssl_verify off;\nclient_max_body_size 8m;"),
		annotation(ngx+"configuration-snippet", "proxy_read_timeout 120s;\nproxy_connect_timeout 7;\nproxy_buffering on;"),
		annotation(ngx+"proxy-connect-timeout", "5"),
		annotation(ngx+"proxy-http-version", "1.0"),
		rule("app.example.com", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(ing))
	p := locationOf(t, m, "app.example.com", "/", PathPrefix).ProxySettings()
	if p.ReadTimeout != 120 || p.ConnectTimeout != 5 || p.HTTPVersion != "1.0" || p.BodySize != "8m" || p.Buffering != "on" {
		t.Errorf("proxy settings %+v", p)
	}
	want := "annotation " + ngx + "configuration-snippet: proxy_connect_timeout 7 (line 2) disagrees with annotation " + ngx +
		"proxy-connect-timeout \"5\"; the annotation's is used"
	if len(problems) != 1 || problems[0].Reason != want {
		t.Errorf("problems %v\nwant %q", problems, want)
	}
}

func TestSnippetBufferSettings(t *testing.T) {
	ing := newIngress("default", "app",
		annotation(ngx+"configuration-snippet", "proxy_buffers 8 16k;\nclient_body_buffer_size 64k;"),
		rule("app.example.com", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(ing))
	p := locationOf(t, m, "app.example.com", "/", PathPrefix).ProxySettings()
	if p.BuffersNumber != 8 || p.BufferSize != "16k" || p.ClientBodyBufferSize != "64k" || len(problems) != 0 {
		t.Errorf("proxy settings %+v, problems %v", p, problems)
	}
	// A busy size nginx would refuse leaves the buffers at the annotations'.
	ing = newIngress("default", "app",
		annotation(ngx+"configuration-snippet", "proxy_buffers 2 4k;\nproxy_busy_buffers_size 64k;"),
		rule("app.example.com", prefix("/", "web", "http")))
	m, problems = Build(snapshotOf(ing))
	p = locationOf(t, m, "app.example.com", "/", PathPrefix).ProxySettings()
	if p.BuffersNumber != 0 || p.BusyBuffersSize != "" || len(problems) != 1 {
		t.Errorf("proxy settings %+v, problems %v", p, problems)
	}
}

func TestSnippetLocations(t *testing.T) {
	older := newIngress("default", "older", createdAt(-1),
		annotation(ngx+"server-snippet", "location = /robots.txt { return 200 \"older\"; }"),
		rule("app.example.com", prefix("/api", "web", "http")))
	ing := newIngress("default", "app",
		annotation(ngx+"server-snippet", "server_tokens off;\nadd_header X-Top top;\n"+
			"location ~ ^/(ping|ready|prometheus) {\n  deny all;\n  return 404;\n}\n"+
			"location /robots.txt {\n  add_header Content-Type \"text/plain\";\n  return 200 \"User-agent: *\\nDisallow: /\";\n}\n"+
			"location = /robots.txt { return 200 \"x\"; }\n"+
			"location /api { return 403; }\n"+
			"location ~* \\.php$ { allow 10.0.0.0/8; deny all; }\n"+
			"location ^~ /static/ { return 301 https://$host/s$request_uri; }"),
		rule("app.example.com", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(older, ing))

	ping := locationOf(t, m, "app.example.com", "/(?-i)(ping|ready|prometheus)", PathRegex) // "~" is case-sensitive
	if ping.FixedSettings() != (FixedResponse{Set: true, Code: 404, Rules: "deny all"}) || ping.Backend != "" || ping.Ingress != "default/app" {
		t.Errorf("ping %+v", ping)
	}
	if ping.SnippetSettings() != (SnippetSettings{ResponseHeaders: "X-Top: top", ServerTokensOff: true}) {
		t.Errorf("ping inherits %+v", ping.SnippetSettings())
	}
	robots := locationOf(t, m, "app.example.com", "/robots.txt", PathLiteralPrefix)
	if robots.FixedSettings() != (FixedResponse{Set: true, Code: 200, Text: "User-agent: *\nDisallow: /", DefaultType: "text/plain"}) ||
		robots.SnippetSettings() != (SnippetSettings{ServerTokensOff: true}) {
		t.Errorf("robots %+v", robots)
	}
	php := locationOf(t, m, "app.example.com", "/?.*?(?:\\.php$)", PathRegex)
	if php.FixedSettings() != (FixedResponse{Set: true, Rules: "allow 10.0.0.0/8,deny all"}) {
		t.Errorf("php %+v", php)
	}
	static := locationOf(t, m, "app.example.com", "/static/", PathPriorityPrefix)
	if static.FixedSettings().Text != "https://${host}/s${request_uri}" || static.FixedSettings().Code != 301 {
		t.Errorf("static %+v", static)
	}
	// The Ingress paths win: "/api" of the older Ingress, and "= /robots.txt"
	// of the older Ingress's snippet.
	if l := locationOf(t, m, "app.example.com", "/api", PathPrefix); l.FixedSettings().Set || l.Ingress != "default/older" {
		t.Errorf("/api %+v", l)
	}
	if l := locationOf(t, m, "app.example.com", "/robots.txt", PathExact); l.FixedSettings().Text != "older" {
		t.Errorf("= /robots.txt %+v", l)
	}
	for _, want := range []string{
		"location /api (line 12): Ingress default/older serves that path on host \"app.example.com\"; the snippet location is left out",
		"location = /robots.txt (line 11): an older server-snippet (Ingress default/older) has that location on host \"app.example.com\"",
	} {
		if _, ok := snippetProblem(problems, want); !ok {
			t.Errorf("no problem %q in %v", want, problems)
		}
	}
	if len(problems) != 2 {
		t.Errorf("problems %v", problems)
	}
	for _, b := range m.Backends.Slice() {
		if b.Name == "" {
			t.Errorf("a backend without a name: %+v", m.Backends)
		}
	}
}

func TestSnippetRegexLocationPaths(t *testing.T) {
	for _, tt := range []struct{ re, want string }{
		{"^/(ping|ready)", "/(ping|ready)"},
		{"\\.php$", "/?.*?(?:\\.php$)"},
	} {
		if got := snippetRegexPath(tt.re, false); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.re, got, tt.want)
		}
	}
	if got := snippetRegexPath("^/Admin", true); got != "/(?-i)Admin" {
		t.Errorf("case-sensitive: %q", got)
	}
}

func TestAuthSnippet(t *testing.T) {
	ing := newIngress("default", "app",
		annotation(ngx+"auth-url", "https://vouch.example.com/validate"),
		annotation(ngx+"auth-signin", "https://vouch.example.com/login?url=$scheme://$http_host$request_uri&vouch-failcount=$auth_resp_failcount&X-Vouch-Token=$auth_resp_jwt"),
		annotation(ngx+"auth-snippet", "# used by the sign-in\nauth_request_set $auth_resp_jwt $upstream_http_x_vouch_jwt;\n"+
			"auth_request_set $auth_resp_failcount $upstream_http_x_vouch_failcount;"),
		annotation(ngx+"configuration-snippet", "proxy_set_header X-Vouch-Jwt $auth_resp_jwt;"),
		rule("app.example.com", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(ing))
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	l := locationOf(t, m, "app.example.com", "/", PathPrefix)
	if want := "restysync_set_1 upstream_http_x_vouch_jwt\nrestysync_set_2 upstream_http_x_vouch_failcount"; l.SnippetSettings().AuthRequestSet != want {
		t.Errorf("auth_request_set %q", l.SnippetSettings().AuthRequestSet)
	}
	if !strings.Contains(l.AccessSettings().ExternalAuth.Signin, "vouch-failcount=${restysync_set_2}&X-Vouch-Token=${restysync_set_1}") {
		t.Errorf("sign-in %q", l.AccessSettings().ExternalAuth.Signin)
	}
	if l.SnippetSettings().RequestHeaders != "X-Vouch-Jwt: ${restysync_set_1}" {
		t.Errorf("request headers %q", l.SnippetSettings().RequestHeaders)
	}

	// Without the auth-snippet, the sign-in's variables are unknown.
	delete(ing.Annotations, ngx+"auth-snippet")
	delete(ing.Annotations, ngx+"configuration-snippet")
	_, problems = Build(snapshotOf(ing))
	if _, ok := snippetProblem(problems, "uses the variable $auth_resp_failcount"); !ok {
		t.Errorf("problems %v", problems)
	}
}

func TestSnippetAnnotationWins(t *testing.T) {
	ing := newIngress("default", "app",
		annotation(ngx+"upstream-vhost", "internal.example.com"),
		annotation(ngx+"configuration-snippet", "proxy_set_header Host $host;\nproxy_set_header X-A a;"),
		rule("app.example.com", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(ing))
	l := locationOf(t, m, "app.example.com", "/", PathPrefix)
	if l.SnippetSettings().RequestHeaders != "X-A: a" {
		t.Errorf("request headers %q", l.SnippetSettings().RequestHeaders)
	}
	if _, ok := snippetProblem(problems, "proxy_set_header Host (line 1): the annotation upstream-vhost sets this header"); !ok {
		t.Errorf("problems %v", problems)
	}
}

func TestGlobalSnippets(t *testing.T) {
	a := newIngress("default", "a", rule("a.example.com", prefix("/", "web", "http")))
	b := newIngress("default", "b", annotation(ngx+"configuration-snippet", "add_header X-Frame-Options SAMEORIGIN;"),
		rule("b.example.com", prefix("/", "web", "http")))
	s := snapshotOf(a, b)
	s.GlobalSnippets = GlobalSnippets{HTTP: "add_header X-Frame-Options DENY;\nmore_clear_headers X-Powered-By;",
		Location: "alias /x;"} // refused: not applied
	m, problems := Build(s)
	if len(problems) != 0 {
		t.Errorf("problems %v", problems)
	}
	if got := locationOf(t, m, "a.example.com", "/", PathPrefix).SnippetSettings(); got != (SnippetSettings{ResponseHeaders: "X-Frame-Options: DENY",
		HideHeaders: "X-Powered-By", ClearHeaders: "X-Powered-By"}) {
		t.Errorf("a: %+v", got)
	}
	if got := locationOf(t, m, "b.example.com", "/", PathPrefix).SnippetSettings(); got.ResponseHeaders != "X-Frame-Options: SAMEORIGIN" {
		t.Errorf("b: %+v", got)
	}
}
