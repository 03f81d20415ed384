package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Loopback addresses of TestHTTPSHostWithoutTLS's backends.
const ipTenantA, ipTenantB = "127.0.0.191", "127.0.0.192"

// TestHTTPSHostWithoutTLS: tenant B owns the default server (a host-less
// rule), tenant A's host has no spec.tls, and the platform's default
// certificate is a valid wildcard over A's host. An HTTPS request for A's
// host is served by A's own locations with the default certificate, as
// ingress-nginx serves it, never by B's default server; plain HTTP to it
// is not redirected (no TLS of its own). A's app-root redirect names the
// host the router matched, not a Host header that disagrees with the
// request line.
func TestHTTPSHostWithoutTLS(t *testing.T) {
	portA := serveOn(t, ipTenantA, echoHandler(ipTenantA))
	portB := serveOn(t, ipTenantB, echoHandler(ipTenantB))
	platform := newTLSKeyPair(t, 2501, "*.apps.test")
	files := map[string]string{
		"classes.yaml":  ingressClasses,
		"app-a.yaml":    service("app-a", portA, ep(ipTenantA)),
		"app-b.yaml":    service("app-b", portB, ep(ipTenantB)),
		"platform.yaml": tlsSecret("platform-tls", platform.cert, platform.key),
		"tenant-b.yaml": ingress("tenant-b", ingressOpts{class: "restysync", paths: []path{prefix("/", "app-b")}}),
		"tenant-a.yaml": ingress("tenant-a", ingressOpts{class: "restysync", host: "a.apps.test", paths: []path{prefix("/", "app-a")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/app-root": "/app/"}}),
	}
	s := newStackWith(t, files, "--default-ssl-certificate", "default/platform-tls")
	httpsPort := stackHTTPSPort(t, s)
	tlsClient := httpsClient(httpsPort)
	tlsClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	s.eventually("A's host over plain HTTP reaches A", func() error {
		e, _, err := echoed(s.client, newRequest(t, http.MethodGet, "http://a.apps.test/x"))
		if err == nil && e.Backend != ipTenantA {
			err = fmt.Errorf("answered by %s", e.Backend)
		}
		return err
	})
	s.eventually("the platform's default certificate for A's host", func() error {
		return servedIs(httpsPort, "a.apps.test", "2501")
	})

	t.Run("HTTPS to A's host is A's", func(t *testing.T) {
		for _, path := range []string{"/x", "/deep/path?q=1"} {
			e, _, err := echoed(tlsClient, newRequest(t, http.MethodGet, "https://a.apps.test"+path))
			if err != nil || e.Backend != ipTenantA || e.Headers["X-Forwarded-Proto"] != "https" {
				t.Errorf("https://a.apps.test%s: %+v, %v; want A's backend %s over https (B owns the default server)", path, e, err, ipTenantA)
			}
		}
		// A host no Ingress names is the default server's, over HTTPS too.
		e, _, err := echoed(tlsClient, newRequest(t, http.MethodGet, "https://other.apps.test/x"))
		if err != nil || e.Backend != ipTenantB {
			t.Errorf("https://other.apps.test/x: %+v, %v; want the default server's %s", e, err, ipTenantB)
		}
	})

	t.Run("plain HTTP to a host without TLS is not redirected", func(t *testing.T) {
		e, resp, err := echoed(s.client, newRequest(t, http.MethodGet, "http://a.apps.test/x"))
		if err != nil || e.Backend != ipTenantA || e.Headers["X-Forwarded-Proto"] != "http" {
			t.Errorf("http://a.apps.test/x: %+v, %v, %v; want A's backend over http", e, resp, err)
		}
	})

	t.Run("app-root over HTTPS", func(t *testing.T) {
		resp, _, err := do(tlsClient, newRequest(t, http.MethodGet, "https://a.apps.test/"))
		if err != nil || resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://a.apps.test/app/" {
			t.Errorf("https://a.apps.test/: %v, %v; want 302 to https://a.apps.test/app/", resp, err)
		}
	})

	t.Run("app-root names the routed host, not a disagreeing Host header", func(t *testing.T) {
		for _, tc := range []struct{ target, host, want string }{
			{"http://a.apps.test/", "evil.example", "http://a.apps.test/app/"},
			{"http://a.apps.test/", "evil.example:8080", "http://a.apps.test/app/"},
			// A Host header naming the routed host keeps its port (the one
			// the client reached), as $http_host did.
			{"/", "a.apps.test:8080", "http://a.apps.test:8080/app/"},
			{"/", "A.Apps.Test", "http://a.apps.test/app/"},
		} {
			status, location, err := rawGet(s.port, tc.target, tc.host)
			if err != nil || status != http.StatusFound || location != tc.want {
				t.Errorf("GET %s, Host: %s: %d, Location %q, %v; want 302 to %s", tc.target, tc.host, status, location, err, tc.want)
			}
		}
	})
}

// rawGet sends "GET target HTTP/1.1" with the Host header host to nginx's
// HTTP port on 127.0.0.1, as written (Go's client would make the two
// agree), and returns the status and the Location header.
func rawGet(port int, target, host string) (int, string, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return 0, "", err
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	return resp.StatusCode, strings.TrimSpace(resp.Header.Get("Location")), nil
}
