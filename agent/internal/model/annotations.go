package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/chars"
)

// annotationPrefixes are the prefixes every annotation key works under:
// restysync's own, and ingress-nginx's so that its users switch by changing
// the class alone. When both are set, restysync's wins.
var annotationPrefixes = []string{"restysync.io/", "nginx.ingress.kubernetes.io/"}

// lookupAnnotation returns the value of key under the first prefix that has it,
// and the full key it was found under. An empty value counts as absent, as
// ingress-nginx's parser takes an empty annotation for a missing one (its
// default applies, and no error); see EmptyAnnotationReason. So does a
// value with a character package chars refuses: no field of the model ever
// holds one, checkAnnotationValues reports it, and readAccess makes the
// Ingress's paths fail closed.
func lookupAnnotation(ing *networkingv1.Ingress, key string) (value, fullKey string, ok bool) {
	if len(ing.Annotations) == 0 {
		return "", "", false
	}
	// The key is built in a buffer on the stack: a map index by
	// string(bytes) does not allocate, and this runs for every key of
	// every Ingress on each full sync.
	var buf [128]byte
	for _, prefix := range annotationPrefixes {
		full := append(append(buf[:0], prefix...), key...)
		if value, ok = ing.Annotations[string(full)]; ok && value != "" {
			if chars.CheckText(value) != nil {
				return "", "", false
			}
			return value, string(full), true
		}
	}
	return "", "", false
}

// boolAnnotation reads a "true"/"false" annotation. A value that is
// neither is a Problem on the Ingress, and the default is used.
func (b *builder) boolAnnotation(ing *networkingv1.Ingress, key string, def bool) bool {
	value, fullKey, ok := lookupAnnotation(ing, key)
	if !ok {
		return def
	}
	v, err := strconv.ParseBool(value)
	if err != nil {
		b.annotationProblem(ing, fullKey, value, fmt.Sprintf("is not true or false; %t is used", def))
		return def
	}
	return v
}

// useRegex says whether the ImplementationSpecific paths of ing are
// regular expressions (annotation use-regex, or a rewrite-target, as
// ingress-nginx has it).
func (b *builder) useRegex(ing *networkingv1.Ingress) bool {
	return b.boolAnnotation(ing, "use-regex", false) || rewriteImpliesRegex(ing)
}

// clip shortens a user value quoted in a Problem, so that a huge
// annotation costs a line, not a megabyte, in every log and Event.
func clip(value string) string {
	const max = 64
	if len(value) <= max {
		return value
	}
	return value[:max] + "…"
}

// annotationProblem reports a bad annotation value on ing.
func (b *builder) annotationProblem(ing *networkingv1.Ingress, key, value, reason string) {
	b.ingressProblem(ing, fmt.Sprintf("annotation %s %q: %s", key, clip(value), reason))
}

// missingObjectProblem is annotationProblem for a value that names an
// object the snapshot lacks (object is "Kind namespace/name"): the value
// is right, the cluster is not (yet).
func (b *builder) missingObjectProblem(ing *networkingv1.Ingress, key, value, object, reason string) {
	b.problems = append(b.problems, Problem{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name,
		Reason:  clipReason(fmt.Sprintf("annotation %s %q: %s", key, clip(value), reason)),
		Missing: object})
}

