package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// End-to-end tests of the HTTP → HTTPS redirect, HSTS, the forwarded and
// request-id headers, backend protocols (HTTPS, gRPC, gRPCS) and WebSocket
// sessions, each against real nginx and real backends on loopback.

// newStackWith is newStack with extra flags for the agent.
func newStackWith(t *testing.T, files map[string]string, flags ...string) *stack {
	t.Helper()
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range files {
		s.writeFile(name, content)
	}
	s.start(append([]string{"--source", "file:" + s.manifests}, flags...)...)
	return s
}

// serveOn serves h on addr at a free port until the test ends, and returns the port.
func serveOn(t *testing.T, addr string, h http.Handler) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// echoHeaders answers with the request as the backend saw it, as JSON.
type echoedRequest struct {
	Backend string            `json:"backend"`
	Host    string            `json:"host"`
	TLS     bool              `json:"tls"`
	SNI     string            `json:"sni"`
	Headers map[string]string `json:"headers"`
}

func echoHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := echoedRequest{Backend: name, Host: r.Host, TLS: r.TLS != nil, Headers: map[string]string{}}
		if r.TLS != nil {
			e.SNI = r.TLS.ServerName
		}
		for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-Port", "X-Real-Ip", "X-Request-Id"} {
			e.Headers[h] = strings.Join(r.Header.Values(h), ",")
		}
		w.Header().Set("X-Request-Id", "from-the-backend") // nginx drops it for its own
		json.NewEncoder(w).Encode(e)
	})
}

// do sends req with c and returns the response with its body read.
func do(c *http.Client, req *http.Request) (*http.Response, string, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp, strings.TrimSpace(string(body)), err
}

func newRequest(t *testing.T, method, url string, headers ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// echoed sends req and decodes the echo backend's answer; any status but 200 is an error.
func echoed(c *http.Client, req *http.Request) (echoedRequest, *http.Response, error) {
	var e echoedRequest
	resp, body, err := do(c, req)
	if err != nil {
		return e, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return e, resp, fmt.Errorf("%s %s: %s %q", req.Method, req.URL, resp.Status, body)
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return e, resp, fmt.Errorf("%s %s: %v in %q", req.Method, req.URL, err, body)
	}
	return e, resp, nil
}

// expectRedirect checks that plain HTTP GET host+pathQuery answers 308
// with Location https://host:httpsPort+pathQuery.
func expectRedirect(s *stack, host, pathQuery string, httpsPort int) error {
	resp, _, err := do(s.client, newRequest(s.t, http.MethodGet, "http://"+host+pathQuery))
	if err != nil {
		return err
	}
	want := "https://" + host + ":" + strconv.Itoa(httpsPort) + pathQuery
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		return fmt.Errorf("http://%s%s: %s, Location %q; want 308 to %s", host, pathQuery, resp.Status, resp.Header.Get("Location"), want)
	}
	if h := resp.Header.Get("Strict-Transport-Security"); h != "" {
		return fmt.Errorf("http://%s%s: HSTS %q over plain HTTP", host, pathQuery, h)
	}
	return nil
}

