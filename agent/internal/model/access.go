package model

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	KeyWhitelistSourceRange = "whitelist-source-range"
	KeyCustomHTTPErrors     = "custom-http-errors"
)

// Access control of a Location, from the ingress-nginx annotations of the
// Ingress that owns it: source ranges, CORS, basic auth, rate limits and
// custom error pages. They are structure: a change is a reload, except the
// content of an htpasswd file (Model.AuthFiles), which nginx reads on every
// request.
//
// A setting that cannot be used is a Problem. Where ignoring it would let
// in someone it was meant to keep out (a source range, basic auth), the
// location fails closed: AccessSettings.Denied is set and every request
// gets 503, as ingress-nginx's "location denied". Otherwise the key falls
// back to its default and the rest of the Ingress is served.

// AccessSettings are the access-control settings of one Location. The zero
// value restricts nothing. Lists are canonical strings, so that Location
// stays comparable (the plan compares locations with ==).
type AccessSettings struct {
	// Denied, when not "", says why every request to the location answers
	// 503: an access-control setting could not be used, and the location
	// fails closed rather than serve without it.
	Denied string
	// AllowSources are the client networks allowed (allowlist-source-range,
	// or its older name whitelist-source-range): masked CIDRs, sorted,
	// joined by ","; "" allows every client. Anyone else gets 403.
	AllowSources string
	// DenySources are client networks refused with 403 before AllowSources
	// is looked at (denylist-source-range), in the same form.
	DenySources string
	CORS        CORS
	BasicAuth   BasicAuth
	// ExternalAuth asks an auth service before each request (extauth.go).
	ExternalAuth ExternalAuth
	// ClientCert is what the location does with the client's certificate
	// (clienttls.go).
	ClientCert ClientCert
	RateLimit  RateLimit
	Errors     CustomErrors
	// WAF is the location's ModSecurity (modsecurity.go).
	WAF ModSecurity
}

// CORS are the Cross-Origin Resource Sharing headers nginx adds (enable-cors
// and the cors-* annotations). Defaults are ingress-nginx's.
type CORS struct {
	// Enabled adds the headers to responses to an allowed origin, and
	// answers its preflight (OPTIONS) with 204 without asking the backend.
	Enabled bool
	// AllowOrigins is "*" (the default: any origin, and the header says
	// "*") or origins joined by ",": "scheme://host[:port]", lower case,
	// where host may start with "*." for one label. A request whose Origin
	// matches one gets it echoed back.
	AllowOrigins string
	// AllowMethods (default "GET, PUT, POST, DELETE, PATCH, OPTIONS"),
	// AllowHeaders (default DefaultCORSAllowHeaders) and ExposeHeaders
	// (default "") are sent as written, joined by ", ".
	AllowMethods  string
	AllowHeaders  string
	ExposeHeaders string
	// AllowCredentials sends Access-Control-Allow-Credentials: true (default true).
	AllowCredentials bool
	// MaxAge is Access-Control-Max-Age in seconds (default 1728000).
	MaxAge int
}

// Defaults of CORS, as ingress-nginx has them.
const (
	DefaultCORSAllowMethods = "GET, PUT, POST, DELETE, PATCH, OPTIONS"
	DefaultCORSAllowHeaders = "DNT, Keep-Alive, User-Agent, X-Requested-With, If-Modified-Since, Cache-Control, Content-Type, Range, Authorization"
	DefaultCORSMaxAge       = 1728000
)

// BasicAuth is HTTP basic authentication against an htpasswd file
// (auth-type basic, auth-secret, auth-realm).
type BasicAuth struct {
	// File is the htpasswd file under the shared dir, "auth/<namespace>_<secret>",
	// one of Model.AuthFiles; "" when there is no basic auth.
	File string
	// Realm is the realm the 401 names (default "").
	Realm string
}

// RateLimit limits requests and connections per client address (limit-*
// annotations). Zero fields are no limit. Every location of one Ingress
// shares the counters, as in ingress-nginx; a request over the limit gets
// 503 (nginx's and ingress-nginx's default).
type RateLimit struct {
	// RPS and RPM are requests per second and per minute, with a burst of
	// BurstMultiplier times the rate (default 5) before requests are refused.
	RPS, RPM        int
	BurstMultiplier int
	// Connections is the number of concurrent connections per address.
	Connections int
	// Exempt are client networks the limits do not apply to
	// (limit-whitelist), in the form of AccessSettings.AllowSources.
	Exempt string
}

