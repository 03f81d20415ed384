package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// oauth2Proxy behaves as oauth2-proxy does in front of ingress-nginx:
// /oauth2/auth answers 202 with the user's headers (and a refreshed
// cookie) for a valid session cookie, 401 without one; a "forbidden"
// session gets 403 and a "broken" one 500. /oauth2/auth-cached is the same
// without the cookie (nginx caches no answer that sets one). It records
// what nginx sent.
type oauth2Proxy struct {
	mu       sync.Mutex
	hits     map[string]int
	original []string // X-Original-URL of each auth request
	methods  []string
}

func (p *oauth2Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.hits[r.URL.Path]++
	p.original = append(p.original, r.Header.Get("X-Original-URL"))
	p.methods = append(p.methods, r.Method)
	p.mu.Unlock()
	switch r.URL.Path {
	case "/oauth2/auth", "/oauth2/auth-cached":
		cookie, _ := r.Cookie("_oauth2_proxy")
		switch {
		case cookie == nil:
			w.WriteHeader(http.StatusUnauthorized)
		case cookie.Value == "valid":
			w.Header().Set("X-Auth-Request-User", "alice")
			w.Header().Set("X-Auth-Request-Email", "alice@example.com")
			if r.URL.Path == "/oauth2/auth" {
				w.Header().Set("Set-Cookie", "_oauth2_proxy=valid; Path=/; HttpOnly")
			}
			w.WriteHeader(http.StatusAccepted)
		case cookie.Value == "forbidden":
			w.WriteHeader(http.StatusForbidden)
		case cookie.Value == "broken":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	default:
		http.NotFound(w, r)
	}
}

// startAuthWorld serves an oauth2Proxy and a backend that answers with the
// user headers it got, both on ip; it returns the proxy, its auth URL and
// the backend's port.
func startAuthWorld(t *testing.T, ip string) (*oauth2Proxy, string, int) {
	t.Helper()
	proxy := &oauth2Proxy{hits: map[string]int{}}
	authPort := nginxproc.FreePort(t)
	serve(t, ip, authPort, proxy.ServeHTTP)
	backendPort := nginxproc.FreePort(t)
	serve(t, ip, backendPort, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "user=%s email=%s", r.Header.Get("X-Auth-Request-User"), r.Header.Get("X-Auth-Request-Email"))
	})
	return proxy, fmt.Sprintf("http://%s:%d/oauth2/auth", ip, authPort), backendPort
}

// appIngress is an Ingress of class restysync sending host's "/" to
// Service app, with annotations.
func appIngress(name, host string, annotations map[string]string) string {
	return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "app")}, annotations: annotations})
}

func (p *oauth2Proxy) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[path]
}