// TestSSLRedirect: plain HTTP to a host named in spec.tls answers 308 to
// the same URL over HTTPS (with the HTTPS port, as it is not 443), for any
// method; ssl-redirect "false" (ingress-nginx's prefix) serves it over HTTP;
// force-ssl-redirect redirects a host without TLS; a host without TLS and
// without the annotation is served over HTTP. HTTPS is served everywhere TLS is.
func TestSSLRedirect(t *testing.T) {
	const ip = "127.0.0.61"
	port := serveOn(t, ip, echoHandler(ip))
	pair := newTLSKeyPair(t, 2001, "secure.test", "optout.test")
	tlsHosts := []ingressTLS{{secret: "tls", hosts: []string{"secure.test", "optout.test"}}}
	files := map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("web", port, ep(ip)),
		"secret.yaml":  tlsSecret("tls", pair.cert, pair.key),
		"secure.yaml":  ingress("secure", ingressOpts{class: "restysync", host: "secure.test", paths: []path{prefix("/", "web")}, tls: tlsHosts}),
		"optout.yaml": ingress("optout", ingressOpts{class: "restysync", host: "optout.test", paths: []path{prefix("/", "web")}, tls: tlsHosts,
			annotations: map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "false"}}),
		"forced.yaml": ingress("forced", ingressOpts{class: "restysync", host: "forced.test", paths: []path{prefix("/", "web")},
			annotations: map[string]string{"restysync.io/force-ssl-redirect": "true"}}),
		"plain.yaml": ingress("plain", ingressOpts{class: "restysync", host: "plain.test", paths: []path{prefix("/", "web")}}),
	}
	s := newStack(t, files)
	httpsPort := stackHTTPSPort(t, s)
	tlsClient := httpsClient(httpsPort)

	s.eventually("plain HTTP to the TLS host is redirected", func() error {
		return expectRedirect(s, "secure.test", "/deep/path?q=1&r=%2F", httpsPort)
	})
	resp, _, err := do(s.client, newRequest(t, http.MethodPost, "http://secure.test/form"))
	if err != nil || resp.StatusCode != http.StatusPermanentRedirect {
		t.Errorf("POST over HTTP: %v, %v; want 308 (which keeps the method)", resp, err)
	}
	if err := expectRedirect(s, "forced.test", "/x", httpsPort); err != nil {
		t.Errorf("force-ssl-redirect: %v", err)
	}
	for _, host := range []string{"optout.test", "plain.test"} {
		e, _, err := echoed(s.client, newRequest(t, http.MethodGet, "http://"+host+"/"))
		if err != nil || e.Backend != ip || e.Headers["X-Forwarded-Proto"] != "http" {
			t.Errorf("%s over HTTP: %+v, %v; want the backend, X-Forwarded-Proto http", host, e, err)
		}
	}
	for _, host := range []string{"secure.test", "optout.test"} {
		e, resp, err := echoed(tlsClient, newRequest(t, http.MethodGet, "https://"+host+"/"))
		if err != nil || e.Backend != ip || e.Headers["X-Forwarded-Proto"] != "https" {
			t.Errorf("%s over HTTPS: %+v, %v; want the backend, X-Forwarded-Proto https", host, e, err)
		} else if resp.ProtoMajor != 2 {
			t.Errorf("%s over HTTPS: %s, want HTTP/2 on the TLS listener", host, resp.Proto)
		}
	}
}

// TestHSTS: Strict-Transport-Security is on every HTTPS response with the
// defaults (one year, includeSubDomains), never over plain HTTP, and the
// flags (and their environment variables) change or remove it.
func TestHSTS(t *testing.T) {
	const ip = "127.0.0.62"
	port := serveOn(t, ip, echoHandler(ip))
	pair := newTLSKeyPair(t, 2002, "hsts.test")
	files := map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("web", port, ep(ip)),
		"secret.yaml":  tlsSecret("tls", pair.cert, pair.key),
		"hsts.yaml": ingress("hsts", ingressOpts{class: "restysync", host: "hsts.test", paths: []path{prefix("/", "web")},
			tls: []ingressTLS{{secret: "tls", hosts: []string{"hsts.test"}}}}),
		"plain.yaml": ingress("plain", ingressOpts{class: "restysync", host: "plain.test", paths: []path{prefix("/", "web")}}),
	}
	for _, tc := range []struct {
		name  string
		flags []string
		env   string
		want  string
	}{
		{name: "defaults", want: "max-age=31536000; includeSubDomains"},
		{name: "flags", flags: []string{"--hsts-max-age", "600", "--hsts-include-subdomains=false", "--hsts-preload"}, want: "max-age=600; preload"},
		{name: "env", env: "RESTYSYNC_HSTS_MAX_AGE=120", want: "max-age=120; includeSubDomains"},
		{name: "off", flags: []string{"--hsts=false"}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				k, v, _ := strings.Cut(tc.env, "=")
				t.Setenv(k, v)
			}
			s := newStackWith(t, files, tc.flags...)
			tlsClient := httpsClient(stackHTTPSPort(t, s))
			var resp *http.Response
			s.eventually("HTTPS reaches the backend", func() error {
				var err error
				_, resp, err = echoed(tlsClient, newRequest(t, http.MethodGet, "https://hsts.test/"))
				return err
			})
			if got := resp.Header.Values("Strict-Transport-Security"); !slices.Equal(got, nonEmpty(tc.want)) {
				t.Errorf("HTTPS: Strict-Transport-Security %q, want %q", got, nonEmpty(tc.want))
			}
			// An HTTPS answer nginx makes itself (no location matches on the
			// default server) carries it too.
			resp, _, err := do(tlsClient, newRequest(t, http.MethodGet, "https://unknown.test/"))
			if err != nil || resp.StatusCode != http.StatusNotFound || resp.Header.Get("Strict-Transport-Security") != tc.want {
				t.Errorf("HTTPS 404: %v, HSTS %q (%v); want 404 with %q", resp, resp.Header.Get("Strict-Transport-Security"), err, tc.want)
			}
			_, resp, err = echoed(s.client, newRequest(t, http.MethodGet, "http://plain.test/"))
			if err != nil || resp.Header.Get("Strict-Transport-Security") != "" {
				t.Errorf("HTTP: %v, HSTS %q; want none over plain HTTP", err, resp.Header.Get("Strict-Transport-Security"))
			}
		})
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

var requestIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRequestHeaders: with no trusted proxies, X-Forwarded-* a client sends
// are replaced by nginx's own values, X-Real-IP is the client's address, and
// X-Request-ID is the client's when it sends one, else one nginx generates;
// the backend and the response see the same, once.
func TestRequestHeaders(t *testing.T) {
	const ip = "127.0.0.63"
	port := serveOn(t, ip, echoHandler(ip))
	s := newStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("web", port, ep(ip)),
		"ingress.yaml": ingress("hdr", ingressOpts{class: "restysync", host: "hdr.test", paths: []path{prefix("/", "web")}}),
	})
	s.eventually("the host is served", func() error {
		_, _, err := echoed(s.client, newRequest(t, http.MethodGet, "http://hdr.test/"))
		return err
	})

	e, resp, err := echoed(s.client, newRequest(t, http.MethodGet, "http://hdr.test/",
		"X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.test", "X-Forwarded-Port", "1"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "hdr.test",
		"X-Forwarded-Port": strconv.Itoa(s.port), "X-Real-Ip": "127.0.0.1",
	}
	for h, w := range want {
		if e.Headers[h] != w {
			t.Errorf("from an untrusted client the backend got %s %q, want %q", h, e.Headers[h], w)
		}
	}
	id := e.Headers["X-Request-Id"]
	if !requestIDPattern.MatchString(id) {
		t.Errorf("generated X-Request-ID %q, want 32 hex digits", id)
	}
	if got := resp.Header.Values("X-Request-Id"); !slices.Equal(got, []string{id}) {
		t.Errorf("response X-Request-ID %q, want [%s] (the one the backend got, once)", got, id)
	}
	e2, _, err := echoed(s.client, newRequest(t, http.MethodGet, "http://hdr.test/"))
	if err != nil || e2.Headers["X-Request-Id"] == id {
		t.Errorf("a second request got X-Request-ID %q (%v); want a new one", e2.Headers["X-Request-Id"], err)
	}

	e, resp, err = echoed(s.client, newRequest(t, http.MethodGet, "http://hdr.test/", "X-Request-ID", "client-id-42"))
	if err != nil || e.Headers["X-Request-Id"] != "client-id-42" || resp.Header.Get("X-Request-Id") != "client-id-42" {
		t.Errorf("client X-Request-ID: backend %q, response %q (%v); want client-id-42 both", e.Headers["X-Request-Id"], resp.Header.Get("X-Request-Id"), err)
	}
	// nginx's own answers carry one too.
	resp, _, err = do(s.client, newRequest(t, http.MethodGet, "http://unknown.test/nothing"))
	if err != nil || !requestIDPattern.MatchString(resp.Header.Get("X-Request-Id")) {
		t.Errorf("404 from nginx: X-Request-ID %q (%v)", resp.Header.Get("X-Request-Id"), err)
	}
}

