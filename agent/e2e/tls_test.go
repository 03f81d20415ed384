package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

const ipSecure = "127.0.0.51"

// tlsKeyPair is a self-signed certificate with a known serial, and its key.
type tlsKeyPair struct {
	serial    int64
	cert, key string
}

func newTLSKeyPair(t *testing.T, serial int64, names ...string) tlsKeyPair {
	t.Helper()
	cert, key := testcert.New(t, serial, time.Now().Add(24*time.Hour), names...)
	return tlsKeyPair{serial: serial, cert: cert, key: key}
}

// stackHTTPSPort reads the --https-port newStack gave the agent.
func stackHTTPSPort(t *testing.T, s *stack) int {
	t.Helper()
	args := s.agent.cmd.Args
	i := slices.Index(args, "--https-port")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no --https-port in %v", args)
	}
	port, err := strconv.Atoi(args[i+1])
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// servedCertificate does a TLS handshake with SNI sni and names the
// certificate nginx presented: its serial, or "default".
func servedCertificate(port int, sni string) (string, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	if leaf.Subject.CommonName == "restysync default certificate" {
		return "default", nil
	}
	return leaf.SerialNumber.String(), nil
}

// httpsClient sends every request to 127.0.0.1:port over TLS, a new
// connection (and handshake) each time, with the URL's host as SNI.
func httpsClient(port int) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
			ForceAttemptHTTP2: true,
		},
	}
}

// httpsGet returns the serial of the certificate and the body of GET https://host/.
func httpsGet(c *http.Client, host string) (string, string, error) {
	resp, err := c.Get("https://" + host + "/")
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("https://%s/: %s", host, resp.Status)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.String(), strings.TrimSpace(string(body)), nil
}