// CustomErrors sends the responses of the backend with one of Codes to
// another Service, which answers with an error page instead
// (custom-http-errors with default-backend). That Service gets the request
// as GET-or-same-method "/" with X-Code, X-Format (the client's Accept),
// X-Original-URI, X-Namespace, X-Ingress-Name, X-Service-Name,
// X-Service-Port and X-Request-ID.
type CustomErrors struct {
	// Codes are HTTP status codes 400 to 599, ascending, joined by ",".
	Codes string
	// Backend is the Name of the error Service's entry in Model.Backends.
	Backend string
}

// AuthFile is an htpasswd file nginx checks basic auth against. The agent
// writes it under the shared dir; nginx reads it on every request, so a
// new content needs no reload.
type AuthFile struct {
	// Name is the file's path under the shared dir: "auth/<namespace>_<secret>".
	Name string
	// Content is the Secret's "auth" key.
	Content string
}

// Limits of the access annotations.
const (
	maxSourceRanges  = 1000
	maxRate          = 1_000_000
	maxConnections   = 1_000_000
	maxBurstMultiple = 1000
	maxCORSMaxAge    = 10 * 365 * 24 * 3600
	maxAuthFileSize  = 1 << 20
	maxRealmLength   = 128
	maxCORSOrigins   = 100
	maxCORSList      = 2048
	authFileDir      = "auth/"
	authSecretKey    = "auth"
	authTypeBasic    = "basic"
	authSecretFile   = "auth-file"
	authSecretMap    = "auth-map"
	defaultBurstMult = 5
)

// accessState is what the access annotations of one Ingress said.
type accessState struct {
	settings AccessSettings
	// authFile is the htpasswd file BasicAuth.File names.
	authFile *AuthFile
}

// readAccess reads the access annotations of ing, whose id is
// "namespace/name", once per Build.
func (b *builder) readAccess(ing *networkingv1.Ingress, id string) {
	var st accessState
	a := &st.settings
	var denied []string
	deny := func(reason string) { denied = append(denied, reason) }
	if bad := badAnnotationValues(ing); len(bad) > 0 {
		deny(strings.Join(bad, ", ") + " holds a character no value may hold")
	}

	allowKey := "allowlist-source-range"
	if _, _, ok := lookupAnnotation(ing, allowKey); !ok {
		allowKey = KeyWhitelistSourceRange
	}
	if value, key, ok := lookupAnnotation(ing, allowKey); ok {
		cidrs, reason := parseSourceRanges(value)
		if reason != "" {
			b.annotationProblem(ing, key, value, reason+"; the Ingress's paths answer 503 until it is fixed")
			deny(key + " is invalid")
		}
		a.AllowSources = cidrs
	}
	if value, key, ok := lookupAnnotation(ing, "denylist-source-range"); ok {
		cidrs, reason := parseSourceRanges(value)
		if reason != "" {
			b.annotationProblem(ing, key, value, reason+"; the Ingress's paths answer 503 until it is fixed")
			deny(key + " is invalid")
		}
		a.DenySources = cidrs
	}
	a.CORS = b.readCORS(ing)
	if reason := b.readBasicAuth(ing, &st); reason != "" {
		deny(reason)
	}
	var reason string
	if a.ExternalAuth, reason = b.readExternalAuth(ing); reason != "" {
		deny(reason)
	}
	var server *ClientTLS
	if a.ClientCert, server, reason = b.readClientTLS(ing); reason != "" {
		deny(reason)
	} else if server != nil {
		b.claimClientTLS(ing, *server)
	}
	a.RateLimit = b.readRateLimit(ing)
	a.Errors = b.readCustomErrors(ing)
	if a.WAF, reason = b.readModSecurity(ing); reason != "" {
		deny(reason)
	}
	// FastCGI parameters and custom-headers that cannot be used (protocol.go).
	if reason := b.locationOptions[id].denied; reason != "" {
		deny(reason)
	}

	if len(denied) > 0 {
		// Nothing else matters for a location that answers 503.
		st = accessState{settings: AccessSettings{Denied: strings.Join(denied, "; ")}}
	}
	if st.settings == (AccessSettings{}) {
		return
	}
	if b.access == nil {
		b.access = make(map[string]accessState)
	}
	b.access[id] = st
}

