package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// More ConfigMap keys over real HTTP: worker-processes, proxy-read-timeout,
// keep-alive-requests, log-format-upstream and forwarded-for-header.
func TestConfigMapMoreKeys(t *testing.T) {
	const ipWeb = "127.0.0.153"
	port := nginxproc.FreePort(t)
	serve(t, ipWeb, port, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/no-read":
			time.Sleep(4 * time.Second) // never reads the body
			io.WriteString(w, "too late")
		case "/slow":
			time.Sleep(2500 * time.Millisecond)
			io.WriteString(w, "late")
		default:
			io.WriteString(w, "ok")
		}
	})
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"web.yaml":     service("web", port, ep(ipWeb)),
		"ingress.yaml": ingress("web", ingressOpts{class: "restysync", host: "keys.test", paths: []path{prefix("/", "web")}}),
		"settings.yaml": configMap(map[string]string{
			"worker-processes":    "3",
			"proxy-read-timeout":  "1",
			"proxy-send-timeout":  "1",
			"proxy-body-size":     "0",
			"keep-alive-requests": "2",
			"enable-access-log":   "true",
			"access-log-path":     "logs/access.log",
			"log-format-upstream": "restysync-test $request_method $uri $status $restysync_backend",
		}),
	})
	s.eventually("served with the ConfigMap", func() error {
		if n := len(s.nginx.WorkerPIDs()); n != 3 {
			return fmt.Errorf("%d nginx workers, want 3 (worker-processes)", n)
		}
		_, body, err := s.request("GET", "keys.test", "/", nil, nil)
		if err == nil && body != "ok" {
			err = fmt.Errorf("body %q", body)
		}
		return err
	})

	t.Run("proxy-read-timeout", func(t *testing.T) {
		start := time.Now()
		resp, _, err := s.request("GET", "keys.test", "/slow", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("a backend 2.5 s late with proxy-read-timeout 1: %d after %s, want 504", resp.StatusCode, time.Since(start))
		}
	})

	t.Run("proxy-send-timeout", func(t *testing.T) {
		// 64 MiB fills the socket buffers of a backend that does not read.
		start := time.Now()
		c := clientTo(s.port)
		c.Timeout = 15 * time.Second
		req, _ := http.NewRequest("POST", "http://keys.test/no-read", strings.NewReader(strings.Repeat("x", 64<<20)))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("a backend that does not read, proxy-send-timeout 1: %d after %s, want 504", resp.StatusCode, time.Since(start))
		}
	})

	t.Run("keep-alive-requests", func(t *testing.T) {
		// One client, one connection: nginx closes it after the second request.
		c := clientTo(s.port)
		var closed []bool
		for range 2 {
			req, _ := http.NewRequest("GET", fmt.Sprintf("http://keys.test:%d/", s.port), nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			closed = append(closed, resp.Close)
		}
		if closed[0] || !closed[1] {
			t.Errorf("connection closed after requests 1, 2: %v; want only after the second", closed)
		}
	})

	t.Run("log-format-upstream", func(t *testing.T) {
		s.eventually("the request logged in the custom format", func() error {
			log, err := os.ReadFile(filepath.Join(s.shared, "logs", "access.log"))
			if err != nil {
				return err
			}
			if !strings.Contains(string(log), "restysync-test GET /slow 504 default/web:80") {
				return fmt.Errorf("access log:\n%s", log)
			}
			return nil
		})
	})
}

