package e2e

// Issue 25, points 5 and 8: what one tenant's body sizes and regexes do
// to another's host.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// plainHTTP, set "false", serves a TLS host over plain HTTP too.
const plainHTTP = "nginx.ingress.kubernetes.io/ssl-redirect"

const (
	ipLimitsA = "127.0.0.251"
	ipLimitsB = "127.0.0.252"
)

// bodyLength answers with the backend's name and how many body bytes it read.
func bodyLength(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s read %d\n", name, n)
	})
}

// postBody sends size bytes to url; chunked sends them without a
// Content-Length (HTTP/1.1 chunked, HTTP/2 DATA frames alone). It returns
// the status and body, or the error; a refusal that resets the request
// while it is still being sent is reported as status 413 when nginx said
// so first.
func postBody(c *http.Client, url string, size int, chunked bool) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(make([]byte, size)))
	if err != nil {
		return 0, "", err
	}
	if chunked {
		req.ContentLength = -1
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

// TestBodyLimitsAcrossTenants: tenant B's proxy-body-size "0" raises the
// router location's client_max_body_size, yet tenant A's host, with the
// default 1m and no profile, refuses a 2 MB body without Content-Length,
// over HTTP/1.1 (chunked) and HTTP/2, while B's takes it; B's
// client-body-buffer-size "999999999m", over the platform's maximum, is
// left at the default (check refuses it: TestCheckRefusesHostileTenantPayloads).
func TestBodyLimitsAcrossTenants(t *testing.T) {
	portA := serveOn(t, ipLimitsA, bodyLength("a"))
	portB := serveOn(t, ipLimitsB, bodyLength("b"))
	pair := newTLSKeyPair(t, 2501, "a.test", "b.test")
	tlsFor := func(host string) []ingressTLS { return []ingressTLS{{secret: "tenants-tls", hosts: []string{host}}} }
	buffer := ingress("b-buffer", ingressOpts{class: "restysync", host: "buffer.b.test", paths: []path{prefix("/", "b")},
		annotations: map[string]string{"nginx.ingress.kubernetes.io/client-body-buffer-size": "999999999m"}})
	files := map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("a", portA, ep(ipLimitsA)) + "---\n" + service("b", portB, ep(ipLimitsB)),
		"secret.yaml":   tlsSecret("tenants-tls", pair.cert, pair.key),
		"a.yaml": ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")},
			tls: tlsFor("a.test"), annotations: map[string]string{plainHTTP: "false"}}),
		"b.yaml": ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: []path{prefix("/", "b")},
			tls: tlsFor("b.test"), annotations: map[string]string{plainHTTP: "false", "nginx.ingress.kubernetes.io/proxy-body-size": "0"}}),
		"b-buffer.yaml": buffer,
	}
	s := newStack(t, files)
	h2 := httpsClient(stackHTTPSPort(t, s))
	const big, small = 2 << 20, 10 << 10

	cases := []struct {
		what    string
		client  *http.Client
		url     string
		size    int
		chunked bool
		want    string
	}{
		{"A, 2 MB with Content-Length", s.client, "http://a.test/", big, false, "413"},
		{"A, 2 MB chunked", s.client, "http://a.test/", big, true, "413"},
		{"A, 10 KB chunked", s.client, "http://a.test/", small, true, "a read 10240"},
		{"A, GET", s.client, "http://a.test/", 0, false, "a read 0"},
		{"B, 2 MB chunked", s.client, "http://b.test/", big, true, "b read 2097152"},
		{"A, 2 MB over HTTP/2 without Content-Length", h2, "https://a.test/", big, true, "413"},
		{"A, 10 KB over HTTP/2 without Content-Length", h2, "https://a.test/", small, true, "a read 10240"},
		{"B, 2 MB over HTTP/2 without Content-Length", h2, "https://b.test/", big, true, "b read 2097152"},
		{"B's buffer host, the default buffer", s.client, "http://buffer.b.test/", small, true, "b read 10240"},
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			status, body, err := postBody(tc.client, tc.url, tc.size, tc.chunked)
			if err != nil {
				t.Fatal(err)
			}
			got := body
			if status != http.StatusOK {
				got = strconv.Itoa(status)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// catastrophicPaths are n use-regex paths each of which backtracks
// without end on "/aaa…a!" (no required byte lets PCRE skip the work),
// after the benign "/first".
func catastrophicPaths(n int, svc string) []path {
	paths := []path{implementationSpecific("/first", svc)}
	for i := 1; i < n; i++ {
		paths = append(paths, implementationSpecific(fmt.Sprintf("/(a+)+(?:$|/x%d)", i), svc))
	}
	return paths
}

// TestRegexBudget: 100 catastrophic use-regex paths on b.test make B's
// own attack requests fail fast with a 500 and a counted regex failure,
// while a.test answers throughout; the 101st regex path of b.test is a
// Problem, and left out.
func TestRegexBudget(t *testing.T) {
	portA := serveOn(t, ipLimitsA, bodyLength("a"))
	portB := serveOn(t, ipLimitsB, bodyLength("b"))
	regexB := func(n int) string {
		return ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: catastrophicPaths(n, "b"),
			annotations: map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true"}})
	}
	files := map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("a", portA, ep(ipLimitsA)) + "---\n" + service("b", portB, ep(ipLimitsB)),
		"a.yaml":        ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")}}),
		"b.yaml":        regexB(100),
	}
	s := newStack(t, files)
	if err := s.expect("b.test", "/first", "b read 0"); err != nil {
		t.Fatal(err)
	}
	before, err := s.scrape()
	if err != nil {
		t.Fatal(err)
	}
	attack := "/" + strings.Repeat("a", 40) + "!"
	for i := range 20 {
		start := time.Now()
		status, _, err := s.get("b.test", attack)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); status != http.StatusInternalServerError || took > time.Second {
			t.Fatalf("attack %d: %d in %s, want a 500 well within a second", i, status, took)
		}
		if err := s.expect("a.test", "/", "a read 0"); err != nil {
			t.Fatalf("after attack %d: %v", i, err)
		}
	}
	after := s.metricAtLeast("the regex failures are counted", "restysync_lua_regex_failures_total",
		before["restysync_lua_regex_failures_total"]+20)
	t.Logf("restysync_lua_regex_failures_total %v → %v", before["restysync_lua_regex_failures_total"], after["restysync_lua_regex_failures_total"])
	if !strings.Contains(s.nginx.Logs(), "restysync: route of b.test: regex ") {
		t.Errorf("nginx's error log has no line of the failing regex")
	}

	// The 101st path: b.test keeps the first 100 (the "/first" among
	// them); TestCheckRefusesHostileTenantPayloads holds check to naming
	// B's Ingress.
	s.writeFile("b.yaml", strings.Replace(regexB(101), "/(a+)+(?:$|/x100)", "/benign101", 1))
	s.eventually("the 101st path is left out", func() error {
		if err := s.expect("b.test", "/first", "b read 0"); err != nil {
			return err
		}
		if !strings.Contains(s.agent.log.String(), "already has 100 regex paths") {
			return errors.New("the agent has not logged the Problem")
		}
		return s.expect("b.test", "/benign101", "404")
	})
}
