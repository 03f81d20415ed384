package model

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// proxyIngress is Ingress default/web on app.test, "/" Prefix to web:80,
// with the annotations given (full keys).
func proxyIngress(annotations map[string]string, paths ...networkingv1.HTTPIngressPath) *networkingv1.Ingress {
	if len(paths) == 0 {
		paths = []networkingv1.HTTPIngressPath{prefix("/", "web", 80)}
	}
	opts := []ingressOption{rule("app.test", paths...)}
	for k, v := range annotations {
		opts = append(opts, annotation(k, v))
	}
	return newIngress("default", "web", opts...)
}

// proxyOf builds ing and returns the settings of the location at path on
// app.test, and the Problems.
func proxyOf(t *testing.T, path string, ings ...*networkingv1.Ingress) (ProxySettings, []Problem) {
	t.Helper()
	m, problems := Build(snapshotOf(ings...))
	for s := range m.Servers.All() {
		for _, l := range s.Locations {
			if s.Host == "app.test" && l.Path == path {
				return l.ProxySettings(), problems
			}
		}
	}
	t.Fatalf("no location %s on app.test in %s", path, dump(m))
	return ProxySettings{}, nil
}

// TestProxyAnnotations reads each key under both prefixes: a good value
// lands in ProxySettings with no Problem; a bad one is a Problem naming the
// key and leaves the default.
func TestProxyAnnotations(t *testing.T) {
	tests := []struct {
		key, value string
		want       ProxySettings // zero: the default, with a Problem
	}{
		{"rewrite-target", "/", ProxySettings{RewriteTarget: "/"}},
		{"rewrite-target", "/new/$1?x=$2", ProxySettings{RewriteTarget: "/new/$1?x=$2"}},
		{"rewrite-target", "/$host", ProxySettings{}},
		{"rewrite-target", "/$0", ProxySettings{}},
		{"rewrite-target", "http://evil.example/", ProxySettings{}},
		{"rewrite-target", "/a b", ProxySettings{}},
		{"rewrite-target", "/a;\nreturn 200", ProxySettings{}},
		{"rewrite-target", `/"`, ProxySettings{}},
		{"app-root", "/app", ProxySettings{AppRoot: "/app"}},
		{"app-root", "/", ProxySettings{}},
		{"app-root", "app", ProxySettings{}},
		{"app-root", "/a$uri", ProxySettings{}},
		{"app-root", "https://x.example/", ProxySettings{}},
		{"permanent-redirect", "https://new.example.com/x?y=1", ProxySettings{RedirectURL: "https://new.example.com/x?y=1", RedirectCode: 301}},
		{"permanent-redirect", "http://new.example.com", ProxySettings{RedirectURL: "http://new.example.com", RedirectCode: 301}},
		{"permanent-redirect", "ftp://new.example.com", ProxySettings{}},
		{"permanent-redirect", "javascript:alert(1)", ProxySettings{}},
		{"permanent-redirect", "/relative", ProxySettings{}},
		{"permanent-redirect", "https://x.example.com$request_uri", ProxySettings{}},
		{"permanent-redirect", "https://user:pw@x.example.com/", ProxySettings{}},
		{"permanent-redirect", "https://x.example.com/\"; return 200", ProxySettings{}},
		{"temporal-redirect", "https://tmp.example.com/", ProxySettings{RedirectURL: "https://tmp.example.com/", RedirectCode: 302}},
		{"temporal-redirect", "https:///nohost", ProxySettings{}},
		{"proxy-body-size", "8m", ProxySettings{BodySize: "8m"}},
		{"proxy-body-size", "0", ProxySettings{BodySize: "0"}},
		{"proxy-body-size", "1024", ProxySettings{BodySize: "1024"}},
		{"proxy-body-size", "8mb", ProxySettings{}},
		{"proxy-body-size", "-1", ProxySettings{}},
		{"proxy-body-size", "8 m", ProxySettings{}},
		{"proxy-body-size", "1234567890g", ProxySettings{}},
		{"proxy-connect-timeout", "10", ProxySettings{ConnectTimeout: 10}},
		{"proxy-connect-timeout", "0", ProxySettings{}},
		{"proxy-connect-timeout", "10s", ProxySettings{}},
		{"proxy-send-timeout", "120", ProxySettings{SendTimeout: 120}},
		{"proxy-send-timeout", "86401", ProxySettings{}},
		{"proxy-read-timeout", "3600", ProxySettings{ReadTimeout: 3600}},
		{"proxy-read-timeout", "-5", ProxySettings{}},
		{"proxy-buffering", "on", ProxySettings{Buffering: "on"}},
		{"proxy-buffering", "off", ProxySettings{Buffering: "off"}},
		{"proxy-buffering", "true", ProxySettings{}},
		{"proxy-buffer-size", "16k", ProxySettings{BufferSize: "16k"}},
		{"proxy-buffer-size", "0", ProxySettings{}},
		{"proxy-buffer-size", "0k", ProxySettings{}},
		{"proxy-buffer-size", "16kb", ProxySettings{}},
		{"proxy-request-buffering", "off", ProxySettings{RequestBuffering: "off"}},
		{"proxy-request-buffering", "Off", ProxySettings{}},
		{"proxy-next-upstream", "error timeout http_502", ProxySettings{NextUpstream: "error timeout http_502"}},
		{"proxy-next-upstream", "http_502  timeout error timeout", ProxySettings{NextUpstream: "error timeout http_502"}},
		{"proxy-next-upstream", "non_idempotent http_503 error", ProxySettings{NextUpstream: "error http_503 non_idempotent"}},
		{"proxy-next-upstream", "off", ProxySettings{NextUpstream: "off"}},
		{"proxy-next-upstream", "off error", ProxySettings{}},
		{"proxy-next-upstream", "error http_501", ProxySettings{}},
		{"proxy-next-upstream", "error;timeout", ProxySettings{}},
		{"proxy-next-upstream", "", ProxySettings{}},
		{"proxy-next-upstream-timeout", "15", ProxySettings{NextUpstreamTimeout: 15}},
		{"proxy-next-upstream-timeout", "0", ProxySettings{}}, // the default, no Problem: see wantNoProblem
		{"proxy-next-upstream-timeout", "3601", ProxySettings{}},
		{"proxy-http-version", "1.0", ProxySettings{HTTPVersion: "1.0"}},
		{"proxy-http-version", "1.1", ProxySettings{HTTPVersion: "1.1"}},
		{"proxy-http-version", "2.0", ProxySettings{}},
		{"upstream-vhost", "internal.example.com", ProxySettings{UpstreamVhost: "internal.example.com"}},
		{"upstream-vhost", "svc.ns.svc.cluster.local:8080", ProxySettings{UpstreamVhost: "svc.ns.svc.cluster.local:8080"}},
		{"upstream-vhost", "$host", ProxySettings{UpstreamVhost: "${host}"}},
		{"upstream-vhost", "Upper.example.com", ProxySettings{}},
		{"upstream-vhost", "x.example.com:70000", ProxySettings{}},
		{"upstream-vhost", "a..b", ProxySettings{}},
		{"upstream-vhost", "a.example.com\r\nX-Injected: 1", ProxySettings{}},
		{"x-forwarded-prefix", "/api", ProxySettings{XForwardedPrefix: "/api"}},
		{"x-forwarded-prefix", "api", ProxySettings{}},
		{"x-forwarded-prefix", "/a$b", ProxySettings{}},
		{"x-forwarded-prefix", "/a\"b", ProxySettings{}},
		{"enable-access-log", "false", ProxySettings{AccessLogOff: true}},
		{"enable-access-log", "true", ProxySettings{}},
		{"enable-access-log", "no", ProxySettings{}},
	}
	wantNoProblem := func(key, value string, want ProxySettings) bool {
		return want != (ProxySettings{}) || value == "" || (key == "proxy-next-upstream-timeout" && value == "0") ||
			(key == "enable-access-log" && value == "true")
	}
	for _, tc := range tests {
		for _, pfx := range annotationPrefixes {
			key := pfx + tc.key
			t.Run(key+"="+tc.value, func(t *testing.T) {
				got, problems := proxyOf(t, "/", proxyIngress(map[string]string{key: tc.value}))
				if got != tc.want {
					t.Errorf("settings:\n got %+v\nwant %+v", got, tc.want)
				}
				if wantNoProblem(tc.key, tc.value, tc.want) {
					if len(problems) != 0 {
						t.Errorf("problems %v, want none", problems)
					}
					return
				}
				if len(problems) != 1 || !strings.Contains(problems[0].Reason, "annotation "+key+" ") {
					t.Errorf("problems %v, want one naming %s", problems, key)
				}
			})
		}
	}
}