// parseSourceRanges parses a comma-separated list of CIDRs or addresses
// into masked CIDRs, sorted, without duplicates, joined by ",". It returns
// a reason when the list is empty or an entry is not a CIDR or address.
func parseSourceRanges(value string) (string, string) {
	parts := strings.Split(value, ",")
	if len(parts) > maxSourceRanges {
		return "", fmt.Sprintf("has %d entries; at most %d are allowed", len(parts), maxSourceRanges)
	}
	var prefixes []netip.Prefix
	for _, part := range parts {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, reason := parsePrefix(part)
		if reason != "" {
			return "", fmt.Sprintf("%q is not a CIDR or IP address", clip(part))
		}
		prefixes = append(prefixes, p)
	}
	if len(prefixes) == 0 {
		return "", "holds no CIDR"
	}
	slices.SortFunc(prefixes, func(x, y netip.Prefix) int {
		if c := x.Addr().Compare(y.Addr()); c != 0 {
			return c
		}
		return x.Bits() - y.Bits()
	})
	prefixes = slices.Compact(prefixes)
	out := make([]string, len(prefixes))
	for i, p := range prefixes {
		out[i] = p.String()
	}
	return strings.Join(out, ","), ""
}

// parsePrefix parses "10.0.0.0/8" or "10.1.2.3" (a /32) into a masked
// prefix without zone; else it returns why not.
func parsePrefix(s string) (netip.Prefix, string) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err.Error()
		}
		return p.Masked(), ""
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err.Error()
	}
	if addr.Zone() != "" {
		return netip.Prefix{}, "has a zone"
	}
	return netip.PrefixFrom(addr, addr.BitLen()), ""
}

// corsToken is an HTTP token (RFC 9110) without "$", which nginx would
// expand as a variable.
var corsToken = regexp.MustCompile("^[!#%&'*+.^_`|~0-9A-Za-z-]{1,64}$")

// corsMethod is a method as ingress-nginx accepts it: letters only.
var corsMethod = regexp.MustCompile(`^[A-Za-z]{1,32}$`)

// readCORS reads enable-cors and the cors-* family.
func (b *builder) readCORS(ing *networkingv1.Ingress) CORS {
	if !b.boolAnnotation(ing, "enable-cors", false) {
		return CORS{}
	}
	c := CORS{
		Enabled:          true,
		AllowOrigins:     "*",
		AllowMethods:     DefaultCORSAllowMethods,
		AllowHeaders:     DefaultCORSAllowHeaders,
		AllowCredentials: b.boolAnnotation(ing, "cors-allow-credentials", true),
		MaxAge:           b.intAnnotation(ing, "cors-max-age", DefaultCORSMaxAge, 0, maxCORSMaxAge),
	}
	if value, key, ok := lookupAnnotation(ing, "cors-allow-origin"); ok {
		if reason := checkOrigins(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; no CORS headers are sent")
			return CORS{}
		}
		origins, bad := parseOrigins(value)
		if len(bad) > 0 {
			b.annotationProblem(ing, key, value, fmt.Sprintf("%q is not an origin such as \"https://example.com\", \"https://*.example.com:8443\" or \"*\"; left out", clip(bad[0])))
		}
		c.AllowOrigins = strings.Join(origins, ",")
	}
	if list, ok := b.tokenList(ing, "cors-allow-methods", corsMethod, false, corsMethodsReason); ok {
		c.AllowMethods = list
	}
	if list, ok := b.tokenList(ing, "cors-allow-headers", corsToken, false, corsHeadersReason); ok {
		c.AllowHeaders = list
	}
	if list, ok := b.tokenList(ing, "cors-expose-headers", corsToken, true, corsExposeReason); ok {
		c.ExposeHeaders = list
	}
	return c
}

