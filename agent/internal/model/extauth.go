package model

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/chars"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	keyAuthResponseHeaders = "auth-response-headers"
	keyAuthProxySetHeaders = "auth-proxy-set-headers"
)

// External authentication (auth-url and friends): nginx asks an auth
// service (oauth2-proxy, Authelia, …) with a subrequest before each request.
// A 2xx lets the request through, with the auth response's named headers
// copied onto it; 401 sends the client to auth-signin when one is set, else
// answers 401; 403 answers 403; anything else is a 500, as in ingress-nginx.
//
// The URLs may use only the nginx variables in authVariables, which stay
// variables ("${host}"); every other character is checked, so a value can
// never close its quotes in nginx.conf (CVE-2025-24514 was an injection
// through auth-url). $http_host stands for the host the router matched
// (render's $restysync_http_host), not the raw Host header: with an
// absolute request line ("GET http://a.test/ HTTP/1.1", Host: b.test) the
// router serves a.test, so the auth service must judge a.test.

// ExternalAuth are the settings of external authentication; the zero value
// is none. Strings are canonical, so that Location stays comparable.
type ExternalAuth struct {
	// URL is the auth service's URL, its variables written "${name}" with
	// nginx's names (see authVariables).
	URL string
	// Method is the subrequest's method (auth-method); "" keeps the
	// client's.
	Method string
	// Signin is where a 401 redirects the client (auth-signin), with the
	// original URL in its SigninRedirectParam query parameter (default
	// "rd") unless it names that parameter itself; "" answers the 401.
	Signin string
	// ResponseHeaders are the auth response's headers set on the request
	// to the backend (auth-response-headers), joined by ",".
	ResponseHeaders string
	// RequestRedirect is the X-Auth-Request-Redirect header sent to the
	// auth service (auth-request-redirect); "" sends the request URI.
	RequestRedirect string
	// CacheKey, when set, caches the auth service's answers under it
	// (auth-cache-key) for CacheDuration (auth-cache-duration, default
	// "200 202 401 5m": nginx's proxy_cache_valid).
	CacheKey      string
	CacheDuration string
	// AlwaysSetCookie sends the auth response's Set-Cookie with every
	// response, not only 2xx and 3xx ones (auth-always-set-cookie).
	AlwaysSetCookie bool
	// ProxySetHeaders are headers set on the request to the auth service
	// (auth-proxy-set-headers, a ConfigMap): "Name: value" lines sorted by
	// name, values with ${vars} as URL has them.
	ProxySetHeaders string
}

// authVariables are the nginx variables the auth URLs may use, by the name
// a user writes (ingress-nginx's), with the variable nginx.conf uses.
var authVariables = map[string]string{
	"host":                "host",
	"http_host":           "restysync_http_host",
	"best_http_host":      "restysync_forwarded_host",
	"scheme":              "scheme",
	"pass_access_scheme":  "restysync_forwarded_proto",
	"request_uri":         "request_uri",
	"escaped_request_uri": "restysync_escaped_request_uri",
	"remote_addr":         "remote_addr",
	"request_id":          "restysync_request_id",
}

// authVariable returns the nginx variable of the variable a user writes
// in an auth URL.
func authVariable(name string) (string, bool) {
	v, ok := authVariables[name]
	return v, ok
}

// authCacheKeyVariable reports whether a cache key may use variable name:
// those of authVariables, and the client's cookies and headers, which is
// what a cache key is made of (oauth2-proxy: $cookie__oauth2_proxy).
func authCacheKeyVariable(name string) (string, bool) {
	if v, ok := authVariable(name); ok {
		return v, true
	}
	for _, prefix := range []string{"cookie_", "http_"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok && rest != "" && isVariableName(rest) {
			return name, true
		}
	}
	if name == "remote_user" {
		return name, true
	}
	return "", false
}

func isVariableName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return s != ""
}

// authMethods are the methods auth-method may name, as ingress-nginx.
var authMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"}

const (
	maxAuthURL             = 2048
	maxAuthResponseHeaders = 64
	defaultAuthCache       = "200 202 401 5m"
	defaultSigninParam     = "rd"
)

