package model

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	keyAuthTLSSecret = "auth-tls-secret"
)

// Client certificates (auth-tls-* annotations): nginx checks them per
// server (ssl_verify_client), so a host whose Ingress names auth-tls-secret
// gets a server block of its own; its locations still go through the Lua
// router. The oldest Ingress of a host that names one decides for the
// host, as in ingress-nginx, where the setting is the server's.

// ClientTLS is what the server of a host checks client certificates with;
// the zero value checks none.
type ClientTLS struct {
	// CAFile and CRLFile are files under the shared dir (Model.AuthFiles)
	// from the Secret's ca.crt and ca.crl; CRLFile "" when it has none.
	CAFile, CRLFile string
	// Verify is nginx's ssl_verify_client: "on" (default), "optional" or
	// "optional_no_ca".
	Verify string
	// Depth is ssl_verify_depth (default 1).
	Depth int
	// ErrorPage is where a request without a valid certificate is
	// redirected (auth-tls-error-page); "" answers 400.
	ErrorPage string
}

// ClientCert is what a location of the Ingress that set auth-tls-* does
// with the certificate: send the ssl-client-* headers (always, when the
// host checks certificates), the certificate itself, and check its subject.
type ClientCert struct {
	// Headers sends ssl-client-verify, ssl-client-subject-dn and
	// ssl-client-issuer-dn to the backend.
	Headers bool
	// PassCertificate sends the URL-escaped PEM as ssl-client-cert
	// (auth-tls-pass-certificate-to-upstream).
	PassCertificate bool
	// MatchCN is a regex the subject DN must match, else 403
	// (auth-tls-match-cn, e.g. "CN=client1|CN=client2").
	MatchCN string
}

// readClientTLS reads the auth-tls-* annotations of ing. It returns the
// location settings, the server settings (nil when none), and why the
// Ingress's locations must fail closed.
func (b *builder) readClientTLS(ing *networkingv1.Ingress) (ClientCert, *ClientTLS, string) {
	ref, key, ok := lookupAnnotation(ing, keyAuthTLSSecret)
	if !ok {
		return ClientCert{}, nil, ""
	}
	const closed = "; the Ingress's paths answer 503 until it is fixed"
	s := ClientTLS{Verify: "on", Depth: 1}
	if v, k, ok := lookupAnnotation(ing, "auth-tls-verify-client"); ok {
		if reason := checkVerifyClient(v); reason != "" {
			b.annotationProblem(ing, k, v, reason+closed)
			return ClientCert{}, nil, k + " is not usable"
		}
		s.Verify = v
	}
	if s.Verify == "off" {
		return ClientCert{}, nil, ""
	}
	if v, k, ok := lookupAnnotation(ing, "auth-tls-verify-depth"); ok {
		if reason := checkVerifyDepth(v); reason != "" {
			b.annotationProblem(ing, k, v, reason+"; 1 is used")
		} else {
			s.Depth, _ = strconv.Atoi(v)
		}
	}
	if v, k, ok := lookupAnnotation(ing, "auth-tls-error-page"); ok {
		if reason := checkRedirectURL(v); reason != "" {
			b.annotationProblem(ing, k, v, reason+"; a failed certificate is answered 400")
		} else {
			s.ErrorPage = v
		}
	}
	var c ClientCert
	c.Headers = true
	c.PassCertificate = b.boolAnnotation(ing, "auth-tls-pass-certificate-to-upstream", false)
	if v, k, ok := lookupAnnotation(ing, "auth-tls-match-cn"); ok {
		if reason := checkMatchCN(v); reason != "" {
			b.annotationProblem(ing, k, v, reason+closed)
			return ClientCert{}, nil, k + " is not usable"
		}
		c.MatchCN = v
	}
	secret := b.namedSecret(ing, key, ref, closed)
	if secret == nil {
		return ClientCert{}, nil, key + " is not usable"
	}
	namespace, name := secret.Namespace, secret.Name
	ca, has := secret.Data["ca.crt"]
	if !has {
		b.annotationProblem(ing, key, ref, fmt.Sprintf("Secret %s/%s has no ca.crt%s", namespace, name, closed))
		return ClientCert{}, nil, key + " is not usable"
	}
	if reason := checkCABundle(ca); reason != "" {
		b.annotationProblem(ing, key, ref, fmt.Sprintf("Secret %s/%s key ca.crt %s%s", namespace, name, reason, closed))
		return ClientCert{}, nil, key + " is not usable"
	}
	s.CAFile = b.secretFile(namespace, name, "ca.crt", ca)
	if crl, has := secret.Data["ca.crl"]; has {
		if reason := checkCRL(crl); reason != "" {
			b.annotationProblem(ing, key, ref, fmt.Sprintf("Secret %s/%s key ca.crl %s%s", namespace, name, reason, closed))
			return ClientCert{}, nil, key + " is not usable"
		}
		s.CRLFile = b.secretFile(namespace, name, "ca.crl", crl)
	}
	return c, &s, ""
}

// checkCRL returns why crl is not PEM certificate revocation lists, or "".
func checkCRL(crl []byte) string {
	return checkPEM(crl, "X509 CRL", "CRL", func(der []byte) error {
		_, err := x509.ParseRevocationList(der)
		return err
	})
}

// claimClientTLS gives the hosts of ing the server settings s, one copy
// for them all, unless an older Ingress gave them some already.
func (b *builder) claimClientTLS(ing *networkingv1.Ingress, s ClientTLS) {
	if b.clientTLS == nil {
		b.clientTLS = map[string]*ClientTLS{}
	}
	for _, rule := range ing.Spec.Rules {
		if rule.Host == "" || validHost(rule.Host) != "" {
			continue
		}
		if _, taken := b.clientTLS[rule.Host]; !taken {
			b.clientTLS[rule.Host] = &s
		}
	}
}

// checkVerifyClient and checkMatchCN check auth-tls-verify-client and
// auth-tls-match-cn (the table's Check column).
var (
	checkVerifyClient = oneOf("on", "off", "optional", "optional_no_ca")
	checkVerifyDepth  = intIn("a depth", 1, 100)
)

func checkMatchCN(value string) string {
	if len(value) > 1024 || strings.ContainsAny(value, "\"\\{};\r\n\x00") || !strings.HasPrefix(value, "CN=") {
		return `is not a regex starting with "CN=" without quotes, braces, ";" or "\"`
	}
	if _, err := regexp.Compile(value); err != nil {
		return "is not a regular expression"
	}
	return ""
}