// tokenList reads a comma-separated list of tokens that match re, joined
// by ", ". A bad list is a Problem, and ok is false: the default stays.
func (b *builder) tokenList(ing *networkingv1.Ingress, name string, re *regexp.Regexp, star bool, reason string) (string, bool) {
	value, key, ok := lookupAnnotation(ing, name)
	if !ok {
		return "", false
	}
	joined, why := parseTokenList(value, re, star, reason)
	if why != "" {
		b.annotationProblem(ing, key, value, why+"; the default is used")
		return "", false
	}
	return joined, true
}

// originScheme is a URL scheme.
var originScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]{0,31}$`)

// parseOrigins parses cors-allow-origin: "*" anywhere means any origin, as
// in ingress-nginx; otherwise each entry must be an origin. It returns the
// canonical origins, sorted, and the entries that are not origins.
func parseOrigins(value string) (origins, bad []string) {
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		switch {
		case entry == "":
			continue
		case entry == "*":
			return []string{"*"}, bad
		}
		if origin, ok := parseOrigin(entry); ok {
			origins = append(origins, origin)
		} else {
			bad = append(bad, entry)
		}
	}
	if len(origins) > maxCORSOrigins {
		return nil, []string{fmt.Sprintf("more than %d origins", maxCORSOrigins)}
	}
	slices.Sort(origins)
	return slices.Compact(origins), bad
}

// parseOrigin checks one origin, "scheme://host[:port]" where host is a DNS
// name, optionally "*." and a name for one label, or an IPv4 address, and
// returns it in lower case.
func parseOrigin(s string) (string, bool) {
	s = strings.ToLower(s)
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !originScheme.MatchString(scheme) || rest == "" {
		return "", false
	}
	u, err := url.Parse("x://" + rest)
	if err != nil || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	host, port := u.Hostname(), u.Port()
	if strings.HasSuffix(u.Host, ":") || (u.Host != host && u.Host != host+":"+port) {
		return "", false // brackets, or an empty port
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return "", false
		}
	}
	name := strings.TrimPrefix(host, "*.")
	if addr, err := netip.ParseAddr(name); err == nil {
		if !addr.Is4() || name != host {
			return "", false
		}
	} else if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", false
	}
	return scheme + "://" + u.Host, true
}

// splitAuthSecretRef splits the auth-secret value ref of ing, "name" or
// "namespace/name", into namespace and name.
func splitAuthSecretRef(ing *networkingv1.Ingress, ref string) (namespace, name string) {
	namespace, name, found := strings.Cut(ref, "/")
	if !found {
		return ing.Namespace, ref
	}
	return namespace, name
}

// AuthSecretRef returns the Secret that ing names for basic auth
// (auth-type basic, auth-secret in the Ingress's own namespace), if any.
// The kube source reads these Secrets and no other non-TLS one.
func AuthSecretRef(ing *networkingv1.Ingress) (types.NamespacedName, bool) {
	if authType, _, ok := lookupAnnotation(ing, "auth-type"); !ok || authType != authTypeBasic {
		return types.NamespacedName{}, false
	}
	ref, _, ok := lookupAnnotation(ing, "auth-secret")
	if !ok {
		return types.NamespacedName{}, false
	}
	namespace, name := splitAuthSecretRef(ing, ref)
	if namespace != ing.Namespace || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, true
}

// readBasicAuth reads auth-type, auth-secret, auth-secret-type and
// auth-realm into st. It returns why the location must fail closed, or "".
func (b *builder) readBasicAuth(ing *networkingv1.Ingress, st *accessState) string {
	authType, typeKey, ok := lookupAnnotation(ing, "auth-type")
	if !ok {
		return ""
	}
	const closed = "; the Ingress's paths answer 503 until it is fixed"
	if reason := checkAuthType(authType); reason != "" {
		b.annotationProblem(ing, typeKey, authType, reason+" (digest is not supported)"+closed)
		return typeKey + " is not usable"
	}
	if value, key, ok := lookupAnnotation(ing, "auth-secret-type"); ok && checkAuthSecretType(value) != "" {
		reason := checkAuthSecretType(value)
		if value == authSecretMap {
			reason = `"auth-map" is not supported: the agent reads only the "auth" key of a Secret; use "auth-file"`
		}
		b.annotationProblem(ing, key, value, reason+closed)
		return key + " is not usable"
	}
	ref, secretKey, ok := lookupAnnotation(ing, "auth-secret")
	if !ok {
		b.ingressProblem(ing, fmt.Sprintf("annotation %s%s needs auth-secret%s", annotationPrefixOf(typeKey), "auth-type", closed))
		return "auth-secret is missing"
	}
	namespace, name := splitAuthSecretRef(ing, ref)
	if namespace != ing.Namespace {
		b.annotationProblem(ing, secretKey, ref, "names a Secret in another namespace; only the Ingress's own namespace is read"+closed)
		return secretKey + " is not usable"
	}
	if reason := checkSecretName(ref); reason != "" {
		b.annotationProblem(ing, secretKey, ref, reason+closed)
		return secretKey + " is not usable"
	}
	secret := b.secret(namespace, name)
	if secret == nil {
		b.missingObjectProblem(ing, secretKey, ref, "Secret "+namespace+"/"+name, fmt.Sprintf("Secret %s/%s not found%s", namespace, name, closed))
		return secretKey + " is not usable"
	}
	content, has := secret.Data[authSecretKey]
	if !has {
		b.annotationProblem(ing, secretKey, ref, fmt.Sprintf("Secret %s/%s has no %q key%s", namespace, name, authSecretKey, closed))
		return secretKey + " is not usable"
	}
	if reason := checkHtpasswd(content); reason != "" {
		b.annotationProblem(ing, secretKey, ref, fmt.Sprintf("Secret %s/%s key %q %s%s", namespace, name, authSecretKey, reason, closed))
		return secretKey + " is not usable"
	}
	realm := ""
	if value, key, ok := lookupAnnotation(ing, "auth-realm"); ok {
		if reason := checkRealm(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+`; "" is used`)
		} else {
			realm = value
		}
	}
	file := fileName(namespace, name, "")
	st.settings.BasicAuth = BasicAuth{File: file, Realm: realm}
	st.authFile = &AuthFile{Name: file, Content: string(content)}
	return ""
}

// annotationPrefixOf returns the prefix of a full annotation key.
func annotationPrefixOf(fullKey string) string {
	for _, prefix := range annotationPrefixes {
		if strings.HasPrefix(fullKey, prefix) {
			return prefix
		}
	}
	return ""
}

// checkHtpasswd checks that content is an htpasswd file nginx can read:
// bounded, UTF-8, no NUL or control characters but newlines, and every
// line that is not empty or a comment "user:hash".
func checkHtpasswd(content []byte) string {
	if len(content) > maxAuthFileSize {
		return fmt.Sprintf("is %d bytes; at most %d are read", len(content), maxAuthFileSize)
	}
	if !utf8.Valid(content) {
		return "is not UTF-8"
	}
	for i, line := range strings.Split(string(content), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, r := range line {
			if unicode.IsControl(r) {
				return fmt.Sprintf("line %d holds a control character", i+1)
			}
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" || hash == "" {
			return fmt.Sprintf("line %d is not \"user:password-hash\"", i+1)
		}
	}
	return ""
}

// checkRealm accepts a realm nginx puts in WWW-Authenticate as is: printable,
// no quote, backslash or "$", and not "off" (which turns auth_basic off).
func checkRealm(realm string) string {
	if len(realm) > maxRealmLength {
		return fmt.Sprintf("is longer than %d bytes", maxRealmLength)
	}
	if realm == "off" {
		return `"off" would turn authentication off`
	}
	for _, r := range realm {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' || r == '$' {
			return `holds a character other than printable ASCII without '"', '\' and '$'`
		}
	}
	return ""
}

