package model

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// keyPair is a self-signed certificate and its key, PEM encoded the way
// Build re-encodes them (CERTIFICATE; PKCS #8 PRIVATE KEY).
type keyPair struct {
	certPEM, keyPEM string
	// sec1KeyPEM is the same key as an "EC PRIVATE KEY" block.
	sec1KeyPEM string
	notAfter   time.Time
}

// newPair makes a P-256 certificate for names (the first is the CN) that
// expires at notAfter. It panics on error: it runs in var initializers.
func newPair(notAfter time.Time, names ...string) keyPair {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    notAfter.Add(-365 * 24 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err)
	}
	return keyPair{
		certPEM:    string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyPEM:     string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})),
		sec1KeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})),
		notAfter:   notAfter.UTC().Truncate(time.Second),
	}
}

var (
	certExpiry = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	richPair   = newPair(certExpiry, "a.example.com", "*.example.com")
	pairA      = newPair(certExpiry, "a.example.com")
	pairB      = newPair(certExpiry, "a.example.com", "b.example.com")
	pairWild   = newPair(certExpiry, "*.example.com")
	pairOld    = newPair(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), "a.example.com")
)

func tlsSecret(namespace, name string, p keyPair) *corev1.Secret {
	return rawTLSSecret(namespace, name, p.certPEM, p.keyPEM)
}

func rawTLSSecret(namespace, name, cert, key string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte(cert), corev1.TLSPrivateKeyKey: []byte(key)},
	}
}

// servedCert is the Certificate Build makes of a good pair.
func servedCert(name string, p keyPair, hosts ...string) Certificate {
	return Certificate{Name: name, Hosts: hosts, CertPEM: p.certPEM, KeyPEM: p.keyPEM, NotAfter: p.notAfter}
}

// invalidCert is the Certificate of a bad Secret; reason is compared as a substring.
func invalidCert(name, reason string, hosts ...string) Certificate {
	return Certificate{Name: name, Hosts: hosts, Invalid: reason}
}