// Without annotations every setting is the default: the zero value.
func TestProxyDefaults(t *testing.T) {
	got, problems := proxyOf(t, "/", proxyIngress(nil))
	if got != (ProxySettings{}) || len(problems) != 0 {
		t.Errorf("got %+v, %v; want the zero ProxySettings and no problem", got, problems)
	}
}

// A bad value of one key leaves the others, and the Ingress, served.
func TestProxyBadValueKeepsTheRest(t *testing.T) {
	got, problems := proxyOf(t, "/", proxyIngress(map[string]string{
		"nginx.ingress.kubernetes.io/proxy-read-timeout": "forever",
		"nginx.ingress.kubernetes.io/proxy-body-size":    "8m",
		"restysync.io/upstream-vhost":                    "backend.internal",
	}))
	want := ProxySettings{BodySize: "8m", UpstreamVhost: "backend.internal"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	wantProblems := []Problem{ingressProblem("default", "web",
		`annotation nginx.ingress.kubernetes.io/proxy-read-timeout "forever": is not an integer from 1 to 86400; the default is used`)}
	if !reflect.DeepEqual(problems, wantProblems) {
		t.Errorf("problems:\n got %v\nwant %v", problems, wantProblems)
	}
}

// restysync.io/ wins over nginx.ingress.kubernetes.io/ when both are set.
func TestProxyOwnPrefixWins(t *testing.T) {
	got, _ := proxyOf(t, "/", proxyIngress(map[string]string{
		"nginx.ingress.kubernetes.io/proxy-body-size": "1m",
		"restysync.io/proxy-body-size":                "2m",
	}))
	if got.BodySize != "2m" {
		t.Errorf("BodySize %q, want 2m", got.BodySize)
	}
}

// temporal-redirect wins over permanent-redirect; permanent-redirect-code
// picks the code, 301 when it is bad.
func TestProxyRedirects(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        ProxySettings
		problems    int
	}{
		{"permanent with code", map[string]string{
			"nginx.ingress.kubernetes.io/permanent-redirect":      "https://a.example.com",
			"nginx.ingress.kubernetes.io/permanent-redirect-code": "308",
		}, ProxySettings{RedirectURL: "https://a.example.com", RedirectCode: 308}, 0},
		{"bad code", map[string]string{
			"restysync.io/permanent-redirect":      "https://a.example.com",
			"restysync.io/permanent-redirect-code": "200",
		}, ProxySettings{RedirectURL: "https://a.example.com", RedirectCode: 301}, 1},
		{"temporal wins", map[string]string{
			"restysync.io/permanent-redirect":               "https://a.example.com",
			"nginx.ingress.kubernetes.io/temporal-redirect": "https://b.example.com",
		}, ProxySettings{RedirectURL: "https://b.example.com", RedirectCode: 302}, 0},
		{"bad temporal leaves permanent", map[string]string{
			"restysync.io/permanent-redirect": "https://a.example.com",
			"restysync.io/temporal-redirect":  "b.example.com",
		}, ProxySettings{RedirectURL: "https://a.example.com", RedirectCode: 301}, 1},
		{"code alone", map[string]string{
			"restysync.io/permanent-redirect-code": "307",
		}, ProxySettings{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := proxyOf(t, "/", proxyIngress(tc.annotations))
			if got != tc.want || len(problems) != tc.problems {
				t.Errorf("got %+v, %v; want %+v with %d problems", got, problems, tc.want, tc.problems)
			}
		})
	}
}

