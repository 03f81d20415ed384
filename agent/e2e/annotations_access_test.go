package e2e

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// The access-control annotations over real HTTP through real nginx, with
// the file source: source ranges, CORS, basic auth, rate limits and custom
// error pages.

// do sends req through nginx and returns the response with its body read.
func (s *stack) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp, strings.TrimSpace(string(body))
}

func accessRequest(t *testing.T, method, url string, header http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return req
}

// An allowlist lets 127.0.0.1 in; a denylist of 127.0.0.0/8 beside it
// wins (403); an allowlist without the client is 403; a bad one fails
// closed (503) while the Ingress's neighbours are served.
func TestAccessSourceRanges(t *testing.T) {
	const ip = "127.0.0.81"
	b := startBackends(t, ip)
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", b.port, ep(ip)),
		"allow.yaml":    appIngress("allow", "allow.test", map[string]string{"nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/8, 127.0.0.1"}),
		"deny.yaml": appIngress("deny", "deny.test", map[string]string{
			"restysync.io/allowlist-source-range":               "127.0.0.1",
			"nginx.ingress.kubernetes.io/denylist-source-range": "127.0.0.0/8",
		}),
		"other.yaml": appIngress("other", "other.test", map[string]string{"restysync.io/allowlist-source-range": "10.0.0.0/8"}),
		"bad.yaml":   appIngress("bad", "bad.test", map[string]string{"nginx.ingress.kubernetes.io/allowlist-source-range": "127.0.0.1/40"}),
	})
	for host, want := range map[string]string{"allow.test": ip, "deny.test": "403", "other.test": "403", "bad.test": "503"} {
		s.eventually(host, func() error { return s.expect(host, "/", want) })
	}
}