func TestBuildTLS(t *testing.T) {
	aRule := rule("a.example.com", prefix("/", "web", 80))
	tests := []struct {
		name      string
		ingresses []*networkingv1.Ingress
		secrets   []*corev1.Secret
		now       time.Time
		want      []Certificate
		// wantProblems are substrings of the problems' Reason, in order.
		wantProblems []string
	}{
		{
			name:      "good certificate",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets:   []*corev1.Secret{tlsSecret("default", "cert", pairA)},
			want:      []Certificate{servedCert("default/cert", pairA, "a.example.com")},
		},
		{
			name:      "PEM is re-encoded: SEC1 key and text around the blocks",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets:   []*corev1.Secret{rawTLSSecret("default", "cert", "subject=a.example.com\n"+pairA.certPEM+"\n\n", pairA.sec1KeyPEM)},
			want:      []Certificate{servedCert("default/cert", pairA, "a.example.com")},
		},
		{
			name:      "expiry not checked without a clock",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets:   []*corev1.Secret{tlsSecret("default", "cert", pairOld)},
			want:      []Certificate{servedCert("default/cert", pairOld, "a.example.com")},
		},
		{
			name:         "expired",
			ingresses:    []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets:      []*corev1.Secret{tlsSecret("default", "cert", pairOld)},
			now:          time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC),
			want:         []Certificate{invalidCert("default/cert", "expired at 2024-01-01T00:00:00Z", "a.example.com")},
			wantProblems: []string{`spec.tls[0].secretName "cert": Secret default/cert holds a certificate that expired at 2024-01-01T00:00:00Z; hosts "a.example.com" keep the certificate last served`},
		},
		{
			name:         "missing Secret",
			ingresses:    []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			wantProblems: []string{`spec.tls[0].secretName "cert": Secret default/cert not found; hosts "a.example.com" get the default certificate`},
		},
		{
			name:         "Secret in another namespace is not found",
			ingresses:    []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets:      []*corev1.Secret{tlsSecret("other", "cert", pairA)},
			wantProblems: []string{`Secret default/cert not found`},
		},
		{
			name:      "wrong type",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets: func() []*corev1.Secret {
				s := tlsSecret("default", "cert", pairA)
				s.Type = corev1.SecretTypeOpaque
				return []*corev1.Secret{s}
			}(),
			wantProblems: []string{`Secret default/cert has type "Opaque"; only kubernetes.io/tls Secrets are served; hosts "a.example.com" get the default certificate`},
		},
		{
			name:         "key does not match",
			ingresses:    []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets:      []*corev1.Secret{rawTLSSecret("default", "cert", pairA.certPEM, pairB.keyPEM)},
			want:         []Certificate{invalidCert("default/cert", "private key does not match public key", "a.example.com")},
			wantProblems: []string{`Secret default/cert holds an unusable tls.crt or tls.key: private key does not match public key; hosts "a.example.com" keep the certificate last served`},
		},
		{
			name:         "not PEM",
			ingresses:    []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets:      []*corev1.Secret{rawTLSSecret("default", "cert", "cert", "key")},
			want:         []Certificate{invalidCert("default/cert", "failed to find any PEM data", "a.example.com")},
			wantProblems: []string{`holds an unusable tls.crt or tls.key: failed to find any PEM data`},
		},
		{
			name:         "no key",
			ingresses:    []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "a.example.com"), aRule)},
			secrets:      []*corev1.Secret{rawTLSSecret("default", "cert", pairA.certPEM, "")},
			want:         []Certificate{invalidCert("default/cert", "has no tls.key", "a.example.com")},
			wantProblems: []string{`Secret default/cert has no tls.key`},
		},
		{
			name:      "wildcard",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", withTLS("wild", "*.example.com"), rule("*.example.com", prefix("/", "web", 80)))},
			secrets:   []*corev1.Secret{tlsSecret("default", "wild", pairWild)},
			want:      []Certificate{servedCert("default/wild", pairWild, "*.example.com")},
		},
		{
			name:         "exact certificate does not cover a wildcard host: served with a problem",
			ingresses:    []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "*.example.com", "a.example.com"), aRule)},
			secrets:      []*corev1.Secret{tlsSecret("default", "cert", pairA)},
			want:         []Certificate{servedCert("default/cert", pairA, "*.example.com", "a.example.com")},
			wantProblems: []string{`spec.tls[0].hosts[0] "*.example.com": the certificate of Secret default/cert does not cover it`},
		},
		{
			name:      "no hosts: the hosts of the rules",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert"), aRule, rule("b.example.com", prefix("/", "web", 80)), rule("", prefix("/x", "web", 80)))},
			secrets:   []*corev1.Secret{tlsSecret("default", "cert", pairB)},
			want:      []Certificate{servedCert("default/cert", pairB, "a.example.com", "b.example.com")},
		},
		{
			name: "conflict: the oldest Ingress wins",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "young", createdAt(5), withTLS("b", "a.example.com", "b.example.com"),
					rule("a.example.com", prefix("/y", "web", 80)), rule("b.example.com", prefix("/", "web", 80))),
				newIngress("default", "old", createdAt(1), withTLS("a", "a.example.com"), aRule),
			},
			secrets: []*corev1.Secret{tlsSecret("default", "a", pairA), tlsSecret("default", "b", pairB)},
			want: []Certificate{
				servedCert("default/a", pairA, "a.example.com"),
				servedCert("default/b", pairB, "b.example.com"),
			},
			wantProblems: []string{`spec.tls[0].hosts[0] "a.example.com": already served with the certificate of Secret default/a by Ingress default/old; host left out`},
		},
		{
			name: "conflict: a missing Secret claims nothing",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "young", createdAt(5), withTLS("b", "a.example.com"), rule("a.example.com", prefix("/y", "web", 80))),
				newIngress("default", "old", createdAt(1), withTLS("gone", "a.example.com"), aRule),
			},
			secrets:      []*corev1.Secret{tlsSecret("default", "b", pairB)},
			want:         []Certificate{servedCert("default/b", pairB, "a.example.com")},
			wantProblems: []string{`Secret default/gone not found`},
		},
		{
			name: "one Secret for two Ingresses serves the hosts of both",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "x", withTLS("cert", "b.example.com"), rule("b.example.com", prefix("/", "web", 80))),
				newIngress("default", "y", withTLS("cert", "a.example.com", "b.example.com"), aRule),
			},
			secrets: []*corev1.Secret{tlsSecret("default", "cert", pairB)},
			want:    []Certificate{servedCert("default/cert", pairB, "a.example.com", "b.example.com")},
			// y has no rule for b.example.com: its spec.tls does not serve it
			// (x's does).
			wantProblems: []string{`spec.tls[0].hosts[1] "b.example.com": no rule of this Ingress has that host`},
		},
		{
			name:      "bad hosts and a missing secret name",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", withTLS("cert", "A.example.com", "a.example.com", "10.0.0.1"), withTLS(""), aRule)},
			secrets:   []*corev1.Secret{tlsSecret("default", "cert", pairA)},
			want:      []Certificate{servedCert("default/cert", pairA, "a.example.com")},
			wantProblems: []string{
				`spec.tls[0].hosts[0] "A.example.com": must be lower case; host left out`,
				`spec.tls[0].hosts[2] "10.0.0.1": is an IP address`,
				`spec.tls[1].secretName: is missing`,
			},
		},
		{
			name:      "Ingresses that are not ours are ignored",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", classField("nginx"), withTLS("gone", "a.example.com"), aRule)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(tt.ingresses...)
			s.Secrets = ListOf(tt.secrets...)
			s.Now = tt.now
			m, problems := Build(s)
			if m.Certificates.Len() != len(tt.want) {
				t.Fatalf("certificates:\n got %s\nwant %s", dump(m.Certificates), dump(tt.want))
			}
			for i, want := range tt.want {
				got := m.Certificates.At(i)
				if got.Name != want.Name || !slices.Equal(got.Hosts, want.Hosts) || got.CertPEM != want.CertPEM ||
					got.KeyPEM != want.KeyPEM || !got.NotAfter.Equal(want.NotAfter) ||
					(want.Invalid == "") != (got.Invalid == "") || !strings.Contains(got.Invalid, want.Invalid) {
					t.Errorf("certificate %d:\n got %s\nwant %s", i, dump(got), dump(want))
				}
			}
			if len(problems) != len(tt.wantProblems) {
				t.Fatalf("problems:\n got %s\nwant %q", dump(problems), tt.wantProblems)
			}
			for i, want := range tt.wantProblems {
				if !strings.Contains(problems[i].Reason, want) {
					t.Errorf("problem %d: %q does not hold %q", i, problems[i].Reason, want)
				}
			}
		})
	}
}

