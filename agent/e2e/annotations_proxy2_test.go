package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
)

// clusterIPService is a Service whose spec.clusterIP is clusterIP, with
// port port (named http) and one EndpointSlice for it whose port is
// slicePort on the endpoints given.
func clusterIPService(name, clusterIP string, port, slicePort int, endpoints ...string) string {
	o := serviceOpts{clusterIP: clusterIP, port: port, slicePort: slicePort}
	for _, e := range endpoints {
		o.endpoints = append(o.endpoints, ep(e))
	}
	return serviceWith(name, o)
}

// TestAnnotationsProxyKeys covers the remaining proxy and routing keys
// over real sockets: the Set-Cookie and Location rewrites of a backend's
// answer, temporal-redirect-code, from-to-www-redirect,
// preserve-trailing-slash, upstream-vhost with the location's variables,
// service-upstream going to the Service's cluster IP, use-regex for every
// Ingress of a host, satisfy any, and an empty annotation taken for none.
// (limit-rate, the buffers and client-body-buffer-size are checked by the
// render stage's golden and nginx -t: TestRenderProxyKeysGolden.)
func TestAnnotationsProxyKeys(t *testing.T) {
	const (
		ipEcho    = "127.0.0.110"
		ipCookie  = "127.0.0.111" // sets a cookie and redirects
		ipPod     = "127.0.0.112" // the endpoint of the service-upstream Service
		ipCluster = "127.0.0.113" // its cluster IP
		nginxIO   = "nginx.ingress.kubernetes.io/"
		ours      = "restysync.io/"
	)
	hits := &hitCounter{}
	echoPort := serveOn(t, ipEcho, proxyEcho(ipEcho, hits))
	cookiePort := serveOn(t, ipCookie, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "1", Domain: "backend.internal", Path: "/app/"})
		if r.URL.Path == "/go" {
			w.Header().Set("Location", "http://download.internal/files/x")
			w.WriteHeader(http.StatusFound)
			return
		}
		io.WriteString(w, "cookie backend\n")
	}))
	podPort := serveOn(t, ipPod, proxyEcho(ipPod, hits))
	clusterPort := serveOn(t, ipCluster, proxyEcho(ipCluster, hits))

	ing := func(name, host string, paths []path, annotations map[string]string) string {
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: paths, annotations: annotations})
	}
	one := func(p path) []path { return []path{p} }
	users := htpasswdSHA("alice", "wonderland")
	files := map[string]string{
		"classes.yaml": ingressClasses,
		"services.yaml": service("echo", echoPort, ep(ipEcho)) + "---\n" + service("cookies", cookiePort, ep(ipCookie)) +
			"---\n" + clusterIPService("clustered", ipCluster, clusterPort, podPort, ipPod),
		"secret.yaml": secretYAML("users", users),
		"cookies.yaml": ing("cookies", "cookies.test", one(prefix("/", "cookies")), map[string]string{
			nginxIO + "proxy-cookie-domain": "backend.internal cookies.test",
			nginxIO + "proxy-cookie-path":   "/app/ /",
			nginxIO + "proxy-redirect-from": "http://download.internal/",
			nginxIO + "proxy-redirect-to":   "$scheme://cookies.test/",
		}),
		"plaincookies.yaml": ing("plaincookies", "plaincookies.test", one(prefix("/", "cookies")), nil),
		"moved.yaml": ing("moved", "moved.test", one(prefix("/", "echo")), map[string]string{
			nginxIO + "temporal-redirect":      "https://maintenance.example.com/",
			nginxIO + "temporal-redirect-code": "307",
		}),
		"apex.yaml": ing("apex", "apex.test", one(prefix("/", "echo")), map[string]string{ours + "from-to-www-redirect": "true"}),
		"www.yaml":  ing("www", "www.shop.test", one(prefix("/", "echo")), map[string]string{nginxIO + "from-to-www-redirect": "true"}),
		"slash.yaml": ing("slash", "slash.test", one(prefix("/", "echo")), map[string]string{
			nginxIO + "force-ssl-redirect": "true", nginxIO + "preserve-trailing-slash": "true"}),
		"noslash.yaml": ing("noslash", "noslash.test", one(prefix("/", "echo")), map[string]string{nginxIO + "force-ssl-redirect": "true"}),
		// Linkerd's dashboard, as its documentation writes it.
		"linkerd.yaml": ing("web-ingress", "dashboard.test", one(prefix("/", "echo")), map[string]string{
			nginxIO + "upstream-vhost": "$service_name.$namespace.svc.cluster.local:8084"}),
		"besthost.yaml": ing("besthost", "besthost.test", one(prefix("/", "echo")), map[string]string{nginxIO + "upstream-vhost": "$best_http_host"}),
		// emojivoto, as Linkerd's documentation writes it; the cluster IP is
		// a loopback address that serves too.
		"emoji.yaml": ingress("emojivoto-web-ingress", ingressOpts{class: "restysync", host: "emoji.test",
			paths:       []path{{"/", "Prefix", "clustered", strconv.Itoa(clusterPort)}},
			annotations: map[string]string{nginxIO + "service-upstream": "true"}}),
		"pods.yaml": ingress("pods", ingressOpts{class: "restysync", host: "pods.test",
			paths: []path{{"/", "Prefix", "clustered", strconv.Itoa(clusterPort)}}}),
		// use-regex on one Ingress of regex.test makes the paths of the
		// other Ingress of the host regexes too; other.test keeps its.
		"regex-api.yaml": ing("regex-api", "regex.test", one(implementationSpecific("/api/v[0-9]+/", "echo")), map[string]string{nginxIO + "use-regex": "true"}),
		"regex-front.yaml": ingress("regex-front", ingressOpts{class: "restysync", host: "regex.test", created: "2025-01-01T00:01:00Z",
			paths: []path{implementationSpecific("/static/.*\\.js", "echo"), prefix("/docs", "echo")}}),
		"literal.yaml": ing("literal", "other.test", one(implementationSpecific("/static/.*\\.js", "echo")), nil),
		"either.yaml": ing("either", "either.test", one(prefix("/", "echo")), map[string]string{
			nginxIO + "allowlist-source-range": "127.0.0.1/32", nginxIO + "auth-type": "basic", nginxIO + "auth-secret": "users",
			nginxIO + "satisfy": "any"}),
		"both.yaml": ing("both", "both.test", one(prefix("/", "echo")), map[string]string{
			nginxIO + "allowlist-source-range": "127.0.0.1/32", nginxIO + "auth-type": "basic", nginxIO + "auth-secret": "users"}),
		"remote.yaml": ing("remote", "remote.test", one(prefix("/", "echo")), map[string]string{
			nginxIO + "allowlist-source-range": "10.0.0.0/8", nginxIO + "auth-type": "basic", nginxIO + "auth-secret": "users",
			nginxIO + "satisfy": "any"}),
		// prow's: an empty app-root is no app-root.
		"empty.yaml": ing("empty", "empty.test", one(prefix("/", "echo")), map[string]string{nginxIO + "app-root": ""}),
	}
	s := newStack(t, files)
	s.eventually("the Ingresses are served", func() error {
		for _, host := range []string{"empty.test", "regex.test", "either.test", "emoji.test"} {
			if status, _, _, err := s.send(http.MethodGet, host, "/docs", nil); err != nil || status == http.StatusNotFound && host != "regex.test" {
				return fmt.Errorf("%s: %d, %v", host, status, err)
			}
		}
		_, err := s.seen("emoji.test", "/")
		return err
	})
	get := func(host, pathQuery string, user ...string) (*http.Response, string) {
		req := accessRequest(t, http.MethodGet, "http://"+host+pathQuery, nil)
		if len(user) == 2 {
			req.SetBasicAuth(user[0], user[1])
		}
		return s.do(t, req)
	}

	t.Run("proxy-cookie-domain and proxy-cookie-path", func(t *testing.T) {
		for host, want := range map[string]string{
			"cookies.test":      "sid=1; Path=/; Domain=cookies.test",
			"plaincookies.test": "sid=1; Path=/app/; Domain=backend.internal",
		} {
			resp, _ := get(host, "/")
			if got := resp.Header.Get("Set-Cookie"); got != want {
				t.Errorf("%s: Set-Cookie %q, want %q", host, got, want)
			}
		}
	})

	t.Run("proxy-redirect-from and proxy-redirect-to", func(t *testing.T) {
		for host, want := range map[string]string{
			"cookies.test":      "http://cookies.test/files/x",
			"plaincookies.test": "http://download.internal/files/x",
		} {
			resp, _ := get(host, "/go")
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
				t.Errorf("%s/go: %d Location %q, want 302 %q", host, resp.StatusCode, resp.Header.Get("Location"), want)
			}
		}
	})

	t.Run("temporal-redirect-code", func(t *testing.T) {
		status, location, _, err := s.send(http.MethodGet, "moved.test", "/any", nil)
		if err != nil || status != http.StatusTemporaryRedirect || location != "https://maintenance.example.com/" {
			t.Errorf("moved.test: %d %q %v, want 307 to https://maintenance.example.com/", status, location, err)
		}
	})

	t.Run("from-to-www-redirect", func(t *testing.T) {
		for host, want := range map[string]string{
			"www.apex.test": "http://apex.test/a/b?c=d", // the other name goes to the host
			"shop.test":     "http://www.shop.test/a/b?c=d",
		} {
			status, location, _, err := s.send(http.MethodGet, host, "/a/b?c=d", nil)
			if err != nil || status != http.StatusPermanentRedirect || location != want {
				t.Errorf("%s: %d %q %v, want 308 to %s", host, status, location, err, want)
			}
		}
		if status, location, _, _ := s.send(http.MethodGet, "www.apex.test", "/dir/", nil); status != http.StatusPermanentRedirect || location != "http://apex.test/dir" {
			t.Errorf("www.apex.test/dir/: %d %q, want 308 to http://apex.test/dir (the trailing slash dropped, as ingress-nginx)", status, location)
		}
		for _, host := range []string{"apex.test", "www.shop.test"} {
			if e, err := s.seen(host, "/x"); err != nil || e.Host != host {
				t.Errorf("%s itself: %+v, %v; want served", host, e, err)
			}
		}
	})

	t.Run("preserve-trailing-slash", func(t *testing.T) {
		httpsPort := strconv.Itoa(stackHTTPSPort(t, s))
		for host, want := range map[string]string{
			"slash.test":   "https://slash.test:" + httpsPort + "/dir/",
			"noslash.test": "https://noslash.test:" + httpsPort + "/dir",
		} {
			status, location, _, err := s.send(http.MethodGet, host, "/dir/", nil)
			if err != nil || status != http.StatusPermanentRedirect || location != want {
				t.Errorf("%s/dir/: %d %q %v, want 308 to %s", host, status, location, err, want)
			}
		}
	})

	t.Run("upstream-vhost variables", func(t *testing.T) {
		if e, err := s.seen("dashboard.test", "/"); err != nil || e.Host != "echo.default.svc.cluster.local:8084" {
			t.Errorf("dashboard.test: backend saw Host %q, %v; want echo.default.svc.cluster.local:8084", e.Host, err)
		}
		if e, err := s.seen("besthost.test", "/"); err != nil || e.Host != "besthost.test" {
			t.Errorf("besthost.test: backend saw Host %q, %v; want the client's", e.Host, err)
		}
	})

	t.Run("service-upstream", func(t *testing.T) {
		for host, want := range map[string]string{"emoji.test": ipCluster, "pods.test": ipPod} {
			for range 3 {
				if e, err := s.seen(host, "/"); err != nil || e.Backend != want {
					t.Errorf("%s: answered by %q, %v; want %s", host, e.Backend, err, want)
				}
			}
		}
	})

	t.Run("use-regex for the whole host", func(t *testing.T) {
		for _, tc := range []struct {
			host, path string
			want       int
		}{
			{"regex.test", "/api/v2/users", http.StatusOK},
			{"regex.test", "/static/app/main.js", http.StatusOK}, // the other Ingress's path, a regex
			{"regex.test", "/DOCS/intro", http.StatusOK},         // a Prefix path of it, "~* ^/docs"
			{"regex.test", "/nothing", http.StatusNotFound},
			{"other.test", "/static/app/main.js", http.StatusNotFound}, // no use-regex there: a prefix
		} {
			if status, _, _, err := s.send(http.MethodGet, tc.host, tc.path, nil); err != nil || status != tc.want {
				t.Errorf("%s%s: %d, %v; want %d", tc.host, tc.path, status, err, tc.want)
			}
		}
	})

	t.Run("satisfy", func(t *testing.T) {
		for _, tc := range []struct {
			host string
			user []string
			want int
		}{
			{"either.test", nil, http.StatusOK},                             // the address lets it in
			{"both.test", nil, http.StatusUnauthorized},                     // satisfy all: credentials too
			{"both.test", []string{"alice", "wonderland"}, http.StatusOK},   //
			{"remote.test", nil, http.StatusUnauthorized},                   // not the address: credentials
			{"remote.test", []string{"alice", "wonderland"}, http.StatusOK}, // are enough
			{"remote.test", []string{"alice", "looking-glass"}, http.StatusUnauthorized},
		} {
			resp, body := get(tc.host, "/", tc.user...)
			if resp.StatusCode != tc.want {
				t.Errorf("%s with %v: %d %q, want %d", tc.host, tc.user, resp.StatusCode, body, tc.want)
				continue
			}
			var e seenRequest
			if tc.want == http.StatusOK && (json.Unmarshal([]byte(body), &e) != nil || e.Backend != ipEcho) {
				t.Errorf("%s: %q, want the echo backend's answer", tc.host, body)
			}
		}
	})

	t.Run("an empty annotation is none", func(t *testing.T) {
		if e, err := s.seen("empty.test", "/"); err != nil || e.URI != "/" {
			t.Errorf("empty.test/: %+v, %v; want served, not redirected", e, err)
		}
	})
}
