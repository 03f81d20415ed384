package model

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// MaxPEMBytes bounds tls.crt and tls.key after re-encoding; Lua refuses
// larger ones. A Secret cannot hold more than 1 MiB in a cluster anyway.
const MaxPEMBytes = 1 << 20

// checkedSecret is a TLS Secret looked at once per Build.
type checkedSecret struct {
	// cert holds Name and, when the Secret is good, the PEMs and NotAfter;
	// cert.Invalid says why a Secret that exists cannot be served.
	cert Certificate
	leaf *x509.Certificate
	// unusable is why the Secret cannot serve at all (not found, not of
	// type kubernetes.io/tls): its hosts get the default certificate and
	// stay free for a younger Ingress.
	unusable string
}

// tlsClaim is the certificate a TLS host was given, and by which Ingress.
type tlsClaim struct {
	cert    string
	ingress string
}

// addTLS gives each host of ing's spec.tls to the Secret it names, unless
// an older Ingress gave it to another Secret already. A spec.tls entry
// without hosts covers the hosts of the Ingress's rules. A missing Secret
// claims nothing; a Secret that exists but is bad (see checkSecret) claims
// its hosts, so that the syncer can keep serving its last good content.
// A certificate that does not cover a host is a Problem but is served
// anyway: the client sees a name mismatch either way, and the user's
// certificate says more about what went wrong than the default one.
func (b *builder) addTLS(ing *networkingv1.Ingress, id string) {
	for ti := range ing.Spec.TLS {
		entry := &ing.Spec.TLS[ti]
		field := fmt.Sprintf("spec.tls[%d]", ti)
		hosts, fromRules := entry.Hosts, false
		if len(hosts) == 0 {
			hosts, fromRules = ruleHosts(ing), true
			if len(hosts) == 0 {
				b.ingressProblem(ing, field+": names no hosts and the rules name none either; left out")
				continue
			}
		}
		if !fromRules {
			hosts = b.ownTLSHosts(ing, field, hosts)
			if len(hosts) == 0 {
				continue
			}
		}
		for _, host := range hosts {
			if validHost(host) == "" {
				b.markHTTPS(ing, host)
			}
		}
		if entry.SecretName == "" {
			b.ingressProblem(ing, field+".secretName: is missing; its hosts get the default certificate")
			continue
		}
		secret := b.checkSecret(ing.Namespace, entry.SecretName)
		name := secret.cert.Name
		secretField := fmt.Sprintf("%s.secretName %q", field, entry.SecretName)
		if secret.unusable != "" {
			b.ingressProblem(ing, fmt.Sprintf("%s: %s; hosts %s get the default certificate", secretField, secret.unusable, quoteHosts(hosts)))
			continue
		}
		var claimed []string
		for hi, host := range hosts {
			hostField := fmt.Sprintf("%s.hosts[%d] %q", field, hi, host)
			if fromRules {
				hostField = fmt.Sprintf("%s (host %q of the rules)", field, host)
			} else if reason := validHost(host); reason != "" {
				b.ingressProblem(ing, fmt.Sprintf("%s: %s; host left out", hostField, reason))
				continue
			}
			if owner, taken := b.tlsHosts[host]; taken {
				if owner.cert != name {
					b.ingressProblem(ing, fmt.Sprintf("%s: already served with the certificate of Secret %s by Ingress %s; host left out",
						hostField, owner.cert, owner.ingress))
				}
				continue
			}
			b.tlsHosts[host] = tlsClaim{cert: name, ingress: id}
			claimed = append(claimed, host)
			if secret.leaf != nil {
				if err := secret.leaf.VerifyHostname(host); err != nil {
					b.ingressProblem(ing, fmt.Sprintf("%s: the certificate of Secret %s does not cover it (%v); served anyway", hostField, name, err))
				}
			}
		}
		if len(claimed) == 0 {
			continue
		}
		if secret.cert.Invalid != "" {
			b.ingressProblem(ing, fmt.Sprintf("%s: Secret %s %s; hosts %s keep the certificate last served for it, or get the default one",
				secretField, name, secret.cert.Invalid, quoteHosts(claimed)))
		}
		b.certHosts[name] = append(b.certHosts[name], claimed...)
	}
}

