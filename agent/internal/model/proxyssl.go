package model

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/restysync/restysync/agent/internal/ciphers"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	keyProxySSLVerify = "proxy-ssl-verify"
)

// TLS to the backends (proxy-ssl-* annotations), for backend-protocol
// HTTPS and GRPCS. The Secret proxy-ssl-secret names gives the CAs the
// backend's certificate is checked against (ca.crt) and the client
// certificate nginx presents (tls.crt, tls.key). nginx reads these files
// when it loads its config, so each file's name holds a hash of its
// content: a rotated CA is a new file and a reload, never a stale one.

// ProxySSL are the settings of TLS to the backend; the zero value is
// nginx's defaults (no verification, SNI and name from the client's host).
type ProxySSL struct {
	// CAFile, CertFile and KeyFile are files under the shared dir (in
	// Model.AuthFiles); "" when the Secret has no such key.
	CAFile, CertFile, KeyFile string
	// Verify checks the backend's certificate against CAFile
	// (proxy-ssl-verify "on"); without a usable CAFile every request
	// fails rather than go unchecked.
	Verify bool
	// VerifyDepth is the longest chain accepted (proxy-ssl-verify-depth,
	// default 1 as ingress-nginx; 0 when Verify is off).
	VerifyDepth int
	// Name is the name checked and sent by SNI (proxy-ssl-name); "" is the
	// client's host.
	Name string
	// ServerName is "on" or "off" (proxy-ssl-server-name); "" keeps SNI on.
	ServerName string
	// Protocols and Ciphers are nginx's proxy_ssl_protocols and
	// proxy_ssl_ciphers (space-separated protocols, an OpenSSL cipher
	// list); "" keeps nginx's defaults.
	Protocols string
	Ciphers   string
}

var proxySSLProtocols = map[string]bool{"TLSv1": true, "TLSv1.1": true, "TLSv1.2": true, "TLSv1.3": true}

const maxSecretFile = 1 << 20

// SecretRefs returns the Secrets ing names by annotation (basic auth's
// auth-secret, proxy-ssl-secret, auth-tls-secret) in its own namespace: the only non-TLS
// Secrets the kube source reads, each by name.
func SecretRefs(ing *networkingv1.Ingress) []types.NamespacedName {
	var refs []types.NamespacedName
	if ref, ok := AuthSecretRef(ing); ok {
		refs = append(refs, ref)
	}
	for _, key := range []string{"proxy-ssl-secret", keyAuthTLSSecret} {
		if value, _, ok := lookupAnnotation(ing, key); ok {
			namespace, name := splitAuthSecretRef(ing, value)
			ref := types.NamespacedName{Namespace: namespace, Name: name}
			if namespace == ing.Namespace && len(validation.IsDNS1123Subdomain(name)) == 0 && !slices.Contains(refs, ref) {
				refs = append(refs, ref)
			}
		}
	}
	return refs
}