// The certificates are not structure, but Build still gives the servers
// of TLS hosts as before: TLS changes nothing else in the Model.
func TestBuildTLSLeavesServersAlone(t *testing.T) {
	plain := snapshotOf(newIngress("default", "a", rule("a.example.com", prefix("/", "web", 80))))
	withCert := snapshotOf(newIngress("default", "a", withTLS("cert", "a.example.com", "tls-only.example.com"), rule("a.example.com", prefix("/", "web", 80))))
	withCert.Secrets = ListOf(tlsSecret("default", "cert", pairA))
	a, _ := Build(plain)
	b, _ := Build(withCert)
	if a.Servers.At(0).HTTPS || !b.Servers.At(0).HTTPS {
		t.Errorf("HTTPS without TLS %v, with TLS %v; want false, true", a.Servers.At(0).HTTPS, b.Servers.At(0).HTTPS)
	}
	// A TLS host redirects plain HTTP to HTTPS (ssl-redirect defaults to true).
	if a.Servers.At(0).Locations[0].SSLRedirect || !b.Servers.At(0).Locations[0].SSLRedirect {
		t.Errorf("SSLRedirect without TLS %v, with TLS %v; want false, true",
			a.Servers.At(0).Locations[0].SSLRedirect, b.Servers.At(0).Locations[0].SSLRedirect)
	}
	b.Certificates = List[Certificate]{}
	b.Servers.At(0).HTTPS = false
	b.Servers.At(0).Locations[0].SSLRedirect = false
	if dump(a) != dump(b) {
		t.Errorf("TLS changed the model beyond HTTPS and the redirect:\n%s\n%s", dump(a), dump(b))
	}
}

