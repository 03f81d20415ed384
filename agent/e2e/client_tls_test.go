package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// crl returns a PEM CRL of ca revoking the certificate certPEM.
func (ca *testCA) crl(t *testing.T, certPEM string) string {
	t.Helper()
	block, _ := pem.Decode([]byte(certPEM))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1),
		ThisUpdate: time.Now().Add(-time.Hour), NextUpdate: time.Now().Add(24 * time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: cert.SerialNumber, RevocationTime: time.Now().Add(-time.Minute)}},
	}, ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}))
}

// Client certificates (auth-tls-*) with real TLS clients: a host that
// checks them answers 400 without one, with one of another CA and with a
// revoked one, and 200 with the right one (the backend gets the
// certificate and its subject); auth-tls-match-cn refuses another subject
// with 403; auth-tls-error-page redirects; the hosts around it are served
// without a certificate; a CA rotated in its Secret applies.
func TestClientCertificates(t *testing.T) {
	const ip = "127.0.0.90"
	port := serveOn(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "verify=%s subject=%s cert=%t", r.Header.Get("ssl-client-verify"), r.Header.Get("ssl-client-subject-dn"),
			strings.Contains(r.Header.Get("ssl-client-cert"), "BEGIN%20CERTIFICATE"))
	}))
	ca := newTestCA(t, "client CA")
	other := newTestCA(t, "another CA")
	goodCert, goodKey := ca.leaf(t, "good-client", x509.ExtKeyUsageClientAuth)
	revokedCert, revokedKey := ca.leaf(t, "revoked-client", x509.ExtKeyUsageClientAuth)
	strangerCert, strangerKey := other.leaf(t, "good-client", x509.ExtKeyUsageClientAuth)

	hosts := []string{"mtls.test", "cn.test", "errpage.test", "plain.test"}
	pair := newTLSKeyPair(t, 3001, hosts...)
	tlsHosts := func(host string) []ingressTLS { return []ingressTLS{{secret: "tls", hosts: []string{host}}} }
	with := func(name, host string, annotations map[string]string) string {
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "app")}, tls: tlsHosts(host), annotations: annotations})
	}
	mtls := func(extra map[string]string) map[string]string {
		a := map[string]string{
			"nginx.ingress.kubernetes.io/auth-tls-secret":                       "default/client-ca",
			"nginx.ingress.kubernetes.io/auth-tls-verify-client":                "on",
			"nginx.ingress.kubernetes.io/auth-tls-verify-depth":                 "1",
			"nginx.ingress.kubernetes.io/auth-tls-pass-certificate-to-upstream": "true",
		}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	s := newStack(t, map[string]string{
		"classes.yaml":   ingressClasses,
		"services.yaml":  service("app", port, ep(ip)),
		"tls.yaml":       tlsSecret("tls", pair.cert, pair.key),
		"client-ca.yaml": opaqueSecret("client-ca", map[string]string{"ca.crt": ca.certPEM, "ca.crl": ca.crl(t, revokedCert)}),
		"mtls.yaml":      with("mtls", "mtls.test", mtls(nil)),
		"cn.yaml":        with("cn", "cn.test", mtls(map[string]string{"nginx.ingress.kubernetes.io/auth-tls-match-cn": "CN=someone-else"})),
		"errpage.yaml":   with("errpage", "errpage.test", mtls(map[string]string{"nginx.ingress.kubernetes.io/auth-tls-error-page": "https://errors.example.com/certificate"})),
		"plain.yaml":     with("plain", "plain.test", nil),
	})
	httpsPort := stackHTTPSPort(t, s)
	client := func(certPEM, keyPEM string) *http.Client {
		c := httpsClient(httpsPort)
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		if certPEM != "" {
			pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
			if err != nil {
				t.Fatal(err)
			}
			c.Transport.(*http.Transport).TLSClientConfig.Certificates = []tls.Certificate{pair}
		}
		return c
	}
	get := func(c *http.Client, host string) (int, string, http.Header) {
		t.Helper()
		resp, err := c.Get("https://" + host + "/")
		if err != nil {
			return 0, err.Error(), nil
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String(), resp.Header
	}
	none, good, revoked, stranger := client("", ""), client(goodCert, goodKey), client(revokedCert, revokedKey), client(strangerCert, strangerKey)
	s.eventually("plain.test over HTTPS", func() error {
		if code, body, _ := get(none, "plain.test"); code != http.StatusOK || !strings.HasPrefix(body, "verify= ") {
			return fmt.Errorf("plain.test: %d %q", code, body)
		}
		return nil
	})
	s.eventually("mtls.test with the right certificate", func() error {
		code, body, _ := get(good, "mtls.test")
		if want := "verify=SUCCESS subject=CN=good-client cert=true"; code != http.StatusOK || body != want {
			return fmt.Errorf("good certificate: %d %q, want 200 %q", code, body, want)
		}
		return nil
	})
	for name, c := range map[string]*http.Client{"no certificate": none, "another CA's": stranger, "a revoked one": revoked} {
		if code, body, _ := get(c, "mtls.test"); code != http.StatusBadRequest {
			t.Errorf("mtls.test with %s: %d %q, want 400", name, code, body)
		}
	}
	if code, body, _ := get(good, "cn.test"); code != http.StatusForbidden {
		t.Errorf("cn.test with a certificate of another subject: %d %q, want 403", code, body)
	}
	code, _, header := get(none, "errpage.test")
	if loc, _ := url.Parse(header.Get("Location")); code != http.StatusFound || loc == nil || loc.Host != "errors.example.com" {
		t.Errorf("errpage.test without a certificate: %d Location %q, want 302 to the error page", code, header.Get("Location"))
	}
	if code, body, _ := get(good, "plain.test"); code != http.StatusOK || !strings.HasPrefix(body, "verify= ") {
		t.Errorf("plain.test with a certificate: %d %q", code, body)
	}

	// The CA rotated in its Secret applies without a restart: the other
	// CA's client is let in, the old CA's is not.
	s.writeFile("client-ca.yaml", opaqueSecret("client-ca", map[string]string{"ca.crt": other.certPEM}))
	// The rotation is a reload: until the old workers are gone, a new
	// connection may still meet one of them (reuseport).
	s.eventually("mtls.test trusts the rotated CA only", func() error {
		if code, body, _ := get(stranger, "mtls.test"); code != http.StatusOK {
			return fmt.Errorf("the new CA's certificate: %d %q, want 200", code, body)
		}
		return nil
	})
	s.steadyWorkers()
	if code, body, _ := get(good, "mtls.test"); code != http.StatusBadRequest {
		t.Errorf("the old CA's certificate after the rotation: %d %q, want 400", code, body)
	}
}

// Tenant B's wildcard "*.test" that checks client certificates takes no
// exact host of tenant A's under it: A's a.test (TLS of its own), c.test
// (no TLS) and ma.test (client certificates of A's own CA, with its alias
// ma2.test) are served without a certificate of B's CA, while B's x.test
// still asks for one. Before, nginx picked B's regex server for a.test's
// handshake: 400; and ma2.test was served without any certificate.
func TestClientCertificatesWildcardOfAnotherTenant(t *testing.T) {
	const ip = "127.0.0.170"
	backend := func(name string) int {
		return serveOn(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s verify=%s subject=%s", name, r.Header.Get("ssl-client-verify"), r.Header.Get("ssl-client-subject-dn"))
		}))
	}
	portA, portB := backend("A"), backend("B")
	caA, caB := newTestCA(t, "tenant A CA"), newTestCA(t, "tenant B CA")
	certA, keyA := caA.leaf(t, "client-a", x509.ExtKeyUsageClientAuth)
	certB, keyB := caB.leaf(t, "client-b", x509.ExtKeyUsageClientAuth)
	tlsA, tlsB := newTLSKeyPair(t, 3101, "a.test", "ma.test"), newTLSKeyPair(t, 3102, "*.test")
	tenant := func(namespace, manifest string) string {
		return strings.ReplaceAll(manifest, "namespace: default", "namespace: "+namespace)
	}
	clientTLS := func(secret string) map[string]string {
		return map[string]string{
			"nginx.ingress.kubernetes.io/auth-tls-secret":        secret,
			"nginx.ingress.kubernetes.io/auth-tls-verify-client": "on",
		}
	}
	with := func(a map[string]string, key, value string) map[string]string {
		a[key] = value
		return a
	}
	route := func(name, host, service string, tls []ingressTLS, annotations map[string]string) string {
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", service)}, tls: tls, annotations: annotations})
	}
	s := newStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"a-app.yaml":   tenant("tenant-a", service("app-a", portA, ep(ip))),
		"a-tls.yaml":   tenant("tenant-a", tlsSecret("a-tls", tlsA.cert, tlsA.key)),
		"a-ca.yaml":    tenant("tenant-a", opaqueSecret("ca", map[string]string{"ca.crt": caA.certPEM})),
		"a.yaml":       tenant("tenant-a", route("a", "a.test", "app-a", []ingressTLS{{secret: "a-tls", hosts: []string{"a.test"}}}, nil)),
		"c.yaml":       tenant("tenant-a", route("c", "c.test", "app-a", nil, nil)),
		"ma.yaml": tenant("tenant-a", route("ma", "ma.test", "app-a", []ingressTLS{{secret: "a-tls", hosts: []string{"ma.test"}}},
			with(clientTLS("tenant-a/ca"), "nginx.ingress.kubernetes.io/server-alias", "ma2.test"))),
		// Client certificates without spec.tls: checked all the same.
		"mc.yaml":       tenant("tenant-a", route("mc", "mc.test", "app-a", nil, clientTLS("tenant-a/ca"))),
		"b-app.yaml":    tenant("tenant-b", service("app-b", portB, ep(ip))),
		"b-tls.yaml":    tenant("tenant-b", tlsSecret("b-tls", tlsB.cert, tlsB.key)),
		"b-ca.yaml":     tenant("tenant-b", opaqueSecret("ca", map[string]string{"ca.crt": caB.certPEM})),
		"wildcard.yaml": tenant("tenant-b", route("wildcard", "*.test", "app-b", []ingressTLS{{secret: "b-tls", hosts: []string{"*.test"}}}, clientTLS("tenant-b/ca"))),
	})
	httpsPort := stackHTTPSPort(t, s)
	client := func(certPEM, keyPEM string) *http.Client {
		c := httpsClient(httpsPort)
		if certPEM != "" {
			pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
			if err != nil {
				t.Fatal(err)
			}
			c.Transport.(*http.Transport).TLSClientConfig.Certificates = []tls.Certificate{pair}
		}
		return c
	}
	get := func(c *http.Client, url string) (int, string) {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(body)
	}
	none, withA, withB := client("", ""), client(certA, keyA), client(certB, keyB)
	s.eventually("B's x.test asks for B's certificate", func() error {
		if code, body := get(withB, "https://x.test/"); code != http.StatusOK || body != "B verify=SUCCESS subject=CN=client-b" {
			return fmt.Errorf("x.test with B's certificate: %d %q", code, body)
		}
		return nil
	})
	if code, body := get(none, "https://x.test/"); code != http.StatusBadRequest {
		t.Errorf("x.test without a certificate: %d %q, want 400", code, body)
	}
	if code, body := get(none, "https://a.test/"); code != http.StatusOK || body != "A verify= subject=" {
		t.Errorf("a.test without a certificate: %d %q, want 200 from A's backend", code, body)
	}
	if serial, err := servedCertificate(httpsPort, "a.test"); err != nil || serial != "3101" {
		t.Errorf("a.test's certificate: %s %v, want A's (3101)", serial, err)
	}
	// c.test has no spec.tls: over HTTPS it is routed by its own
	// locations (the default certificate), never B's check or B's
	// backend; over HTTP A's backend.
	if code, body := get(none, "https://c.test/"); code != http.StatusOK || body != "A verify= subject=" {
		t.Errorf("https://c.test without a certificate: %d %q, want A's backend", code, body)
	}
	// mc.test checks A's CA though it has no spec.tls: its HTTPS
	// requests, routed by its own locations, do not skip the check.
	if code, body := get(none, "https://mc.test/"); code != http.StatusBadRequest {
		t.Errorf("https://mc.test without a certificate: %d %q, want 400", code, body)
	}
	if code, body := get(withA, "https://mc.test/"); code != http.StatusOK || body != "A verify=SUCCESS subject=CN=client-a" {
		t.Errorf("https://mc.test with A's certificate: %d %q, want 200 from A's backend", code, body)
	}
	if code, body, err := s.get("c.test", "/"); err != nil || code != http.StatusOK || body != "A verify= subject=" {
		t.Errorf("http://c.test: %d %q %v, want 200 from A's backend", code, body, err)
	}
	// ma.test checks A's own CA: B's certificate is refused there, and
	// so is a request for its alias ma2.test without A's certificate.
	for _, host := range []string{"ma.test", "ma2.test"} {
		if code, body := get(withA, "https://"+host+"/"); code != http.StatusOK || body != "A verify=SUCCESS subject=CN=client-a" {
			t.Errorf("%s with A's certificate: %d %q, want 200 from A's backend", host, code, body)
		}
		for name, c := range map[string]*http.Client{"no certificate": none, "B's": withB} {
			if code, body := get(c, "https://"+host+"/"); code != http.StatusBadRequest {
				t.Errorf("%s with %s: %d %q, want 400", host, name, code, body)
			}
		}
	}
}
