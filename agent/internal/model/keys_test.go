package model

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// ingressNginxKeys is the list of ingress-nginx annotation keys (issue 8)
// that users switching to restysync expect to work under both prefixes.
var ingressNginxKeys = []string{
	"rewrite-target", "use-regex", "app-root", "ssl-redirect", "force-ssl-redirect",
	"permanent-redirect", "permanent-redirect-code", "temporal-redirect", "backend-protocol",
	"proxy-body-size", "proxy-connect-timeout", "proxy-send-timeout", "proxy-read-timeout",
	"proxy-buffering", "proxy-buffer-size", "proxy-request-buffering", "proxy-next-upstream",
	"proxy-next-upstream-tries", "proxy-http-version", "upstream-vhost", "x-forwarded-prefix",
	"server-alias", "whitelist-source-range", "allowlist-source-range", "denylist-source-range",
	"enable-cors", "cors-allow-origin", "cors-allow-methods", "cors-allow-headers",
	"cors-allow-credentials", "cors-max-age", "cors-expose-headers",
	"auth-type", "auth-secret", "auth-realm",
	"limit-rps", "limit-rpm", "limit-connections", "limit-burst-multiplier", "limit-whitelist",
	"custom-http-errors", "default-backend", "enable-access-log",
	"affinity", "session-cookie-name", "session-cookie-path", "session-cookie-max-age",
	"session-cookie-samesite", "session-cookie-secure", "session-cookie-change-on-failure", "session-cookie-domain", "session-cookie-expires",
	"load-balance", "upstream-hash-by", "upstream-hash-by-subset", "upstream-hash-by-subset-size",
	"affinity-mode", "affinity-canary-behavior", "session-cookie-conditional-samesite-none",
	"canary", "canary-weight", "canary-weight-total", "canary-by-header", "canary-by-header-value", "canary-by-header-pattern", "canary-by-cookie",
}

// enablingAnnotations turn on the features whose other keys are read only
// when the feature is on (cors-*, auth-*, session-cookie-*, a rate limit's
// multiplier and allowlist, a redirect's code, the error pages' backend).
var enablingAnnotations = map[string]string{
	"enable-cors":        "true",
	"auth-type":          "basic",
	"auth-secret":        "htpasswd",
	"affinity":           "cookie",
	"limit-rps":          "5",
	"permanent-redirect": "https://example.com/",
	"custom-http-errors": "404",
	"default-backend":    "errors",
}

// TestIngressNginxKeysWired proves every listed key, under both prefixes,
// is read by a parser: AnnotationStatus says supported, and a hostile
// value is a Problem that names the full key. (A key that is on the
// supported list but never read would pass the first check only.)
func TestIngressNginxKeysWired(t *testing.T) {
	const hostile = "\x00{;$bad\n"
	secret := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"auth": []byte("user:{PLAIN}pass\n")}}
	secret.Namespace, secret.Name = "default", "htpasswd"
	for _, pfx := range annotationPrefixes {
		for _, key := range ingressNginxKeys {
			t.Run(pfx+key, func(t *testing.T) {
				if got := AnnotationStatus(pfx + key); got != AnnotationSupported {
					t.Fatalf("AnnotationStatus(%q) = %q, want supported", pfx+key, got)
				}
				opts := []ingressOption{rule("app.test", prefix("/", "web", 80))}
				for k, v := range enablingAnnotations {
					if k != key {
						opts = append(opts, annotation(pfx+k, v))
					}
				}
				opts = append(opts, annotation(pfx+key, hostile))
				if (strings.HasPrefix(key, "canary") && key != "canary") || key == "affinity-canary-behavior" {
					opts = append(opts, annotation(pfx+"canary", "true"))
				}
				ing := newIngress("default", "web", opts...)
				s := snapshotOf(ing)
				s.Secrets = ListOf(append(s.Secrets.Slice(), secret)...)
				_, problems := Build(s)
				for _, p := range problems {
					if strings.Contains(p.Reason, pfx+key+" ") || strings.Contains(p.Reason, pfx+key+":") {
						return
					}
				}
				t.Errorf("a hostile value of %s gave no Problem naming it; problems: %v", pfx+key, problems)
			})
		}
	}
}