// enable-cors: a preflight from an allowed origin is answered 204 by nginx
// with ingress-nginx's default headers, without reaching the backend; a
// request from it gets the headers, one from another origin none; the
// http block's X-Request-ID survives.
func TestAccessCORS(t *testing.T) {
	const ip = "127.0.0.82"
	b := startBackends(t, ip)
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", b.port, ep(ip)),
		"cors.yaml": ingress("cors", ingressOpts{class: "restysync", host: "cors.test", paths: []path{prefix("/", "app")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/enable-cors":       "true",
				"nginx.ingress.kubernetes.io/cors-allow-origin": "https://app.example.com, https://*.apps.example.com",
				"restysync.io/cors-expose-headers":              "X-Total",
			}}),
		"any.yaml": ingress("any", ingressOpts{class: "restysync", host: "any.test", paths: []path{prefix("/", "app")},
			annotations: map[string]string{"restysync.io/enable-cors": "true", "restysync.io/cors-allow-credentials": "false", "restysync.io/cors-max-age": "60"}}),
		"custom.yaml": ingress("custom", ingressOpts{class: "restysync", host: "custom.test", paths: []path{prefix("/", "app")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/enable-cors":        "true",
				"nginx.ingress.kubernetes.io/cors-allow-methods": "GET, POST",
				"restysync.io/cors-allow-headers":                "X-Custom, Content-Type",
			}}),
	})
	s.eventually("cors.test serves", func() error { return s.expect("cors.test", "/", ip) })

	preflight := http.Header{"Origin": {"https://app.example.com"}, "Access-Control-Request-Method": {"PUT"}}
	b.mu.Lock()
	before := b.hits[ip]
	b.mu.Unlock()
	resp, _ := s.do(t, accessRequest(t, http.MethodOptions, "http://cors.test/items", preflight))
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("preflight: status %d, want 204", resp.StatusCode)
	}
	for header, want := range map[string]string{
		"Access-Control-Allow-Origin":      "https://app.example.com",
		"Access-Control-Allow-Methods":     "GET, PUT, POST, DELETE, PATCH, OPTIONS",
		"Access-Control-Allow-Headers":     "DNT, Keep-Alive, User-Agent, X-Requested-With, If-Modified-Since, Cache-Control, Content-Type, Range, Authorization",
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Max-Age":           "1728000",
		"Access-Control-Expose-Headers":    "X-Total",
	} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("preflight: %s = %q, want %q", header, got, want)
		}
	}
	b.mu.Lock()
	if b.hits[ip] != before {
		t.Errorf("the preflight reached the backend")
	}
	b.mu.Unlock()

	resp, body := s.do(t, accessRequest(t, http.MethodGet, "http://cors.test/", http.Header{"Origin": {"https://x.apps.example.com"}}))
	if resp.StatusCode != http.StatusOK || body != ip || resp.Header.Get("Access-Control-Allow-Origin") != "https://x.apps.example.com" {
		t.Errorf("GET from a wildcard origin: %d %q, Allow-Origin %q", resp.StatusCode, body, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp.Header.Get("X-Request-ID") == "" {
		t.Errorf("GET: X-Request-ID is gone from the response")
	}
	for _, origin := range []string{"https://evil.example.com", "https://a.b.apps.example.com", "http://app.example.com"} {
		resp, _ = s.do(t, accessRequest(t, http.MethodGet, "http://cors.test/", http.Header{"Origin": {origin}}))
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" || resp.StatusCode != http.StatusOK {
			t.Errorf("GET from %s: %d, Allow-Origin %q; want 200 without CORS headers", origin, resp.StatusCode, got)
		}
	}
	resp, _ = s.do(t, accessRequest(t, http.MethodOptions, "http://cors.test/", http.Header{"Origin": {"https://evil.example.com"}}))
	if resp.StatusCode == http.StatusNoContent {
		t.Errorf("a preflight from another origin was answered 204 by nginx")
	}

	// cors-allow-methods and cors-allow-headers replace the defaults.
	resp, _ = s.do(t, accessRequest(t, http.MethodOptions, "http://custom.test/", http.Header{"Origin": {"https://whoever.test"}}))
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Methods") != "GET, POST" ||
		resp.Header.Get("Access-Control-Allow-Headers") != "X-Custom, Content-Type" {
		t.Errorf("custom.test preflight: %d, methods %q, headers %q; want 204, \"GET, POST\", \"X-Custom, Content-Type\"",
			resp.StatusCode, resp.Header.Get("Access-Control-Allow-Methods"), resp.Header.Get("Access-Control-Allow-Headers"))
	}

	// cors-allow-origin "*" (the default) answers "*".
	resp, _ = s.do(t, accessRequest(t, http.MethodOptions, "http://any.test/", http.Header{"Origin": {"https://whoever.test"}}))
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		resp.Header.Get("Access-Control-Allow-Credentials") != "" || resp.Header.Get("Access-Control-Max-Age") != "60" {
		t.Errorf("any.test preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// secretYAML is an Opaque Secret in default holding auth.
func secretYAML(name, auth string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: default\ntype: Opaque\ndata:\n  auth: %s\n",
		name, base64.StdEncoding.EncodeToString([]byte(auth)))
}

func htpasswdBcrypt(t *testing.T, user, password string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return user + ":" + string(hash) + "\n"
}

func htpasswdSHA(user, password string) string {
	sum := sha1.Sum([]byte(password))
	return user + ":{SHA}" + base64.StdEncoding.EncodeToString(sum[:]) + "\n"
}

// auth-type basic: 401 without or with wrong credentials, 200 with a
// bcrypt or {SHA} password from the Secret; a changed Secret applies
// without a reload; a missing Secret fails closed with 503.
func TestAccessBasicAuth(t *testing.T) {
	const ip = "127.0.0.83"
	b := startBackends(t, ip)
	authIngress := ingress("private", ingressOpts{class: "restysync", host: "private.test", paths: []path{prefix("/", "app")},
		annotations: map[string]string{
			"nginx.ingress.kubernetes.io/auth-type":   "basic",
			"nginx.ingress.kubernetes.io/auth-secret": "users",
			"restysync.io/auth-realm":                 "Staff only",
		}})
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", b.port, ep(ip)),
		"secret.yaml":   secretYAML("users", htpasswdBcrypt(t, "alice", "wonderland")+htpasswdSHA("bob", "builder")),
		"private.yaml":  authIngress,
		"broken.yaml": ingress("broken", ingressOpts{class: "restysync", host: "broken.test", paths: []path{prefix("/", "app")},
			annotations: map[string]string{"restysync.io/auth-type": "basic", "restysync.io/auth-secret": "missing"}}),
	})
	get := func(user, password string) (int, string, string) {
		req := accessRequest(t, http.MethodGet, "http://private.test/", nil)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, body := s.do(t, req)
		return resp.StatusCode, body, resp.Header.Get("WWW-Authenticate")
	}
	s.eventually("private.test asks for credentials", func() error {
		if status, _, _ := get("", ""); status != http.StatusUnauthorized {
			return fmt.Errorf("status %d, want 401", status)
		}
		return nil
	})
	if _, _, challenge := get("", ""); challenge != `Basic realm="Staff only"` {
		t.Errorf("WWW-Authenticate = %q", challenge)
	}
	for _, c := range []struct {
		user, password string
		status         int
	}{
		{"alice", "wonderland", 200}, {"bob", "builder", 200},
		{"alice", "wrong", 401}, {"carol", "wonderland", 401},
	} {
		status, body, _ := get(c.user, c.password)
		if status != c.status || (status == 200 && body != ip) {
			t.Errorf("%s:%s: %d %q, want %d", c.user, c.password, status, body, c.status)
		}
	}
	if err := s.expect("broken.test", "/", "503"); err != nil {
		t.Errorf("a missing auth Secret: %v", err)
	}

	// A new password: no reload, the next request checks the new file.
	workers := s.steadyWorkers()
	s.writeFile("secret.yaml", secretYAML("users", htpasswdSHA("alice", "looking-glass")))
	s.eventually("the new password applies", func() error {
		if status, _, _ := get("alice", "looking-glass"); status != http.StatusOK {
			return fmt.Errorf("new password: status %d", status)
		}
		return nil
	})
	if status, _, _ := get("bob", "builder"); status != http.StatusUnauthorized {
		t.Errorf("bob after his removal: %d, want 401", status)
	}
	if now := s.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
		t.Errorf("nginx workers changed from %v to %v: a password change reloaded", workers, now)
	}
	// The Secret gone: fail closed, never unauthenticated.
	s.removeFile("secret.yaml")
	s.eventually("private.test fails closed", func() error { return s.expect("private.test", "/", "503") })
}

