package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// testCA is a certificate authority of a test: it signs leaf certificates.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// leaf returns a certificate for cn (and as a DNS name) signed by ca.
func (ca *testCA) leaf(t *testing.T, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

// opaqueSecret is an Opaque Secret in default with data.
func opaqueSecret(name string, data map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: default\ntype: Opaque\ndata:\n", name)
	for k, v := range data {
		fmt.Fprintf(&b, "  %s: %s\n", k, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	return b.String()
}

// TLS to an HTTPS backend with its own CA (proxy-ssl-*): verified against
// the Secret's ca.crt with the right name → 200, and nginx presents the
// Secret's client certificate; a wrong name or another CA → 502; without
// the annotations the backend is reached unverified; a rotated CA applies.
func TestBackendTLS(t *testing.T) {
	const ip = "127.0.0.89"
	ca := newTestCA(t, "backend CA")
	other := newTestCA(t, "another CA")
	serverCert, serverKey := ca.leaf(t, "backend.internal", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.leaf(t, "nginx-client", x509.ExtKeyUsageClientAuth)

	pair, err := tls.X509KeyPair([]byte(serverCert), []byte(serverKey))
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(ca.cert)
	port := nginxproc.FreePort(t)
	l, err := tls.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: clientCAs})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "cn=%s", cn)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	https := func(name, host string, annotations map[string]string) string {
		a := map[string]string{"nginx.ingress.kubernetes.io/backend-protocol": "HTTPS"}
		for k, v := range annotations {
			a[k] = v
		}
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "app")}, annotations: a})
	}
	verified := func(secret, name string) map[string]string {
		return map[string]string{
			"nginx.ingress.kubernetes.io/proxy-ssl-secret": "default/" + secret,
			"nginx.ingress.kubernetes.io/proxy-ssl-verify": "on",
			"nginx.ingress.kubernetes.io/proxy-ssl-name":   name,
		}
	}
	s := newStack(t, map[string]string{
		"classes.yaml":    ingressClasses,
		"services.yaml":   service("app", port, ep(ip)),
		"backend-ca.yaml": opaqueSecret("backend-ca", map[string]string{"ca.crt": ca.certPEM, "tls.crt": clientCert, "tls.key": clientKey}),
		"other-ca.yaml":   opaqueSecret("other-ca", map[string]string{"ca.crt": other.certPEM}),
		"good.yaml":       https("good", "good.test", verified("backend-ca", "backend.internal")),
		"wrongname.yaml":  https("wrongname", "wrongname.test", verified("backend-ca", "wrong.internal")),
		"wrongca.yaml":    https("wrongca", "wrongca.test", verified("other-ca", "backend.internal")),
		"noverify.yaml":   https("noverify", "noverify.test", nil),
	})
	s.eventually("noverify.test serves", func() error { return s.expect("noverify.test", "/", "cn=") })
	if err := s.expect("good.test", "/", "cn=nginx-client"); err != nil {
		t.Errorf("verified against the right CA with the client certificate: %v", err)
	}
	for _, host := range []string{"wrongname.test", "wrongca.test"} {
		if err := s.expect(host, "/", "502"); err != nil {
			t.Errorf("%v", err)
		}
	}
	// The CA rotated in its Secret: wrongca.test's Secret now holds the
	// right CA, and it is served without a restart.
	s.writeFile("other-ca.yaml", opaqueSecret("other-ca", map[string]string{"ca.crt": ca.certPEM}))
	s.eventually("wrongca.test after its CA rotated", func() error { return s.expect("wrongca.test", "/", "cn=") })
}