// ownTLSHosts returns the hosts of a spec.tls entry (field) that ing's
// own rules serve: a rule's host, or a wildcard that covers one of them.
// Any other is a Problem and left out, as ingress-nginx reads spec.tls
// for the hosts of the Ingress's own rules only: else an Ingress could
// claim another tenant's host ("a.test" in the spec.tls of an Ingress for
// "b.test"), give it its certificate and turn on the HTTPS redirect of
// the other tenant's locations.
func (b *builder) ownTLSHosts(ing *networkingv1.Ingress, field string, hosts []string) []string {
	rules := ruleHosts(ing)
	var own []string
	for hi, host := range hosts {
		if validHost(host) != "" || slices.Contains(rules, host) ||
			slices.ContainsFunc(rules, func(r string) bool { return wildcardCovers(host, r) }) {
			own = append(own, host) // an invalid host is reported below
			continue
		}
		b.ingressProblem(ing, fmt.Sprintf("%s.hosts[%d] %q: no rule of this Ingress has that host (or one the wildcard covers); "+
			"a spec.tls entry serves its own Ingress's hosts only; host left out", field, hi, host))
	}
	return own
}

// wildcardCovers says whether the spec.tls host pattern "*.parent" covers
// the rule host (one label more, as Ingress wildcards go).
func wildcardCovers(pattern, host string) bool {
	parent, ok := strings.CutPrefix(pattern, "*.")
	if !ok || strings.HasPrefix(host, "*.") {
		return false
	}
	_, rest, ok := strings.Cut(host, ".")
	return ok && rest == parent
}

// markHTTPS records that host has TLS of its own (Server.HTTPS: its
// certificate, the HTTPS redirect), and, for a wildcard, the hosts of
// ing's own rules it covers: never another Ingress's host, which has TLS
// only when a spec.tls of its own Ingress says so.
func (b *builder) markHTTPS(ing *networkingv1.Ingress, host string) {
	host = strings.ToLower(host)
	b.httpsHosts[host] = true
	for _, r := range ruleHosts(ing) {
		if wildcardCovers(host, r) {
			b.httpsHosts[r] = true
		}
	}
}

// ruleHosts returns the valid hosts of ing's rules, without duplicates.
func ruleHosts(ing *networkingv1.Ingress) []string {
	var hosts []string
	for _, r := range ing.Spec.Rules {
		if r.Host != "" && validHost(r.Host) == "" && !slices.Contains(hosts, r.Host) {
			hosts = append(hosts, r.Host)
		}
	}
	return hosts
}

func quoteHosts(hosts []string) string {
	quoted := make([]string, len(hosts))
	for i, h := range hosts {
		quoted[i] = fmt.Sprintf("%q", h)
	}
	return strings.Join(quoted, ", ")
}

// checkSecret looks at the Secret namespace/name once per Build: it must
// exist, be of type kubernetes.io/tls, and hold a tls.crt and tls.key that
// parse, match and have not expired (see parseKeyPair).
func (b *Builder) checkSecret(namespace, name string) *checkedSecret {
	id := namespace + "/" + name
	if c, ok := b.checked[id]; ok {
		return c
	}
	c := &checkedSecret{cert: Certificate{Name: id}}
	b.checked[id] = c
	s := b.secret(namespace, name)
	switch {
	case s == nil:
		c.unusable = fmt.Sprintf("Secret %s not found", id)
	case s.Type != corev1.SecretTypeTLS:
		c.unusable = fmt.Sprintf("Secret %s has type %q; only %s Secrets are served", id, s.Type, corev1.SecretTypeTLS)
	case len(s.Data[corev1.TLSCertKey]) == 0:
		c.cert.Invalid = "has no " + corev1.TLSCertKey
	case len(s.Data[corev1.TLSPrivateKeyKey]) == 0:
		c.cert.Invalid = "has no " + corev1.TLSPrivateKeyKey
	default:
		certPEM, keyPEM, leaf, reason := parseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], b.now)
		if reason != "" {
			c.cert.Invalid = reason
			break
		}
		c.leaf = leaf
		b.noteExpiry(leaf.NotAfter)
		c.cert.CertPEM, c.cert.KeyPEM, c.cert.NotAfter = certPEM, keyPEM, leaf.NotAfter.UTC()
	}
	return c
}