// TestTLS runs the agent on an Ingress with spec.tls and checks, with real
// TLS clients, that the Secret's certificate is served for its SNI name and
// that rotating, removing and breaking the Secret take effect with no
// reload: nginx's worker processes stay the same throughout.
func TestTLS(t *testing.T) {
	b := startBackends(t, ipSecure)
	const host = "secure.test"
	first := newTLSKeyPair(t, 1001, host)
	files := map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("secure", b.port, ep(ipSecure)),
		"ingress.yaml": ingress("secure", ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "secure")},
			tls: []ingressTLS{{secret: "secure-tls", hosts: []string{host}}}}),
		"secret.yaml": tlsSecret("secure-tls", first.cert, first.key),
	}
	s := newStack(t, files)
	port := stackHTTPSPort(t, s)
	client := httpsClient(port)

	expectServed := func(what, sni, want string) {
		t.Helper()
		s.eventually(what, func() error {
			got, err := servedCertificate(port, sni)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("SNI %q got certificate %s, want %s", sni, got, want)
			}
			return nil
		})
	}

	expectServed("the Secret's certificate is served", host, "1001")
	m := s.metricAtLeast("Lua serves one certificate", "restysync_lua_certificates", 1)
	if expiry := m["restysync_certificate_nearest_expiry_timestamp_seconds"]; expiry < float64(time.Now().Unix()) || expiry > float64(time.Now().Add(25*time.Hour).Unix()) {
		t.Errorf("nearest expiry %v, want the certificate's NotAfter, a day from now", expiry)
	}
	if m[`restysync_lua_pushes_total{kind="certificates"}`] < 1 || m[`restysync_lua_push_bytes_total{kind="certificates"}`] < 500 ||
		m[`restysync_objects{kind="Secret"}`] != 1 {
		t.Errorf("certificate pushes %v, bytes %v, Secrets %v; want at least 1, 500 and exactly 1",
			m[`restysync_lua_pushes_total{kind="certificates"}`], m[`restysync_lua_push_bytes_total{kind="certificates"}`], m[`restysync_objects{kind="Secret"}`])
	}
	s.eventually("HTTPS reaches the backend", func() error {
		serial, body, err := httpsGet(client, host)
		if err != nil {
			return err
		}
		if serial != "1001" || body != ipSecure {
			return fmt.Errorf("got certificate %s and %q, want 1001 and %s", serial, body, ipSecure)
		}
		return nil
	})
	if got, err := servedCertificate(port, "other.test"); err != nil || got != "default" {
		t.Errorf("unknown SNI got %q (%v), want the default certificate", got, err)
	}
	if got, err := servedCertificate(port, ""); err != nil || got != "default" {
		t.Errorf("no SNI got %q (%v), want the default certificate", got, err)
	}
	// Plain HTTP to a TLS host is redirected to HTTPS (ssl-redirect is on
	// by default; protocols_test.go covers turning it off). Eventually: a
	// worker of the bootstrap config may still accept a connection on the
	// shared HTTP listener for a moment after the reload.
	s.eventually("plain HTTP is redirected to HTTPS", func() error { return expectRedirect(s, host, "/a?b=c", port) })

	// Workers of the config being served; any reload from here on replaces them.
	s.eventually("the start-up reloads are over", func() error {
		if n := len(s.nginx.WorkerPIDs()); n != 2 {
			return fmt.Errorf("%d workers, want 2", n)
		}
		return nil
	})
	workers := s.steadyWorkers()
	checkNoReload := func(t *testing.T) {
		t.Helper()
		if now := s.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
			t.Errorf("nginx workers changed from %v to %v: it reloaded", workers, now)
		}
	}

	t.Run("rotate under traffic", func(t *testing.T) {
		second := newTLSKeyPair(t, 1002, host)
		var (
			stop     atomic.Bool
			wg       sync.WaitGroup
			mu       sync.Mutex
			requests int
			failures []error
			serials  = map[string]int{}
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				serial, body, err := httpsGet(client, host)
				mu.Lock()
				requests++
				if err == nil && body != ipSecure {
					err = fmt.Errorf("body %q, want %s", body, ipSecure)
				}
				if err != nil {
					failures = append(failures, err)
				} else {
					serials[serial]++
				}
				mu.Unlock()
			}
		}()
		s.writeFile("secret.yaml", tlsSecret("secure-tls", second.cert, second.key))
		expectServed("the rotated certificate is served", host, "1002")
		time.Sleep(100 * time.Millisecond) // some traffic after the switch
		stop.Store(true)
		wg.Wait()
		if len(failures) > 0 {
			t.Errorf("%d of %d HTTPS requests failed during the rotation, first: %v", len(failures), requests, failures[0])
		}
		if serials["1002"] == 0 {
			t.Errorf("no request saw the new certificate: %v", serials)
		}
		t.Logf("%d HTTPS requests during the rotation, by certificate serial: %v", requests, serials)
		checkNoReload(t)
	})

	t.Run("remove the Secret: default certificate and a problem", func(t *testing.T) {
		s.removeFile("secret.yaml")
		expectServed("the default certificate is served", host, "default")
		s.eventually("the problem is logged", func() error {
			if !strings.Contains(s.agent.log.String(), "Secret default/secure-tls not found") {
				return fmt.Errorf("agent log does not name the missing Secret")
			}
			return nil
		})
		if err := expectRedirect(s, host, "/", port); err != nil {
			t.Errorf("plain HTTP after the Secret went: %v", err)
		}
		if _, body, err := httpsGet(client, host); err != nil || body != ipSecure {
			t.Errorf("HTTPS with the default certificate: %q, %v; want %s", body, err, ipSecure)
		}
		checkNoReload(t)
	})

	t.Run("a bad Secret keeps the last good certificate", func(t *testing.T) {
		third := newTLSKeyPair(t, 1003, host)
		s.writeFile("secret.yaml", tlsSecret("secure-tls", third.cert, third.key))
		expectServed("the Secret's certificate is served again", host, "1003")

		other := newTLSKeyPair(t, 1004, host)
		s.writeFile("secret.yaml", tlsSecret("secure-tls", other.cert, third.key)) // key of another certificate
		s.eventually("the problem is logged", func() error {
			if !strings.Contains(s.agent.log.String(), "private key does not match public key") {
				return fmt.Errorf("agent log does not name the key mismatch")
			}
			return nil
		})
		for range 10 {
			got, err := servedCertificate(port, host)
			if err != nil || got != "1003" {
				t.Fatalf("SNI %s got %q (%v) with a bad Secret, want the last good 1003", host, got, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		checkNoReload(t)
	})
}

// --default-ssl-certificate: the Secret is served to clients without SNI
// and for names no Ingress's certificate covers; rotating it needs no
// reload, and without it the self-signed one is back.
func TestDefaultSSLCertificate(t *testing.T) {
	b := startBackends(t, ipSecure)
	const host = "secure.test"
	own, fallback, rotated := newTLSKeyPair(t, 2001, host), newTLSKeyPair(t, 2002, "fallback.test"), newTLSKeyPair(t, 2003, "fallback.test")
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range map[string]string{
		"classes.yaml": ingressClasses,
		"service.yaml": service("secure", b.port, ep(ipSecure)),
		"ingress.yaml": ingress("secure", ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "secure")},
			tls: []ingressTLS{{secret: "secure-tls", hosts: []string{host}}}}),
		"secret.yaml":   tlsSecret("secure-tls", own.cert, own.key),
		"fallback.yaml": tlsSecret("fallback-tls", fallback.cert, fallback.key),
	} {
		s.writeFile(name, content)
	}
	s.start("--source", "file:"+s.manifests, "--default-ssl-certificate", "default/fallback-tls")
	port := stackHTTPSPort(t, s)
	expect := func(what string, want map[string]string) {
		t.Helper()
		s.eventually(what, func() error {
			for sni, w := range want {
				if err := servedIs(port, sni, w); err != nil {
					return fmt.Errorf("SNI %q: %w", sni, err)
				}
			}
			return nil
		})
	}
	expect("the configured default certificate", map[string]string{"": "2002", "unknown.test": "2002", host: "2001"})
	workers := s.steadyWorkers()
	s.writeFile("fallback.yaml", tlsSecret("fallback-tls", rotated.cert, rotated.key))
	expect("the rotated default certificate", map[string]string{"": "2003", "unknown.test": "2003", host: "2001"})
	s.removeFile("fallback.yaml")
	expect("the self-signed one when the Secret is gone", map[string]string{"": "default", "unknown.test": "default", host: "2001"})
	if now := s.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
		t.Errorf("changing the default certificate reloaded nginx: workers %v, before %v", now, workers)
	}
	if problem := s.problemOf("Secret default/fallback-tls"); !strings.Contains(problem, "not found") {
		t.Errorf("problem of the missing default Secret: %q", problem)
	}
	// The dry run says the same.
	out, err := exec.Command(agentBinary, "inspect", "--source", "file:"+s.manifests,
		"--default-ssl-certificate", "default/fallback-tls", "--admin", "127.0.0.1:1").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Secret default/fallback-tls") || !strings.Contains(string(out), "--default-ssl-certificate") {
		t.Errorf("inspect --source with --default-ssl-certificate: %v\n%s", err, out)
	}
}