// External authentication against a real auth service: a valid session is
// let in with the user's headers at the backend and the refreshed cookie
// in the response, no session is sent to the sign-in URL with the original
// URL in rd, a forbidden one gets 403, a broken auth service 500; without
// auth-signin a 401 is answered; cached answers spare the auth service; a
// hostile auth-url fails closed without touching the neighbours.
func TestExternalAuth(t *testing.T) {
	const ip = "127.0.0.87"
	proxy, authURL, backendPort := startAuthWorld(t, ip)
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", backendPort, ep(ip)),
		"app.yaml": appIngress("app", "app.test", map[string]string{
			"nginx.ingress.kubernetes.io/auth-url":              authURL,
			"nginx.ingress.kubernetes.io/auth-signin":           "https://$host/oauth2/start?rd=$escaped_request_uri",
			"nginx.ingress.kubernetes.io/auth-response-headers": "X-Auth-Request-User, X-Auth-Request-Email",
		}),
		"plain401.yaml": appIngress("plain401", "plain401.test", map[string]string{
			"restysync.io/auth-url":    authURL,
			"restysync.io/auth-method": "HEAD",
		}),
		"cached.yaml": appIngress("cached", "cached.test", map[string]string{
			"nginx.ingress.kubernetes.io/auth-url":            authURL + "-cached",
			"nginx.ingress.kubernetes.io/auth-cache-key":      "$cookie__oauth2_proxy",
			"nginx.ingress.kubernetes.io/auth-cache-duration": "200 202 401 1m",
		}),
		"bad.yaml": appIngress("bad", "bad.test", map[string]string{
			"nginx.ingress.kubernetes.io/auth-url": `http://` + ip + `/$http_authorization";} location /x { return 200`,
		}),
		"open.yaml": appIngress("open", "open.test", nil),
	})
	s.eventually("open.test serves", func() error { return s.expect("open.test", "/", "user= email=") })
	session := func(value string) http.Header {
		if value == "" {
			return nil
		}
		return http.Header{"Cookie": {"_oauth2_proxy=" + value}}
	}

	// Allowed, with the auth service's headers and cookie.
	resp, body := s.do(t, accessRequest(t, http.MethodGet, "http://app.test/some/path?q=1", session("valid")))
	if resp.StatusCode != http.StatusOK || body != "user=alice email=alice@example.com" {
		t.Errorf("valid session: %d %q, want 200 with the user's headers at the backend", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Set-Cookie"); !strings.HasPrefix(got, "_oauth2_proxy=valid") {
		t.Errorf("valid session: Set-Cookie %q, want the auth service's", got)
	}
	proxy.mu.Lock()
	if n := len(proxy.original); n == 0 || proxy.original[n-1] != "http://app.test/some/path?q=1" {
		t.Errorf("X-Original-URL sent to the auth service: %q", proxy.original)
	}
	proxy.mu.Unlock()
	// A client cannot forge the headers the auth service sets.
	forged := session("valid")
	forged.Set("X-Auth-Request-User", "mallory")
	if _, body := s.do(t, accessRequest(t, http.MethodGet, "http://app.test/", forged)); body != "user=alice email=alice@example.com" {
		t.Errorf("forged X-Auth-Request-User: backend saw %q", body)
	}

	// No session: to the sign-in URL, with where to come back.
	resp, _ = s.do(t, accessRequest(t, http.MethodGet, "http://app.test/some/path?q=1", nil))
	if want := "https://app.test/oauth2/start?rd=%2Fsome%2Fpath%3Fq%3D1"; resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		t.Errorf("no session: %d Location %q, want 302 to %s", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	for value, want := range map[string]int{"forbidden": http.StatusForbidden, "broken": http.StatusInternalServerError} {
		if resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://app.test/", session(value))); resp.StatusCode != want {
			t.Errorf("%s session: %d, want %d", value, resp.StatusCode, want)
		}
	}

	// Without auth-signin the 401 is the answer; auth-method is used.
	if resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://plain401.test/", nil)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("plain401.test without a session: %d, want 401", resp.StatusCode)
	}
	proxy.mu.Lock()
	if m := proxy.methods[len(proxy.methods)-1]; m != http.MethodHead {
		t.Errorf("auth-method HEAD: the auth service got %s", m)
	}
	proxy.mu.Unlock()

	// Cached: the second request with the same session does not ask.
	for i := range 3 {
		resp, body := s.do(t, accessRequest(t, http.MethodGet, "http://cached.test/", session("valid")))
		if resp.StatusCode != http.StatusOK || body != "user= email=" {
			t.Errorf("cached.test request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if n := proxy.count("/oauth2/auth-cached"); n != 1 {
		t.Errorf("cached.test: the auth service was asked %d times for 3 requests of one session, want 1", n)
	}
	if resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://cached.test/", nil)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("cached.test without a session: %d, want 401 (another cache key)", resp.StatusCode)
	}

	// A hostile auth-url: its Ingress fails closed, the rest is served.
	if resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://bad.test/x", nil)); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("bad.test: %d, want 503", resp.StatusCode)
	}
	if _, body := s.do(t, accessRequest(t, http.MethodGet, "http://open.test/", nil)); body != "user= email=" {
		t.Errorf("open.test beside the hostile one: %q", body)
	}
}

