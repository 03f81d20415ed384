// Package testcert is a test helper: self-signed server certificates in
// PEM, for the tests that serve TLS through real nginx and Lua, and client
// certificates signed by a CA of their own.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// New returns a self-signed P-256 certificate for names (the first is the
// common name) with the given serial, valid from an hour ago to notAfter,
// and its PKCS#8 key, both PEM.
func New(t testing.TB, serial int64, notAfter time.Time, names ...string) (certPEM, keyPEM string) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, key := issue(t, tmpl, nil, nil)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))
}

// issue makes a new P-256 key and the certificate tmpl for it, signed by
// parent with parentKey, or self-signed when parent is nil.
func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// ClientCA is a certificate authority that signs client certificates, for
// the tests of client certificate validation. Its client certificates name
// their issuer by name alone (no authority key id), as the Gateway API
// conformance suite's do: another CA of the same name is a candidate
// issuer, whose signature check fails.
type ClientCA struct {
	// PEM is the CA's certificate.
	PEM string
	// cert is the CA's template, without the subject key id the
	// certificate got.
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewClientCA returns a CA named name, valid for a day.
func NewClientCA(t testing.TB, name string) ClientCA {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, key := issue(t, tmpl, nil, nil)
	return ClientCA{PEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), cert: tmpl, key: key}
}

// Client returns a client certificate for name signed by ca, valid for a
// day, ready for a tls.Config.
func (ca ClientCA) Client(t testing.TB, name string) tls.Certificate {
	t.Helper()
	der, key := issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca.cert, ca.key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