// parseKeyPair checks a certificate chain and its key the way the data
// plane will use them: every CERTIFICATE block parses, the key parses and
// matches the first (leaf) certificate, and the leaf has not expired at now
// (unless now is zero). It returns the chain and key re-encoded (PEM
// CERTIFICATE blocks; a PKCS #8 PRIVATE KEY block), so that Lua gets
// exactly what was checked, or the reason they cannot be served. A text
// the Secret holds already in that form is returned as the Secret's own
// bytes (sharedText), not a copy.
func parseKeyPair(certPEM, keyPEM []byte, now time.Time) (string, string, *x509.Certificate, string) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return "", "", nil, fmt.Sprintf("holds an unusable tls.crt or tls.key: %s", strings.TrimPrefix(err.Error(), "tls: "))
	}
	var chain []byte
	var leaf *x509.Certificate
	for i, der := range pair.Certificate {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return "", "", nil, fmt.Sprintf("holds a tls.crt whose certificate %d does not parse: %v", i, err)
		}
		if i == 0 {
			leaf = cert
		}
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if !now.IsZero() && now.After(leaf.NotAfter) {
		return "", "", nil, fmt.Sprintf("holds a certificate that expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	der, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		return "", "", nil, fmt.Sprintf("holds a tls.key of a kind that is not supported: %v", err)
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if len(chain) > MaxPEMBytes || len(key) > MaxPEMBytes {
		return "", "", nil, fmt.Sprintf("holds a tls.crt or tls.key larger than %d bytes", MaxPEMBytes)
	}
	return sharedText(certPEM, chain), sharedText(keyPEM, key), leaf, ""
}

// sharedText returns checked, the re-encoded text of a Secret's value
// held, as a string: held's own bytes when they are exactly checked (a
// certificate at 50,000 TLS Secrets is then held once, by the source,
// and not again by the model: 34 MB), else a copy of checked.
//
// Sharing is sound because no one ever writes those bytes: a source
// publishes a Secret once it is done with it and replaces it whole on a
// change (kube: the informer's transform, stripAuthSecret, is the last
// write, and its cache hands out objects no one may change; file:
// decode, checkSecret folding stringData, then compact's deep copy, which
// is what the snapshot holds), and Snapshot's objects are read-only.
// TestCertificateSharesTheSecretsBytes checks that the model shares them.
func sharedText(held, checked []byte) string {
	if !bytes.Equal(held, checked) {
		return string(checked)
	}
	return unsafe.String(unsafe.SliceData(held), len(held))
}

// addDefaultCertificate makes the TLS Secret id ("namespace/name") the
// default certificate. One that is missing or not of type TLS is a Problem,
// and the self-signed certificate stays the default; one that is bad is a
// Problem and keeps its last good content, as for any host.
func (b *builder) addDefaultCertificate(id string) {
	if id == "" {
		return
	}
	namespace, name, _ := strings.Cut(id, "/")
	c := b.checkSecret(namespace, name)
	switch {
	case c.unusable != "":
		b.problem("Secret", namespace, name, fmt.Sprintf("--default-ssl-certificate: %s; the self-signed default certificate is served", c.unusable))
		return
	case c.cert.Invalid != "":
		b.problem("Secret", namespace, name, fmt.Sprintf("--default-ssl-certificate: the Secret %s; its last good content (or the self-signed one) stays the default", c.cert.Invalid))
	}
	b.certHosts[id] = append(b.certHosts[id], DefaultCertificateHost)
}

// certificates returns the certificates that won at least one host, sorted.
func (b *Builder) certificates() []Certificate {
	if len(b.certHosts) == 0 {
		return nil
	}
	certs := make([]Certificate, 0, len(b.certHosts))
	for name, hosts := range b.certHosts {
		c := b.checked[name].cert
		c.Hosts = slices.Clone(hosts)
		slices.Sort(c.Hosts)
		certs = append(certs, c)
	}
	slices.SortFunc(certs, func(x, y Certificate) int { return strings.Compare(x.Name, y.Name) })
	return certs
}