// The ConfigMap's global-auth-url protects every Ingress that names no
// auth-url; enable-global-auth "false" opts one out (the auth service's
// own, in ingress-nginx's docs); an Ingress's own auth-url wins; a global
// auth-url that cannot be used fails every such Ingress closed.
func TestGlobalExternalAuth(t *testing.T) {
	const ip = "127.0.0.88"
	_, authURL, backendPort := startAuthWorld(t, ip)
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", backendPort, ep(ip)),
		"cm.yaml": configMap(map[string]string{
			"global-auth-url":              authURL,
			"global-auth-response-headers": "X-Auth-Request-User",
		}),
		"guarded.yaml": appIngress("guarded", "guarded.test", nil),
		"optout.yaml":  appIngress("optout", "optout.test", map[string]string{"nginx.ingress.kubernetes.io/enable-global-auth": "false"}),
		"own.yaml": appIngress("own", "own.test", map[string]string{
			"nginx.ingress.kubernetes.io/auth-url":    authURL,
			"nginx.ingress.kubernetes.io/auth-signin": "https://login.test/start",
		}),
	})
	s.eventually("optout.test serves", func() error { return s.expect("optout.test", "/", "user= email=") })
	valid := http.Header{"Cookie": {"_oauth2_proxy=valid"}}
	if resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://guarded.test/", nil)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("guarded.test without a session: %d, want 401", resp.StatusCode)
	}
	if resp, body := s.do(t, accessRequest(t, http.MethodGet, "http://guarded.test/", valid)); resp.StatusCode != http.StatusOK || body != "user=alice email=" {
		t.Errorf("guarded.test with a session: %d %q, want 200 user=alice email=", resp.StatusCode, body)
	}
	if resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://own.test/", nil)); resp.StatusCode != http.StatusFound {
		t.Errorf("own.test without a session: %d, want its own sign-in redirect", resp.StatusCode)
	}

	s.writeFile("cm.yaml", configMap(map[string]string{"global-auth-url": "http://auth.test/$http_cookie"}))
	s.eventually("a bad global-auth-url fails guarded.test closed", func() error { return s.expect("guarded.test", "/", "503") })
	if _, body := s.do(t, accessRequest(t, http.MethodGet, "http://optout.test/", nil)); body != "user= email=" {
		t.Errorf("optout.test with a bad global auth: %q", body)
	}
}

// auth-proxy-set-headers: the headers of its ConfigMap reach the auth
// service, which lets the request in only with them; a changed ConfigMap
// is followed; one that is gone fails the Ingress closed (503), as a bad
// one does, and the neighbours keep serving.
func TestAuthProxySetHeaders(t *testing.T) {
	const ip = "127.0.0.98"
	authPort := nginxproc.FreePort(t)
	serve(t, ip, authPort, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Tenant") == "a-team" && r.Header.Get("X-Seen-Host") == "tenant.test" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	})
	backendPort := nginxproc.FreePort(t)
	serve(t, ip, backendPort, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "in") })
	authURL := fmt.Sprintf("http://%s:%d/check", ip, authPort)
	withHeaders := func(name, host, configMap string) string {
		return appIngress(name, host, map[string]string{
			"nginx.ingress.kubernetes.io/auth-url":               authURL,
			"nginx.ingress.kubernetes.io/auth-proxy-set-headers": configMap,
		})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", backendPort, ep(ip)),
		"headers.yaml":  namedConfigMap("auth-headers", map[string]string{"X-Tenant": "a-team", "X-Seen-Host": "$host"}),
		"tenant.yaml":   withHeaders("tenant", "tenant.test", "auth-headers"),
		"missing.yaml":  withHeaders("missing", "missing.test", "default/no-such-headers"),
		"open.yaml":     appIngress("open", "open.test", nil),
	})
	s.eventually("tenant.test lets the request in", func() error { return s.expect("tenant.test", "/", "in") })
	if err := s.expect("missing.test", "/", "503"); err != nil {
		t.Errorf("a ConfigMap that is not there fails closed: %v", err)
	}
	s.writeFile("headers.yaml", namedConfigMap("auth-headers", map[string]string{"X-Tenant": "b-team", "X-Seen-Host": "$host"}))
	s.eventually("the changed header reaches the auth service", func() error { return s.expect("tenant.test", "/", "401") })
	s.writeFile("headers.yaml", namedConfigMap("auth-headers", map[string]string{"X-Tenant": `a-team"; deny all; #`}))
	s.eventually("a hostile value fails closed", func() error { return s.expect("tenant.test", "/", "503") })
	if err := s.expect("open.test", "/", "in"); err != nil {
		t.Errorf("the neighbour: %v", err)
	}
}

// groupAuth is an auth service that decides by who the session cookie
// names, by the group the Ingress requires (X-Required-Group, which the
// Ingress sets through auth-proxy-set-headers) and by the host it is told
// of (X-Original-URL): unknown or no session 401; a user outside the
// group, or on a host not theirs, 403; else 200. It counts the calls and
// records what nginx told it.
type groupAuth struct {
	mu    sync.Mutex
	calls int
	heard []authHeard
	users map[string]authUser // by session cookie
	// byForwardedHost judges the host of X-Forwarded-Host, as services
	// behind a proxy that sets it do.
	byForwardedHost bool
}

type authUser struct {
	groups []string
	hosts  []string
}