// clientFrom is clientTo(port) with connections from the local address
// from: nginx sees that as the client address.
func clientFrom(from string, port int, useTLS bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// TestTrustedProxies: with --trusted-proxies, a request from a trusted
// address has its X-Forwarded-For (appended to), -Proto, -Host and -Port
// passed on, and its X-Forwarded-Proto https stops the redirect of a TLS
// host (TLS ended at the proxy); the same headers from any other address
// are replaced, and the redirect happens.
func TestTrustedProxies(t *testing.T) {
	const ip = "127.0.0.64"
	const proxy, stranger = "127.0.0.65", "127.0.0.66"
	port := serveOn(t, ip, echoHandler(ip))
	pair := newTLSKeyPair(t, 2003, "app.test")
	s := newStackWith(t, map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("web", port, ep(ip)),
		"secret.yaml":  tlsSecret("tls", pair.cert, pair.key),
		"ingress.yaml": ingress("app", ingressOpts{class: "restysync", host: "app.test", paths: []path{prefix("/", "web")},
			tls: []ingressTLS{{secret: "tls", hosts: []string{"app.test"}}}}),
	}, "--trusted-proxies", "10.0.0.0/8,"+proxy+"/32", "--trusted-proxies", "fd00::/8")
	httpsPort := stackHTTPSPort(t, s)
	forwarded := []string{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "public.example", "X-Forwarded-Port", "443"}

	trusted := clientFrom(proxy, s.port, false)
	s.eventually("the trusted proxy's HTTPS request is served over HTTP", func() error {
		e, resp, err := echoed(trusted, newRequest(t, http.MethodGet, "http://app.test/", forwarded...))
		if err != nil {
			return err
		}
		want := map[string]string{"X-Forwarded-For": "203.0.113.9, " + proxy, "X-Forwarded-Proto": "https",
			"X-Forwarded-Host": "public.example", "X-Forwarded-Port": "443", "X-Real-Ip": proxy}
		for h, w := range want {
			if e.Headers[h] != w {
				return fmt.Errorf("from the trusted proxy the backend got %s %q, want %q", h, e.Headers[h], w)
			}
		}
		if resp.Header.Get("Strict-Transport-Security") == "" {
			return errors.New("no HSTS on a request the trusted proxy says was HTTPS")
		}
		return nil
	})
	// A trusted proxy without X-Forwarded-Proto sent plain HTTP: redirect.
	resp, _, err := do(trusted, newRequest(t, http.MethodGet, "http://app.test/p"))
	if err != nil || resp.StatusCode != http.StatusPermanentRedirect {
		t.Errorf("trusted proxy without X-Forwarded-Proto: %v, %v; want 308", resp, err)
	}
	// The same headers from a stranger: the redirect, and over HTTPS nginx's own values.
	other := clientFrom(stranger, s.port, false)
	resp, _, err = do(other, newRequest(t, http.MethodGet, "http://app.test/p", forwarded...))
	if err != nil || resp.StatusCode != http.StatusPermanentRedirect ||
		resp.Header.Get("Location") != "https://app.test:"+strconv.Itoa(httpsPort)+"/p" {
		t.Errorf("stranger with X-Forwarded-Proto https: %v, %v; want 308 to the HTTPS port", resp, err)
	}
	e, _, err := echoed(clientFrom(stranger, httpsPort, true), newRequest(t, http.MethodGet, "https://app.test/", forwarded...))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"X-Forwarded-For": stranger, "X-Forwarded-Proto": "https",
		"X-Forwarded-Host": "app.test", "X-Forwarded-Port": strconv.Itoa(httpsPort), "X-Real-Ip": stranger}
	for h, w := range want {
		if e.Headers[h] != w {
			t.Errorf("from a stranger the backend got %s %q, want %q", h, e.Headers[h], w)
		}
	}
}

// A bad --trusted-proxies or HSTS value stops the agent, naming the flag.
func TestTrustedProxiesAndHSTSBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"--trusted-proxies", "10.0.0.0/33"}, want: "--trusted-proxies"},
		{args: []string{"--trusted-proxies", "10.0.0.0/8,proxy.example"}, want: "--trusted-proxies"},
		{args: []string{"--trusted-proxies", "10.0.0.0/8 1; }"}, want: "--trusted-proxies"},
		{env: "RESTYSYNC_TRUSTED_PROXIES=10.0.0.0/8,nope", want: "--trusted-proxies"},
		{args: []string{"--hsts-max-age", "-1"}, want: "--hsts-max-age"},
		{args: []string{"--https-redirect-port", "70000"}, want: "--https-redirect-port"},
	} {
		t.Run(strings.Join(tc.args, " ")+tc.env, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			args := append([]string{"run", "--source", "file:" + t.TempDir(), "--shared-dir", t.TempDir()}, tc.args...)
			cmd := exec.CommandContext(ctx, agentBinary, args...)
			if tc.env != "" {
				cmd.Env = append(os.Environ(), tc.env)
			}
			out, err := cmd.CombinedOutput()
			if err == nil || cmd.ProcessState == nil || cmd.ProcessState.ExitCode() == 0 {
				t.Fatalf("exit %v, want non-zero; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output does not name %q:\n%s", tc.want, out)
			}
		})
	}
}