// withVariables checks s, a string that may use the variables lookup
// allows, and returns it with each variable written "${nginxname}". It
// refuses what could end a quoted nginx string or a directive, control
// characters and unknown variables.
func withVariables(s string, lookup func(string) (string, bool)) (string, string) {
	if !utf8.ValidString(s) {
		return "", "is not valid UTF-8"
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			name, end := "", i+1
			if end < len(s) && s[end] == '{' {
				close := strings.IndexByte(s[end:], '}')
				if close < 0 {
					return "", "has an unclosed ${"
				}
				name, i = s[end+1:end+close], end+close
			} else {
				for end < len(s) && (s[end] >= 'a' && s[end] <= 'z' || s[end] >= '0' && s[end] <= '9' || s[end] == '_') {
					end++
				}
				name, i = s[i+1:end], end-1
			}
			nginx, ok := lookup(name)
			if !ok {
				return "", fmt.Sprintf("uses the variable $%s, which is not allowed here", clip(name))
			}
			out.WriteString("${" + nginx + "}")
		case c <= ' ' || c == 0x7f:
			return "", "contains a space or control character"
		case strings.IndexByte("\"'\\{};`", c) >= 0:
			return "", fmt.Sprintf("contains %q", c)
		default:
			out.WriteByte(c)
		}
	}
	return out.String(), ""
}

// authURL checks an auth-url or auth-signin value: an absolute http(s) URL
// with a host, where variables may stand for parts.
func authURL(value string) (string, string) {
	return authURLWith(value, authVariable)
}

// authURLWith is authURL with the variables lookup allows.
func authURLWith(value string, lookup func(string) (string, bool)) (string, string) {
	if len(value) > maxAuthURL {
		return "", fmt.Sprintf("is %d bytes; at most %d are allowed", len(value), maxAuthURL)
	}
	canonical, reason := withVariables(value, lookup)
	if reason != "" {
		return "", reason
	}
	// Parse it with each variable as a plain word.
	plain := canonical
	for {
		start := strings.Index(plain, "${")
		if start < 0 {
			break
		}
		end := strings.IndexByte(plain[start:], '}')
		plain = plain[:start] + "x" + plain[start+end+1:]
	}
	u, err := url.Parse(plain)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", "is not an absolute http or https URL with a host"
	}
	return canonical, ""
}

// readExternalAuth reads auth-url and the annotations that go with it, or
// the ConfigMap's global auth when the Ingress names no auth-url and does
// not turn it off (enable-global-auth: "false"). It returns the settings,
// and why the location must fail closed ("" when it need not): an auth-url
// that cannot be used must not let everyone in.
func (b *builder) readExternalAuth(ing *networkingv1.Ingress) (ExternalAuth, string) {
	if _, _, ok := lookupAnnotation(ing, "auth-url"); !ok {
		if !b.boolAnnotation(ing, "enable-global-auth", true) {
			return ExternalAuth{}, ""
		}
		if b.globalAuthDenied != "" {
			return ExternalAuth{}, b.globalAuthDenied
		}
		if b.globalAuth.URL != "" && !routedByHost(ing) {
			if reason := b.targets.CheckURL(b.globalAuth.URL, false); reason != "" {
				b.problem("Ingress", ing.Namespace, ing.Name, fmt.Sprintf("the ConfigMap's global-auth-url %q %s; this Ingress serves "+
					"requests for any host (a rule without a host, or spec.defaultBackend), so its paths answer 503; "+
					"set enable-global-auth: \"false\" or an auth-url of its own", clip(b.globalAuth.URL), reason))
				return ExternalAuth{}, "global-auth-url is refused for this Ingress"
			}
		}
		return b.globalAuth, ""
	}
	get := func(name string) (string, string, bool) { return lookupAnnotation(ing, name) }
	problem := func(key, value, reason string) { b.annotationProblem(ing, key, value, reason) }
	a, denied := parseExternalAuth(get, problem, "", b.authSnippetVariable(ing))
	if denied != "" {
		return a, denied
	}
	if reason := b.targets.CheckURL(a.URL, routedByHost(ing)); reason != "" {
		value, key, _ := lookupAnnotation(ing, "auth-url")
		b.targetRefused(ing, key, value, reason, "the Ingress's paths answer 503 until it is fixed")
		return ExternalAuth{}, key + " is refused"
	}
	if a.ProxySetHeaders, denied = b.readAuthProxyHeaders(ing); denied != "" {
		return ExternalAuth{}, denied
	}
	return a, ""
}

// GlobalAuth reads the global-auth-* keys of the agent's ConfigMap: the
// external auth of every Ingress that names none. It returns the settings,
// why every such Ingress must fail closed ("" when it need not: a
// global-auth-url that cannot be used must not let everyone in), and the
// reason of each key it could not use.
func GlobalAuth(data map[string]string) (auth ExternalAuth, denied string, invalid map[string]string) {
	invalid = map[string]string{}
	get := func(name string) (string, string, bool) {
		v, ok := data[name]
		return v, name, ok
	}
	problem := func(key, value, reason string) { invalid[key] = fmt.Sprintf("%q %s", clip(value), reason) }
	for _, key := range slices.Sorted(maps.Keys(data)) {
		if err := chars.CheckText(data[key]); err != nil && strings.HasPrefix(key, "global-auth-") {
			problem(key, data[key], err.Error()+", which no value in nginx.conf may hold; every Ingress under global auth answers 503 until it is fixed")
			denied = key + " is not usable"
		}
	}
	if denied != "" {
		return ExternalAuth{}, denied, invalid
	}
	auth, denied = parseExternalAuth(get, problem, "global-", nil)
	return auth, denied, invalid
}