// rewrite-target makes the paths regexes, as use-regex does: every path of
// the host, Prefix and Exact too, as ingress-nginx writes them "~* ^PATH".
func TestRewriteTargetImpliesRegex(t *testing.T) {
	ing := proxyIngress(map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/$2"},
		httpPath(implType, "/something(/|$)(.*)", backend("web", 80)),
		prefix("/plain", "web", 80))
	m, problems := Build(snapshotOf(ing))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	want := []Location{
		{Path: "/plain", PathType: PathRegex, Backend: "default/web:80", Ingress: "default/web", Proxy: &ProxySettings{RewriteTarget: "/$2"},
			MatchReason: "Prefix became Regex: rewrite-target on Ingress default/web makes every path of the host a regex"},
		{Path: "/something(/|$)(.*)", PathType: PathRegex, Backend: "default/web:80", Ingress: "default/web", Proxy: &ProxySettings{RewriteTarget: "/$2"},
			MatchReason: "ImplementationSpecific with rewrite-target on this Ingress is a regex"},
	}
	if got := m.Servers.At(0).Locations; !reflect.DeepEqual(got, want) {
		t.Errorf("locations:\n got %s\nwant %s", dump(got), dump(want))
	}
	// A bad target still makes the paths regexes (as the key is there),
	// and is a Problem.
	bad := proxyIngress(map[string]string{"restysync.io/rewrite-target": "/$x"}, httpPath(implType, "/r(.*)", backend("web", 80)))
	m, problems = Build(snapshotOf(bad))
	if len(problems) != 1 || m.Servers.At(0).Locations[0].PathType != PathRegex || m.Servers.At(0).Locations[0].ProxySettings().RewriteTarget != "" {
		t.Errorf("bad target: %s, %v", dump(m.Servers.At(0).Locations), problems)
	}
}

