package model

import (
	"github.com/restysync/restysync/agent/internal/snippet"

	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The table of annotations: one row per ingress-nginx annotation key,
// whether restysync reads it or not. The lists the rest of the agent needs
// derive from it: which keys Build reads (AnnotationStatus), which keys
// ingress-nginx reads and which it ignores and why (`restysync check`),
// which ConfigMap keys set an annotation for every Ingress (package
// configmap) and which snippet directive sets which annotation
// (snippet.go). README.md's annotation tables are checked against it
// (annotationtable_test.go).
//
// A key is written as a quoted string in its row and in its family file
// (model/FAMILY.go, which parses it; render/FAMILY.go renders what it
// parsed) and nowhere else: other files name it by the constant its family
// file declares.

// Annotation is one row of the table.
type Annotation struct {
	// Name is the key without prefix.
	Name string
	// Family is the file pair that reads and renders the key:
	// model/FAMILY.go and render/FAMILY.go (or, for keys that travel to
	// Lua, the Lua module). "" for keys restysync does not read.
	Family string
	// Kind is the kind of value: bool, int, seconds, size, enum, list,
	// text, url, regex, variables, secret, service, configmap, headers or
	// directives.
	Kind string
	// Default is what holds when the key is absent, "" for nothing.
	Default string
	// ConfigMap is the key of the agent's ConfigMap that sets the same
	// thing for every Ingress (the annotation then overrides it), "" for
	// none.
	ConfigMap string
	// Directive is the nginx directive a configuration- or server-snippet
	// sets the same field with, "" for none.
	Directive string
	// Status is what AnnotationStatus says of the key under
	// ingress-nginx's prefix: AnnotationSupported, AnnotationUnknown (read
	// by ingress-nginx, not by restysync yet), AnnotationRefused or
	// AnnotationIgnoredByIngressNginx.
	Status string
	// Ours marks a supported key ingress-nginx does not read.
	Ours bool
	// Why is, for AnnotationRefused and AnnotationIgnoredByIngressNginx,
	// why; "" for a refused snippet takes refusedReason.
	Why string
	// Doc is the key's documentation in one line.
	Doc string
	// Check is the key's parse, as a check: why a value is refused, ""
	// when Build takes it. It is the function the family's reader calls.
	// For a key whose value names an object (a Secret, a Service, a
	// ConfigMap), Check judges the value's shape only (a name, or
	// namespace/name); whether the object exists and holds what the key
	// needs is known to Build alone. Every supported row has one.
	Check func(value string) string
}

// supportedRow, notYetRow, refusedRow and ignoredRow make rows of each status.
func supportedRow(a Annotation) Annotation { a.Status = AnnotationSupported; return a }

func notYetRow(name, doc string) Annotation {
	return Annotation{Name: name, Status: AnnotationUnknown, Doc: doc}
}

func refusedRow(name, why, doc string) Annotation {
	return Annotation{Name: name, Kind: "directives", Status: AnnotationRefused, Why: why, Doc: doc}
}

func ignoredRow(name, why string) Annotation {
	return Annotation{Name: name, Status: AnnotationIgnoredByIngressNginx, Why: why, Doc: why}
}

// configMapKeyWhy is why ingress-nginx ignores one of its ConfigMap keys
// set as an annotation.
const configMapKeyWhy = "a key of ingress-nginx's ConfigMap, not an annotation"

// Annotations is the table, by family.
var Annotations = []Annotation{
	// Paths (paths.go).
	supportedRow(Annotation{Name: keyUseRegex, Family: "paths", Kind: "bool", Default: "false", Doc: "The Ingress's paths (and those of the other Ingresses on its hosts) are case-insensitive regular expressions", Check: checkBool}),

	// Balancing and session affinity, read into the backend's policy and applied by Lua (policy.go, lua/balancer.lua).
	supportedRow(Annotation{Name: KeyLoadBalance, Family: "policy", Kind: "enum", Default: "round_robin", ConfigMap: KeyLoadBalance, Doc: "How Lua picks an endpoint: round_robin or ewma", Check: checkLoadBalance}),
	supportedRow(Annotation{Name: "upstream-hash-by", Family: "policy", Kind: "variables", Doc: "Consistent hashing on one to four nginx variables; overrides load-balance", Check: checkHashBy}),
	supportedRow(Annotation{Name: "upstream-hash-by-subset", Family: "policy", Kind: "bool", Default: "false", Doc: "With upstream-hash-by, a value goes to a subset of endpoints taken in turn", Check: checkBool}),
	supportedRow(Annotation{Name: "upstream-hash-by-subset-size", Family: "policy", Kind: "int", Default: "3", Doc: "The size of each upstream-hash-by-subset subset", Check: intIn("an integer", 0, MaxHashSubset)}),
	supportedRow(Annotation{Name: "affinity", Family: "policy", Kind: "enum", Doc: "cookie: sticky sessions by a cookie the balancer sets", Check: checkAffinity}),
	supportedRow(Annotation{Name: "affinity-mode", Family: "policy", Kind: "enum", Default: "balanced", Doc: "balanced (the cookie holds a ring position) or persistent (it names the endpoint)", Check: checkAffinityMode}),
	supportedRow(Annotation{Name: "session-cookie-name", Family: "policy", Kind: "text", Default: "INGRESSCOOKIE", Doc: "The affinity cookie's name", Check: checkCookieName}),
	supportedRow(Annotation{Name: "session-cookie-path", Family: "policy", Kind: "text", Default: "/", Doc: "The affinity cookie's Path", Check: checkCookiePath}),
	supportedRow(Annotation{Name: "session-cookie-max-age", Family: "policy", Kind: "seconds", Doc: "The affinity cookie's Max-Age (default: a session cookie)", Check: intIn("an integer", 0, 10*365*24*3600)}),
	supportedRow(Annotation{Name: "session-cookie-samesite", Family: "policy", Kind: "enum", Doc: "The affinity cookie's SameSite: Strict, Lax or None", Check: checkSameSite}),
	supportedRow(Annotation{Name: "session-cookie-conditional-samesite-none", Family: "policy", Kind: "bool", Default: "false", Doc: "Leave SameSite=None out for the browsers that mishandle it", Check: checkBool}),
	supportedRow(Annotation{Name: "session-cookie-secure", Family: "policy", Kind: "bool", Default: "false", Doc: "The affinity cookie is Secure", Check: checkBool}),
	supportedRow(Annotation{Name: "session-cookie-change-on-failure", Family: "policy", Kind: "bool", Default: "false", Doc: "Re-pin a client whose endpoint failed on its request", Check: checkBool}),
	supportedRow(Annotation{Name: "session-cookie-domain", Family: "policy", Kind: "text", Doc: "The affinity cookie's Domain", Check: checkCookieDomain}),
	supportedRow(Annotation{Name: "session-cookie-expires", Family: "policy", Kind: "seconds", Doc: "The affinity cookie's Expires, that long after the response", Check: intIn("an integer", 0, 10*365*24*3600)}),
	supportedRow(Annotation{Name: "proxy-next-upstream-tries", Family: "policy", Kind: "int", Default: "3", Doc: "Endpoints one request tries, the first included", Check: intIn("an integer", 1, 20)}),
	supportedRow(Annotation{Name: "max-fails", Family: "policy", Kind: "int", Default: "3", Ours: true, Doc: "Passive health: failures within fail-timeout that take an endpoint out", Check: intIn("an integer", 1, 1000)}),
	supportedRow(Annotation{Name: "fail-timeout", Family: "policy", Kind: "seconds", Default: "10", Ours: true, Doc: "Passive health: the window of max-fails, and how long an endpoint stays out", Check: intIn("an integer", 1, 3600)}),

	// Canary splits (canary.go, lua/balancer.lua).
	supportedRow(Annotation{Name: "canary", Family: "canary", Kind: "bool", Default: "false", Doc: "This Ingress splits the traffic of another Ingress's paths instead of serving its own", Check: checkBool}),
	supportedRow(Annotation{Name: "canary-by-header", Family: "canary", Kind: "text", Doc: "A header whose value always or never sends the request to the canary", Check: checkCanaryHeader}),
	supportedRow(Annotation{Name: "canary-by-header-value", Family: "canary", Kind: "text", Doc: "With canary-by-header, the value that means always", Check: checkCanaryHeaderValue}),
	supportedRow(Annotation{Name: "canary-by-header-pattern", Family: "canary", Kind: "regex", Doc: "With canary-by-header, a regex of the values that mean always", Check: checkCanaryHeaderPattern}),
	supportedRow(Annotation{Name: "canary-by-cookie", Family: "canary", Kind: "text", Doc: "A cookie whose value always or never sends the request to the canary", Check: checkCookieName}),
	supportedRow(Annotation{Name: "canary-weight", Family: "canary", Kind: "int", Default: "0", Doc: "The share of the remaining requests the canary takes", Check: intIn("an integer", 0, 1_000_000)}),
	supportedRow(Annotation{Name: "canary-weight-total", Family: "canary", Kind: "int", Default: "100", Doc: "The total canary-weight is a share of", Check: intIn("an integer", 1, 1_000_000)}),
	supportedRow(Annotation{Name: "affinity-canary-behavior", Family: "canary", Kind: "enum", Default: "sticky", Doc: "sticky: the split honours the affinity cookie; legacy: it does not", Check: checkCanaryBehavior}),

	// Protocol and HTTPS redirects (protocol.go).
	supportedRow(Annotation{Name: "ssl-redirect", Family: "protocol", Kind: "bool", Default: "true", Doc: "Plain HTTP to a host with TLS is redirected to HTTPS (308)", Check: checkBool}),
	supportedRow(Annotation{Name: "force-ssl-redirect", Family: "protocol", Kind: "bool", Default: "false", Doc: "Redirect to HTTPS even when the host has no TLS here", Check: checkBool}),
	supportedRow(Annotation{Name: keyBackendProtocol, Family: "protocol", Kind: "enum", Default: "HTTP", Doc: "What nginx speaks to the endpoints: HTTP, HTTPS, GRPC, GRPCS or FCGI", Check: checkBackendProtocol}),

	// Proxy and routing (proxy.go).
	supportedRow(Annotation{Name: keyRewriteTarget, Family: "proxy", Kind: "text", Doc: "The path sent to the backend, with $N the path regex's groups", Check: checkRewriteTarget}),
	supportedRow(Annotation{Name: "app-root", Family: "proxy", Kind: "text", Doc: "A request for / is redirected (302) to this path", Check: checkAppRoot}),
	supportedRow(Annotation{Name: "permanent-redirect", Family: "proxy", Kind: "url", Doc: "Every request is redirected to exactly this URL", Check: checkRedirectURL}),
	supportedRow(Annotation{Name: "permanent-redirect-code", Family: "proxy", Kind: "int", Default: "301", Doc: "The code of permanent-redirect", Check: checkPermanentRedirectCode}),
	supportedRow(Annotation{Name: "temporal-redirect", Family: "proxy", Kind: "url", Doc: "As permanent-redirect, with temporal-redirect-code; wins over it", Check: checkRedirectURL}),
	supportedRow(Annotation{Name: KeyProxyBodySize, Family: "proxy", Kind: "size", Default: "1m", ConfigMap: KeyProxyBodySize, Directive: "client_max_body_size", Doc: "Largest request body (client_max_body_size)", Check: func(v string) string { return checkSize(v, true) }}),
	supportedRow(Annotation{Name: KeyProxyConnectTimeout, Family: "proxy", Kind: "seconds", Default: "5", ConfigMap: KeyProxyConnectTimeout, Directive: "proxy_connect_timeout", Doc: "Timeout of the connection to the endpoint", Check: intIn("an integer", 1, maxProxyTimeout)}),
	supportedRow(Annotation{Name: KeyProxySendTimeout, Family: "proxy", Kind: "seconds", Default: "60", ConfigMap: KeyProxySendTimeout, Directive: "proxy_send_timeout", Doc: "Timeout between two writes to the endpoint", Check: intIn("an integer", 1, maxProxyTimeout)}),
	supportedRow(Annotation{Name: KeyProxyReadTimeout, Family: "proxy", Kind: "seconds", Default: "60", ConfigMap: KeyProxyReadTimeout, Directive: "proxy_read_timeout", Doc: "Timeout between two reads from the endpoint", Check: intIn("an integer", 1, maxProxyTimeout)}),
	supportedRow(Annotation{Name: KeyProxyBuffering, Family: "proxy", Kind: "enum", Default: "off", ConfigMap: KeyProxyBuffering, Directive: "proxy_buffering", Doc: "Buffer responses from the backend: on or off", Check: checkOnOff}),
	supportedRow(Annotation{Name: "proxy-request-buffering", Family: "proxy", Kind: "enum", Default: "on", Directive: "proxy_request_buffering", Doc: "Read the whole request body before sending it: on or off", Check: checkOnOff}),
	supportedRow(Annotation{Name: KeyProxyBufferSize, Family: "proxy", Kind: "size", Default: "4k", ConfigMap: KeyProxyBufferSize, Directive: "proxy_buffer_size", Doc: "Buffer for the response head, and the size of each proxy buffer", Check: checkPositiveSize}),
	supportedRow(Annotation{Name: "proxy-next-upstream", Family: "proxy", Kind: "list", Default: "error timeout", Doc: "When a request is tried on the next endpoint", Check: reasonOf(parseNextUpstream)}),
	supportedRow(Annotation{Name: "proxy-next-upstream-timeout", Family: "proxy", Kind: "seconds", Default: "0", Doc: "Time within which a request may still go to the next endpoint (0: no limit)", Check: intIn("an integer", 0, maxNextUpstreamTimeout)}),
	supportedRow(Annotation{Name: "proxy-http-version", Family: "proxy", Kind: "enum", Default: "1.1", Directive: "proxy_http_version", Doc: "HTTP version to the backend: 1.0 or 1.1", Check: checkHTTPVersion}),
	supportedRow(Annotation{Name: keyUpstreamVhost, Family: "proxy", Kind: "text", Doc: "The Host header sent to the backend instead of the client's", Check: reasonOf(parseUpstreamVhost)}),
	supportedRow(Annotation{Name: keyXForwardedPrefix, Family: "proxy", Kind: "text", Doc: "Sent to the backend as X-Forwarded-Prefix", Check: checkXForwardedPrefix}),
	supportedRow(Annotation{Name: "server-alias", Family: "proxy", Kind: "list", Doc: "More names for the servers of the Ingress's hosts", Check: checkServerAliases}),
	supportedRow(Annotation{Name: KeyEnableAccessLog, Family: "proxy", Kind: "bool", Default: "true", ConfigMap: KeyEnableAccessLog, Doc: "false: no access log for the Ingress's paths", Check: checkBool}),

	// The other proxy keys, each a directive of the location (proxykeys.go).
	supportedRow(Annotation{Name: "temporal-redirect-code", Family: "proxykeys", Kind: "int", Default: "302", Doc: "The code of temporal-redirect", Check: checkTemporalRedirectCode}),
	supportedRow(Annotation{Name: "preserve-trailing-slash", Family: "proxykeys", Kind: "bool", Default: "false", Doc: "Keep the URI's trailing / in the HTTPS redirect", Check: checkBool}),
	supportedRow(Annotation{Name: "from-to-www-redirect", Family: "proxykeys", Kind: "bool", Default: "false", Doc: "www.HOST redirects (308) to HOST, or HOST to www.HOST", Check: checkBool}),
	supportedRow(Annotation{Name: KeyClientBodyBufferSize, Family: "proxykeys", Kind: "size", ConfigMap: KeyClientBodyBufferSize, Directive: "client_body_buffer_size", Doc: "Buffer for the request body (client_body_buffer_size)", Check: checkPositiveSize}),
	supportedRow(Annotation{Name: KeyProxyBuffersNumber, Family: "proxykeys", Kind: "int", Default: "4", ConfigMap: KeyProxyBuffersNumber, Directive: "proxy_buffers", Doc: "The number of proxy buffers (proxy_buffers N SIZE, SIZE being proxy-buffer-size)", Check: reasonOf(ParseBuffersNumber)}),
	supportedRow(Annotation{Name: KeyProxyBusyBuffersSize, Family: "proxykeys", Kind: "size", ConfigMap: KeyProxyBusyBuffersSize, Directive: "proxy_busy_buffers_size", Doc: "proxy_busy_buffers_size (default: twice the buffer)", Check: checkPositiveSize}),
	supportedRow(Annotation{Name: KeyProxyMaxTempFileSize, Family: "proxykeys", Kind: "size", Default: "1024m", ConfigMap: KeyProxyMaxTempFileSize, Doc: "proxy_max_temp_file_size", Check: func(v string) string { _, reason := ParseNginxSize(v, true); return reason }}),
	supportedRow(Annotation{Name: KeyProxyCookieDomain, Family: "proxykeys", Kind: "text", Default: "off", ConfigMap: KeyProxyCookieDomain, Doc: "Rewrites the Domain of the backend's Set-Cookie (proxy_cookie_domain FROM TO)", Check: func(v string) string { _, reason := ParseCookieRewrite(v, false); return reason }}),
	supportedRow(Annotation{Name: KeyProxyCookiePath, Family: "proxykeys", Kind: "text", Default: "off", ConfigMap: KeyProxyCookiePath, Doc: "Rewrites the Path of the backend's Set-Cookie (proxy_cookie_path FROM TO)", Check: func(v string) string { _, reason := ParseCookieRewrite(v, true); return reason }}),
	supportedRow(Annotation{Name: KeyProxyRedirectFrom, Family: "proxykeys", Kind: "text", ConfigMap: KeyProxyRedirectFrom, Doc: "proxy_redirect FROM, with proxy-redirect-to", Check: func(v string) string { _, reason := ParseProxyRedirect(v, true); return reason }}),
	supportedRow(Annotation{Name: KeyProxyRedirectTo, Family: "proxykeys", Kind: "text", ConfigMap: KeyProxyRedirectTo, Doc: "proxy_redirect TO, with proxy-redirect-from", Check: func(v string) string { _, reason := ParseProxyRedirect(v, false); return reason }}),
	supportedRow(Annotation{Name: KeyLimitRate, Family: "proxykeys", Kind: "int", ConfigMap: KeyLimitRate, Doc: "limit_rate, in KB/s per response", Check: reasonOf(ParseRate)}),
	supportedRow(Annotation{Name: KeyLimitRateAfter, Family: "proxykeys", Kind: "int", ConfigMap: KeyLimitRateAfter, Doc: "limit_rate_after, in KB", Check: reasonOf(ParseRate)}),
	supportedRow(Annotation{Name: "satisfy", Family: "proxykeys", Kind: "enum", Default: "all", Doc: "any: one of the source ranges, basic auth or auth-url letting a request in is enough", Check: checkSatisfy}),
	supportedRow(Annotation{Name: KeyServiceUpstream, Family: "proxykeys", Kind: "bool", Default: "false", ConfigMap: KeyServiceUpstream, Doc: "Proxy to the Service's cluster IP instead of its endpoints", Check: checkBool}),

	// Response headers (responseheaders.go).
	supportedRow(Annotation{Name: keyCustomHeaders, Family: "responseheaders", Kind: "configmap", Doc: "A ConfigMap whose keys are response headers added to every response", Check: checkConfigMapName}),

	// FastCGI and mirroring (fastcgi.go, mirror.go; render/fcgimirror.go).
	supportedRow(Annotation{Name: "fastcgi-index", Family: "fastcgi", Kind: "text", Doc: "With backend-protocol FCGI: fastcgi_index", Check: checkFastCGIIndex}),
	supportedRow(Annotation{Name: "fastcgi-params-configmap", Family: "fastcgi", Kind: "configmap", Doc: "With backend-protocol FCGI: a ConfigMap of fastcgi_param names and values", Check: checkConfigMapName}),
	supportedRow(Annotation{Name: "mirror-target", Family: "mirror", Kind: "url", Doc: "A copy of each request goes to this URL", Check: checkMirrorTarget}),
	supportedRow(Annotation{Name: "mirror-host", Family: "mirror", Kind: "text", Doc: "The Host header of the mirrored request (default: the target's host)", Check: checkMirrorHost}),
	supportedRow(Annotation{Name: "mirror-request-body", Family: "mirror", Kind: "enum", Default: "on", Doc: "off sends the copy without the request's body", Check: checkMirrorRequestBody}),

	// Access: source ranges, CORS, basic auth, rate limits, error pages (access.go).
	supportedRow(Annotation{Name: "allowlist-source-range", Family: "access", Kind: "list", Doc: "Only these CIDRs get in; others get 403", Check: reasonOf(parseSourceRanges)}),
	supportedRow(Annotation{Name: KeyWhitelistSourceRange, Family: "access", Kind: "list", Doc: "The older name of allowlist-source-range", Check: reasonOf(parseSourceRanges)}),
	supportedRow(Annotation{Name: "denylist-source-range", Family: "access", Kind: "list", Doc: "These CIDRs get 403, checked before the allowlist", Check: reasonOf(parseSourceRanges)}),
	supportedRow(Annotation{Name: "enable-cors", Family: "access", Kind: "bool", Default: "false", Doc: "Add CORS headers for allowed origins and answer their preflight", Check: checkBool}),
	supportedRow(Annotation{Name: "cors-allow-origin", Family: "access", Kind: "list", Default: "*", Doc: "Origins allowed", Check: checkOrigins}),
	supportedRow(Annotation{Name: "cors-allow-methods", Family: "access", Kind: "list", Default: "GET, PUT, POST, DELETE, PATCH, OPTIONS", Doc: "Access-Control-Allow-Methods", Check: checkCORSMethods}),
	supportedRow(Annotation{Name: "cors-allow-headers", Family: "access", Kind: "list", Default: "DNT, Keep-Alive, User-Agent, X-Requested-With, If-Modified-Since, Cache-Control, Content-Type, Range, Authorization", Doc: "Access-Control-Allow-Headers", Check: checkCORSHeaders}),
	supportedRow(Annotation{Name: "cors-expose-headers", Family: "access", Kind: "list", Doc: "Access-Control-Expose-Headers", Check: checkCORSExposeHeaders}),
	supportedRow(Annotation{Name: "cors-allow-credentials", Family: "access", Kind: "bool", Default: "true", Doc: "Access-Control-Allow-Credentials", Check: checkBool}),
	supportedRow(Annotation{Name: "cors-max-age", Family: "access", Kind: "seconds", Default: "1728000", Doc: "Access-Control-Max-Age", Check: intIn("an integer", 0, maxCORSMaxAge)}),
	supportedRow(Annotation{Name: "auth-type", Family: "access", Kind: "enum", Doc: "basic: HTTP basic authentication against auth-secret", Check: checkAuthType}),
	supportedRow(Annotation{Name: "auth-secret", Family: "access", Kind: "secret", Doc: "An Opaque Secret whose key auth is an htpasswd file", Check: checkSecretName}),
	supportedRow(Annotation{Name: "auth-secret-type", Family: "access", Kind: "enum", Default: "auth-file", Doc: "auth-file (auth-map is not supported)", Check: checkAuthSecretType}),
	supportedRow(Annotation{Name: "auth-realm", Family: "access", Kind: "text", Doc: "The realm of the 401's WWW-Authenticate", Check: checkRealm}),
	supportedRow(Annotation{Name: "limit-rps", Family: "access", Kind: "int", Doc: "Requests per second per client address, past the burst 503", Check: intIn("an integer", 1, maxRate)}),
	supportedRow(Annotation{Name: "limit-rpm", Family: "access", Kind: "int", Doc: "Requests per minute per client address, past the burst 503", Check: intIn("an integer", 1, maxRate)}),
	supportedRow(Annotation{Name: "limit-connections", Family: "access", Kind: "int", Doc: "Concurrent connections per client address, more get 503", Check: intIn("an integer", 1, maxConnections)}),
	supportedRow(Annotation{Name: "limit-burst-multiplier", Family: "access", Kind: "int", Default: "5", Doc: "The burst of limit-rps and limit-rpm, as a multiple of the rate", Check: intIn("an integer", 1, maxBurstMultiple)}),
	supportedRow(Annotation{Name: "limit-whitelist", Family: "access", Kind: "list", Doc: "CIDRs exempt from the rate and connection limits", Check: reasonOf(parseSourceRanges)}),
	supportedRow(Annotation{Name: KeyCustomHTTPErrors, Family: "access", Kind: "list", ConfigMap: KeyCustomHTTPErrors, Doc: "Responses with these codes are replaced by default-backend's answer", Check: checkErrorCodes}),
	supportedRow(Annotation{Name: "default-backend", Family: "access", Kind: "service", Doc: "A Service that answers while a path's Service has no endpoints, and serves custom-http-errors", Check: checkServiceName}),

	// External authentication (extauth.go); the ConfigMap's global-auth-* keys set it for every Ingress.
	supportedRow(Annotation{Name: "auth-url", Family: "extauth", Kind: "url", ConfigMap: "global-auth-url", Doc: "External authentication: each request is first asked of this URL (auth_request)", Check: checkAuthURL}),
	supportedRow(Annotation{Name: "auth-method", Family: "extauth", Kind: "enum", ConfigMap: "global-auth-method", Doc: "The method of the auth request (default: the client's)", Check: checkAuthMethod}),
	supportedRow(Annotation{Name: "auth-signin", Family: "extauth", Kind: "url", ConfigMap: "global-auth-signin", Doc: "Where a 401 from the auth service sends the client (302)", Check: checkAuthURL}),
	supportedRow(Annotation{Name: "auth-signin-redirect-param", Family: "extauth", Kind: "text", Default: "rd", ConfigMap: "global-auth-signin-redirect-param", Doc: "The query parameter auth-signin gets the original URL in", Check: checkSigninParam}),
	supportedRow(Annotation{Name: keyAuthResponseHeaders, Family: "extauth", Kind: "list", ConfigMap: "global-auth-response-headers", Doc: "Headers of the auth service's answer set on the request to the backend", Check: func(v string) string { _, reason := headerList(v, maxAuthResponseHeaders); return reason }}),
	supportedRow(Annotation{Name: "auth-request-redirect", Family: "extauth", Kind: "text", Default: "$request_uri", ConfigMap: "global-auth-request-redirect", Doc: "The X-Auth-Request-Redirect header sent to the auth service", Check: checkAuthRequestRedirect}),
	supportedRow(Annotation{Name: "auth-cache-key", Family: "extauth", Kind: "variables", ConfigMap: "global-auth-cache-key", Doc: "Cache the auth service's answers under this key", Check: checkAuthCacheKey}),
	supportedRow(Annotation{Name: "auth-cache-duration", Family: "extauth", Kind: "text", ConfigMap: "global-auth-cache-duration", Doc: "How long answers are cached, by status", Check: checkAuthCacheDuration}),
	supportedRow(Annotation{Name: "auth-always-set-cookie", Family: "extauth", Kind: "bool", Default: "false", ConfigMap: "global-auth-always-set-cookie", Doc: "Send the auth service's Set-Cookie with every response", Check: checkAuthAlwaysSetCookie}),
	supportedRow(Annotation{Name: keyAuthProxySetHeaders, Family: "extauth", Kind: "configmap", Doc: "A ConfigMap of headers set on the request to the auth service", Check: checkConfigMapName}),
	supportedRow(Annotation{Name: "enable-global-auth", Family: "extauth", Kind: "bool", Default: "true", Doc: "false keeps the ConfigMap's global-auth-url off this Ingress", Check: checkBool}),

	// TLS to the backend (proxyssl.go).
	supportedRow(Annotation{Name: "proxy-ssl-secret", Family: "proxyssl", Kind: "secret", Doc: "A Secret with the CA (and client certificate) for TLS to the backend", Check: checkSecretName}),
	supportedRow(Annotation{Name: keyProxySSLVerify, Family: "proxyssl", Kind: "enum", Default: "off", Directive: "proxy_ssl_verify", Doc: "Check the backend's certificate and name: on or off", Check: checkOnOff}),
	supportedRow(Annotation{Name: "proxy-ssl-verify-depth", Family: "proxyssl", Kind: "int", Default: "1", Doc: "The longest backend chain accepted", Check: checkProxySSLVerifyDepth}),
	supportedRow(Annotation{Name: "proxy-ssl-name", Family: "proxyssl", Kind: "text", Doc: "The name checked in the backend's certificate and sent by SNI", Check: checkProxySSLName}),
	supportedRow(Annotation{Name: "proxy-ssl-server-name", Family: "proxyssl", Kind: "enum", Default: "off", Doc: "Send SNI to the backend: on or off", Check: checkOnOff}),
	supportedRow(Annotation{Name: "proxy-ssl-protocols", Family: "proxyssl", Kind: "list", Doc: "TLS protocols offered to the backend", Check: checkProxySSLProtocols}),
	supportedRow(Annotation{Name: "proxy-ssl-ciphers", Family: "proxyssl", Kind: "text", Doc: "Ciphers offered to the backend", Check: checkProxySSLCiphers}),

	// Client certificates (clienttls.go).
	supportedRow(Annotation{Name: keyAuthTLSSecret, Family: "clienttls", Kind: "secret", Doc: "A Secret with the CA client certificates must chain to", Check: checkSecretName}),
	supportedRow(Annotation{Name: "auth-tls-verify-client", Family: "clienttls", Kind: "enum", Default: "on", Doc: "on, off, optional or optional_no_ca", Check: checkVerifyClient}),
	supportedRow(Annotation{Name: "auth-tls-verify-depth", Family: "clienttls", Kind: "int", Default: "1", Doc: "The longest client chain accepted", Check: checkVerifyDepth}),
	supportedRow(Annotation{Name: "auth-tls-error-page", Family: "clienttls", Kind: "url", Doc: "Where a request without a good certificate is redirected instead of the 400", Check: checkRedirectURL}),
	supportedRow(Annotation{Name: "auth-tls-pass-certificate-to-upstream", Family: "clienttls", Kind: "bool", Default: "false", Doc: "Send the client's certificate to the backend as ssl-client-cert", Check: checkBool}),
	supportedRow(Annotation{Name: "auth-tls-match-cn", Family: "clienttls", Kind: "regex", Doc: "The client certificate's subject DN must match it", Check: checkMatchCN}),

	// SSL passthrough (stream.go).
	supportedRow(Annotation{Name: "ssl-passthrough", Family: "stream", Kind: "bool", Default: "false", Doc: "TLS connections for the Ingress's hosts go to the backend untouched", Check: checkBool}),

	// ModSecurity (modsecurity.go).
	supportedRow(Annotation{Name: KeyEnableModSecurity, Family: "modsecurity", Kind: "bool", Default: "false", ConfigMap: KeyEnableModSecurity, Doc: "Run the ModSecurity web application firewall with the recommended rules", Check: checkTrueFalse}),
	supportedRow(Annotation{Name: "enable-owasp-core-rules", Family: "modsecurity", Kind: "bool", Default: "false", ConfigMap: "enable-owasp-modsecurity-crs", Doc: "With ModSecurity on, add the OWASP Core Rule Set", Check: checkTrueFalse}),
	supportedRow(Annotation{Name: "modsecurity-transaction-id", Family: "modsecurity", Kind: "variables", Doc: "The id ModSecurity logs the request's transaction under", Check: checkTransactionID}),

	// Snippets, read as typed directives against an allowlist (snippet.go).
	supportedRow(Annotation{Name: configurationSnippetKey, Family: "snippet", Kind: "directives", ConfigMap: "location-snippet", Doc: "Headers and proxy settings for every location of the Ingress", Check: snippetCheck(snippet.Configuration)}),
	supportedRow(Annotation{Name: ServerSnippetKey, Family: "snippet", Kind: "directives", ConfigMap: ServerSnippetKey, Doc: "Settings for the Ingress's locations on its hosts, and locations with an answer of their own", Check: snippetCheck(snippet.Server)}),
	supportedRow(Annotation{Name: authSnippetKey, Family: "snippet", Kind: "directives", Doc: "auth_request_set lines beside auth-url's auth_request", Check: snippetCheck(snippet.Auth)}),

	// Read by ingress-nginx, not by restysync yet: ignored, with a Problem.
	notYetRow("auth-keepalive", "Keepalive connections to the auth service"),
	notYetRow("auth-keepalive-requests", "Requests per keepalive connection to the auth service"),
	notYetRow("auth-keepalive-share-vars", "Share the auth subrequest's variables with the main request"),
	notYetRow("auth-keepalive-timeout", "Idle timeout of keepalive connections to the auth service"),
	notYetRow("connection-proxy-header", "The Connection header sent to the backend"),
	notYetRow("disable-proxy-intercept-errors", "Do not intercept the backend's errors for custom-http-errors"),
	notYetRow("enable-influxdb", "Send request metrics to InfluxDB"),
	notYetRow("influxdb-host", "The InfluxDB host of enable-influxdb"),
	notYetRow("influxdb-measurement", "The InfluxDB measurement of enable-influxdb"),
	notYetRow("influxdb-port", "The InfluxDB port of enable-influxdb"),
	notYetRow("influxdb-server-name", "The InfluxDB server name of enable-influxdb"),
	notYetRow("enable-opentelemetry", "Trace requests with OpenTelemetry"),
	notYetRow("opentelemetry-operation-name", "The span name of enable-opentelemetry"),
	notYetRow("opentelemetry-trust-incoming-span", "Continue the client's trace"),
	notYetRow("enable-opentracing", "Trace requests with OpenTracing"),
	notYetRow("opentracing-trust-incoming-span", "Continue the client's trace"),
	notYetRow("enable-rewrite-log", "Log rewrites to the error log"),
	notYetRow("global-rate-limit", "A rate limit shared by every replica (memcached)"),
	notYetRow("global-rate-limit-ignored-cidrs", "CIDRs exempt from global-rate-limit"),
	notYetRow("global-rate-limit-key", "The key global-rate-limit counts by"),
	notYetRow("global-rate-limit-window", "The window of global-rate-limit"),
	notYetRow("http2-push-preload", "HTTP/2 server push of preload links"),
	notYetRow("limit-allowlist", "The newer name of limit-whitelist"),
	notYetRow("ssl-ciphers", "Ciphers of the Ingress's servers"),
	notYetRow("ssl-prefer-server-ciphers", "Prefer the server's cipher order"),

	// Raw nginx configuration, read by ingress-nginx and refused by design.
	refusedRow("modsecurity-snippet", "ModSecurity rules are refused by design: restysync cannot check what a rule does "+
		"(SecRuleEngine Off turns the WAF off, @pmFromFile and @inspectFile read and run files, ctl: changes the engine per request); "+
		"enable-modsecurity and enable-owasp-core-rules load the recommended rules and the OWASP Core Rule Set, "+
		"and the agent's --modsecurity-rule-engine On blocks what they detect (the SecRuleEngine On such snippets set)",
		"ModSecurity rules for the Ingress"),
	refusedRow("stream-snippet", "", "Directives of the stream block"),

	// Ignored by ingress-nginx too: carrying them changes nothing.
	ignoredRow("add-base-url", "removed from ingress-nginx long ago"),
	ignoredRow("base-url-scheme", "removed from ingress-nginx long ago"),
	ignoredRow("secure-backends", "removed from ingress-nginx (backend-protocol: HTTPS replaced it)"),
	ignoredRow("grpc-backend", "removed from ingress-nginx (backend-protocol: GRPC replaced it)"),
	ignoredRow("session-cookie-hash", "removed from ingress-nginx"),
	ignoredRow("client_max_body_size", "an nginx directive's name, not an annotation (proxy-body-size sets it)"),
	ignoredRow("client-max-body-size", "an annotation of NGINX Inc.'s controller (nginx.org/), not of ingress-nginx (proxy-body-size is)"),
	ignoredRow("websocket-services", "an annotation of NGINX Inc.'s controller (nginx.org/); ingress-nginx proxies WebSockets without one"),
	ignoredRow("ssl-services", "an annotation of NGINX Inc.'s controller (nginx.org/); ingress-nginx's is backend-protocol: HTTPS"),
	ignoredRow("redirect-to-https", "an annotation of NGINX Inc.'s controller (nginx.org/); ingress-nginx's is force-ssl-redirect"),
	ignoredRow("proxy-pass-headers", "an annotation of NGINX Inc.'s controller (nginx.org/), not of ingress-nginx"),
	ignoredRow("proxy-hide-headers", "an annotation of NGINX Inc.'s controller (nginx.org/), not of ingress-nginx"),
	ignoredRow("auth-tls-verify-client-no", "not an annotation; auth-tls-verify-client takes on, off, optional or optional_no_ca"),
	ignoredRow("hsts", configMapKeyWhy),
	ignoredRow("hsts-include-subdomains", configMapKeyWhy),
	ignoredRow("hsts-max-age", configMapKeyWhy),
	ignoredRow("hsts-preload", configMapKeyWhy),
	ignoredRow("client-header-buffer-size", configMapKeyWhy),
	ignoredRow("large-client-header-buffers", configMapKeyWhy),
	ignoredRow("proxy-set-headers", configMapKeyWhy),
	ignoredRow("add-headers", configMapKeyWhy),
	ignoredRow("use-forwarded-headers", configMapKeyWhy),
	ignoredRow("enable-real-ip", configMapKeyWhy),
	ignoredRow("real-ip-header", configMapKeyWhy),
	ignoredRow("ssl-protocols", configMapKeyWhy),
	ignoredRow("client-header-timeout", configMapKeyWhy),
	ignoredRow("client-body-timeout", configMapKeyWhy),
	ignoredRow("keep-alive", configMapKeyWhy),
	ignoredRow("keep-alive-requests", configMapKeyWhy),
	ignoredRow("use-gzip", configMapKeyWhy),
	ignoredRow("gzip-level", configMapKeyWhy),
	ignoredRow("gzip-types", configMapKeyWhy),
	ignoredRow("server-tokens", configMapKeyWhy),
	ignoredRow("proxy-buffers", configMapKeyWhy),
	ignoredRow("compute-full-forwarded-for", configMapKeyWhy),
	ignoredRow("forwarded-for-header", configMapKeyWhy),
	ignoredRow("use-http2", configMapKeyWhy),
	ignoredRow("ssl-session-cache", configMapKeyWhy),
	ignoredRow("ssl-session-timeout", configMapKeyWhy),
	ignoredRow("log-format-upstream", configMapKeyWhy),
	ignoredRow("worker-processes", configMapKeyWhy),
	ignoredRow("http-snippet", configMapKeyWhy),
	ignoredRow("allow-snippet-annotations", configMapKeyWhy),
	ignoredRow("proxy-headers-hash-max-size", configMapKeyWhy),
	ignoredRow("server-name-hash-bucket-size", configMapKeyWhy),
}

// annotationRows indexes Annotations by name.
var annotationRows = func() map[string]*Annotation {
	rows := make(map[string]*Annotation, len(Annotations))
	for i := range Annotations {
		rows[Annotations[i].Name] = &Annotations[i]
	}
	return rows
}()

// supportedAnnotation reports whether Build reads the key (without prefix).
func supportedAnnotation(name string) bool {
	row, ok := annotationRows[name]
	return ok && row.Status == AnnotationSupported
}

// supportedAnnotations returns the keys (without prefix) Build reads, in
// table order.
func supportedAnnotations() []string {
	var names []string
	for _, row := range Annotations {
		if row.Status == AnnotationSupported {
			names = append(names, row.Name)
		}
	}
	return names
}

// ingressNginxReads reports whether ingress-nginx reads the key (without
// prefix).
func ingressNginxReads(name string) bool {
	row, ok := annotationRows[name]
	return ok && !row.Ours && row.Status != AnnotationIgnoredByIngressNginx
}

// annotationOfDirective returns the annotation a snippet's directive sets,
// by the table's Directive column ("" for none).
func annotationOfDirective(directive string) string {
	for _, row := range Annotations {
		if row.Directive == directive {
			return row.Name
		}
	}
	return ""
}

// AnnotationConfigMapKeys returns the ConfigMap keys of the table's
// ConfigMap column whose annotation has family, in table order ("" for
// every family).
func AnnotationConfigMapKeys(family string) []string {
	var keys []string
	for _, row := range Annotations {
		if row.ConfigMap != "" && (family == "" || row.Family == family) {
			keys = append(keys, row.ConfigMap)
		}
	}
	return keys
}

// The Check column's makers. A check returns why a value is refused, ""
// when it is fine: the text before the "; what is used instead" that the
// family's reader adds. The family readers call the same checks, so a row
// and its reader judge a value one way.

// checkBool is the check of a "true"/"false" value.
func checkBool(value string) string {
	if _, err := strconv.ParseBool(value); err != nil {
		return "is not true or false"
	}
	return ""
}

// intIn checks an integer from min to max; what names it in the reason
// ("an integer", "a depth").
func intIn(what string, min, max int) func(string) string {
	return func(value string) string {
		if n, err := strconv.Atoi(value); err != nil || n < min || n > max {
			return fmt.Sprintf("is not %s from %d to %d", what, min, max)
		}
		return ""
	}
}

// oneOf checks a value that must be one of values, exactly.
func oneOf(values ...string) func(string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	reason := "is not " + quoted[len(quoted)-1]
	if len(quoted) > 1 {
		reason = "is not " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	}
	return func(value string) string {
		if slices.Contains(values, value) {
			return ""
		}
		return reason
	}
}

// matching checks a value against re; reason is why one that does not
// match is refused.
func matching(re *regexp.Regexp, reason string) func(string) string {
	return func(value string) string {
		if re.MatchString(value) {
			return ""
		}
		return reason
	}
}

// reasonOf makes a check of a family's parse function.
func reasonOf[T any](parse func(string) (T, string)) func(string) string {
	return func(value string) string {
		_, reason := parse(value)
		return reason
	}
}
