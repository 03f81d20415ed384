package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// End-to-end tests of the proxy and routing annotations (issue 8): real
// requests through real nginx to real backends on loopback, with the
// annotations under both prefixes.

// seenRequest is what a proxyEcho backend saw of a request.
type seenRequest struct {
	Backend string `json:"backend"`
	Method  string `json:"method"`
	URI     string `json:"uri"`
	Host    string `json:"host"`
	Prefix  string `json:"prefix"`  // X-Forwarded-Prefix
	Body    int64  `json:"body"`    // bytes of request body read
	Proto   string `json:"proto"`   // HTTP version nginx spoke to the backend
	Chunked bool   `json:"chunked"` // the body came chunked, not with a Content-Length
}

// hitCounter counts requests per backend and method.
type hitCounter struct {
	mu   sync.Mutex
	hits map[string]int // "backend METHOD"
}

func (c *hitCounter) add(backend, method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hits == nil {
		c.hits = map[string]int{}
	}
	c.hits[backend+" "+method]++
}

func (c *hitCounter) get(backend, method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[backend+" "+method]
}

// proxyEcho answers 200 with the request as it reached the backend, as JSON.
func proxyEcho(name string, hits *hitCounter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		hits.add(name, r.Method)
		json.NewEncoder(w).Encode(seenRequest{Backend: name, Method: r.Method, URI: r.RequestURI, Host: r.Host,
			Prefix: r.Header.Get("X-Forwarded-Prefix"), Body: n, Proto: r.Proto, Chunked: slices.Contains(r.TransferEncoding, "chunked")})
	})
}

// serveSamePort serves each address's handler on one port free on all of
// them, as the endpoints of one Service, and returns the port.
func serveSamePort(t *testing.T, handlers map[string]http.Handler) int {
	t.Helper()
	for range 20 {
		port := freePortOn(t)
		var listeners []net.Listener
		var addrs []string
		for addr := range handlers {
			l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
			if err != nil {
				break
			}
			listeners, addrs = append(listeners, l), append(addrs, addr)
		}
		if len(listeners) < len(handlers) {
			for _, l := range listeners {
				l.Close()
			}
			continue
		}
		for i, l := range listeners {
			srv := &http.Server{Handler: handlers[addrs[i]], ReadHeaderTimeout: 5 * time.Second}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
		}
		return port
	}
	t.Fatal("no port free on all addresses")
	return 0
}