// The settings are per Ingress: another Ingress on the same host keeps the defaults.
func TestProxySettingsPerIngress(t *testing.T) {
	a := proxyIngress(map[string]string{"restysync.io/proxy-read-timeout": "5"}, prefix("/a", "web", 80))
	b := newIngress("default", "other", createdAt(1), rule("app.test", prefix("/b", "web", 80)))
	if got, _ := proxyOf(t, "/a", a, b); got.ReadTimeout != 5 {
		t.Errorf("/a: %+v", got)
	}
	if got, _ := proxyOf(t, "/b", a, b); got != (ProxySettings{}) {
		t.Errorf("/b: %+v, want defaults", got)
	}
}

func TestServerAlias(t *testing.T) {
	aliasIngress := func(name string, minutes int, host, aliases string) *networkingv1.Ingress {
		return newIngress("default", name, createdAt(minutes), annotation("nginx.ingress.kubernetes.io/server-alias", aliases),
			rule(host, prefix("/"+name, "web", 80)))
	}
	tests := []struct {
		name     string
		ings     []*networkingv1.Ingress
		want     map[string][]string // host → aliases
		problems []string            // substrings, one per Problem
	}{
		{"two aliases, sorted", []*networkingv1.Ingress{aliasIngress("a", 0, "app.test", "www.app.test, app.example.com")},
			map[string][]string{"app.test": {"app.example.com", "www.app.test"}}, nil},
		{"bad names left out", []*networkingv1.Ingress{aliasIngress("a", 0, "app.test", "ok.test,*.wild.test,Bad.Test,1.2.3.4,a_b.test,,")},
			map[string][]string{"app.test": {"ok.test"}}, []string{"*.wild.test", "Bad.Test", "1.2.3.4", "a_b.test"}},
		{"a host wins over an alias", []*networkingv1.Ingress{
			aliasIngress("a", 0, "app.test", "other.test"),
			aliasIngress("b", 1, "other.test", ""),
		}, map[string][]string{"app.test": nil, "other.test": nil}, []string{"is the host of a rule"}},
		{"the oldest Ingress wins an alias", []*networkingv1.Ingress{
			aliasIngress("new", 5, "two.test", "shared.test"),
			aliasIngress("old", 0, "one.test", "shared.test"),
		}, map[string][]string{"one.test": {"shared.test"}, "two.test": nil}, []string{`already an alias of host "one.test"`}},
		{"two Ingresses of one host", []*networkingv1.Ingress{
			aliasIngress("a", 0, "app.test", "x.test"),
			aliasIngress("b", 1, "app.test", "x.test,y.test"),
		}, map[string][]string{"app.test": {"x.test", "y.test"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, problems := Build(snapshotOf(tc.ings...))
			got := map[string][]string{}
			for s := range m.Servers.All() {
				got[s.Host] = s.Aliases
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("aliases %v, want %v", got, tc.want)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems %v, want %d", problems, len(tc.problems))
			}
			for _, want := range tc.problems {
				if !slices.ContainsFunc(problems, func(p Problem) bool { return strings.Contains(p.Reason, want) }) {
					t.Errorf("no problem mentions %q in %v", want, problems)
				}
			}
		})
	}
}

// Every proxy key is a supported annotation under both prefixes.
func TestProxyKeysSupported(t *testing.T) {
	for _, key := range []string{"rewrite-target", "app-root", "permanent-redirect", "permanent-redirect-code",
		"temporal-redirect", "proxy-body-size", "proxy-connect-timeout", "proxy-send-timeout", "proxy-read-timeout",
		"proxy-buffering", "proxy-buffer-size", "proxy-request-buffering", "proxy-next-upstream",
		"proxy-next-upstream-timeout", "proxy-http-version", "upstream-vhost", "x-forwarded-prefix",
		"server-alias", "enable-access-log"} {
		for _, pfx := range annotationPrefixes {
			if got := AnnotationStatus(pfx + key); got != AnnotationSupported {
				t.Errorf("%s%s: %q, want supported", pfx, key, got)
			}
		}
	}
}