// parseExternalAuth reads the auth settings named prefix+"auth-url" and so
// on through get, reporting each bad value to problem.
//
// setVars, when not nil, looks up the variables an auth-snippet's
// auth_request_set defines (snippet.go): auth-signin and
// auth-request-redirect may use them besides authVariables.
func parseExternalAuth(get func(name string) (value, key string, ok bool), problem func(key, value, reason string), prefix string,
	setVars func(string) (string, bool)) (ExternalAuth, string) {
	lookup := authVariable
	if setVars != nil {
		lookup = func(name string) (string, bool) {
			if v, ok := authVariable(name); ok {
				return v, true
			}
			return setVars(name)
		}
	}
	value, key, ok := get(prefix + "auth-url")
	if !ok {
		return ExternalAuth{}, ""
	}
	const closed = "; the Ingress's paths answer 503 until it is fixed"
	var a ExternalAuth
	var reason string
	if a.URL, reason = authURL(strings.TrimSpace(value)); reason != "" {
		problem(key, value, reason+closed)
		return ExternalAuth{}, key + " is not usable"
	}
	if v, k, ok := get(prefix + "auth-method"); ok {
		if reason := checkAuthMethod(v); reason == "" {
			a.Method = strings.ToUpper(strings.TrimSpace(v))
		} else {
			problem(k, v, reason+"; the client's method is used")
		}
	}
	param := defaultSigninParam
	if v, k, ok := get(prefix + "auth-signin-redirect-param"); ok {
		if reason := checkSigninParam(v); reason == "" {
			param = v
		} else {
			problem(k, v, reason+`; "rd" is used`)
		}
	}
	if v, k, ok := get(prefix + "auth-signin"); ok {
		signin, reason := authURLWith(strings.TrimSpace(v), lookup)
		if reason != "" {
			problem(k, v, reason+"; a 401 is answered as it is")
		} else {
			a.Signin = withRedirectParam(signin, param)
		}
	}
	if v, k, ok := get(prefix + keyAuthResponseHeaders); ok {
		headers, reason := headerList(v, maxAuthResponseHeaders)
		if reason != "" {
			problem(k, v, reason+"; no header is copied")
		} else {
			a.ResponseHeaders = headers
		}
	}
	if v, k, ok := get(prefix + "auth-request-redirect"); ok {
		redirect, reason := parseAuthVariables(v, lookup)
		if reason != "" {
			problem(k, v, reason+"; the request URI is sent")
		} else {
			a.RequestRedirect = redirect
		}
	}
	if v, k, ok := get(prefix + "auth-cache-key"); ok {
		cacheKey, reason := parseAuthVariables(v, authCacheKeyVariable)
		if reason != "" {
			problem(k, v, reason+"; answers are not cached")
		} else {
			a.CacheKey = cacheKey
			a.CacheDuration = defaultAuthCache
		}
	}
	if v, k, ok := get(prefix + "auth-cache-duration"); ok && a.CacheKey != "" {
		if reason := checkAuthCacheDuration(v); reason == "" {
			a.CacheDuration, _ = parseCacheDuration(v)
		} else {
			problem(k, v, reason+"; "+defaultAuthCache+" is used")
		}
	}
	if v, k, ok := get(prefix + "auth-always-set-cookie"); ok {
		if reason := checkAuthAlwaysSetCookie(v); reason != "" {
			problem(k, v, reason+"; false is used")
		} else {
			a.AlwaysSetCookie = strings.TrimSpace(v) == "true"
		}
	}
	return a, ""
}

// withRedirectParam adds param=<the original URL> to a sign-in URL that
// does not carry param itself, as ingress-nginx does.
func withRedirectParam(signin, param string) string {
	query := ""
	if i := strings.IndexByte(signin, '?'); i >= 0 {
		query = signin[i+1:]
	}
	for _, kv := range strings.Split(query, "&") {
		if name, _, _ := strings.Cut(kv, "="); name == param {
			return signin
		}
	}
	sep := "?"
	if strings.Contains(signin, "?") {
		sep = "&"
	}
	return signin + sep + param + "=${restysync_forwarded_proto}://${restysync_http_host}${restysync_escaped_request_uri}"
}