// readProxySSL reads the proxy-ssl-* annotations into p.SSL and the files
// it needs into b.proxyFiles.
func (b *builder) readProxySSL(ing *networkingv1.Ingress, p *ProxySettings) {
	s := &p.SSL
	if value, key, ok := lookupAnnotation(ing, keyProxySSLVerify); ok {
		if reason := checkOnOff(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; off is used")
		} else if value == "on" {
			s.Verify, s.VerifyDepth = true, 1
		}
	}
	if value, key, ok := lookupAnnotation(ing, "proxy-ssl-verify-depth"); ok {
		if reason := checkProxySSLVerifyDepth(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; 1 is used")
		} else if s.Verify {
			s.VerifyDepth, _ = strconv.Atoi(value)
		}
	}
	if value, key, ok := lookupAnnotation(ing, "proxy-ssl-name"); ok {
		if reason := checkProxySSLName(value); reason == "" {
			s.Name = strings.ToLower(value)
		} else {
			b.annotationProblem(ing, key, value, reason+"; the client's host is used")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "proxy-ssl-server-name"); ok {
		if reason := checkOnOff(value); reason == "" {
			s.ServerName = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; on is used")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "proxy-ssl-protocols"); ok {
		if reason := checkProxySSLProtocols(value); reason == "" {
			s.Protocols = strings.Join(strings.Fields(value), " ")
		} else {
			b.annotationProblem(ing, key, value, reason+"; nginx's default is used")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "proxy-ssl-ciphers"); ok {
		if reason := checkProxySSLCiphers(value); reason == "" {
			s.Ciphers = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; nginx's default is used")
		}
	}
	ref, key, ok := lookupAnnotation(ing, "proxy-ssl-secret")
	if !ok {
		return
	}
	unusable := "; the backend's certificate is checked against no CA (every request fails)"
	if !s.Verify {
		unusable = "; TLS to the backend goes on without it"
	}
	secret := b.namedSecret(ing, key, ref, unusable)
	if secret == nil {
		return
	}
	namespace, name := secret.Namespace, secret.Name
	if ca, has := secret.Data["ca.crt"]; has {
		if reason := checkCABundle(ca); reason != "" {
			b.annotationProblem(ing, key, ref, fmt.Sprintf("Secret %s/%s key ca.crt %s%s", namespace, name, reason, unusable))
		} else {
			s.CAFile = b.secretFile(namespace, name, "ca.crt", ca)
		}
	}
	cert, hasCert := secret.Data["tls.crt"]
	keyPEM, hasKey := secret.Data["tls.key"]
	if hasCert && hasKey {
		if len(cert)+len(keyPEM) > maxSecretFile {
			b.annotationProblem(ing, key, ref, fmt.Sprintf("Secret %s/%s: tls.crt and tls.key are too large; no client certificate is sent", namespace, name))
		} else if _, err := tls.X509KeyPair(cert, keyPEM); err != nil {
			b.annotationProblem(ing, key, ref, fmt.Sprintf("Secret %s/%s: tls.crt and tls.key are not a certificate and its key; no client certificate is sent", namespace, name))
		} else {
			s.CertFile = b.secretFile(namespace, name, "tls.crt", cert)
			s.KeyFile = b.secretFile(namespace, name, "tls.key", keyPEM)
		}
	}
}

// namedSecret returns the Secret an annotation (key, with value ref) names
// in the Ingress's namespace, or nil after a Problem that ends with
// consequence (what happens without it).
func (b *builder) namedSecret(ing *networkingv1.Ingress, key, ref, consequence string) *corev1.Secret {
	namespace, name := splitAuthSecretRef(ing, ref)
	if namespace != ing.Namespace || len(validation.IsDNS1123Subdomain(name)) > 0 {
		b.annotationProblem(ing, key, ref, "is not the name of a Secret in the Ingress's namespace"+consequence)
		return nil
	}
	secret := b.secret(namespace, name)
	if secret == nil {
		b.missingObjectProblem(ing, key, ref, "Secret "+namespace+"/"+name, fmt.Sprintf("Secret %s/%s not found%s", namespace, name, consequence))
	}
	return secret
}

// secretFile records a file nginx reads from a Secret or a ConfigMap (a
// CA, a client certificate, a CRL) and returns its name, which changes
// with its content: nginx reads these when it loads its config, so new
// content must be a new file and a reload.
func (b *Builder) secretFile(namespace, name, key string, content []byte) string {
	name = hashedFileName(namespace, name, key, content)
	if b.secretFiles == nil {
		b.secretFiles = map[string]AuthFile{}
	}
	b.secretFiles[name] = AuthFile{Name: name, Content: string(content)}
	return name
}

// MaxFileName bounds the name of a file under the shared dir's auth/
// folder: filesystems take 255 bytes, and apply writes each file under a
// temporary name a little longer first.
const MaxFileName = 200

// fileName is the name under the shared dir of a file made from the object
// namespace/name: "auth/<namespace>_<name><suffix>". A name too long for
// the filesystem (Kubernetes takes 63 + 253 characters) is cut and ends
// with a hash of namespace/name, so that two objects never share a file.
func fileName(namespace, name, suffix string) string {
	base := namespace + "_" + name
	if len(base)+len(suffix) > MaxFileName {
		sum := sha256.Sum256([]byte(namespace + "/" + name))
		mark := "-" + hex.EncodeToString(sum[:6])
		base = base[:MaxFileName-len(suffix)-len(mark)] + mark
	}
	return authFileDir + base + suffix
}

// hashedFileName is the file of key of object namespace/name holding
// content: its name changes with the content.
func hashedFileName(namespace, name, key string, content []byte) string {
	sum := sha256.Sum256(content)
	return fileName(namespace, name, "."+hex.EncodeToString(sum[:6])+"."+key)
}

// checkCABundle returns why ca is not a PEM bundle of CA certificates, or "".
func checkCABundle(ca []byte) string {
	return checkPEM(ca, "CERTIFICATE", "certificate", func(der []byte) error {
		_, err := x509.ParseCertificate(der)
		return err
	})
}

// checkPEM returns why data is not one or more PEM blocks of blockType
// (called what) that parse, or "".
func checkPEM(data []byte, blockType, what string, parse func([]byte) error) string {
	if len(data) > maxSecretFile {
		return "is larger than 1 MiB"
	}
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != blockType {
			return "holds a PEM block that is not a " + what
		}
		if err := parse(block.Bytes); err != nil {
			return "holds a " + what + " that does not parse"
		}
		n++
	}
	if n == 0 {
		return "holds no PEM " + what
	}
	return ""
}

// The checks of the proxy-ssl-* keys (the table's Check column).
var checkProxySSLVerifyDepth = intIn("a depth", 0, 100)

func checkProxySSLName(value string) string {
	if len(validation.IsDNS1123Subdomain(strings.ToLower(value))) == 0 {
		return ""
	}
	return "is not a host name"
}

func checkProxySSLProtocols(value string) string {
	fields := strings.Fields(value)
	good := len(fields) > 0
	for _, f := range fields {
		good = good && proxySSLProtocols[f]
	}
	if good {
		return ""
	}
	return "is not a list of TLSv1, TLSv1.1, TLSv1.2, TLSv1.3"
}

func checkProxySSLCiphers(value string) string {
	if err := ciphers.Check(value); err != nil {
		return "is not an OpenSSL cipher list nginx takes: " + err.Error()
	}
	return ""
}
