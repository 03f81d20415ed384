package model

import "strings"

// ingressNginxPrefix is the prefix ingress-nginx reads its annotations under.
const ingressNginxPrefix = "nginx.ingress.kubernetes.io/"

// ingressNginxAnnotations are the annotation names (without prefix) that
// ingress-nginx reads, from its annotation parsers and its annotations
// documentation (2026). A key under its prefix that is not here is ignored
// by ingress-nginx too, so an Ingress carrying one moves as it is.
var ingressNginxAnnotations = setOf(
	"affinity", "affinity-canary-behavior", "affinity-mode", "app-root",
	"auth-always-set-cookie", "auth-cache-duration", "auth-cache-key", "auth-keepalive",
	"auth-keepalive-requests", "auth-keepalive-share-vars", "auth-keepalive-timeout", "auth-method",
	"auth-proxy-set-headers", "auth-realm", "auth-request-redirect", "auth-response-headers",
	"auth-secret", "auth-secret-type", "auth-signin", "auth-signin-redirect-param", "auth-snippet",
	"auth-tls-error-page", "auth-tls-match-cn", "auth-tls-pass-certificate-to-upstream",
	"auth-tls-secret", "auth-tls-verify-client", "auth-tls-verify-depth", "auth-type", "auth-url",
	"backend-protocol", "canary", "canary-by-cookie", "canary-by-header", "canary-by-header-pattern",
	"canary-by-header-value", "canary-weight", "canary-weight-total", "client-body-buffer-size",
	"configuration-snippet", "connection-proxy-header", "cors-allow-credentials", "cors-allow-headers",
	"cors-allow-methods", "cors-allow-origin", "cors-expose-headers", "cors-max-age",
	"custom-headers", "custom-http-errors", "default-backend", "denylist-source-range",
	"disable-proxy-intercept-errors", "enable-access-log", "enable-cors", "enable-global-auth",
	"enable-influxdb", "enable-modsecurity", "enable-opentelemetry", "enable-opentracing",
	"enable-owasp-core-rules", "enable-rewrite-log", "fastcgi-index", "fastcgi-params-configmap",
	"force-ssl-redirect", "from-to-www-redirect", "global-rate-limit", "global-rate-limit-ignored-cidrs",
	"global-rate-limit-key", "global-rate-limit-window", "http2-push-preload", "influxdb-host",
	"influxdb-measurement", "influxdb-port", "influxdb-server-name", "limit-allowlist",
	"limit-burst-multiplier", "limit-connections", "limit-rate", "limit-rate-after", "limit-rpm",
	"limit-rps", "limit-whitelist", "load-balance", "mirror-host", "mirror-request-body",
	"mirror-target", "modsecurity-snippet", "modsecurity-transaction-id", "opentelemetry-operation-name",
	"opentelemetry-trust-incoming-span", "opentracing-trust-incoming-span", "permanent-redirect",
	"permanent-redirect-code", "preserve-trailing-slash", "proxy-body-size", "proxy-buffer-size",
	"proxy-buffering", "proxy-buffers-number", "proxy-busy-buffers-size", "proxy-connect-timeout",
	"proxy-cookie-domain", "proxy-cookie-path", "proxy-http-version", "proxy-max-temp-file-size",
	"proxy-next-upstream", "proxy-next-upstream-timeout", "proxy-next-upstream-tries",
	"proxy-read-timeout", "proxy-redirect-from", "proxy-redirect-to", "proxy-request-buffering",
	"proxy-send-timeout", "proxy-ssl-ciphers", "proxy-ssl-name", "proxy-ssl-protocols",
	"proxy-ssl-secret", "proxy-ssl-server-name", "proxy-ssl-verify", "proxy-ssl-verify-depth",
	"rewrite-target", "satisfy", "server-alias", "server-snippet", "service-upstream",
	"session-cookie-change-on-failure", "session-cookie-conditional-samesite-none",
	"session-cookie-domain", "session-cookie-expires", "session-cookie-max-age", "session-cookie-name",
	"session-cookie-path", "session-cookie-samesite", "session-cookie-secure", "ssl-ciphers",
	"ssl-passthrough", "ssl-prefer-server-ciphers", "ssl-redirect", "stream-snippet",
	"temporal-redirect", "temporal-redirect-code", "upstream-hash-by", "upstream-hash-by-subset",
	"upstream-hash-by-subset-size", "upstream-vhost", "use-regex", "whitelist-source-range",
	"allowlist-source-range", "x-forwarded-prefix",
)