// freePortOn picks a port the kernel has free on loopback.
func freePortOn(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// send sends method host+pathQuery with body (nil for none) and returns
// the status, the Location header and the body.
func (s *stack) send(method, host, pathQuery string, body io.Reader) (int, string, string, error) {
	req, err := http.NewRequest(method, "http://"+host+pathQuery, body)
	if err != nil {
		return 0, "", "", err
	}
	resp, text, err := do(s.client, req)
	if err != nil {
		return 0, "", "", err
	}
	return resp.StatusCode, resp.Header.Get("Location"), text, nil
}

// seen sends GET host+pathQuery and decodes what the echo backend saw.
func (s *stack) seen(host, pathQuery string) (seenRequest, error) {
	var e seenRequest
	status, _, body, err := s.send(http.MethodGet, host, pathQuery, nil)
	if err != nil {
		return e, err
	}
	if status != http.StatusOK {
		return e, fmt.Errorf("GET %s%s: %d %q", host, pathQuery, status, body)
	}
	return e, json.Unmarshal([]byte(body), &e)
}

// TestAnnotationsProxy covers the proxy and routing annotations in one
// stack: rewrites with capture groups, app-root, permanent and temporal
// redirects, request body limits, read timeouts, upstream-vhost,
// x-forwarded-prefix, server-alias, proxy-next-upstream (a 502 retried on
// the next endpoint for GET, never for POST) and enable-access-log.
func TestAnnotationsProxy(t *testing.T) {
	const (
		ipEcho  = "127.0.0.141"
		ipSlow  = "127.0.0.142"
		ipBad   = "127.0.0.143" // answers 502
		ipGood  = "127.0.0.144"
		ipBulk  = "127.0.0.145" // sends a large body
		ipBig   = "127.0.0.146" // sends a 6 KiB response header
		nginxIO = "nginx.ingress.kubernetes.io/"
		ours    = "restysync.io/"
	)
	hits := &hitCounter{}
	echoPort := serveOn(t, ipEcho, proxyEcho(ipEcho, hits))
	slowPort := serveOn(t, ipSlow, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/fast" {
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "slow backend\n")
	}))
	flakyPort := serveSamePort(t, map[string]http.Handler{
		ipBad: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			hits.add(ipBad, r.Method)
			http.Error(w, "bad gateway from "+ipBad, http.StatusBadGateway)
		}),
		ipGood: proxyEcho(ipGood, hits),
	})

	bigPort := serveOn(t, ipBig, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 6<<10))
		io.WriteString(w, "big header\n")
	}))
	bulk := newBulkBackend()
	bulkPort := serveOn(t, ipBulk, bulk)

	ing := func(name, host string, p path, annotations map[string]string) string {
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{p}, annotations: annotations})
	}
	files := map[string]string{
		"classes.yaml": ingressClasses,
		"services.yaml": service("echo", echoPort, ep(ipEcho)) + "---\n" + service("slow", slowPort, ep(ipSlow)) +
			"---\n" + service("flaky", flakyPort, ep(ipBad), ep(ipGood)) + "---\n" + service("bulk", bulkPort, ep(ipBulk)) +
			"---\n" + service("scaled-to-zero", echoPort) + "---\n" + service("big", bigPort, ep(ipBig)),
		"config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: restysync
  namespace: default
data:
  enable-access-log: "true"
  access-log-path: logs/access.log
`,
		"rewrite.yaml": ing("rewrite", "rewrite.test", implementationSpecific("/something(/|$)(.*)", "echo"), map[string]string{
			nginxIO + "rewrite-target":     "/$2",
			nginxIO + "x-forwarded-prefix": "/something",
		}),
		"vhost.yaml": ing("vhost", "vhost.test", prefix("/", "echo"), map[string]string{
			ours + "upstream-vhost":  "internal.example:8080",
			nginxIO + "server-alias": "alias.test, www.alias.test",
		}),
		"approot.yaml": ing("approot", "approot.test", prefix("/", "echo"), map[string]string{ours + "app-root": "/app/"}),
		"perm.yaml": ing("perm", "perm.test", prefix("/", "echo"), map[string]string{
			nginxIO + "permanent-redirect":      "https://new.example.com/landing",
			nginxIO + "permanent-redirect-code": "308",
		}),
		"perm301.yaml": ing("perm301", "perm301.test", prefix("/", "echo"), map[string]string{ours + "permanent-redirect": "https://new.example.com/"}),
		"temp.yaml":    ing("temp", "temp.test", prefix("/", "echo"), map[string]string{nginxIO + "temporal-redirect": "https://tmp.example.com/x"}),
		"body.yaml":    ing("body", "body.test", prefix("/", "echo"), map[string]string{ours + "proxy-body-size": "4k"}),
		"bigbody.yaml": ing("bigbody", "bigbody.test", prefix("/", "echo"), map[string]string{nginxIO + "proxy-body-size": "8m"}),
		"plain.yaml":   ing("plain", "plain.test", prefix("/", "echo"), nil),
		"slow.yaml":    ing("slow", "slow.test", prefix("/", "slow"), map[string]string{nginxIO + "proxy-read-timeout": "1"}),
		// max-fails high: passive health must not take the 502 endpoint
		// out, or the requests below would never meet it.
		"retry.yaml": ing("retry", "retry.test", prefix("/", "flaky"), map[string]string{
			nginxIO + "proxy-next-upstream": "error timeout http_502",
			ours + "max-fails":              "1000",
		}),
		"noretry.yaml": ing("noretry", "noretry.test", prefix("/", "flaky"), map[string]string{ours + "max-fails": "1000"}),
		"quiet.yaml":   ing("quiet", "quiet.test", prefix("/", "echo"), map[string]string{nginxIO + "enable-access-log": "false"}),
		"loud.yaml":    ing("loud", "loud.test", prefix("/", "echo"), nil),
		"stream.yaml":  ing("stream", "stream.test", prefix("/", "bulk"), nil),
		"fallback.yaml": ing("fallback", "fallback.test", prefix("/", "scaled-to-zero"), map[string]string{
			nginxIO + "default-backend": "echo",
		}),
		"nofallback.yaml": ing("nofallback", "nofallback.test", prefix("/", "scaled-to-zero"), nil),
		"http10.yaml":     ing("http10", "http10.test", prefix("/", "echo"), map[string]string{nginxIO + "proxy-http-version": "1.0"}),
		"smallbuf.yaml":   ing("smallbuf", "smallbuf.test", prefix("/", "big"), map[string]string{nginxIO + "proxy-buffer-size": "4k"}),
		"bigbuf.yaml":     ing("bigbuf", "bigbuf.test", prefix("/", "big"), map[string]string{ours + "proxy-buffer-size": "16k"}),
		"unbuffered.yaml": ing("unbuffered", "unbuffered.test", prefix("/", "echo"), map[string]string{nginxIO + "proxy-request-buffering": "off"}),
		"buffered.yaml": ing("buffered", "buffered.test", prefix("/", "bulk"), map[string]string{
			nginxIO + "proxy-buffering": "on",
		}),
	}
	s := newStackWith(t, files, "--configmap", "default/restysync")
	s.eventually("the annotated Ingresses are served", func() error {
		_, err := s.seen("loud.test", "/")
		return err
	})

	t.Run("rewrite-target with capture groups", func(t *testing.T) {
		for uri, want := range map[string]string{
			"/something/new/path?q=1": "/new/path?q=1",
			"/something":              "/",
			"/SOMETHING/x":            "/x", // regex paths match case-insensitively
		} {
			e, err := s.seen("rewrite.test", uri)
			if err != nil {
				t.Fatal(err)
			}
			if e.URI != want || e.Prefix != "/something" {
				t.Errorf("GET %s: backend saw %s with X-Forwarded-Prefix %q; want %s with /something", uri, e.URI, e.Prefix, want)
			}
		}
		if status, _, _, err := s.send(http.MethodGet, "rewrite.test", "/other", nil); err != nil || status != http.StatusNotFound {
			t.Errorf("GET /other: %d, %v; want 404 (no path matches)", status, err)
		}
	})

	t.Run("upstream-vhost and server-alias", func(t *testing.T) {
		for _, host := range []string{"vhost.test", "alias.test", "www.alias.test"} {
			e, err := s.seen(host, "/x")
			if err != nil {
				t.Fatal(err)
			}
			if e.Host != "internal.example:8080" || e.Prefix != "" {
				t.Errorf("%s: backend saw Host %q, X-Forwarded-Prefix %q; want internal.example:8080 and none", host, e.Host, e.Prefix)
			}
		}
		if e, err := s.seen("plain.test", "/x"); err != nil || e.Host != "plain.test" {
			t.Errorf("plain.test: backend saw Host %q, %v; want the client's host", e.Host, err)
		}
	})

	t.Run("proxy-buffer-size", func(t *testing.T) {
		for host, want := range map[string]int{"smallbuf.test": http.StatusBadGateway, "bigbuf.test": http.StatusOK} {
			if status, _, _, err := s.send(http.MethodGet, host, "/", nil); err != nil || status != want {
				t.Errorf("%s with a 6 KiB response header: %d, %v; want %d", host, status, err, want)
			}
		}
	})

	t.Run("proxy-request-buffering", func(t *testing.T) {
		// A body of unknown length goes chunked from the client: nginx
		// buffers it and sends a Content-Length, or, with buffering off,
		// passes it on chunked as it comes.
		for host, wantChunked := range map[string]bool{"plain.test": false, "unbuffered.test": true} {
			body, w := io.Pipe()
			go func() {
				io.WriteString(w, "streamed ")
				time.Sleep(200 * time.Millisecond) // the rest comes later
				io.WriteString(w, "body")
				w.Close()
			}()
			status, _, text, err := s.send(http.MethodPost, host, "/", body)
			var e seenRequest
			if err == nil && status == http.StatusOK {
				err = json.Unmarshal([]byte(text), &e)
			}
			if err != nil || status != http.StatusOK || e.Body != 13 || e.Chunked != wantChunked {
				t.Errorf("%s: %d %+v %v; want 200, 13 bytes, chunked %v", host, status, e, err, wantChunked)
			}
		}
	})

	t.Run("proxy-http-version", func(t *testing.T) {
		for host, want := range map[string]string{"http10.test": "HTTP/1.0", "plain.test": "HTTP/1.1"} {
			if e, err := s.seen(host, "/"); err != nil || e.Proto != want {
				t.Errorf("%s: the backend saw %q (%v), want %s", host, e.Proto, err, want)
			}
		}
	})

	t.Run("default-backend answers while the Service has no endpoints", func(t *testing.T) {
		if e, err := s.seen("fallback.test", "/x"); err != nil || e.Backend != ipEcho || e.URI != "/x" {
			t.Errorf("fallback.test: %+v, %v; want the request answered by the default-backend Service (%s)", e, err, ipEcho)
		}
		if status, _, _, err := s.send(http.MethodGet, "nofallback.test", "/", nil); err != nil || status != http.StatusServiceUnavailable {
			t.Errorf("nofallback.test: %d, %v; want 503 without a default-backend", status, err)
		}
	})

	t.Run("proxy-buffering", func(t *testing.T) {
		// On: nginx takes the whole response from the backend (into a
		// temp file) while the client reads nothing yet.
		if !bulk.fetch(t, s.port, "buffered.test", "on") {
			t.Error("buffered.test (proxy-buffering on): the backend could not finish sending while the client waited")
		}
		// Off (the default, as in ingress-nginx): nginx reads from the
		// backend only as fast as the client takes the response.
		if bulk.fetch(t, s.port, "stream.test", "off") {
			t.Error("stream.test (buffering off): the backend finished sending before the client read anything")
		}
	})

	t.Run("redirects", func(t *testing.T) {
		for _, tc := range []struct {
			host, uri  string
			wantStatus int
			wantTo     string
		}{
			{"approot.test", "/", http.StatusFound, "http://approot.test/app/"},
			{"perm.test", "/any/path?x=1", http.StatusPermanentRedirect, "https://new.example.com/landing"},
			{"perm301.test", "/", http.StatusMovedPermanently, "https://new.example.com/"},
			{"temp.test", "/y", http.StatusFound, "https://tmp.example.com/x"},
		} {
			status, location, _, err := s.send(http.MethodGet, tc.host, tc.uri, nil)
			if err != nil || status != tc.wantStatus || location != tc.wantTo {
				t.Errorf("GET %s%s: %d to %q, %v; want %d to %s", tc.host, tc.uri, status, location, err, tc.wantStatus, tc.wantTo)
			}
		}
		// app-root redirects "/" only; other paths reach the backend.
		if e, err := s.seen("approot.test", "/app/page"); err != nil || e.URI != "/app/page" {
			t.Errorf("approot.test/app/page: %+v, %v; want it proxied", e, err)
		}
	})

	t.Run("proxy-body-size", func(t *testing.T) {
		post := func(host string, size int) int {
			t.Helper()
			status, _, _, err := s.send(http.MethodPost, host, "/upload", strings.NewReader(strings.Repeat("x", size)))
			if err != nil {
				t.Fatalf("POST %d bytes to %s: %v", size, host, err)
			}
			return status
		}
		for _, tc := range []struct {
			host string
			size int
			want int
		}{
			{"body.test", 4 << 10, http.StatusOK},
			{"body.test", 4<<10 + 1, http.StatusRequestEntityTooLarge},
			{"plain.test", 1 << 20, http.StatusOK},                        // the default, 1m
			{"plain.test", 1<<20 + 1, http.StatusRequestEntityTooLarge},   // over the default
			{"bigbody.test", 3 << 20, http.StatusOK},                      // raised to 8m
			{"bigbody.test", 8<<20 + 1, http.StatusRequestEntityTooLarge}, // over 8m
		} {
			if got := post(tc.host, tc.size); got != tc.want {
				t.Errorf("POST %d bytes to %s: %d, want %d", tc.size, tc.host, got, tc.want)
			}
		}
	})

	t.Run("proxy-read-timeout", func(t *testing.T) {
		start := time.Now()
		status, _, _, err := s.send(http.MethodGet, "slow.test", "/", nil)
		took := time.Since(start)
		if err != nil || status != http.StatusGatewayTimeout {
			t.Errorf("GET slow.test: %d, %v; want 504", status, err)
		}
		if took < 900*time.Millisecond || took > 2500*time.Millisecond {
			t.Errorf("GET slow.test answered after %s; want about the 1 s read timeout", took)
		}
		if status, _, _, err := s.send(http.MethodGet, "slow.test", "/fast", nil); err != nil || status != http.StatusOK {
			t.Errorf("GET slow.test/fast: %d, %v; want 200", status, err)
		}
	})

	t.Run("proxy-next-upstream", func(t *testing.T) {
		const n = 20
		badGets := hits.get(ipBad, http.MethodGet)
		for i := range n {
			e, err := s.seen("retry.test", "/get/"+strconv.Itoa(i))
			if err != nil || e.Backend != ipGood {
				t.Fatalf("GET retry.test #%d: %+v, %v; want every GET answered by %s after a retry", i, e, err, ipGood)
			}
		}
		if hits.get(ipBad, http.MethodGet) == badGets {
			t.Errorf("no GET reached %s: the retries were not tested", ipBad)
		}

		// POST is not idempotent: the one sent to the 502 endpoint is not retried.
		badPosts, goodPosts := hits.get(ipBad, http.MethodPost), hits.get(ipGood, http.MethodPost)
		got502, got200 := 0, 0
		for i := range n {
			status, _, body, err := s.send(http.MethodPost, "retry.test", "/post/"+strconv.Itoa(i), strings.NewReader("payload"))
			if err != nil {
				t.Fatal(err)
			}
			switch status {
			case http.StatusBadGateway:
				got502++
			case http.StatusOK:
				got200++
			default:
				t.Fatalf("POST retry.test: %d %q", status, body)
			}
		}
		toBad, toGood := hits.get(ipBad, http.MethodPost)-badPosts, hits.get(ipGood, http.MethodPost)-goodPosts
		if got502 == 0 || got502 != toBad || got200 != toGood || toBad+toGood != n {
			t.Errorf("%d POSTs: %d answered 502 and %d 200; %s saw %d, %s saw %d: want some 502s, each POST sent once",
				n, got502, got200, ipBad, toBad, ipGood, toGood)
		}

		// Without the annotation a 502 is not retried ("error timeout").
		got502 = 0
		for i := range n {
			status, _, _, err := s.send(http.MethodGet, "noretry.test", "/get/"+strconv.Itoa(i), nil)
			if err != nil {
				t.Fatal(err)
			}
			if status == http.StatusBadGateway {
				got502++
			}
		}
		if got502 == 0 {
			t.Errorf("noretry.test: no 502 in %d GETs; the default must not retry on 502", n)
		}
	})

	t.Run("enable-access-log", func(t *testing.T) {
		for _, host := range []string{"quiet.test", "loud.test"} {
			if _, err := s.seen(host, "/"+strings.TrimSuffix(host, ".test")+"-marker"); err != nil {
				t.Fatal(err)
			}
		}
		logPath := filepath.Join(s.shared, "logs", "access.log")
		s.eventually("loud.test is in the access log", func() error {
			b, err := os.ReadFile(logPath)
			if err != nil {
				return err
			}
			if !strings.Contains(string(b), "/loud-marker") {
				return fmt.Errorf("no /loud-marker in %d bytes of access log", len(b))
			}
			return nil
		})
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "/quiet-marker") {
			t.Errorf("the access log has the request of quiet.test (enable-access-log false):\n%s", b)
		}
	})
}

// bulkBackend answers with bulkSize bytes and records, by the request's
// ?id=, when it has written them all: with proxy buffering nginx takes
// them at once, without it only as fast as the client reads.
type bulkBackend struct {
	mu   sync.Mutex
	done map[string]chan struct{}
}

const bulkSize = 64 << 20 // more than the sockets between the three hold

func newBulkBackend() *bulkBackend { return &bulkBackend{done: map[string]chan struct{}{}} }

func (b *bulkBackend) doneCh(id string) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.done[id]
	if !ok {
		ch = make(chan struct{})
		b.done[id] = ch
	}
	return ch
}

func (b *bulkBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", strconv.Itoa(bulkSize))
	chunk := make([]byte, 1<<20)
	for range bulkSize / len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
	close(b.doneCh(r.URL.Query().Get("id")))
}

// fetch GETs host/?id=id through nginx on port, waits up to 3 seconds
// before reading the body, and says whether the backend finished sending
// in that time. Then it reads the whole body.
func (b *bulkBackend) fetch(t *testing.T, port int, host, id string) (finishedFirst bool) {
	t.Helper()
	client := clientTo(port)
	client.Timeout = 30 * time.Second
	resp, err := client.Get("http://" + host + "/?id=" + id)
	if err != nil {
		t.Fatalf("GET %s: %v", host, err)
	}
	defer resp.Body.Close()
	select {
	case <-b.doneCh(id):
		finishedFirst = true
	case <-time.After(3 * time.Second):
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != bulkSize {
		t.Errorf("GET %s: %d bytes, %v; want %d", host, n, err, bulkSize)
	}
	return finishedFirst
}
