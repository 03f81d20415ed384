package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/fcgi"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// FastCGI backends (backend-protocol FCGI with fastcgi-index and
// fastcgi-params-configmap), request mirroring (mirror-target, mirror-host,
// mirror-request-body) and custom response headers (custom-headers), over
// real sockets: a Go FastCGI responder, an HTTP mirror that records what it
// gets, and the client's view of the headers.

const (
	ipFCGI   = "127.0.0.136"
	ipMain   = "127.0.0.137"
	ipMirror = "127.0.0.138"
	ipHeader = "127.0.0.139"
)

// serveFastCGI answers FastCGI requests on addr:port with h until the test
// ends.
func serveFastCGI(t *testing.T, addr string, port int, h http.HandlerFunc) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	go fcgi.Serve(l, h)
	t.Cleanup(func() { l.Close() })
}

// The FastCGI responder answers with the parameters it got: nginx's
// standard ones, those of the Ingress's ConfigMap (SCRIPT_FILENAME,
// APP_ENV) and the X-Forwarded-For nginx computed.
func fastCGIResponder(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/missing.php" {
		http.Error(w, "php says no", http.StatusNotFound)
		return
	}
	env := fcgi.ProcessEnv(r)
	fmt.Fprintf(w, "script=%s app=%s method=%s uri=%s xff=%s proxy=%q",
		env["SCRIPT_FILENAME"], env["APP_ENV"], r.Method, r.URL.RequestURI(), r.Header.Get("X-Forwarded-For"), r.Header.Get("Proxy"))
}

// backend-protocol FCGI reaches a FastCGI responder through the Lua
// balancer with the ConfigMap's parameters (SCRIPT_FILENAME from
// $document_root-free text and $fastcgi_script_name, which fastcgi-index
// completes for a URI ending in "/"); a changed ConfigMap is followed; a
// missing one and a hostile one fail their Ingress closed and the
// neighbour keeps serving.
func TestFastCGIBackend(t *testing.T) {
	port := nginxproc.FreePort(t)
	serveFastCGI(t, ipFCGI, port, fastCGIResponder)
	httpPort := nginxproc.FreePort(t)
	serve(t, ipFCGI, httpPort, func(w http.ResponseWriter, r *http.Request) {
		if code, err := strconv.Atoi(r.Header.Get("X-Code")); err == nil { // an error page, as custom error backends answer
			w.WriteHeader(code)
		}
		io.WriteString(w, "http")
	})
	fcgiIngress := func(name, configMap string) string {
		annotations := map[string]string{
			"nginx.ingress.kubernetes.io/backend-protocol": "FCGI",
			"nginx.ingress.kubernetes.io/fastcgi-index":    "index.php",
		}
		if configMap != "" {
			annotations["nginx.ingress.kubernetes.io/fastcgi-params-configmap"] = configMap
		}
		return ingress(name, ingressOpts{class: "restysync", host: name + ".test", paths: []path{prefix("/", "php")}, annotations: annotations})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("php", port, ep(ipFCGI)) + "---\n" + service("web", httpPort, ep(ipFCGI)),
		"params.yaml":   namedConfigMap("php-params", map[string]string{"SCRIPT_FILENAME": "/srv/app$fastcgi_script_name", "APP_ENV": "production"}),
		"app.yaml":      fcgiIngress("app", "php-params"),
		"plain.yaml":    fcgiIngress("plain", ""),
		"missing.yaml":  fcgiIngress("missing", "no-such-params"),
		"web.yaml":      ingress("web", ingressOpts{class: "restysync", host: "web.test", paths: []path{prefix("/", "web")}}),
		"errors.yaml": ingress("errors", ingressOpts{class: "restysync", host: "errors.test", paths: []path{prefix("/", "php")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/backend-protocol":   "FCGI",
				"nginx.ingress.kubernetes.io/custom-http-errors": "404",
				"nginx.ingress.kubernetes.io/default-backend":    "web",
			}}),
	})
	s.eventually("app.test answers over FastCGI", func() error {
		return s.expect("app.test", "/hello.php?x=1", `script=/srv/app/hello.php app=production method=GET uri=/hello.php?x=1 xff=127.0.0.1 proxy=""`)
	})
	if err := s.expect("app.test", "/", `script=/srv/app/index.php app=production method=GET uri=/ xff=127.0.0.1 proxy=""`); err != nil {
		t.Errorf("fastcgi-index: %v", err)
	}
	// A client's X-Forwarded-For and Proxy headers do not reach the
	// application: nginx's values replace them.
	req := accessRequest(t, http.MethodPost, "http://app.test/form.php", http.Header{"X-Forwarded-For": {"6.6.6.6"}, "Proxy": {"http://evil/"}})
	if resp, body := s.do(t, req); resp.StatusCode != http.StatusOK ||
		body != `script=/srv/app/form.php app=production method=POST uri=/form.php xff=127.0.0.1 proxy=""` {
		t.Errorf("POST with forged headers: %d %q", resp.StatusCode, body)
	}
	// Without a ConfigMap: nginx's standard parameters only.
	if err := s.expect("plain.test", "/a.php", `script= app= method=GET uri=/a.php xff=127.0.0.1 proxy=""`); err != nil {
		t.Errorf("FCGI without params: %v", err)
	}
	if err := s.expect("missing.test", "/", "503"); err != nil {
		t.Errorf("a params ConfigMap that is not there fails closed: %v", err)
	}
	// custom-http-errors catches the application's own 404.
	if status, body, err := s.get("errors.test", "/missing.php"); err != nil || status != http.StatusNotFound || body != "http" {
		t.Errorf("custom-http-errors on FastCGI: %d %q %v, want 404 with the default-backend's page", status, body, err)
	}
	if err := s.expect("errors.test", "/ok.php", `script= app= method=GET uri=/ok.php xff=127.0.0.1 proxy=""`); err != nil {
		t.Errorf("custom-http-errors on FastCGI, a page that exists: %v", err)
	}

	s.writeFile("params.yaml", namedConfigMap("php-params", map[string]string{"SCRIPT_FILENAME": "/srv/v2$fastcgi_script_name", "APP_ENV": "staging"}))
	s.eventually("the changed parameters reach the application", func() error {
		return s.expect("app.test", "/x.php", `script=/srv/v2/x.php app=staging method=GET uri=/x.php xff=127.0.0.1 proxy=""`)
	})
	s.writeFile("params.yaml", namedConfigMap("php-params", map[string]string{"SCRIPT_FILENAME": `/x"; } location /y { return 200; #`}))
	s.eventually("a hostile parameter fails closed", func() error { return s.expect("app.test", "/", "503") })
	if err := s.expect("web.test", "/", "http"); err != nil {
		t.Errorf("the HTTP neighbour: %v", err)
	}
	if err := s.expect("plain.test", "/b.php", `script= app= method=GET uri=/b.php xff=127.0.0.1 proxy=""`); err != nil {
		t.Errorf("the FCGI neighbour: %v", err)
	}
}