// notIngressNginxAnnotations say why ingress-nginx ignores some keys that
// Ingresses carry under its prefix.
var notIngressNginxAnnotations = map[string]string{
	"add-base-url":              "removed from ingress-nginx long ago",
	"base-url-scheme":           "removed from ingress-nginx long ago",
	"secure-backends":           "removed from ingress-nginx (backend-protocol: HTTPS replaced it)",
	"grpc-backend":              "removed from ingress-nginx (backend-protocol: GRPC replaced it)",
	"session-cookie-hash":       "removed from ingress-nginx",
	"client_max_body_size":      "an nginx directive's name, not an annotation (proxy-body-size sets it)",
	"client-max-body-size":      "an annotation of NGINX Inc.'s controller (nginx.org/), not of ingress-nginx (proxy-body-size is)",
	"websocket-services":        "an annotation of NGINX Inc.'s controller (nginx.org/); ingress-nginx proxies WebSockets without one",
	"ssl-services":              "an annotation of NGINX Inc.'s controller (nginx.org/); ingress-nginx's is backend-protocol: HTTPS",
	"redirect-to-https":         "an annotation of NGINX Inc.'s controller (nginx.org/); ingress-nginx's is force-ssl-redirect",
	"proxy-pass-headers":        "an annotation of NGINX Inc.'s controller (nginx.org/), not of ingress-nginx",
	"proxy-hide-headers":        "an annotation of NGINX Inc.'s controller (nginx.org/), not of ingress-nginx",
	"auth-tls-verify-client-no": "not an annotation; auth-tls-verify-client takes on, off, optional or optional_no_ca",
}

// ingressNginxConfigMapKeys are keys of ingress-nginx's ConfigMap that
// Ingresses carry as annotations, where ingress-nginx ignores them.
var ingressNginxConfigMapKeys = setOf(
	"hsts", "hsts-include-subdomains", "hsts-max-age", "hsts-preload", "client-header-buffer-size",
	"large-client-header-buffers", "proxy-set-headers", "add-headers", "use-forwarded-headers",
	"enable-real-ip", "real-ip-header", "ssl-protocols", "client-header-timeout", "client-body-timeout",
	"keep-alive", "keep-alive-requests", "use-gzip", "gzip-level", "gzip-types", "server-tokens",
	"proxy-buffers", "compute-full-forwarded-for", "forwarded-for-header", "use-http2",
	"ssl-session-cache", "ssl-session-timeout", "log-format-upstream", "worker-processes",
	"http-snippet", "allow-snippet-annotations", "proxy-headers-hash-max-size", "server-name-hash-bucket-size",
)

func setOf(names ...string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

// ingressNginxIgnores reports whether ingress-nginx ignores the annotation
// key (full key), and why.
func ingressNginxIgnores(key string) (reason string, ignored bool) {
	name, ok := strings.CutPrefix(key, ingressNginxPrefix)
	if !ok || ingressNginxAnnotations[name] {
		return "", false
	}
	if why, ok := notIngressNginxAnnotations[name]; ok {
		return why, true
	}
	if ingressNginxConfigMapKeys[name] {
		return "a key of ingress-nginx's ConfigMap, not an annotation", true
	}
	if near := nearestIngressNginxAnnotation(name); near != "" {
		return "not an ingress-nginx annotation; a typo of " + near + "?", true
	}
	return "not an ingress-nginx annotation", true
}

// nearestIngressNginxAnnotation returns the one annotation name within two
// edits of name, or "".
func nearestIngressNginxAnnotation(name string) string {
	found := ""
	for known := range ingressNginxAnnotations {
		if editDistance(name, known) <= 2 {
			if found != "" {
				return "" // more than one: no guess
			}
			found = known
		}
	}
	return found
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