// authHeard is what one auth request said about the client's request.
type authHeard struct {
	originalURL, originalMethod, forwardedHost, seenHost string
}

func (g *groupAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	heard := authHeard{r.Header.Get("X-Original-URL"), r.Header.Get("X-Original-Method"),
		r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Seen-Host")}
	g.mu.Lock()
	g.calls++
	g.heard = append(g.heard, heard)
	g.mu.Unlock()
	cookie, _ := r.Cookie("session")
	if cookie == nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	user, ok := g.users[cookie.Value]
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	host := ""
	if u, err := url.Parse(heard.originalURL); err == nil {
		host = u.Hostname()
	}
	if g.byForwardedHost {
		host = heard.forwardedHost
	}
	group := r.Header.Get("X-Required-Group")
	if !slices.Contains(user.hosts, host) || group != "" && !slices.Contains(user.groups, group) {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (g *groupAuth) callCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

func (g *groupAuth) last() authHeard {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.heard) == 0 {
		return authHeard{}
	}
	return g.heard[len(g.heard)-1]
}

// startGroupAuth serves a groupAuth and a backend answering "in" on ip; it
// returns the service, its auth URL and the backend's port.
func startGroupAuth(t *testing.T, ip string, users map[string]authUser) (*groupAuth, string, int) {
	t.Helper()
	g := &groupAuth{users: users}
	authPort := nginxproc.FreePort(t)
	serve(t, ip, authPort, g.ServeHTTP)
	backendPort := nginxproc.FreePort(t)
	serve(t, ip, backendPort, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "in") })
	return g, fmt.Sprintf("http://%s:%d/check", ip, authPort), backendPort
}

// expectAuth sends req and checks its status and that the auth service was
// asked (asked: one more call) or not.
func expectAuth(t *testing.T, s *stack, g *groupAuth, what string, req *http.Request, status int, asked bool) {
	t.Helper()
	before := g.callCount()
	resp, _ := s.do(t, req)
	after := g.callCount()
	if resp.StatusCode != status {
		t.Errorf("%s: %d, want %d", what, resp.StatusCode, status)
	}
	if asked && after != before+1 {
		t.Errorf("%s: the auth service was asked %d times, want once", what, after-before)
	}
	if !asked && after != before {
		t.Errorf("%s: the auth service was asked %d times, want an answer from the cache", what, after-before)
	}
}