// mirrored is what the mirror backend got.
type mirrored struct {
	method, uri, host, body string
}

type mirrorRecorder struct {
	mu   sync.Mutex
	seen []mirrored
}

func (m *mirrorRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	m.mu.Lock()
	m.seen = append(m.seen, mirrored{r.Method, r.RequestURI, r.Host, string(body)})
	m.mu.Unlock()
	w.WriteHeader(http.StatusTeapot) // ignored by nginx
	io.WriteString(w, "mirror")
}

// has reports whether the mirror got want.
func (m *mirrorRecorder) has(want mirrored) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if slices.Contains(m.seen, want) {
		return nil
	}
	return fmt.Errorf("the mirror got %+v, not %+v", m.seen, want)
}

// mirror-target copies each request to the mirror, whose answer is
// ignored: the client gets the main backend's. With the body and
// mirror-host, and without the body and with the target's host as Host;
// a hostile target is a Problem and its Ingress is served unmirrored.
func TestMirrorTarget(t *testing.T) {
	mainPort, mirrorPort := nginxproc.FreePort(t), nginxproc.FreePort(t)
	serve(t, ipMain, mainPort, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "main %s %s", r.Method, body)
	})
	rec := &mirrorRecorder{}
	serve(t, ipMirror, mirrorPort, rec.ServeHTTP)
	target := fmt.Sprintf("http://%s:%d/copy$request_uri", ipMirror, mirrorPort)
	mirrorIngress := func(name string, annotations map[string]string) string {
		return ingress(name, ingressOpts{class: "restysync", host: name + ".test", paths: []path{prefix("/", "main")}, annotations: annotations})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("main", mainPort, ep(ipMain)),
		"body.yaml": mirrorIngress("body", map[string]string{
			"nginx.ingress.kubernetes.io/mirror-target": target,
			"nginx.ingress.kubernetes.io/mirror-host":   "shadow.test",
		}),
		"nobody.yaml": mirrorIngress("nobody", map[string]string{
			"nginx.ingress.kubernetes.io/mirror-target":       target,
			"nginx.ingress.kubernetes.io/mirror-request-body": "off",
		}),
		"bad.yaml": mirrorIngress("bad", map[string]string{
			"nginx.ingress.kubernetes.io/mirror-target": `http://` + ipMirror + `/"; } location /x { return 200; #`,
		}),
	})
	s.eventually("body.test serves", func() error { return s.expect("body.test", "/", "main GET") })

	post := func(host, path, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, "http://"+host+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, got := s.do(t, req)
		return resp.StatusCode, got
	}
	if status, body := post("body.test", "/orders?id=7", "payload-1"); status != http.StatusOK || body != "main POST payload-1" {
		t.Errorf("body.test: %d %q, want the main backend's answer", status, body)
	}
	s.eventually("the mirror gets the request with its body and mirror-host", func() error {
		return rec.has(mirrored{http.MethodPost, "/copy/orders?id=7", "shadow.test", "payload-1"})
	})
	if status, body := post("nobody.test", "/events", "payload-2"); status != http.StatusOK || body != "main POST payload-2" {
		t.Errorf("nobody.test: %d %q, want the main backend's answer", status, body)
	}
	s.eventually("the mirror gets the request without its body, Host the target's", func() error {
		return rec.has(mirrored{http.MethodPost, "/copy/events", ipMirror, ""})
	})
	if status, body := post("bad.test", "/x", "payload-3"); status != http.StatusOK || body != "main POST payload-3" {
		t.Errorf("bad.test: %d %q, want the main backend's answer (served without a mirror)", status, body)
	}
	// The mirror's own location is internal: a client cannot use it.
	if err := s.expect("body.test", "/_restysync/mirror", "404"); err != nil {
		t.Errorf("a client asking for the internal mirror location: %v", err)
	}
	rec.mu.Lock()
	for _, m := range rec.seen {
		if strings.Contains(m.uri, "/x") && m.body == "payload-3" {
			t.Errorf("bad.test was mirrored: %+v", m)
		}
	}
	rec.mu.Unlock()
}