// limit-rps: past the burst (rate × limit-burst-multiplier) nginx answers
// 503; limit-whitelist exempts the client.
func TestAccessRateLimit(t *testing.T) {
	const ip, ipHeld = "127.0.0.84", "127.0.0.85"
	b := startBackends(t, ip)
	release := make(chan struct{})
	var arrived atomic.Int32
	heldPort := serveOn(t, ipHeld, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "held")
	}))
	limited := func(name, host string, extra map[string]string) string {
		annotations := map[string]string{"nginx.ingress.kubernetes.io/limit-rpm": "1", "restysync.io/limit-burst-multiplier": "3"}
		for k, v := range extra {
			annotations[k] = v
		}
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "app")}, annotations: annotations})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", b.port, ep(ip)) + "---\n" + service("held", heldPort, ep(ipHeld)),
		"limited.yaml":  limited("limited", "limited.test", nil),
		"conn.yaml": ingress("conn", ingressOpts{class: "restysync", host: "conn.test", paths: []path{prefix("/", "held")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/limit-connections": "2"}}),
		"exempt.yaml": limited("exempt", "exempt.test", map[string]string{"nginx.ingress.kubernetes.io/limit-whitelist": "127.0.0.0/8"}),
		"rps.yaml": ingress("rps", ingressOpts{class: "restysync", host: "rps.test", paths: []path{prefix("/", "app")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/limit-rps": "1", "nginx.ingress.kubernetes.io/limit-burst-multiplier": "2"}}),
	})
	// One request a minute with a burst of 3: the first 4 pass, then 503.
	var got []string
	for range 8 {
		status, _, err := s.get("limited.test", "/")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strconv.Itoa(status))
	}
	want := []string{"200", "200", "200", "200", "503", "503", "503", "503"}
	if !slices.Equal(got, want) {
		t.Errorf("limited.test: %v, want %v", got, want)
	}
	for i := range 20 {
		if err := s.expect("exempt.test", "/", ip); err != nil {
			t.Fatalf("exempt.test request %d: %v", i, err)
		}
	}
	// One request a second with a burst of 2: three pass at once, the
	// fourth (well within the second) does not.
	got = got[:0]
	for range 4 {
		status, _, err := s.get("rps.test", "/")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strconv.Itoa(status))
	}
	if want := []string{"200", "200", "200", "503"}; !slices.Equal(got, want) {
		t.Errorf("rps.test: %v, want %v", got, want)
	}

	// limit-connections 2: with two requests held open by the backend, a
	// third from the same address is refused; once they finish, it passes.
	statuses := make(chan int, 2)
	for range 2 {
		go func() {
			status, _, _ := s.get("conn.test", "/")
			statuses <- status
		}()
	}
	s.eventually("two requests are held by the backend", func() error {
		if n := arrived.Load(); n != 2 {
			return fmt.Errorf("%d requests at the backend", n)
		}
		return nil
	})
	if status, _, err := s.get("conn.test", "/"); err != nil || status != http.StatusServiceUnavailable {
		t.Errorf("a third connection: %d, %v; want 503", status, err)
	}
	close(release)
	for range 2 {
		if status := <-statuses; status != http.StatusOK {
			t.Errorf("a held request ended with %d, want 200", status)
		}
	}
	if err := s.expect("conn.test", "/", "held"); err != nil {
		t.Errorf("after the held requests: %v", err)
	}
}

// custom-http-errors with default-backend: a 404 of the backend is
// replaced by the page of the error Service, which learns the code, the
// original URI and the Service through X- headers.
func TestAccessCustomErrors(t *testing.T) {
	const appIP, errorsIP = "127.0.0.85", "127.0.0.86"
	port := nginxproc.FreePort(t)
	serve(t, appIP, port, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.Error(w, "backend's own 404", http.StatusNotFound)
			return
		}
		io.WriteString(w, "app\n")
	})
	serve(t, errorsIP, port, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.Header.Get("X-Code"))
		w.WriteHeader(code)
		fmt.Fprintf(w, "custom %s for %s at %s of %s/%s:%s in %s\n", r.Header.Get("X-Code"), r.Header.Get("X-Original-URI"), r.URL.Path,
			r.Header.Get("X-Namespace"), r.Header.Get("X-Service-Name"), r.Header.Get("X-Service-Port"), r.Header.Get("X-Ingress-Name"))
	})
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", port, ep(appIP)) + "---\n" + service("errors", port, ep(errorsIP)),
		"app.yaml": ingress("web", ingressOpts{class: "restysync", host: "errors.test", paths: []path{prefix("/", "app")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/custom-http-errors": "404,503",
				"restysync.io/default-backend":                   "errors",
			}}),
	})
	s.eventually("errors.test serves", func() error { return s.expect("errors.test", "/", "app") })
	status, body, err := s.get("errors.test", "/missing?x=1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "custom 404 for /missing?x=1 at / of default/app:80 in web"; status != http.StatusNotFound || body != want {
		t.Errorf("GET /missing: %d %q, want 404 %q", status, body, want)
	}
}

// serve answers on addr:port with h until the test ends.
func serve(t *testing.T, addr string, port int, h http.HandlerFunc) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}
