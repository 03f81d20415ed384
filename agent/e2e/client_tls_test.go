package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
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