// custom-headers: the ConfigMap's headers reach the client on every
// response of the Ingress (errors too), replacing the backend's header of
// that name, with a literal "$"; X-Request-ID and, over HTTPS, HSTS are
// still sent; a missing ConfigMap fails closed until it appears.
func TestCustomHeaders(t *testing.T) {
	port := nginxproc.FreePort(t)
	serve(t, ipHeader, port, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "SAMEORIGIN")
		w.Header().Set("X-Backend", "yes")
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "ok")
	})
	headers := map[string]string{"X-Frame-Options": "DENY", "X-Price": `costs $5 "net"`}
	withHeaders := func(name, host, configMap string) string {
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "web")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/custom-headers": configMap}})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("web", port, ep(ipHeader)),
		"headers.yaml":  namedConfigMap("resp-headers", headers),
		"app.yaml":      withHeaders("app", "app.test", "resp-headers"),
		"default.yaml":  withHeaders("default", "", "resp-headers"),
		"later.yaml":    withHeaders("later", "later.test", "later-headers"),
	})
	s.eventually("app.test serves", func() error { return s.expect("app.test", "/", "ok") })
	check := func(what string, resp *http.Response, wantStatus int) {
		t.Helper()
		if resp.StatusCode != wantStatus {
			t.Errorf("%s: status %d, want %d", what, resp.StatusCode, wantStatus)
		}
		if got := resp.Header.Values("X-Frame-Options"); !slices.Equal(got, []string{"DENY"}) {
			t.Errorf("%s: X-Frame-Options %q, want the ConfigMap's alone", what, got)
		}
		if got := resp.Header.Get("X-Price"); got != `costs $5 "net"` {
			t.Errorf("%s: X-Price %q", what, got)
		}
		if got := resp.Header.Values("X-Request-ID"); len(got) != 1 || got[0] == "" {
			t.Errorf("%s: X-Request-ID %q, want one", what, got)
		}
		if got := resp.Header.Get("X-Backend"); got != "yes" {
			t.Errorf("%s: the backend's other headers are kept: X-Backend %q", what, got)
		}
	}
	resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://app.test/", nil))
	check("GET /", resp, http.StatusOK)
	if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
		t.Errorf("plain HTTP: Strict-Transport-Security %q, want none", got)
	}
	resp, _ = s.do(t, accessRequest(t, http.MethodGet, "http://app.test/missing", nil))
	check("a 404 of the backend", resp, http.StatusNotFound)

	// Over HTTPS (the default server's route: the host-less Ingress), HSTS
	// is still there beside the custom headers.
	https := httpsClient(stackHTTPSPort(t, s))
	hresp, err := https.Get("https://any.test/")
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	check("HTTPS", hresp, http.StatusOK)
	if got := hresp.Header.Values("Strict-Transport-Security"); len(got) != 1 || !strings.HasPrefix(got[0], "max-age=") {
		t.Errorf("HTTPS: Strict-Transport-Security %q, want one", got)
	}

	if err := s.expect("later.test", "/", "503"); err != nil {
		t.Errorf("a custom-headers ConfigMap that is not there fails closed: %v", err)
	}
	s.writeFile("later-headers.yaml", namedConfigMap("later-headers", map[string]string{"X-Later": "here"}))
	s.eventually("the ConfigMap that appears is used", func() error { return s.expect("later.test", "/", "ok") })
	resp, _ = s.do(t, accessRequest(t, http.MethodGet, "http://later.test/", nil))
	if got := resp.Header.Get("X-Later"); got != "here" {
		t.Errorf("later.test: X-Later %q", got)
	}
	if got := resp.Header.Values("X-Frame-Options"); !slices.Equal(got, []string{"SAMEORIGIN"}) {
		t.Errorf("later.test: the backend's X-Frame-Options %q, want it untouched", got)
	}
	s.writeFile("headers.yaml", namedConfigMap("resp-headers", map[string]string{"X-A": "a\r\nSet-Cookie: admin=1"}))
	s.eventually("a hostile value fails closed", func() error { return s.expect("app.test", "/", "503") })
	if err := s.expect("later.test", "/", "ok"); err != nil {
		t.Errorf("the neighbour: %v", err)
	}
}