// A wildcard in spec.tls makes the hosts it covers listen for HTTPS; a
// Secret that is missing does not stop that (they get the default certificate).
func TestBuildHTTPSHosts(t *testing.T) {
	s := snapshotOf(newIngress("default", "a", withTLS("missing", "*.example.com"),
		rule("a.example.com", prefix("/", "web", 80)), rule("b.other.com", prefix("/", "web", 80))))
	m, _ := Build(s)
	got := map[string]bool{}
	for srv := range m.Servers.All() {
		got[srv.Host] = srv.HTTPS
	}
	if !got["a.example.com"] || got["b.other.com"] {
		t.Errorf("HTTPS by host %v; want a.example.com only", got)
	}
}

func TestCertificateHash(t *testing.T) {
	c := servedCert("default/cert", pairA, "a.example.com")
	// Lua computes the hex SHA-1 of cert .. "\n" .. key over what it stores.
	if got, want := (Certificate{CertPEM: "c", KeyPEM: "k"}).Hash(), fmt.Sprintf("%x", sha1.Sum([]byte("c\nk"))); got != want {
		t.Errorf("Hash() = %s, want %s", got, want)
	}
	other := c
	other.Hosts = []string{"b.example.com"}
	if c.Hash() != other.Hash() {
		t.Error("hosts changed the hash; it covers the PEMs only")
	}
	other.KeyPEM = pairB.keyPEM
	if c.Hash() == other.Hash() {
		t.Error("another key gave the same hash")
	}
}

// A certificate whose Secret holds its text as Build re-encodes it shares
// the Secret's bytes (sharedText): at 50,000 TLS Secrets a copy was 34 MB.
// Text in another form is served re-encoded, a copy of its own.
func TestCertificateSharesTheSecretsBytes(t *testing.T) {
	same := func(s string, b []byte) bool { return unsafe.StringData(s) == unsafe.SliceData(b) }
	build := func(secret *corev1.Secret) Certificate {
		t.Helper()
		s := snapshotOf(newIngress("default", "a", withTLS("cert", "a.example.com"), rule("a.example.com", prefix("/", "web", 80))))
		s.Secrets = ListOf(secret)
		m, _ := Build(s)
		if m.Certificates.Len() != 1 || m.Certificates.At(0).Invalid != "" {
			t.Fatalf("certificates: %s", dump(m.Certificates))
		}
		return m.Certificates.At(0)
	}
	canonical := tlsSecret("default", "cert", pairA)
	c := build(canonical)
	if !same(c.CertPEM, canonical.Data[corev1.TLSCertKey]) || !same(c.KeyPEM, canonical.Data[corev1.TLSPrivateKeyKey]) {
		t.Error("the certificate's text is a copy of the Secret's, not its bytes")
	}
	other := rawTLSSecret("default", "cert", "subject=a.example.com\n"+pairA.certPEM, pairA.sec1KeyPEM)
	c = build(other)
	if c.CertPEM != pairA.certPEM || c.KeyPEM != pairA.keyPEM {
		t.Errorf("re-encoded text:\n got %s\nwant %s", dump(c), dump(servedCert("default/cert", pairA)))
	}
}