// readRateLimit reads limit-rps, limit-rpm, limit-connections,
// limit-burst-multiplier and limit-whitelist.
func (b *builder) readRateLimit(ing *networkingv1.Ingress) RateLimit {
	r := RateLimit{
		RPS:         b.intAnnotation(ing, "limit-rps", 0, 1, maxRate),
		RPM:         b.intAnnotation(ing, "limit-rpm", 0, 1, maxRate),
		Connections: b.intAnnotation(ing, "limit-connections", 0, 1, maxConnections),
	}
	multiplier := b.intAnnotation(ing, "limit-burst-multiplier", defaultBurstMult, 1, maxBurstMultiple)
	if r == (RateLimit{}) {
		return r // the others mean nothing without a limit
	}
	if r.RPS > 0 || r.RPM > 0 {
		r.BurstMultiplier = multiplier
	}
	if value, key, ok := lookupAnnotation(ing, "limit-whitelist"); ok {
		cidrs, reason := parseSourceRanges(value)
		if reason != "" {
			b.annotationProblem(ing, key, value, reason+"; no client is exempt from the limits")
		}
		r.Exempt = cidrs
	}
	return r
}

// ErrorPageCode reports whether nginx's error_page takes code: 300 to 599
// but 499, nginx's own code for a client that closed the connection
// (nginx 1.22's `nginx -t`: "value must be between 300 and 599", and
// "invalid value" for 499).
func ErrorPageCode(code int) bool { return code >= 300 && code <= 599 && code != 499 }