// supportedAnnotations are the keys Build reads, without prefix.
var supportedAnnotations = map[string]bool{
	"use-regex": true, "load-balance": true, "upstream-hash-by": true,
	"affinity": true, "session-cookie-name": true, "session-cookie-path": true, "session-cookie-max-age": true,
	"session-cookie-samesite": true, "session-cookie-secure": true, "session-cookie-change-on-failure": true,
	"session-cookie-domain": true, "session-cookie-expires": true,
	// balancing keys of policy.go and canary.go
	"upstream-hash-by-subset": true, "upstream-hash-by-subset-size": true, "affinity-mode": true,
	"affinity-canary-behavior": true, "session-cookie-conditional-samesite-none": true,
	"proxy-next-upstream-tries": true, "max-fails": true, "fail-timeout": true,
	"canary": true, "canary-weight": true, "canary-weight-total": true, "canary-by-header": true,
	"canary-by-header-value": true, "canary-by-header-pattern": true, "canary-by-cookie": true,
	"ssl-redirect": true, "force-ssl-redirect": true, "backend-protocol": true, "ssl-passthrough": true,
	// proxy and routing (proxy.go)
	"rewrite-target": true, "app-root": true, "permanent-redirect": true, "permanent-redirect-code": true,
	"temporal-redirect": true, "proxy-body-size": true, "proxy-connect-timeout": true, "proxy-send-timeout": true,
	"proxy-read-timeout": true, "proxy-buffering": true, "proxy-buffer-size": true, "proxy-request-buffering": true,
	"proxy-next-upstream": true, "proxy-next-upstream-timeout": true, "proxy-http-version": true,
	"upstream-vhost": true, "x-forwarded-prefix": true, "server-alias": true, "enable-access-log": true,
	// the remaining proxy and routing keys (proxykeys.go)
	"proxy-buffers-number": true, "proxy-busy-buffers-size": true, "proxy-max-temp-file-size": true,
	"client-body-buffer-size": true, "proxy-cookie-domain": true, "proxy-cookie-path": true,
	"proxy-redirect-from": true, "proxy-redirect-to": true, "limit-rate": true, "limit-rate-after": true,
	"temporal-redirect-code": true, "from-to-www-redirect": true, "preserve-trailing-slash": true,
	"satisfy": true, "service-upstream": true,
	// access control (access.go)
	"whitelist-source-range": true, "allowlist-source-range": true, "denylist-source-range": true,
	"enable-cors": true, "cors-allow-origin": true, "cors-allow-methods": true, "cors-allow-headers": true,
	"cors-allow-credentials": true, "cors-max-age": true, "cors-expose-headers": true,
	"auth-type": true, "auth-secret": true, "auth-secret-type": true, "auth-realm": true,
	"auth-url": true, "auth-method": true, "auth-signin": true, "auth-signin-redirect-param": true,
	"auth-response-headers": true, "auth-request-redirect": true, "auth-cache-key": true,
	"auth-cache-duration": true, "auth-always-set-cookie": true, "auth-proxy-set-headers": true, "enable-global-auth": true,
	"proxy-ssl-secret": true, "proxy-ssl-verify": true, "proxy-ssl-verify-depth": true, "proxy-ssl-name": true,
	"proxy-ssl-server-name": true,
	"auth-tls-secret":       true, "auth-tls-verify-client": true, "auth-tls-verify-depth": true, "auth-tls-error-page": true,
	"auth-tls-pass-certificate-to-upstream": true, "auth-tls-match-cn": true, "proxy-ssl-protocols": true, "proxy-ssl-ciphers": true,
	"limit-rps": true, "limit-rpm": true, "limit-connections": true, "limit-burst-multiplier": true,
	"limit-whitelist": true, "custom-http-errors": true, "default-backend": true,
	// FastCGI, mirroring, response headers (fastcgi.go, mirror.go, responseheaders.go)
	"fastcgi-index": true, "fastcgi-params-configmap": true, "mirror-target": true, "mirror-host": true,
	"mirror-request-body": true, "custom-headers": true,
	// ModSecurity (modsecurity.go)
	"enable-modsecurity": true, "enable-owasp-core-rules": true, "modsecurity-transaction-id": true,
	// snippets, read as typed directives against an allowlist (snippet.go)
	configurationSnippetKey: true, serverSnippetKey: true, authSnippetKey: true,
}

// isSnippet reports whether key (without prefix) is a raw nginx directive
// Build does not read (the snippets it reads are in supportedAnnotations).
func isSnippet(key string) bool {
	return strings.HasSuffix(key, "-snippet") || key == "lua-resty-waf-extra-rules"
}

// Annotation statuses, as AnnotationStatus and `restysync check` name them.
const (
	AnnotationSupported = "supported"
	AnnotationRefused   = "refused"
	AnnotationUnknown   = "unknown"
	// AnnotationIgnoredByIngressNginx is a key under ingress-nginx's
	// prefix that ingress-nginx does not read either (a typo, a ConfigMap
	// key, a removed annotation): ignoring it changes nothing.
	AnnotationIgnoredByIngressNginx = "ignored-by-ingress-nginx"
)

// refusedReason says why a snippet annotation is refused.
const refusedReason = "raw nginx directives are refused by design: a snippet could read every certificate " +
	"and key nginx holds and break every other Ingress"