// --default-ssl-certificate: the Secret is a certificate for the host "*",
// also when an Ingress names it; a missing Secret is a Problem and the
// self-signed one stays the default.
func TestBuildDefaultCertificate(t *testing.T) {
	a := newIngress("default", "a", withTLS("cert", "a.example.com"), rule("a.example.com", prefix("/", "web", 80)))
	tests := []struct {
		name         string
		ingresses    []*networkingv1.Ingress
		want         []Certificate
		wantProblems []string
	}{
		{name: "alone", want: []Certificate{servedCert("ingress/fallback", pairA, DefaultCertificateHost)}},
		{name: "beside an Ingress's", ingresses: []*networkingv1.Ingress{a},
			want: []Certificate{servedCert("default/cert", pairA, "a.example.com"), servedCert("ingress/fallback", pairA, DefaultCertificateHost)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshotOf(tc.ingresses...)
			s.Secrets = ListOf(tlsSecret("default", "cert", pairA), tlsSecret("ingress", "fallback", pairA))
			s.DefaultCertificate = "ingress/fallback"
			m, problems := Build(s)
			if dump(m.Certificates) != dump(tc.want) || len(problems) != 0 {
				t.Errorf("certificates %s problems %v, want %s", dump(m.Certificates), problems, dump(tc.want))
			}
		})
	}
	t.Run("the Ingress's Secret is the default too", func(t *testing.T) {
		s := snapshotOf(a)
		s.Secrets = ListOf(tlsSecret("default", "cert", pairA))
		s.DefaultCertificate = "default/cert"
		m, _ := Build(s)
		if want := []Certificate{servedCert("default/cert", pairA, DefaultCertificateHost, "a.example.com")}; dump(m.Certificates) != dump(want) {
			t.Errorf("certificates %s, want %s", dump(m.Certificates), dump(want))
		}
	})
	t.Run("missing", func(t *testing.T) {
		s := snapshotOf()
		s.DefaultCertificate = "ingress/nope"
		m, problems := Build(s)
		if m.Certificates.Len() != 0 || len(problems) != 1 || problems[0].Object() != "Secret ingress/nope" ||
			!strings.Contains(problems[0].Reason, "--default-ssl-certificate: Secret ingress/nope not found; the self-signed default certificate is served") {
			t.Errorf("certificates %s problems %v", dump(m.Certificates), problems)
		}
	})
}

// Another tenant's spec.tls does not reach a host its Ingress has no rule
// for: neither a host it names ("a.example.com" in the spec.tls of an
// Ingress of b.example.com) nor one its wildcard covers ("*.example.com"
// with a rule of its own for it). Host a.example.com, whose own Ingress
// names no spec.tls, keeps listening for HTTP only, with no redirect, and
// no certificate of the other tenant's is served for it by name.
func TestBuildTLSOfAnotherTenantsHost(t *testing.T) {
	a := newIngress("tenant-a", "a", createdAt(5), rule("a.example.com", prefix("/", "web", 80)))
	alone, _ := Build(snapshotOf(a))
	for _, hostile := range []*networkingv1.Ingress{
		newIngress("tenant-b", "named", createdAt(1), withTLS("cert", "a.example.com", "b.example.com"),
			rule("b.example.com", prefix("/", "web", 80))),
		newIngress("tenant-b", "wildcard", createdAt(1), withTLS("cert", "*.example.com"),
			rule("*.example.com", prefix("/", "web", 80))),
		newIngress("tenant-b", "covers-own", createdAt(1), withTLS("cert", "*.example.com"),
			rule("b.example.com", prefix("/", "web", 80))),
	} {
		t.Run(hostile.Name, func(t *testing.T) {
			s := snapshotOf(a, hostile)
			s.Secrets = ListOf(tlsSecret("tenant-b", "cert", pairB))
			m, problems := Build(s)
			if got, want := serverOf(m, "a.example.com"), serverOf(alone, "a.example.com"); !reflect.DeepEqual(got, want) {
				t.Errorf("a.example.com:\n got %s\nwant %s", dump(got), dump(want))
			}
			for c := range m.Certificates.All() {
				if slices.Contains(c.Hosts, "a.example.com") {
					t.Errorf("certificate %s is served for a.example.com", c.Name)
				}
			}
			if b := serverOf(m, "b.example.com"); b.Host != "" && !b.HTTPS {
				t.Errorf("b.example.com does not listen for HTTPS: its own spec.tls names it")
			}
			named := slices.ContainsFunc(problems, func(p Problem) bool {
				return p.Name == "named" && strings.Contains(p.Reason, `"a.example.com": no rule of this Ingress has that host`)
			})
			if hostile.Name == "named" && !named {
				t.Errorf("no Problem names the host left out: %v", problems)
			}
		})
	}
}