// Issue 25, point 3: the auth cache is keyed per guard. One auth service
// decides by the group each Ingress requires (auth-proxy-set-headers): a
// member of "users" is refused on admin.test, let in on users.test, and
// still refused on admin.test (the cached 200 of users.test is not
// admin.test's); the same on one host where two paths require different
// groups. Tenant B, copying A's auth-url with a cache key of its choosing
// (auth-cache-key: $http_x_key), caches a 200 under it, and A's /secret
// with a session cookie of that value is still asked of the service (401).
// Equal guards still share: a second request of one session on one host is
// served from the cache.
func TestAuthCachePerGuard(t *testing.T) {
	const ip = "127.0.0.225"
	everywhere := []string{"admin.test", "users.test", "shared.test", "a.test", "b.test"}
	g, authURL, backendPort := startGroupAuth(t, ip, map[string]authUser{
		"alice": {groups: []string{"admins", "users"}, hosts: everywhere},
		"bob":   {groups: []string{"users"}, hosts: everywhere},
		"mal":   {hosts: []string{"b.test"}}, // B's own user
	})
	guarded := func(name, host, pathPrefix, headers, cacheKey string) string {
		annotations := map[string]string{
			"nginx.ingress.kubernetes.io/auth-url":       authURL,
			"nginx.ingress.kubernetes.io/auth-cache-key": cacheKey,
		}
		if headers != "" {
			annotations["nginx.ingress.kubernetes.io/auth-proxy-set-headers"] = headers
		}
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix(pathPrefix, "app")}, annotations: annotations})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":      ingressClasses,
		"services.yaml":     service("app", backendPort, ep(ip)),
		"admins.yaml":       namedConfigMap("need-admins", map[string]string{"X-Required-Group": "admins"}),
		"users.yaml":        namedConfigMap("need-users", map[string]string{"X-Required-Group": "users"}),
		"admin.yaml":        guarded("admin", "admin.test", "/", "need-admins", "$cookie_session"),
		"user.yaml":         guarded("user", "users.test", "/", "need-users", "$cookie_session"),
		"shared-admin.yaml": guarded("shared-admin", "shared.test", "/admin", "need-admins", "$cookie_session"),
		"shared-user.yaml":  guarded("shared-user", "shared.test", "/users", "need-users", "$cookie_session"),
		"tenant-a.yaml":     guarded("tenant-a", "a.test", "/secret", "", "$cookie_session"),
		"tenant-b.yaml":     guarded("tenant-b", "b.test", "/", "", "$http_x_key"),
	})
	session := func(value string) http.Header { return http.Header{"Cookie": {"session=" + value}} }
	get := func(url string, h http.Header) *http.Request { return accessRequest(t, http.MethodGet, url, h) }
	s.eventually("admin.test asks the auth service", func() error {
		resp, _ := s.do(t, get("http://admin.test/", session("alice")))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("admin.test for alice: %d", resp.StatusCode)
		}
		return nil
	})

	// (a) One service, a header each Ingress sets.
	expectAuth(t, s, g, "bob on admin.test", get("http://admin.test/", session("bob")), http.StatusForbidden, true)
	expectAuth(t, s, g, "bob on users.test", get("http://users.test/", session("bob")), http.StatusOK, true)
	expectAuth(t, s, g, "bob on admin.test after users.test", get("http://admin.test/", session("bob")), http.StatusForbidden, true)
	expectAuth(t, s, g, "bob on users.test again", get("http://users.test/", session("bob")), http.StatusOK, false)
	// The same on one host: two paths, two groups.
	expectAuth(t, s, g, "bob on shared.test/admin", get("http://shared.test/admin", session("bob")), http.StatusForbidden, true)
	expectAuth(t, s, g, "bob on shared.test/users", get("http://shared.test/users", session("bob")), http.StatusOK, true)
	expectAuth(t, s, g, "bob on shared.test/admin after /users", get("http://shared.test/admin", session("bob")), http.StatusForbidden, true)

	// (b) B caches a 200 under a key it chose.
	attack := session("mal")
	attack.Set("X-Key", "zzz")
	expectAuth(t, s, g, "B's user on b.test with X-Key zzz", get("http://b.test/", attack), http.StatusOK, true)
	expectAuth(t, s, g, "B's key again", get("http://b.test/", attack), http.StatusOK, false)
	expectAuth(t, s, g, "a.test/secret with the cookie session=zzz", get("http://a.test/secret", session("zzz")), http.StatusUnauthorized, true)
	expectAuth(t, s, g, "a.test/secret for alice", get("http://a.test/secret", session("alice")), http.StatusOK, true)
	expectAuth(t, s, g, "a.test/secret for alice again", get("http://a.test/secret", session("alice")), http.StatusOK, false)
}