// refusedReasons say why some snippets are refused, where refusedReason
// does not fit, by key without prefix.
var refusedReasons = map[string]string{
	"modsecurity-snippet": "ModSecurity rules are refused by design: restysync cannot check what a rule does " +
		"(SecRuleEngine Off turns the WAF off, @pmFromFile and @inspectFile read and run files, ctl: changes the engine per request); " +
		"enable-modsecurity and enable-owasp-core-rules load the recommended rules and the OWASP Core Rule Set, " +
		"and the agent's --modsecurity-rule-engine On blocks what they detect (the SecRuleEngine On such snippets set)",
}

// refusedReasonOf says why the snippet annotation key (full key) is refused.
func refusedReasonOf(key string) string {
	for _, prefix := range annotationPrefixes {
		if name, ok := strings.CutPrefix(key, prefix); ok {
			if why, ok := refusedReasons[name]; ok {
				return why
			}
		}
	}
	return refusedReason
}

// AnnotationStatus classifies an annotation key: AnnotationSupported (Build
// reads it), AnnotationRefused (a raw nginx directive),
// AnnotationIgnoredByIngressNginx (not read by ingress-nginx either),
// AnnotationUnknown (under one of our prefixes, not read), or "" (not one
// of ours).
func AnnotationStatus(key string) string {
	status, _ := AnnotationStatusReason(key)
	return status
}

// AnnotationStatusReason is AnnotationStatus and, for
// AnnotationIgnoredByIngressNginx, why ingress-nginx ignores the key.
func AnnotationStatusReason(key string) (status, reason string) {
	status = annotationStatus(key)
	if status == AnnotationUnknown {
		if why, ignored := ingressNginxIgnores(key); ignored {
			return AnnotationIgnoredByIngressNginx, why
		}
	}
	return status, ""
}

func annotationStatus(key string) string {
	for _, prefix := range annotationPrefixes {
		name, ok := strings.CutPrefix(key, prefix)
		switch {
		case !ok:
			continue
		case supportedAnnotations[name]:
			return AnnotationSupported
		case isSnippet(name):
			return AnnotationRefused
		default:
			return AnnotationUnknown
		}
	}
	return ""
}

// checkAnnotationKeys raises a Problem for each annotation under our
// prefixes that Build does not read: a snippet, refused by design, or a
// key not supported (yet), ignored. Users switching from ingress-nginx see
// in one place what their Ingress asks for and does not get.
func (b *builder) checkAnnotationKeys(ing *networkingv1.Ingress) {
	var keys []string
	for key := range ing.Annotations {
		if status := AnnotationStatus(key); status != "" && status != AnnotationSupported {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys) // problems in a stable order
	for _, key := range badAnnotationValues(ing) {
		value := ing.Annotations[key]
		b.annotationProblem(ing, key, value, chars.CheckText(value).Error()+
			", which no value in nginx.conf may hold; the Ingress's paths answer 503 until it is fixed")
	}
	for _, key := range keys {
		switch status, why := AnnotationStatusReason(key); status {
		case AnnotationRefused:
			b.ingressProblem(ing, fmt.Sprintf("annotation %s: %s; ignored, the rest of the Ingress is served", key, refusedReasonOf(key)))
		case AnnotationIgnoredByIngressNginx:
			b.ingressProblem(ing, fmt.Sprintf("annotation %s: ignored, as ingress-nginx ignores it: %s", key, why))
		default:
			b.ingressProblem(ing, fmt.Sprintf("annotation %s: is not supported; ignored", key))
		}
	}
}

// badAnnotationValues returns, sorted, the keys of the annotations Build
// reads whose value holds a character package chars refuses (a control
// character, a line separator, a bidi or other format character, invalid
// UTF-8). A snippet may hold tabs and line breaks; each field refuses
// those itself. checkAnnotationKeys reports each, and readAccess makes the
// Ingress's paths fail closed: the value may have been an auth-url or an
// allowlist.
func badAnnotationValues(ing *networkingv1.Ingress) []string {
	var keys []string
	for key, value := range ing.Annotations {
		if chars.CheckText(value) != nil && AnnotationStatus(key) == AnnotationSupported {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// EmptyAnnotationReason is why an annotation of ours with an empty value
// changes nothing: Build takes it for absent, as ingress-nginx does.
const EmptyAnnotationReason = "an empty value, which ingress-nginx ignores too"