// TLS keys from the ConfigMap, checked with real TLS clients:
// ssl-protocols (a TLS 1.2 client is refused when only TLSv1.3 is on),
// ssl-ciphers (a TLS 1.2 client offering only a cipher left out is refused)
// and the hsts keys overriding the flags' defaults.
func TestConfigMapTLSKeys(t *testing.T) {
	const ip = "127.0.0.154"
	port := serveOn(t, ip, echoHandler(ip))
	pair := newTLSKeyPair(t, 3003, "cmtls.test")
	files := map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("web", port, ep(ip)),
		"secret.yaml":  tlsSecret("tls", pair.cert, pair.key),
		"ingress.yaml": ingress("web", ingressOpts{class: "restysync", host: "cmtls.test", paths: []path{prefix("/", "web")},
			tls: []ingressTLS{{secret: "tls", hosts: []string{"cmtls.test"}}}}),
	}
	handshake := func(httpsPort int, version uint16, ciphers []uint16) error {
		d := &net.Dialer{Timeout: 5 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(httpsPort)),
			&tls.Config{ServerName: "cmtls.test", InsecureSkipVerify: true, MinVersion: version, MaxVersion: version, CipherSuites: ciphers})
		if err == nil {
			conn.Close()
		}
		return err
	}

	// servedOverHTTPS starts a stack with settings as its ConfigMap and
	// returns its HTTPS port and the first response that came through.
	servedOverHTTPS := func(t *testing.T, settings map[string]string) (int, *http.Response) {
		s := newConfigMapStack(t, with(files, "settings.yaml", configMap(settings)))
		httpsPort := stackHTTPSPort(t, s)
		client := httpsClient(httpsPort)
		var resp *http.Response
		s.eventually("HTTPS reaches the backend", func() error {
			var err error
			_, resp, err = echoed(client, newRequest(t, http.MethodGet, "https://cmtls.test/"))
			return err
		})
		return httpsPort, resp
	}

	t.Run("ssl-protocols and hsts", func(t *testing.T) {
		httpsPort, resp := servedOverHTTPS(t, map[string]string{
			"ssl-protocols":           "TLSv1.3",
			"hsts-max-age":            "300",
			"hsts-include-subdomains": "false",
			"hsts-preload":            "true",
		})
		if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=300; preload" {
			t.Errorf("Strict-Transport-Security %q, want the ConfigMap's max-age=300; preload", got)
		}
		if err := handshake(httpsPort, tls.VersionTLS13, nil); err != nil {
			t.Errorf("TLS 1.3 handshake: %v", err)
		}
		if err := handshake(httpsPort, tls.VersionTLS12, nil); err == nil {
			t.Error("a TLS 1.2 handshake succeeded with ssl-protocols TLSv1.3")
		}
	})

	t.Run("ssl-ciphers and hsts off", func(t *testing.T) {
		httpsPort, resp := servedOverHTTPS(t, map[string]string{
			"ssl-protocols": "TLSv1.2",
			"ssl-ciphers":   "ECDHE-ECDSA-AES128-GCM-SHA256",
			"hsts":          "false",
		})
		if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
			t.Errorf("Strict-Transport-Security %q with hsts false", got)
		}
		if err := handshake(httpsPort, tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}); err != nil {
			t.Errorf("TLS 1.2 with the listed cipher: %v", err)
		}
		if err := handshake(httpsPort, tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}); err == nil {
			t.Error("TLS 1.2 with a cipher ssl-ciphers leaves out succeeded")
		}
	})
}

// with returns a copy of files with name set to content.
func with(files map[string]string, name, content string) map[string]string {
	out := maps.Clone(files)
	out[name] = content
	return out
}

// upstream-keepalive-connections: with the default, nginx reuses its
// connections to the backend; with 0 it opens one per request.
// forwarded-for-header: a trusted proxy's chain is read from that header.
func TestConfigMapUpstreamKeepaliveAndForwardedFor(t *testing.T) {
	const ipWeb = "127.0.0.155"
	var accepted atomic.Int64
	l, err := net.Listen("tcp", net.JoinHostPort(ipWeb, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second,
		ConnState: func(_ net.Conn, state http.ConnState) {
			if state == http.StateNew {
				accepted.Add(1)
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, r.Header.Get("X-Forwarded-For"))
		})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port

	settings := map[string]string{"use-forwarded-headers": "true", "forwarded-for-header": "X-Client-Chain",
		"disable-access-log": "false", "access-log-path": "logs/access.log"}
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"web.yaml":      service("web", port, ep(ipWeb)),
		"ingress.yaml":  ingress("web", ingressOpts{class: "restysync", host: "ka.test", paths: []path{prefix("/", "web")}}),
		"settings.yaml": configMap(settings),
	})
	s.eventually("served", func() error {
		_, _, err := s.request("GET", "ka.test", "/", nil, nil)
		return err
	})
	connectionsFor := func(requests int) int64 {
		before := accepted.Load()
		for range requests {
			if _, _, err := s.request("GET", "ka.test", "/", nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		return accepted.Load() - before
	}

	t.Run("forwarded-for-header", func(t *testing.T) {
		_, xff, err := s.request("GET", "ka.test", "/", nil, map[string]string{"X-Client-Chain": "203.0.113.7"})
		if err != nil || xff != "203.0.113.7, 127.0.0.1" {
			t.Errorf("X-Forwarded-For at the backend %q (%v), want the chain from X-Client-Chain and the proxy", xff, err)
		}
	})

	t.Run("disable-access-log false", func(t *testing.T) {
		s.eventually("the request is logged", func() error {
			log, err := os.ReadFile(filepath.Join(s.shared, "logs", "access.log"))
			if err != nil {
				return err
			}
			if !strings.Contains(string(log), `"GET / HTTP/1.1" 200`) {
				return fmt.Errorf("access log:\n%s", log)
			}
			return nil
		})
	})

	t.Run("upstream-keepalive-connections", func(t *testing.T) {
		if n := connectionsFor(20); n > 4 {
			t.Errorf("20 requests with upstream keep-alive on opened %d backend connections, want at most one per worker and a spare", n)
		}
		workers := s.steadyWorkers()
		settings["upstream-keepalive-connections"] = "0"
		s.writeFile("settings.yaml", configMap(settings))
		s.eventually("nginx reloaded", func() error {
			if now := s.nginx.WorkerPIDs(); slices.Equal(now, workers) || len(now) != len(workers) {
				return fmt.Errorf("workers %v, before %v", now, workers)
			}
			return nil
		})
		if n := connectionsFor(20); n != 20 {
			t.Errorf("20 requests with upstream-keepalive-connections 0 opened %d backend connections, want 20", n)
		}
	})
}