// rawExchange sends request, as written, over a new connection to nginx
// and returns the answer's status.
func rawExchange(t *testing.T, port int, request string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", request, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Issue 25, point 10: the auth service hears the host the router matched.
// "GET http://a.test/secret" with "Host: b.test" is routed to a.test; A's
// auth service must judge a.test (403 for a user of b.test only), in
// X-Original-URL, X-Forwarded-Host and $http_host of auth-proxy-set-headers
// alike, and the cache must not hand it b.test's answer. A Host header
// that agrees keeps its port; the host is in lower case, as the router
// matched it (an auth service comparing names as written cannot be
// walked around with capitals).
func TestAuthHearsRoutedHost(t *testing.T) {
	const ip = "127.0.0.226"
	g, authURL, backendPort := startGroupAuth(t, ip, map[string]authUser{
		"alice": {hosts: []string{"a.test", "cached-a.test"}},
		"mal":   {hosts: []string{"b.test", "cached-b.test"}},
	})
	guarded := func(name, host, cacheKey string) string {
		annotations := map[string]string{
			"nginx.ingress.kubernetes.io/auth-url":               authURL,
			"nginx.ingress.kubernetes.io/auth-proxy-set-headers": "seen-host",
		}
		if cacheKey != "" {
			annotations["nginx.ingress.kubernetes.io/auth-cache-key"] = cacheKey
		}
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "app")}, annotations: annotations})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", backendPort, ep(ip)),
		"seen.yaml":     namedConfigMap("seen-host", map[string]string{"X-Seen-Host": "$http_host"}),
		"a.yaml":        guarded("tenant-a", "a.test", ""),
		"b.yaml":        guarded("tenant-b", "b.test", ""),
		"ca.yaml":       guarded("cached-a", "cached-a.test", "$cookie_session"),
		"cb.yaml":       guarded("cached-b", "cached-b.test", "$cookie_session"),
	})
	s.eventually("a.test asks the auth service", func() error {
		resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://a.test/", http.Header{"Cookie": {"session=alice"}}))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("a.test for alice: %d", resp.StatusCode)
		}
		return nil
	})
	raw := func(target, host, session string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nCookie: session=" + session + "\r\nConnection: close\r\n\r\n"
	}
	for _, tc := range []struct {
		name, request string
		status        int
		asked         bool
		heard         authHeard // when asked
	}{
		{"mal on b.test", raw("/x", "b.test", "mal"), http.StatusOK, true,
			authHeard{"http://b.test/x", "GET", "b.test", "b.test"}},
		{"mal on a.test through the request line", raw("http://a.test/secret", "b.test", "mal"), http.StatusForbidden, true,
			authHeard{"http://a.test/secret", "GET", "a.test", "a.test"}},
		{"alice, Host with a port", raw("/secret?q=1", "a.test:8080", "alice"), http.StatusOK, true,
			authHeard{"http://a.test:8080/secret?q=1", "GET", "a.test", "a.test:8080"}},
		{"alice, Host in capitals", raw("/", "A.Test", "alice"), http.StatusOK, true,
			authHeard{"http://a.test/", "GET", "a.test", "a.test"}},
		{"a request line's port, a Host that disagrees", raw("http://a.test:81/", "b.test:81", "mal"), http.StatusForbidden, true,
			authHeard{"http://a.test/", "GET", "a.test", "a.test"}},
		{"mal on cached-b.test", raw("/", "cached-b.test", "mal"), http.StatusOK, true,
			authHeard{"http://cached-b.test/", "GET", "cached-b.test", "cached-b.test"}},
		{"mal on cached-b.test again", raw("/", "cached-b.test", "mal"), http.StatusOK, false, authHeard{}},
		{"mal on cached-a.test through the request line", raw("http://cached-a.test/", "cached-b.test", "mal"), http.StatusForbidden, true,
			authHeard{"http://cached-a.test/", "GET", "cached-a.test", "cached-a.test"}},
	} {
		before := g.callCount()
		if got := rawExchange(t, s.port, tc.request); got != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.status)
		}
		want := 0
		if tc.asked {
			want = 1
		}
		if n := g.callCount() - before; n != want {
			t.Errorf("%s: the auth service was asked %d times, want %d", tc.name, n, want)
		}
		if got := g.last(); tc.asked && got != tc.heard {
			t.Errorf("%s: the auth service heard %+v, want %+v", tc.name, got, tc.heard)
		}
	}
}

// A trusted proxy's X-Forwarded-Host reaches the auth service, so it is in
// the cache key: an answer for one X-Forwarded-Host is not served to a
// request with another (use-forwarded-headers: "true" with no
// proxy-real-ip-cidr trusts every client, as in ingress-nginx).
func TestAuthCacheTrustedForwardedHost(t *testing.T) {
	const ip = "127.0.0.227"
	g, authURL, backendPort := startGroupAuth(t, ip, map[string]authUser{
		"mal": {hosts: []string{"b.test"}},
	})
	g.byForwardedHost = true
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", backendPort, ep(ip)),
		"cm.yaml":       configMap(map[string]string{"use-forwarded-headers": "true"}),
		"a.yaml": appIngress("tenant-a", "a.test", map[string]string{
			"nginx.ingress.kubernetes.io/auth-url":       authURL,
			"nginx.ingress.kubernetes.io/auth-cache-key": "$cookie_session",
		}),
	})
	s.eventually("a.test asks the auth service", func() error { return s.expect("a.test", "/", "401") })
	viaProxy := http.Header{"Cookie": {"session=mal"}, "X-Forwarded-Host": {"b.test"}}
	expectAuth(t, s, g, "mal through a proxy saying b.test", accessRequest(t, http.MethodGet, "http://a.test/", viaProxy), http.StatusOK, true)
	expectAuth(t, s, g, "mal through a proxy saying b.test again", accessRequest(t, http.MethodGet, "http://a.test/", viaProxy), http.StatusOK, false)
	expectAuth(t, s, g, "mal on a.test itself", accessRequest(t, http.MethodGet, "http://a.test/", http.Header{"Cookie": {"session=mal"}}), http.StatusForbidden, true)
}