func isQueryName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// headerList parses a comma-separated list of header names into a
// canonical one.
func headerList(value string, max int) (string, string) {
	var names []string
	for _, part := range strings.Split(value, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !isVariableHeaderName(part) {
			return "", fmt.Sprintf("%q is not a header name of letters, digits, '-' and '_' (each becomes an nginx variable)", clip(part))
		}
		names = append(names, part)
	}
	if len(names) == 0 {
		return "", "names no header"
	}
	if len(names) > max {
		return "", fmt.Sprintf("names %d headers; at most %d are allowed", len(names), max)
	}
	return strings.Join(names, ","), ""
}

// isVariableHeaderName reports whether s is a header name nginx can hold
// in a variable ($upstream_http_x_user): letters, digits, '-' and '_', as
// ingress-nginx allows for auth-response-headers.
func isVariableHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return s != "" && len(s) <= 128
}

// parseCacheDuration parses "200 202 401 5m": status codes, then one nginx
// time (digits and a unit), or the time alone.
func parseCacheDuration(value string) (string, bool) {
	fields := strings.Fields(value)
	if len(fields) == 0 || len(fields) > 20 {
		return "", false
	}
	for _, f := range fields[:len(fields)-1] {
		if len(f) != 3 || f < "100" || f > "599" || !isDigits(f) {
			return "", false
		}
	}
	last := fields[len(fields)-1]
	unit := last[len(last)-1]
	if len(last) < 2 || len(last) > 8 || !isDigits(last[:len(last)-1]) || strings.IndexByte("smhd", unit) < 0 {
		return "", false
	}
	return strings.Join(fields, " "), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// maxAuthProxyHeaders bounds the headers of auth-proxy-set-headers.
const maxAuthProxyHeaders = 64

// readAuthProxyHeaders reads the ConfigMap auth-proxy-set-headers names:
// the headers set on the request to the auth service, each name a header
// name and each value literal text or the auth URL's variables. They come
// back canonical ("Name: value" lines, sorted by name). A value that
// cannot be used fails the Ingress closed, as ingress-nginx denies the
// location: the auth service may rely on what the headers tell it.
func (b *builder) readAuthProxyHeaders(ing *networkingv1.Ingress) (headers, denied string) {
	value, key, ok := lookupAnnotation(ing, keyAuthProxySetHeaders)
	if !ok {
		return "", ""
	}
	cm, ref, denied := b.ingressConfigMap(ing, key, value, maxAuthProxyHeaders, "headers")
	if denied != "" {
		return "", denied
	}
	var lines []string
	for _, header := range slices.Sorted(maps.Keys(cm.Data)) {
		v, reason := withVariables(strings.TrimSpace(cm.Data[header]), authVariable)
		switch {
		case !isVariableHeaderName(header):
			reason = "is not a header name of letters, digits, '-' and '_'"
		case reason == "" && (v == "" || len(v) > maxAuthURL):
			reason = "has an empty or too long value"
		}
		if reason != "" {
			return "", b.entryProblem(ing, key, value, ref, fmt.Sprintf("header %q", clip(header)), reason)
		}
		lines = append(lines, header+": "+v)
	}
	return strings.Join(lines, "\n"), ""
}

// The checks of the extauth keys (the table's Check column): the value's
// shape as parseExternalAuth judges it. Whether the agent may send to a
// URL (--target-policy) only Build knows.
func checkAuthURL(value string) string {
	_, reason := authURL(strings.TrimSpace(value))
	return reason
}

func checkAuthMethod(value string) string {
	if slices.Contains(authMethods, strings.ToUpper(strings.TrimSpace(value))) {
		return ""
	}
	return "is not an HTTP method (" + strings.Join(authMethods, ", ") + ")"
}

func checkSigninParam(value string) string {
	if isQueryName(value) {
		return ""
	}
	return `is not a query parameter name (letters, digits, "-", "_", ".")`
}

func checkAuthRequestRedirect(value string) string {
	_, reason := parseAuthVariables(value, authVariable)
	return reason
}

func checkAuthCacheKey(value string) string {
	_, reason := parseAuthVariables(value, authCacheKeyVariable)
	return reason
}

// parseAuthVariables parses auth-request-redirect or auth-cache-key: text
// with the variables lookup allows, not empty, at most maxAuthURL bytes.
func parseAuthVariables(value string, lookup func(string) (string, bool)) (string, string) {
	canonical, reason := withVariables(strings.TrimSpace(value), lookup)
	if reason == "" && (canonical == "" || len(canonical) > maxAuthURL) {
		reason = "is empty or too long"
	}
	return canonical, reason
}

func checkAuthCacheDuration(value string) string {
	if _, ok := parseCacheDuration(value); !ok {
		return `is not status codes and a duration ("200 202 401 5m")`
	}
	return ""
}

func checkAuthAlwaysSetCookie(value string) string {
	return oneOf("true", "false")(strings.TrimSpace(value))
}