// maxErrorCodes bounds custom-http-errors: each code is a named location
// per server.
const maxErrorCodes = 50

// readCustomErrors reads custom-http-errors; default-backend names the
// Service that serves the pages (defaultBackendOf).
func (b *builder) readCustomErrors(ing *networkingv1.Ingress) CustomErrors {
	value, key, ok := lookupAnnotation(ing, KeyCustomHTTPErrors)
	if !ok {
		return CustomErrors{}
	}
	codes, reason := parseErrorCodes(value)
	if reason != "" {
		b.annotationProblem(ing, key, value, reason+"; error responses pass through unchanged")
		return CustomErrors{}
	}
	if _, _, has := lookupAnnotation(ing, "default-backend"); !has {
		b.annotationProblem(ing, key, value, "needs default-backend, the Service that serves the error pages; error responses pass through unchanged")
		return CustomErrors{}
	}
	ref, ok := b.defaultBackendOf(ing)
	if !ok {
		return CustomErrors{}
	}
	text := make([]string, len(codes))
	for i, c := range codes {
		text[i] = strconv.Itoa(c)
	}
	return CustomErrors{Codes: strings.Join(text, ","), Backend: ref.name}
}

// annotatedDefault is what defaultBackendOf read of one Ingress.
type annotatedDefault struct {
	ref backendRef
	ok  bool
}

// defaultBackendOf reads the default-backend annotation of ing, once: the
// Service in the Ingress's namespace (its first port, as ingress-nginx takes
// it) that answers for the Ingress's backends while they have no endpoints,
// and serves its custom-http-errors pages. ok is false when the annotation
// is absent or unusable (a Problem).
func (b *builder) defaultBackendOf(ing *networkingv1.Ingress) (backendRef, bool) {
	id := ing.Namespace + "/" + ing.Name
	if d, seen := b.annotatedDefaults[id]; seen {
		return d.ref, d.ok
	}
	ref, ok := b.readDefaultBackend(ing)
	b.annotatedDefaults[id] = annotatedDefault{ref, ok}
	return ref, ok
}

func (b *builder) readDefaultBackend(ing *networkingv1.Ingress) (backendRef, bool) {
	value, key, found := lookupAnnotation(ing, "default-backend")
	if !found {
		return backendRef{}, false
	}
	if reason := checkServiceName(value); reason != "" {
		b.annotationProblem(ing, key, value, reason+"; ignored")
		return backendRef{}, false
	}
	svc := b.service(ing.Namespace, value)
	if svc == nil {
		b.missingObjectProblem(ing, key, value, "Service "+ing.Namespace+"/"+value, fmt.Sprintf("Service %s/%s not found; ignored", ing.Namespace, value))
		return backendRef{}, false
	}
	if len(svc.Ports) == 0 {
		b.annotationProblem(ing, key, value, fmt.Sprintf("Service %s/%s has no port; ignored", ing.Namespace, value))
		return backendRef{}, false
	}
	port := networkingv1.ServiceBackendPort{Name: svc.Ports[0].Name}
	if port.Name == "" {
		port = networkingv1.ServiceBackendPort{Number: svc.Ports[0].Port}
	}
	ref, reason := parseBackend(ing.Namespace, &networkingv1.IngressBackend{
		Service: &networkingv1.IngressServiceBackend{Name: value, Port: port},
	}, "default-backend")
	if reason != "" {
		b.annotationProblem(ing, key, value, reason+"; ignored")
		return backendRef{}, false
	}
	if r := b.resolve(ref); r.problem != "" {
		b.annotationProblem(ing, key, value, strings.TrimPrefix(r.problem, ".")+"; it answers 503")
	}
	return ref, true
}

