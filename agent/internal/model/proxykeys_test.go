package model

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestProxyKeysAnnotations reads each key of proxykeys.go under both
// prefixes: a good value lands in ProxySettings with no Problem; a bad or
// hostile one is a Problem naming the key and leaves the default.
func TestProxyKeysAnnotations(t *testing.T) {
	tests := []struct {
		key, value string
		want       ProxySettings // zero: the default, with a Problem
	}{
		{"proxy-buffers-number", "8", ProxySettings{BuffersNumber: 8}},
		{"proxy-buffers-number", "64", ProxySettings{BuffersNumber: 64}},
		{"proxy-buffers-number", "1", ProxySettings{}},
		{"proxy-buffers-number", "0", ProxySettings{}},
		{"proxy-buffers-number", "-4", ProxySettings{}},
		{"proxy-buffers-number", "4k", ProxySettings{}},
		{"proxy-buffers-number", "99999999999999999999", ProxySettings{}},
		{"proxy-busy-buffers-size", "8k", ProxySettings{BusyBuffersSize: "8k"}},
		{"proxy-busy-buffers-size", "1g", ProxySettings{}}, // nginx takes no g here
		{"proxy-busy-buffers-size", "0", ProxySettings{}},
		{"proxy-busy-buffers-size", "8k;", ProxySettings{}},
		{"proxy-max-temp-file-size", "0", ProxySettings{MaxTempFileSize: "0"}},
		{"proxy-max-temp-file-size", "512m", ProxySettings{MaxTempFileSize: "512m"}},
		{"proxy-max-temp-file-size", "2g", ProxySettings{}},
		{"proxy-max-temp-file-size", "1m\nreturn 200", ProxySettings{}},
		{"proxy-buffer-size", "1g", ProxySettings{}},
		{"client-body-buffer-size", "160k", ProxySettings{ClientBodyBufferSize: "160k"}},
		{"client-body-buffer-size", "1M", ProxySettings{ClientBodyBufferSize: "1M"}},
		{"client-body-buffer-size", "0", ProxySettings{}},
		{"client-body-buffer-size", "16 k", ProxySettings{}},
		{"client-body-buffer-size", `16k"`, ProxySettings{}},
		{"proxy-cookie-domain", "backend.internal example.com", ProxySettings{CookieDomain: "backend.internal example.com"}},
		{"proxy-cookie-domain", "  a.internal   b.example ", ProxySettings{CookieDomain: "a.internal b.example"}},
		{"proxy-cookie-domain", "off", ProxySettings{CookieDomain: "off"}},
		{"proxy-cookie-domain", "one", ProxySettings{}},
		{"proxy-cookie-domain", "a b c", ProxySettings{}},
		{"proxy-cookie-domain", "~^(.+)\\.internal$ $1.example", ProxySettings{}},
		{"proxy-cookie-domain", "a $host", ProxySettings{}},
		{"proxy-cookie-domain", "a b;return 200", ProxySettings{}},
		{"proxy-cookie-domain", `a "b"`, ProxySettings{}},
		{"proxy-cookie-path", "/app/ /", ProxySettings{CookiePath: "/app/ /"}},
		{"proxy-cookie-path", "/one /two?x=1&y=2", ProxySettings{CookiePath: "/one /two?x=1&y=2"}},
		{"proxy-cookie-path", "off", ProxySettings{CookiePath: "off"}},
		{"proxy-cookie-path", "/a", ProxySettings{}},
		{"proxy-cookie-path", "~*^/a /b", ProxySettings{}},
		{"proxy-cookie-path", "/a /b{}", ProxySettings{}},
		{"limit-rate", "100", ProxySettings{LimitRate: "100k"}},
		{"limit-rate", "0", ProxySettings{LimitRate: "0"}},
		{"limit-rate", "-1", ProxySettings{}},
		{"limit-rate", "100k", ProxySettings{}}, // kilobytes are implied, as in ingress-nginx
		{"limit-rate", "01", ProxySettings{}},
		{"limit-rate", "9999999999", ProxySettings{}},
		{"limit-rate-after", "1024", ProxySettings{LimitRateAfter: "1024k"}},
		{"limit-rate-after", "1 2", ProxySettings{}},
		{"satisfy", "any", ProxySettings{SatisfyAny: true}},
		{"satisfy", " any ", ProxySettings{SatisfyAny: true}},
		{"satisfy", "all", ProxySettings{}},
		{"satisfy", "some", ProxySettings{}},
		{"preserve-trailing-slash", "true", ProxySettings{PreserveTrailingSlash: true}},
		{"preserve-trailing-slash", "false", ProxySettings{}},
		{"preserve-trailing-slash", "yes", ProxySettings{}},
		{"from-to-www-redirect", "true", ProxySettings{FromToWWWRedirect: true}},
		{"from-to-www-redirect", "maybe", ProxySettings{}},
		{"temporal-redirect-code", "307", ProxySettings{}}, // needs temporal-redirect: see TestTemporalRedirectCode
		{"upstream-vhost", "$host", ProxySettings{UpstreamVhost: "${host}"}},
		{"upstream-vhost", "${http_host}", ProxySettings{UpstreamVhost: "${http_host}"}},
		{"upstream-vhost", "$best_http_host", ProxySettings{UpstreamVhost: "${restysync_forwarded_host}"}},
		{"upstream-vhost", "$service_name.$namespace.svc.cluster.local:8084", ProxySettings{UpstreamVhost: "web.default.svc.cluster.local:8084"}},
		{"upstream-vhost", "$ingress_name.internal", ProxySettings{UpstreamVhost: "web.internal"}},
		{"upstream-vhost", "$service_name:$service_port", ProxySettings{UpstreamVhost: "web:80"}},
		{"upstream-vhost", "$remote_addr", ProxySettings{}},
		{"upstream-vhost", "$host;return 200", ProxySettings{}},
		{"upstream-vhost", "$host\"", ProxySettings{}},
		{"upstream-vhost", "${host", ProxySettings{}},
		{"upstream-vhost", "$host UPPER", ProxySettings{}},
		{"upstream-vhost", "$service_name..x", ProxySettings{}},
		{"upstream-vhost", "$service_name:99999", ProxySettings{}},
	}
	wantNoProblem := func(key, value string, want ProxySettings) bool {
		return want != (ProxySettings{}) || (key == "limit-rate" && value == "0") || (key == "satisfy" && value == "all") ||
			value == "false" || key == "temporal-redirect-code"
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

// proxy-redirect-from and -to pair as in ingress-nginx.
func TestProxyRedirectPair(t *testing.T) {
	const from, to = "nginx.ingress.kubernetes.io/proxy-redirect-from", "nginx.ingress.kubernetes.io/proxy-redirect-to"
	tests := []struct {
		name        string
		annotations map[string]string
		want        ProxySettings
		problems    int
	}{
		{"both", map[string]string{from: "http://download.kiwix.org/", to: "$scheme://download.kiwix.org/"},
			ProxySettings{RedirectFrom: "http://download.kiwix.org/", RedirectTo: "${scheme}://download.kiwix.org/"}, 0},
		{"best host", map[string]string{from: "http://backend:8080/", to: "https://$best_http_host/"},
			ProxySettings{RedirectFrom: "http://backend:8080/", RedirectTo: "https://${restysync_forwarded_host}/"}, 0},
		// $http_host is the host the router matched (with the client's
		// port): a Host header that disagrees with an absolute request
		// line does not set the Location.
		{"http host", map[string]string{from: "http://$http_host/", to: "https://$http_host/app/"},
			ProxySettings{RedirectFrom: "http://${restysync_http_host}/", RedirectTo: "https://${restysync_http_host}/app/"}, 0},
		{"off", map[string]string{from: "off", to: "/x"}, ProxySettings{RedirectFrom: "off"}, 0},
		{"default", map[string]string{from: "default"}, ProxySettings{}, 0},
		{"from alone rewrites nothing", map[string]string{from: "http://a/"}, ProxySettings{}, 0},
		{"to off rewrites nothing", map[string]string{from: "http://a/", to: "off"}, ProxySettings{}, 0},
		{"to alone rewrites nothing", map[string]string{to: "http://a/"}, ProxySettings{}, 0},
		{"regex from", map[string]string{from: "~^http://(.*)$", to: "/$1"}, ProxySettings{}, 2},
		{"bad variable", map[string]string{from: "http://a/", to: "$request_body"}, ProxySettings{}, 1},
		{"injection", map[string]string{from: "http://a/", to: "/b; return 200 x"}, ProxySettings{}, 1},
		{"quote", map[string]string{from: `http://a/"`, to: "/b"}, ProxySettings{}, 1},
		{"brace", map[string]string{from: "http://a/", to: "/b}"}, ProxySettings{}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := proxyOf(t, "/", proxyIngress(tc.annotations))
			if got != tc.want || len(problems) != tc.problems {
				t.Errorf("got %+v, %v; want %+v with %d problems", got, problems, tc.want, tc.problems)
			}
			for _, p := range problems {
				if !strings.Contains(p.Reason, "proxy-redirect-") {
					t.Errorf("problem %q does not name the key", p.Reason)
				}
			}
		})
	}
}

// temporal-redirect-code takes 300 to 307; else 302 and a Problem.
func TestTemporalRedirectCode(t *testing.T) {
	for code, want := range map[string]int{"307": 307, "303": 303, "300": 300, "308": 302, "301x": 302, "200": 302} {
		got, problems := proxyOf(t, "/", proxyIngress(map[string]string{
			"nginx.ingress.kubernetes.io/temporal-redirect":      "https://maintenance.example.com",
			"nginx.ingress.kubernetes.io/temporal-redirect-code": code,
		}))
		if got.RedirectCode != want || got.RedirectURL != "https://maintenance.example.com" {
			t.Errorf("code %q: %+v, want %d", code, got, want)
		}
		if (want == 302) != (len(problems) == 1) {
			t.Errorf("code %q: problems %v", code, problems)
		}
	}
	// The code alone redirects nothing.
	if got, problems := proxyOf(t, "/", proxyIngress(map[string]string{"nginx.ingress.kubernetes.io/temporal-redirect-code": "307"})); got != (ProxySettings{}) || len(problems) != 0 {
		t.Errorf("code alone: %+v, %v", got, problems)
	}
}

// The buffer annotations are checked together as nginx checks them: the
// corpus's combinations pass; one nginx would refuse at "nginx -t" is a
// Problem and leaves the number, busy size and temporary file size at
// their defaults, which always go with the buffer size.
func TestProxyBuffersCombination(t *testing.T) {
	const pfx = "nginx.ingress.kubernetes.io/"
	tests := []struct {
		name        string
		annotations map[string]string
		want        ProxyBuffers
		problem     string
	}{
		{"oauth2-proxy's dashboard", map[string]string{pfx + "proxy-buffer-size": "256k", pfx + "proxy-buffers-number": "4", pfx + "proxy-busy-buffers-size": "256k"},
			ProxyBuffers{"256k", 4, "256k", "1024m"}, ""},
		{"kbve's kong", map[string]string{pfx + "proxy-buffer-size": "160k", pfx + "proxy-buffers-number": "64"},
			ProxyBuffers{"160k", 64, "320k", "1024m"}, ""},
		{"size alone", map[string]string{pfx + "proxy-buffer-size": "16k"}, ProxyBuffers{"16k", 4, "32k", "1024m"}, ""},
		{"number alone", map[string]string{pfx + "proxy-buffers-number": "8"}, ProxyBuffers{"4k", 8, "8k", "1024m"}, ""},
		{"two buffers need a busy size", map[string]string{pfx + "proxy-buffers-number": "2"},
			ProxyBuffers{}, "at most the 2 buffers of 4k but one"},
		{"two buffers with a busy size", map[string]string{pfx + "proxy-buffers-number": "2", pfx + "proxy-busy-buffers-size": "4k"},
			ProxyBuffers{"4k", 2, "4k", "1024m"}, ""},
		{"busy too large", map[string]string{pfx + "proxy-buffer-size": "4k", pfx + "proxy-busy-buffers-size": "64k"},
			ProxyBuffers{"4k", 4, "8k", "1024m"}, "at most the 4 buffers of 4k but one"},
		{"busy below a buffer", map[string]string{pfx + "proxy-buffer-size": "16k", pfx + "proxy-busy-buffers-size": "8k"},
			ProxyBuffers{"16k", 4, "32k", "1024m"}, "at least one buffer"},
		{"temporary files below a buffer", map[string]string{pfx + "proxy-buffer-size": "16k", pfx + "proxy-max-temp-file-size": "8k"},
			ProxyBuffers{"16k", 4, "32k", "1024m"}, "0 or at least one buffer"},
		{"no temporary files", map[string]string{pfx + "proxy-buffer-size": "16k", pfx + "proxy-max-temp-file-size": "0"},
			ProxyBuffers{"16k", 4, "32k", "0"}, ""},
		{"megabytes", map[string]string{pfx + "proxy-buffer-size": "1m", pfx + "proxy-buffers-number": "3"},
			ProxyBuffers{"1m", 3, "2m", "1024m"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := proxyOf(t, "/", proxyIngress(tc.annotations))
			bufs, ok := got.Buffers()
			if ok != (tc.want != ProxyBuffers{}) || bufs != tc.want || (ok && bufs.Check() != "") {
				t.Errorf("buffers %+v (%v, %q), want %+v", bufs, ok, bufs.Check(), tc.want)
			}
			if tc.problem == "" {
				if len(problems) != 0 {
					t.Errorf("problems %v", problems)
				}
				return
			}
			if len(problems) != 1 || !strings.Contains(problems[0].Reason, tc.problem) || !strings.Contains(problems[0].Reason, "annotation "+pfx) {
				t.Errorf("problems %v, want one naming the key with %q", problems, tc.problem)
			}
		})
	}
}

// An empty value of any supported annotation is as if it were absent: the
// same model, and no Problem (ingress-nginx ignores it too), under either
// prefix; the other prefix's value then applies.
func TestEmptyAnnotationValuesAreAbsent(t *testing.T) {
	base := proxyIngress(nil)
	want, wantProblems := Build(snapshotOf(base))
	for _, key := range slices.Sorted(slices.Values(supportedAnnotations())) {
		for _, pfx := range annotationPrefixes {
			ing := proxyIngress(map[string]string{pfx + key: ""})
			got, problems := Build(snapshotOf(ing))
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(problems, wantProblems) {
				t.Errorf("%s%s: \"\": model or problems differ from no annotation:\n%s\n%v", pfx, key, dump(got), problems)
			}
		}
	}
	// restysync.io/ empty: nginx.ingress.kubernetes.io/ applies.
	got, problems := proxyOf(t, "/", proxyIngress(map[string]string{
		"restysync.io/proxy-body-size": "", "nginx.ingress.kubernetes.io/proxy-body-size": "8m",
		"nginx.ingress.kubernetes.io/app-root": "", // prow's
	}))
	if got.BodySize != "8m" || got.AppRoot != "" || len(problems) != 0 {
		t.Errorf("got %+v, %v", got, problems)
	}
}

// upstream-vhost's $service_name, $namespace, $ingress_name and
// $service_port are each location's; a result that is no host is a Problem
// for that location only.
func TestUpstreamVhostLocationVariables(t *testing.T) {
	api := service("linkerd-viz", "web", servicePort("http", 8084))
	other := service("linkerd-viz", "metrics", servicePort("", 9090))
	ing := newIngress("linkerd-viz", "web-ingress",
		annotation("nginx.ingress.kubernetes.io/upstream-vhost", "$service_name.$namespace.svc.cluster.local:$service_port"),
		rule("dashboard.example.com", prefix("/", "web", 8084), prefix("/metrics", "metrics", 9090), prefix("/named", "web", "http")))
	s := snapshotOf(ing)
	s.Services = ListOf(api, other)
	m, problems := Build(s)
	got := map[string]string{}
	for _, l := range m.Servers.At(0).Locations {
		got[l.Path] = l.ProxySettings().UpstreamVhost
	}
	want := map[string]string{"/": "web.linkerd-viz.svc.cluster.local:8084", "/metrics": "metrics.linkerd-viz.svc.cluster.local:9090", "/named": ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("vhosts %v, want %v", got, want)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, "upstream-vhost") || !strings.Contains(problems[0].Reason, `"web.linkerd-viz.svc.cluster.local:http"`) {
		t.Errorf("problems %v, want one for the named port", problems)
	}
}

// service-upstream sends to the Service's cluster IP and port; a headless
// Service is a Problem and keeps its endpoints; ResolveBackend, the fast
// path, agrees with Build.
func TestServiceUpstream(t *testing.T) {
	svc := service("emojivoto", "web-svc", servicePort("http", 80))
	svc.ClusterIP = "10.96.0.10"
	headless := service("emojivoto", "headless", servicePort("http", 80))
	headless.ClusterIP = corev1.ClusterIPNone
	slice := endpointSlice("emojivoto", "web-svc-1", "web-svc", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.1.0.1"))
	hslice := endpointSlice("emojivoto", "headless-1", "headless", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.1.0.2"))
	ing := newIngress("emojivoto", "emojivoto-web-ingress", annotation("nginx.ingress.kubernetes.io/service-upstream", "true"),
		defaultBackendTo(backend("web-svc", 80)), rule("emoji.example.com", prefix("/h", "headless", 80)))
	plain := newIngress("emojivoto", "plain", rule("plain.example.com", prefix("/", "web-svc", 80)))
	s := snapshotOf(ing, plain)
	s.Services = ListOf(svc, headless)
	s.EndpointSlices = ListOf(slice, hslice)
	m, problems := Build(s)
	backends := map[string][]Endpoint{}
	for _, b := range m.Backends.Slice() {
		backends[b.Name] = b.Endpoints
	}
	const upstream = "emojivoto/web-svc:80@emojivoto/emojivoto-web-ingress#service-upstream"
	want := map[string][]Endpoint{
		upstream: {{"10.96.0.10", 80}},
		"emojivoto/headless:80@emojivoto/emojivoto-web-ingress#service-upstream": {{"10.1.0.2", 8080}},
		"emojivoto/web-svc:80": {{"10.1.0.1", 8080}},
	}
	if !reflect.DeepEqual(backends, want) {
		t.Errorf("backends %v, want %v", backends, want)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, "annotation nginx.ingress.kubernetes.io/service-upstream") ||
		!strings.Contains(problems[0].Reason, "emojivoto/headless has no cluster IP") {
		t.Errorf("problems %v, want one for the headless Service", problems)
	}
	got, _ := ResolveBackend(upstream, svc, []*discoveryv1.EndpointSlice{slice}, Targets{Local: true})
	if !reflect.DeepEqual(got.Endpoints, want[upstream]) {
		t.Errorf("ResolveBackend: %v, want the cluster IP", got.Endpoints)
	}
	// The ConfigMap's service-upstream is the default; an annotation
	// "false" opts out.
	s.Ingresses = ListOf(plain,
		newIngress("emojivoto", "optout", annotation("nginx.ingress.kubernetes.io/service-upstream", "false"),
			rule("optout.example.com", prefix("/", "web-svc", 80))))
	s.ServiceUpstream = true
	m, _ = Build(s)
	for _, b := range m.Backends.Slice() {
		switch {
		case strings.HasPrefix(b.Name, "emojivoto/web-svc:80@emojivoto/plain#service-upstream"):
			if !reflect.DeepEqual(b.Endpoints, []Endpoint{{"10.96.0.10", 80}}) {
				t.Errorf("the ConfigMap's default: %v", b.Endpoints)
			}
		case b.Name == "emojivoto/web-svc:80":
			if !reflect.DeepEqual(b.Endpoints, []Endpoint{{"10.1.0.1", 8080}}) {
				t.Errorf("opted out: %v", b.Endpoints)
			}
		default:
			t.Errorf("backend %s", b.Name)
		}
	}
	for _, bad := range []string{"", "not-an-ip", "0.0.0.0", "fe80::1%eth0"} {
		svc.ClusterIP = bad
		if _, ok := clusterIP(svc); ok {
			t.Errorf("cluster IP %q accepted", bad)
		}
	}
}

// use-regex on one Ingress makes every path of its host a regex, those of
// the other Ingresses on the host too, as ingress-nginx writes the whole
// server's locations "~* ^PATH"; other hosts keep their matching. A Prefix
// path that is no regex keeps its matching, with a Problem.
func TestUseRegexHostWide(t *testing.T) {
	regex := newIngress("default", "api", annotation("nginx.ingress.kubernetes.io/use-regex", "true"),
		rule("app.test", httpPath(pathTypeOf(networkingv1.PathTypeImplementationSpecific), "/api/v[0-9]+/.*", backend("web", 80))))
	other := newIngress("default", "front", createdAt(1), rule("app.test",
		httpPath(pathTypeOf(networkingv1.PathTypeImplementationSpecific), "/static/.*\\.js", backend("web", 80)),
		prefix("/docs", "web", 80), exact("/healthz", "web", 80), prefix("/a(b", "web", 80)),
		rule("elsewhere.test", httpPath(pathTypeOf(networkingv1.PathTypeImplementationSpecific), "/x.*", backend("web", 80))))
	m, problems := Build(snapshotOf(regex, other))
	types := map[string]PathType{}
	for s := range m.Servers.All() {
		for _, l := range s.Locations {
			types[s.Host+l.Path] = l.PathType
		}
	}
	want := map[string]PathType{
		"app.test/api/v[0-9]+/.*": PathRegex, "app.test/static/.*\\.js": PathRegex, "app.test/docs": PathRegex,
		"app.test/healthz": PathRegex, "app.test/a(b": PathPrefix, "elsewhere.test/x.*": PathPrefix,
	}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("path types %v, want %v", types, want)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, `path "/a(b" on host "app.test": Ingress default/api has use-regex`) {
		t.Errorf("problems %v", problems)
	}
	// A canary's path on the host matches the primary's regex location.
	canary := newIngress("default", "front-canary", createdAt(2), annotation("nginx.ingress.kubernetes.io/canary", "true"),
		annotation("nginx.ingress.kubernetes.io/canary-weight", "10"), rule("app.test", prefix("/docs", "web", 80)))
	if _, problems := Build(snapshotOf(regex, other, canary)); len(problems) != 1 {
		t.Errorf("with a canary: problems %v, want only the /a(b one", problems)
	}
}

// from-to-www-redirect gives the server its other name, which is served
// with the host's certificate when it covers it.
func TestFromToWWWRedirect(t *testing.T) {
	const key = "nginx.ingress.kubernetes.io/from-to-www-redirect"
	apex := newIngress("default", "apex", annotation(key, "true"), rule("example.com", prefix("/", "web", 80)))
	www := newIngress("default", "www", annotation(key, "true"), rule("www.shop.test", prefix("/", "web", 80)))
	taken := newIngress("default", "taken", annotation(key, "true"), rule("taken.test", prefix("/", "web", 80)))
	takenBy := newIngress("default", "taken-www", rule("www.taken.test", prefix("/", "web", 80)))
	wild := newIngress("default", "wild", annotation(key, "true"), rule("*.wild.test", prefix("/", "web", 80)))
	m, problems := Build(snapshotOf(apex, www, taken, takenBy, wild))
	got := map[string]string{}
	for s := range m.Servers.All() {
		got[s.Host] = s.WWWRedirect
	}
	want := map[string]string{"example.com": "www.example.com", "www.shop.test": "shop.test", "taken.test": "", "www.taken.test": "", "*.wild.test": ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("redirects %v, want %v", got, want)
	}
	var reasons []string
	for _, p := range problems {
		reasons = append(reasons, p.Reason)
	}
	if len(problems) != 2 || !strings.Contains(strings.Join(reasons, "\n"), `host "www.taken.test" is served by a rule or an alias already`) ||
		!strings.Contains(strings.Join(reasons, "\n"), `host "*.wild.test" is a wildcard`) {
		t.Errorf("problems %v", problems)
	}
	// The locations stay plain: the redirect is a route of its own.
	if !m.Servers.At(0).Locations[0].Plain() {
		t.Errorf("location %+v is not plain", m.Servers.At(0).Locations[0])
	}
}

// satisfy and preserve-trailing-slash: the first needs a profile, the
// second is Lua's.
func TestSatisfyAndTrailingSlashPlain(t *testing.T) {
	for key, plain := range map[string]bool{"satisfy": false, "preserve-trailing-slash": true} {
		value := map[string]string{"satisfy": "any", "preserve-trailing-slash": "true"}[key]
		m, _ := Build(snapshotOf(proxyIngress(map[string]string{"nginx.ingress.kubernetes.io/" + key: value})))
		if got := m.Servers.At(0).Locations[0].Plain(); got != plain {
			t.Errorf("%s: Plain() = %v, want %v", key, got, plain)
		}
	}
}

// Every key of proxykeys.go is supported under both prefixes.
func TestRemainingProxyKeysSupported(t *testing.T) {
	for _, key := range []string{"proxy-buffers-number", "proxy-busy-buffers-size", "proxy-max-temp-file-size",
		"client-body-buffer-size", "proxy-cookie-domain", "proxy-cookie-path", "proxy-redirect-from", "proxy-redirect-to",
		"limit-rate", "limit-rate-after", "temporal-redirect-code", "from-to-www-redirect", "preserve-trailing-slash",
		"satisfy", "service-upstream"} {
		for _, pfx := range annotationPrefixes {
			if got := AnnotationStatus(pfx + key); got != AnnotationSupported {
				t.Errorf("%s%s: %q, want supported", pfx, key, got)
			}
		}
	}
}

// FuzzProxyKeys: no value of any key of proxykeys.go makes Build panic,
// and what lands in the settings passes the checks the render stage makes
// again.
func FuzzProxyKeys(f *testing.F) {
	for _, seed := range [][2]string{
		{"proxy-cookie-domain", "a b"}, {"proxy-cookie-path", "/a /b"}, {"proxy-redirect-to", "$scheme://x/"},
		{"upstream-vhost", "$service_name.$namespace:8080"}, {"limit-rate", "12"}, {"proxy-busy-buffers-size", "8k"},
		{"proxy-buffers-number", "2"}, {"satisfy", "any"}, {"upstream-vhost", "${host}"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		ing := proxyIngress(map[string]string{
			"nginx.ingress.kubernetes.io/" + key:                  value,
			"nginx.ingress.kubernetes.io/proxy-redirect-from":     value,
			"nginx.ingress.kubernetes.io/proxy-redirect-to":       value,
			"nginx.ingress.kubernetes.io/proxy-busy-buffers-size": value,
		})
		m, _ := Build(snapshotOf(ing))
		p := m.Servers.At(0).Locations[0].ProxySettings()
		if bufs, ok := p.Buffers(); ok && bufs.Check() != "" {
			t.Errorf("buffers %+v: %s", bufs, bufs.Check())
		}
		for _, c := range []struct {
			v    string
			path bool
		}{{p.CookieDomain, false}, {p.CookiePath, true}} {
			if c.v != "" {
				if got, reason := ParseCookieRewrite(c.v, c.path); reason != "" || got != c.v {
					t.Errorf("cookie rewrite %q: %s", c.v, reason)
				}
			}
		}
		for _, s := range []string{p.RedirectFrom, p.RedirectTo, p.UpstreamVhost} {
			if s = vhostVariable.ReplaceAllString(s, ""); strings.ContainsAny(s, "\"';{}$ \\\n\r\t") {
				t.Errorf("%q holds a character that could end a directive", s)
			}
		}
	})
}