// healthServer is a gRPC backend: Check answers SERVING and tells, in the
// response header "backend", which backend it is and what it got.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	name string
}

func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	grpc.SetHeader(ctx, metadata.Pairs("backend", h.name, "got-service", req.Service,
		"got-authority", first(":authority"), "got-proto", first("x-forwarded-proto"), "got-request-id", first("x-request-id")))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// startGRPC serves the health service on addr, in plain text (h2c) or with
// TLS; sni returns the server names TLS clients asked for, accepted the
// number of connections.
func startGRPC(t *testing.T, addr string, withTLS bool) (port int, sni func() []string, accepted func() int64) {
	t.Helper()
	inner, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: inner}
	var (
		mu    sync.Mutex
		names []string
	)
	var opts []grpc.ServerOption
	if withTLS {
		pair := newTLSKeyPair(t, 3001, "backend.internal")
		cert, err := tls.X509KeyPair([]byte(pair.cert), []byte(pair.key))
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{cert},
			GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
				mu.Lock()
				names = append(names, hello.ServerName)
				mu.Unlock()
				return nil, nil
			},
		})))
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, &healthServer{name: addr})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return l.Addr().(*net.TCPAddr).Port, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(names)
	}, l.accepted.Load
}

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// grpcCheck makes one unary Health/Check call through nginx's HTTPS port
// with SNI and :authority host, and returns the response header.
func grpcCheck(httpsPort int, host string) (metadata.MD, error) {
	conn, err := grpc.NewClient("passthrough:///127.0.0.1:"+strconv.Itoa(httpsPort),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ServerName: host, InsecureSkipVerify: true})),
		grpc.WithAuthority(host))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var header metadata.MD
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "restysync"}, grpc.Header(&header))
	if err != nil {
		return header, err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return header, fmt.Errorf("status %s", resp.Status)
	}
	return header, nil
}