// authFiles returns the htpasswd files the locations name, sorted by Name.
func (b *builder) authFiles() []AuthFile {
	seen := map[string]bool{}
	var out []AuthFile
	for _, st := range b.access {
		if st.authFile != nil && !seen[st.authFile.Name] {
			seen[st.authFile.Name] = true
			out = append(out, *st.authFile)
		}
	}
	for _, f := range b.secretFiles {
		out = append(out, f)
	}
	slices.SortFunc(out, func(x, y AuthFile) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// parseTokenList parses a comma-separated list of tokens that match re
// (or "*", when star), joined by ", "; reason is why a bad token refuses it.
func parseTokenList(value string, re *regexp.Regexp, star bool, reason string) (string, string) {
	var items []string
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !re.MatchString(item) && !(star && item == "*") {
			return "", reason
		}
		items = append(items, item)
	}
	joined := strings.Join(items, ", ")
	if len(joined) > maxCORSList {
		return "", fmt.Sprintf("is longer than %d bytes", maxCORSList)
	}
	return joined, ""
}

// The reasons of the cors-* lists.
const (
	corsMethodsReason = "is not a list of methods (letters only)"
	corsHeadersReason = "is not a list of header names"
	corsExposeReason  = `is not a list of header names or "*"`
)

// checkCORSMethods, checkCORSHeaders and checkCORSExposeHeaders are the
// checks of the cors-* lists (the table's Check column).
func checkCORSMethods(value string) string {
	_, reason := parseTokenList(value, corsMethod, false, corsMethodsReason)
	return reason
}

func checkCORSHeaders(value string) string {
	_, reason := parseTokenList(value, corsToken, false, corsHeadersReason)
	return reason
}

func checkCORSExposeHeaders(value string) string {
	_, reason := parseTokenList(value, corsToken, true, corsExposeReason)
	return reason
}

// checkOrigins checks cors-allow-origin as readCORS does: refused when no
// origin is left (a bad origin among good ones is left out).
func checkOrigins(value string) string {
	if origins, _ := parseOrigins(value); len(origins) == 0 {
		return `allows no origin (want origins such as "https://example.com", "https://*.example.com:8443", or "*")`
	}
	return ""
}

// checkAuthType and checkAuthSecretType check auth-type and
// auth-secret-type (the table's Check column).
var (
	checkAuthType       = oneOf(authTypeBasic)
	checkAuthSecretType = oneOf(authSecretFile)
)

// refName is the name of a NAME or NAMESPACE/NAME reference.
func refName(ref string) string {
	if _, name, found := strings.Cut(ref, "/"); found {
		return name
	}
	return ref
}

// checkSecretName checks the shape of a Secret reference: NAME or
// NAMESPACE/NAME with a valid name. Whether it is in the Ingress's
// namespace, exists and holds the keys it needs, only Build knows.
func checkSecretName(value string) string {
	if len(validation.IsDNS1123Subdomain(refName(value))) > 0 {
		return "is not a Secret name"
	}
	return ""
}

// checkServiceName checks default-backend's shape: a Service name. Whether
// the Service exists only Build knows.
func checkServiceName(value string) string {
	if len(validation.IsDNS1035Label(value)) > 0 {
		return "is not a Service name in the Ingress's namespace"
	}
	return ""
}

// checkErrorCodes checks custom-http-errors.
func checkErrorCodes(value string) string {
	_, reason := parseErrorCodes(value)
	return reason
}

// parseErrorCodes parses custom-http-errors: 1 to maxErrorCodes codes
// nginx's error_page takes, sorted, each once.
func parseErrorCodes(value string) ([]int, string) {
	var codes []int
	for _, part := range strings.Split(value, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 400 || !ErrorPageCode(n) {
			return nil, fmt.Sprintf("%q is not a status code from 400 to 599 that nginx's error_page takes (not 499)", clip(part))
		}
		codes = append(codes, n)
	}
	slices.Sort(codes)
	if codes = slices.Compact(codes); len(codes) == 0 || len(codes) > maxErrorCodes {
		return nil, fmt.Sprintf("needs 1 to %d status codes", maxErrorCodes)
	}
	return codes, ""
}