func mdFirst(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

// TestBackendProtocols: backend-protocol HTTPS proxies to a TLS backend
// with the request's host as SNI; GRPC and GRPCS carry a real grpc-go
// unary call from a grpc-go client (over TLS and HTTP/2 to nginx) to a
// plain-text and a TLS gRPC server; a value that is not a protocol is a
// Problem naming the annotation and HTTP is used.
func TestBackendProtocols(t *testing.T) {
	const ipHTTPS, ipGRPC, ipGRPCS, ipBad = "127.0.0.71", "127.0.0.72", "127.0.0.73", "127.0.0.74"

	httpsBackend := httptest.NewUnstartedServer(echoHandler(ipHTTPS))
	l, err := net.Listen("tcp", net.JoinHostPort(ipHTTPS, "0"))
	if err != nil {
		t.Fatal(err)
	}
	httpsBackend.Listener.Close()
	httpsBackend.Listener = l
	httpsBackend.StartTLS()
	t.Cleanup(httpsBackend.Close)
	httpsPortOfBackend := l.Addr().(*net.TCPAddr).Port

	grpcPort, _, grpcAccepted := startGRPC(t, ipGRPC, false)
	grpcsPort, grpcsSNI, _ := startGRPC(t, ipGRPCS, true)
	badPort := serveOn(t, ipBad, echoHandler(ipBad))

	hosts := []string{"grpc.test", "grpcs.test"}
	pair := newTLSKeyPair(t, 2004, hosts...)
	tlsHosts := []ingressTLS{{secret: "tls", hosts: hosts}}
	proto := func(p string) map[string]string {
		return map[string]string{"nginx.ingress.kubernetes.io/backend-protocol": p}
	}
	s := newStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"secret.yaml":  tlsSecret("tls", pair.cert, pair.key),
		"https.yaml": service("https", httpsPortOfBackend, ep(ipHTTPS)) + "---\n" +
			ingress("https", ingressOpts{class: "restysync", host: "https.test", paths: []path{prefix("/", "https")}, annotations: proto("HTTPS")}),
		"grpc.yaml": service("grpc", grpcPort, ep(ipGRPC)) + "---\n" +
			ingress("grpc", ingressOpts{class: "restysync", host: "grpc.test", paths: []path{prefix("/", "grpc")}, tls: tlsHosts, annotations: proto("GRPC")}),
		"grpcs.yaml": service("grpcs", grpcsPort, ep(ipGRPCS)) + "---\n" +
			ingress("grpcs", ingressOpts{class: "restysync", host: "grpcs.test", paths: []path{prefix("/", "grpcs")}, tls: tlsHosts,
				annotations: map[string]string{"restysync.io/backend-protocol": "grpcs"}}),
		"bad.yaml": service("bad", badPort, ep(ipBad)) + "---\n" +
			ingress("bad", ingressOpts{class: "restysync", host: "bad.test", paths: []path{prefix("/", "bad")}, annotations: proto("AJP")}),
	})
	httpsPort := stackHTTPSPort(t, s)

	t.Run("HTTPS backend", func(t *testing.T) {
		var e echoedRequest
		s.eventually("HTTP reaches the TLS backend", func() error {
			var err error
			e, _, err = echoed(s.client, newRequest(t, http.MethodGet, "http://https.test/x"))
			return err
		})
		if !e.TLS || e.SNI != "https.test" || e.Host != "https.test" || e.Backend != ipHTTPS {
			t.Errorf("the TLS backend got %+v; want TLS with SNI and Host https.test", e)
		}
	})

	t.Run("GRPC", func(t *testing.T) {
		var md metadata.MD
		s.eventually("a gRPC call through nginx", func() error {
			var err error
			md, err = grpcCheck(httpsPort, "grpc.test")
			return err
		})
		if mdFirst(md, "backend") != ipGRPC || mdFirst(md, "got-service") != "restysync" {
			t.Errorf("response header %v: want it from %s with the request", md, ipGRPC)
		}
		if got := mdFirst(md, "got-proto"); got != "https" {
			t.Errorf("the gRPC backend got X-Forwarded-Proto %q, want https", got)
		}
		if id := mdFirst(md, "got-request-id"); !requestIDPattern.MatchString(id) || mdFirst(md, "x-request-id") != id {
			t.Errorf("X-Request-ID: backend %q, response %q; want the same generated id", id, mdFirst(md, "x-request-id"))
		}
		if got := mdFirst(md, "got-authority"); got != "grpc.test" {
			t.Errorf("the gRPC backend got :authority %q, want grpc.test", got)
		}
		// Upstream keepalive works for grpc_pass through the Lua balancer:
		// more calls, each on a new client connection to nginx, reuse
		// nginx's connections to the backend (at most one per worker).
		for i := range 6 {
			if _, err := grpcCheck(httpsPort, "grpc.test"); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		if n := grpcAccepted(); n > 2 {
			t.Errorf("the gRPC backend accepted %d connections for 7 calls; want at most 2 (keepalive, 2 workers)", n)
		}
	})

	t.Run("GRPCS", func(t *testing.T) {
		var md metadata.MD
		s.eventually("a gRPC call through nginx to a TLS backend", func() error {
			var err error
			md, err = grpcCheck(httpsPort, "grpcs.test")
			return err
		})
		if mdFirst(md, "backend") != ipGRPCS {
			t.Errorf("response header %v: want it from %s", md, ipGRPCS)
		}
		if names := grpcsSNI(); len(names) == 0 || names[len(names)-1] != "grpcs.test" {
			t.Errorf("the TLS gRPC backend saw SNI %q, want grpcs.test", names)
		}
	})

	t.Run("gRPC over plain HTTP is not offered", func(t *testing.T) {
		conn, err := grpc.NewClient("passthrough:///127.0.0.1:"+strconv.Itoa(s.port),
			grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.test"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
			t.Error("a plain-text HTTP/2 gRPC call on the HTTP port succeeded; the HTTP port speaks HTTP/1.1 only")
		}
	})

	t.Run("a bad protocol is a Problem; HTTP is used", func(t *testing.T) {
		s.eventually("bad.test is served over HTTP", func() error {
			e, _, err := echoed(s.client, newRequest(t, http.MethodGet, "http://bad.test/"))
			if err == nil && e.Backend != ipBad {
				err = fmt.Errorf("got %+v", e)
			}
			return err
		})
		s.eventually("the problem is logged", func() error {
			if !strings.Contains(s.agent.log.String(), `annotation nginx.ingress.kubernetes.io/backend-protocol \"AJP\"`) &&
				!strings.Contains(s.agent.log.String(), `annotation nginx.ingress.kubernetes.io/backend-protocol "AJP"`) {
				return errors.New("the agent log does not name the annotation")
			}
			return nil
		})
	})
}

// wsBackends serve, on one port of each address, a WebSocket echo at /ws
// that prefixes every message with the address, and the address at any
// other path.
func wsBackends(t *testing.T, addrs ...string) int {
	t.Helper()
	handler := func(name string) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/ws", websocket.Handler(func(c *websocket.Conn) {
			for {
				var msg string
				if err := websocket.Message.Receive(c, &msg); err != nil {
					return
				}
				if err := websocket.Message.Send(c, name+": "+msg); err != nil {
					return
				}
			}
		}))
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name+"\n") })
		return mux
	}
	for attempt := 0; attempt < 20; attempt++ {
		port := serveOn(t, addrs[0], handler(addrs[0]))
		ok := true
		for _, addr := range addrs[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			srv := &http.Server{Handler: handler(addr), ReadHeaderTimeout: 5 * time.Second}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", addrs)
	return 0
}

// wsDial opens a WebSocket session to ws://host/ws through nginx's HTTP port.
func wsDial(port int, host string) (*websocket.Conn, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	cfg, err := websocket.NewConfig("ws://"+host+"/ws", "http://"+host+"/")
	if err != nil {
		conn.Close()
		return nil, err
	}
	ws, err := websocket.NewClient(cfg, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return ws, nil
}

func wsEcho(ws *websocket.Conn, msg string) (string, error) {
	if err := websocket.Message.Send(ws, msg); err != nil {
		return "", err
	}
	var reply string
	err := websocket.Message.Receive(ws, &reply)
	return reply, err
}

// TestWebSocketSurvivesEndpointPush: a WebSocket session through nginx
// keeps talking to its endpoint after the Service's endpoints change (the
// endpoint it uses even leaves the EndpointSlice): the change is a push to
// Lua, no reload (nginx's workers stay the same), and only new sessions
// and requests go to the new endpoint.
func TestWebSocketSurvivesEndpointPush(t *testing.T) {
	const ipOld, ipNew = "127.0.0.81", "127.0.0.82"
	const host = "ws.test"
	port := wsBackends(t, ipOld, ipNew)
	s := newStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("ws", port, ep(ipOld)),
		"ingress.yaml": ingress("ws", ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "ws")}}),
	})
	s.eventually("the host is served", func() error { return s.expect(host, "/", ipOld) })
	s.eventually("the start-up reloads are over", func() error {
		if n := len(s.nginx.WorkerPIDs()); n != 2 {
			return fmt.Errorf("%d workers, want 2", n)
		}
		return nil
	})
	workers := s.steadyWorkers()

	ws, err := wsDial(s.port, host)
	if err != nil {
		t.Fatalf("WebSocket handshake through nginx: %v", err)
	}
	defer ws.Close()
	if reply, err := wsEcho(ws, "one"); err != nil || reply != ipOld+": one" {
		t.Fatalf("echo before the push: %q, %v", reply, err)
	}

	s.writeFile("service.yaml", service("ws", port, ep(ipNew)))
	s.eventually("new requests go to the new endpoint", func() error { return s.expect(host, "/", ipNew) })

	if reply, err := wsEcho(ws, "two"); err != nil || reply != ipOld+": two" {
		t.Errorf("echo on the open session after the push: %q, %v; want it from %s", reply, err, ipOld)
	}
	fresh, err := wsDial(s.port, host)
	if err != nil {
		t.Fatalf("a new WebSocket session: %v", err)
	}
	defer fresh.Close()
	if reply, err := wsEcho(fresh, "three"); err != nil || reply != ipNew+": three" {
		t.Errorf("echo on a new session: %q, %v; want it from %s", reply, err, ipNew)
	}
	if now := s.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
		t.Errorf("nginx workers changed from %v to %v: the endpoint change reloaded", workers, now)
	}
	if !strings.Contains(s.agent.log.String(), "push") {
		t.Log("agent log does not mention a push")
	}
}
