package model

// The remaining proxy and routing annotations of ingress-nginx: the
// response buffers, client_body_buffer_size, the Set-Cookie and Location
// rewrites, limit_rate, temporal-redirect-code, satisfy,
// preserve-trailing-slash, from-to-www-redirect, the variables of
// upstream-vhost, service-upstream, and use-regex for a whole host. Each
// is read once per Ingress; a bad value is a Problem naming the key and
// leaves that setting at its default. The checks that parse a value are
// exported for package configmap, whose keys of the same names take the
// same values.

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	KeyClientBodyBufferSize = "client-body-buffer-size"
	KeyProxyBuffersNumber   = "proxy-buffers-number"
	KeyProxyBusyBuffersSize = "proxy-busy-buffers-size"
	KeyProxyMaxTempFileSize = "proxy-max-temp-file-size"
	KeyProxyCookieDomain    = "proxy-cookie-domain"
	KeyProxyCookiePath      = "proxy-cookie-path"
	KeyProxyRedirectFrom    = "proxy-redirect-from"
	KeyProxyRedirectTo      = "proxy-redirect-to"
	KeyLimitRate            = "limit-rate"
	KeyLimitRateAfter       = "limit-rate-after"
	KeyServiceUpstream      = "service-upstream"
)

// NginxSize is a size nginx's size directives (proxy_buffer_size,
// client_body_buffer_size, limit_rate, ...) take: a number of bytes, or
// of k or m. nginx refuses "g" there, unlike client_max_body_size.
var NginxSize = regexp.MustCompile(`^[0-9]{1,9}[kKmM]?$`)

// Defaults of the proxy buffers, as ingress-nginx writes them (nginx's own
// number is 8; its busy size is twice the larger buffer; its largest
// temporary file 1024m).
const (
	DefaultBufferSize     = "4k"
	DefaultBuffersNumber  = 4
	DefaultMaxTempFile    = "1024m"
	MaxBuffersNumber      = 1024
	MaxLimitRate          = 1_000_000_000 // kilobytes
	maxCookieRewrite      = 255
	maxProxyRedirect      = 2048
	maxUpstreamVhost      = 255
	serviceUpstreamMark   = "#service-upstream"
	temporalRedirectLeast = 300
	temporalRedirectMost  = 307
)

// ProxyBuffers are the four buffer directives a location writes together.
type ProxyBuffers struct {
	Size    string // proxy_buffer_size and the size of each proxy_buffers
	Number  int    // the number of proxy_buffers
	Busy    string // proxy_busy_buffers_size
	MaxTemp string // proxy_max_temp_file_size
}

// Buffers returns the buffer directives of p, those it does not set at
// their defaults; ok is false when p sets none of them.
func (p ProxySettings) Buffers() (ProxyBuffers, bool) {
	if p.BufferSize == "" && p.BuffersNumber == 0 && p.BusyBuffersSize == "" && p.MaxTempFileSize == "" {
		return ProxyBuffers{}, false
	}
	b := ProxyBuffers{Size: p.BufferSize, Number: p.BuffersNumber, Busy: p.BusyBuffersSize, MaxTemp: p.MaxTempFileSize}
	if b.Size == "" {
		b.Size = DefaultBufferSize
	}
	if b.Number == 0 {
		b.Number = DefaultBuffersNumber
	}
	if b.Busy == "" {
		b.Busy = scaleSize(b.Size, 2)
	}
	if b.MaxTemp == "" {
		b.MaxTemp = DefaultMaxTempFile
	}
	return b, true
}

// Check returns why nginx would refuse these buffers at "nginx -t", or "":
// at least 2 buffers; a busy size of at least one buffer and at most all
// buffers but one; a largest temporary file of 0 or at least one buffer.
func (b ProxyBuffers) Check() string {
	size, ok1 := sizeOf(b.Size)
	busy, ok2 := sizeOf(b.Busy)
	maxTemp, ok3 := sizeOf(b.MaxTemp)
	switch {
	case !ok1 || !ok2 || !ok3 || size == 0:
		return "is not a valid size"
	case b.Number < 2 || b.Number > MaxBuffersNumber:
		return fmt.Sprintf("nginx needs 2 to %d buffers", MaxBuffersNumber)
	case busy < size:
		return fmt.Sprintf("nginx needs proxy_busy_buffers_size (%s) to be at least one buffer (%s)", b.Busy, b.Size)
	case busy > int64(b.Number-1)*size:
		return fmt.Sprintf("nginx needs proxy_busy_buffers_size (%s) to be at most the %d buffers of %s but one", b.Busy, b.Number, b.Size)
	case maxTemp != 0 && maxTemp < size:
		return fmt.Sprintf("nginx needs proxy_max_temp_file_size (%s) to be 0 or at least one buffer (%s)", b.MaxTemp, b.Size)
	}
	return ""
}

// SizeBytes reads an nginx size: digits, then an optional unit k, m or g
// (either case). The caller checks which units its directive takes
// (NginxSize, render.BodySize).
func SizeBytes(size string) (int64, bool) {
	if size == "" {
		return 0, false
	}
	unit := int64(1)
	switch size[len(size)-1] {
	case 'k', 'K':
		unit = 1 << 10
	case 'm', 'M':
		unit = 1 << 20
	case 'g', 'G':
		unit = 1 << 30
	}
	n, err := strconv.ParseUint(strings.TrimRight(size, "kKmMgG"), 10, 63)
	if err != nil || int64(n) > (1<<62)/unit {
		return 0, false
	}
	return int64(n) * unit, true
}

// scaleSize multiplies a NginxSize by n, keeping its unit.
func scaleSize(size string, n int64) string {
	digits := strings.TrimRight(size, "kKmM")
	v, _ := strconv.ParseInt(digits, 10, 64)
	return strconv.FormatInt(v*n, 10) + size[len(digits):]
}

// ParseNginxSize checks a NginxSize; zero says whether 0 is allowed.
func ParseNginxSize(value string, zero bool) (string, string) {
	if !NginxSize.MatchString(value) {
		return "", `is not an nginx size such as "16k" or "1m" (digits, then k or m; nginx takes no g here)`
	}
	if !zero && strings.TrimLeft(strings.TrimRight(value, "kKmM"), "0") == "" {
		return "", "is 0; want a size above 0"
	}
	return value, ""
}

// ParseBuffersNumber checks a proxy-buffers-number.
func ParseBuffersNumber(value string) (int, string) {
	n, err := strconv.Atoi(value)
	if err != nil || n < 2 || n > MaxBuffersNumber {
		return 0, fmt.Sprintf("is not an integer from 2 to %d (nginx needs at least 2 buffers)", MaxBuffersNumber)
	}
	return n, ""
}

// ParseRate checks a limit-rate or limit-rate-after, kilobytes as
// ingress-nginx reads them, and returns the nginx value: "Nk", or "0".
func ParseRate(value string) (string, string) {
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 || n > MaxLimitRate || strconv.Itoa(n) != value {
		return "", fmt.Sprintf("is not a number of kilobytes from 0 to %d", MaxLimitRate)
	}
	if n == 0 {
		return "0", ""
	}
	return value + "k", ""
}

// cookieDomainChars and cookiePathChars are what ingress-nginx lets
// through in proxy-cookie-domain and proxy-cookie-path.
var (
	cookieDomainChars = regexp.MustCompile(`^[A-Za-z0-9._~:/-]+$`)
	cookiePathChars   = regexp.MustCompile(`^[A-Za-z0-9._~:/?&=-]+$`)
)

// ParseCookieRewrite checks a proxy-cookie-domain (path false) or
// proxy-cookie-path value: "off", or "FROM TO", two words of ingress-nginx's
// characters. A word starting with "~" (nginx's regex) is refused.
func ParseCookieRewrite(value string, path bool) (string, string) {
	if value == "off" {
		return value, ""
	}
	chars := cookieDomainChars
	if path {
		chars = cookiePathChars
	}
	fields := strings.Fields(value)
	if len(fields) != 2 || len(value) > 2*maxCookieRewrite {
		return "", `is not "off" or two words, FROM and TO`
	}
	for _, f := range fields {
		if !chars.MatchString(f) {
			return "", fmt.Sprintf("%q has a character other than letters, digits and %s", clip(f), strings.Trim(chars.String()[len(`^[A-Za-z0-9`):], "]+$"))
		}
		if strings.HasPrefix(f, "~") {
			return "", fmt.Sprintf("%q is a regular expression, which is not supported", clip(f))
		}
	}
	return fields[0] + " " + fields[1], ""
}

// redirectVariables are the nginx variables proxy-redirect-from and -to
// may use, by the name a user writes, with the variable nginx.conf uses.
// $http_host is the host the router matched, with the client's port
// (render's $restysync_http_host), not the raw Host header: a Host header
// that disagrees with an absolute request line must not set the Location
// a client (or a cache in front) is sent to.
var redirectVariables = map[string]string{
	"host":               "host",
	"http_host":          "restysync_http_host",
	"best_http_host":     "restysync_forwarded_host",
	"scheme":             "scheme",
	"pass_access_scheme": "restysync_forwarded_proto",
	"server_port":        "server_port",
}

// ParseProxyRedirect checks one side of proxy_redirect (a URL or a path,
// with the variables of redirectVariables) and returns it with its
// variables written "${name}". from says it is proxy-redirect-from, whose
// "~" would make it a regex, which is not supported.
func ParseProxyRedirect(value string, from bool) (string, string) {
	if len(value) > maxProxyRedirect {
		return "", fmt.Sprintf("is longer than %d bytes", maxProxyRedirect)
	}
	if from && strings.HasPrefix(value, "~") {
		return "", "is a regular expression, which is not supported"
	}
	canonical, reason := withVariables(value, func(name string) (string, bool) {
		v, ok := redirectVariables[name]
		return v, ok
	})
	if reason != "" {
		return "", reason
	}
	return canonical, ""
}

// readProxyKeys reads the keys of this file into p.
func (b *builder) readProxyKeys(ing *networkingv1.Ingress, p *ProxySettings) {
	b.readBuffers(ing, p)
	if value, key, ok := lookupAnnotation(ing, KeyClientBodyBufferSize); ok {
		if size, reason := ParseNginxSize(value, false); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; the default is used")
		} else {
			p.ClientBodyBufferSize = size
		}
	}
	for _, c := range []struct {
		name  string
		path  bool
		field *string
	}{{KeyProxyCookieDomain, false, &p.CookieDomain}, {KeyProxyCookiePath, true, &p.CookiePath}} {
		if value, key, ok := lookupAnnotation(ing, c.name); ok {
			if v, reason := ParseCookieRewrite(value, c.path); reason != "" {
				b.annotationProblem(ing, key, value, reason+"; cookies are not rewritten")
			} else {
				*c.field = v
			}
		}
	}
	b.readProxyRedirect(ing, p)
	b.temporalRedirectCode(ing) // a bad code is a Problem even without temporal-redirect
	for _, r := range []struct {
		name  string
		field *string
	}{{KeyLimitRate, &p.LimitRate}, {KeyLimitRateAfter, &p.LimitRateAfter}} {
		if value, key, ok := lookupAnnotation(ing, r.name); ok {
			if v, reason := ParseRate(value); reason != "" {
				b.annotationProblem(ing, key, value, reason+"; the default is used")
			} else {
				*r.field = v
			}
		}
	}
	if value, key, ok := lookupAnnotation(ing, "satisfy"); ok {
		if reason := checkSatisfy(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; all is used")
		} else {
			p.SatisfyAny = strings.TrimSpace(value) == "any"
		}
	}
	p.PreserveTrailingSlash = b.boolAnnotation(ing, "preserve-trailing-slash", false)
	if p.FromToWWWRedirect = b.boolAnnotation(ing, "from-to-www-redirect", false); p.FromToWWWRedirect {
		_, key, _ := lookupAnnotation(ing, "from-to-www-redirect")
		if b.wwwKeys == nil {
			b.wwwKeys = make(map[string]string)
		}
		b.wwwKeys[ing.Namespace+"/"+ing.Name] = key
	}
}

// readBuffers reads proxy-buffers-number, proxy-busy-buffers-size and
// proxy-max-temp-file-size (proxy-buffer-size is read with the sizes), and
// checks the four together: a combination nginx refuses is a Problem, and
// the three are left at their defaults, which always go with the buffer
// size.
func (b *builder) readBuffers(ing *networkingv1.Ingress, p *ProxySettings) {
	var keys []string
	if value, key, ok := lookupAnnotation(ing, KeyProxyBuffersNumber); ok {
		if n, reason := ParseBuffersNumber(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; 4 is used")
		} else {
			p.BuffersNumber = n
			keys = append(keys, key)
		}
	}
	if value, key, ok := lookupAnnotation(ing, KeyProxyBusyBuffersSize); ok {
		if size, reason := ParseNginxSize(value, false); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; the default is used")
		} else {
			p.BusyBuffersSize = size
			keys = append(keys, key)
		}
	}
	if value, key, ok := lookupAnnotation(ing, KeyProxyMaxTempFileSize); ok {
		if size, reason := ParseNginxSize(value, true); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; the default is used")
		} else {
			p.MaxTempFileSize = size
			keys = append(keys, key)
		}
	}
	bufs, ok := p.Buffers()
	if !ok {
		return
	}
	if reason := bufs.Check(); reason != "" {
		key := strings.Join(keys, ", ")
		if key == "" {
			_, key, _ = lookupAnnotation(ing, KeyProxyBufferSize)
		}
		b.ingressProblem(ing, fmt.Sprintf("annotation %s: with %d buffers of %s, a busy size of %s and temporary files up to %s, %s; "+
			"proxy-buffers-number, proxy-busy-buffers-size and proxy-max-temp-file-size keep their defaults",
			key, bufs.Number, bufs.Size, bufs.Busy, bufs.MaxTemp, reason))
		p.BuffersNumber, p.BusyBuffersSize, p.MaxTempFileSize = 0, "", ""
	}
}

// bufferSizeAnnotation reads proxy-buffer-size, a NginxSize above 0.
func (b *builder) bufferSizeAnnotation(ing *networkingv1.Ingress, name string) string {
	value, key, ok := lookupAnnotation(ing, name)
	if !ok {
		return ""
	}
	size, reason := ParseNginxSize(value, false)
	if reason != "" {
		b.annotationProblem(ing, key, value, reason+"; the default is used")
	}
	return size
}

// readProxyRedirect reads proxy-redirect-from and proxy-redirect-to, as
// ingress-nginx pairs them: from "off" turns the rewriting off, "default"
// is nginx's default (nothing written); any other from is rewritten to
// to, and without a to (or with "off") nothing is.
func (b *builder) readProxyRedirect(ing *networkingv1.Ingress, p *ProxySettings) {
	from, fromKey, hasFrom := lookupAnnotation(ing, KeyProxyRedirectFrom)
	to, toKey, hasTo := lookupAnnotation(ing, KeyProxyRedirectTo)
	var canonicalFrom, canonicalTo string
	if hasFrom && from != "off" && from != "default" {
		var reason string
		if canonicalFrom, reason = ParseProxyRedirect(from, true); reason != "" {
			b.annotationProblem(ing, fromKey, from, reason+"; Location headers are not rewritten")
		}
	}
	if hasTo && to != "off" {
		var reason string
		if canonicalTo, reason = ParseProxyRedirect(to, false); reason != "" {
			b.annotationProblem(ing, toKey, to, reason+"; Location headers are not rewritten")
		}
	}
	switch {
	case from == "off":
		p.RedirectFrom = "off"
	case canonicalFrom != "" && canonicalTo != "":
		p.RedirectFrom, p.RedirectTo = canonicalFrom, canonicalTo
	}
}

// temporalRedirectCode reads temporal-redirect-code: 300 to 307 (a
// temporary redirect), 302 by default.
func (b *builder) temporalRedirectCode(ing *networkingv1.Ingress) int {
	value, key, ok := lookupAnnotation(ing, "temporal-redirect-code")
	if !ok {
		return TemporalRedirectCode
	}
	if reason := checkTemporalRedirectCode(value); reason != "" {
		b.annotationProblem(ing, key, value, reason+"; 302 is used")
		return TemporalRedirectCode
	}
	n, _ := strconv.Atoi(value)
	return n
}

// Variables of upstream-vhost. Those of the location are replaced when
// the model is built (ingress-nginx sets them per location); the others
// stay nginx variables.
var (
	vhostLocationVariables = map[string]bool{"service_name": true, "namespace": true, "ingress_name": true, "service_port": true}
	vhostNginxVariables    = map[string]string{"host": "host", "http_host": "http_host", "best_http_host": "restysync_forwarded_host"}
)

// vhostLiteral is what upstream-vhost may hold around its variables.
var vhostLiteral = regexp.MustCompile(`^[a-z0-9.:-]*$`)

// parseUpstreamVhost checks an upstream-vhost value and returns it with
// its variables written "${name}", or why it cannot be used.
func parseUpstreamVhost(value string) (string, string) {
	if len(value) > maxUpstreamVhost {
		return "", fmt.Sprintf("is longer than %d bytes", maxUpstreamVhost)
	}
	if !strings.Contains(value, "$") {
		return value, checkHostPort(value)
	}
	canonical, reason := withVariables(value, func(name string) (string, bool) {
		if vhostLocationVariables[name] {
			return name, true
		}
		v, ok := vhostNginxVariables[name]
		return v, ok
	})
	if reason != "" {
		return "", reason + " (upstream-vhost may use $service_name, $namespace, $ingress_name, $service_port, $host, $http_host and $best_http_host)"
	}
	literal := vhostVariable.ReplaceAllString(canonical, "")
	if !vhostLiteral.MatchString(literal) {
		return "", "has characters other than lower-case letters, digits, '.', '-' and ':' around its variables"
	}
	if !hasNginxVariable(canonical) {
		// Only the location's variables: check it with plausible values.
		if reason := checkHostPort(expandVhost(canonical, "web", "default", "app", "80")); reason != "" {
			return "", reason
		}
	}
	return canonical, ""
}

// vhostVariable finds a variable written "${name}".
var vhostVariable = regexp.MustCompile(`\$\{([a-z_]+)\}`)

// hasNginxVariable says whether a canonical upstream-vhost keeps a
// variable for nginx.
func hasNginxVariable(canonical string) bool {
	for _, m := range vhostVariable.FindAllStringSubmatch(canonical, -1) {
		if !vhostLocationVariables[m[1]] {
			return true
		}
	}
	return false
}

func expandVhost(canonical, service, namespace, ingress, port string) string {
	return strings.NewReplacer("${service_name}", service, "${namespace}", namespace,
		"${ingress_name}", ingress, "${service_port}", port).Replace(canonical)
}

// finishUpstreamVhost replaces the location's variables of the
// upstream-vhost of loc's proxy settings with its Service, namespace,
// Ingress and Service port (as written in the Ingress). A result that is
// not a host[:port] is a Problem and the location sends the client's host.
func (b *builder) finishUpstreamVhost(loc Location, proxy *ProxySettings) {
	vhost := proxy.UpstreamVhost
	if !strings.Contains(vhost, "${") {
		return
	}
	namespace, name, _ := strings.Cut(loc.Ingress, "/")
	_, service, _ := BackendService(loc.Backend)
	port := ""
	if _, rest, ok := strings.Cut(baseBackendName(loc.Backend), ":"); ok {
		port = rest
	}
	expanded := expandVhost(vhost, service, namespace, name, port)
	if !hasNginxVariable(expanded) {
		if reason := checkHostPort(expanded); reason != "" {
			b.problem("Ingress", namespace, name, fmt.Sprintf("annotation upstream-vhost: for Service %s port %s it is %q, which %s; the client's host is sent", service, port, clip(expanded), reason))
			proxy.UpstreamVhost = ""
			return
		}
	}
	proxy.UpstreamVhost = expanded
}

// serviceUpstreamOf reads service-upstream of ing once: "true" sends its
// paths to their Service's cluster IP and port instead of the endpoints.
// A Service without a cluster IP (headless) is a Problem, and its
// endpoints are used.
func (b *builder) serviceUpstreamOf(ing *networkingv1.Ingress) bool {
	id := ing.Namespace + "/" + ing.Name
	if on, seen := b.serviceUpstream[id]; seen {
		return on
	}
	if b.serviceUpstream == nil {
		b.serviceUpstream = make(map[string]bool)
	}
	on := b.boolAnnotation(ing, KeyServiceUpstream, b.serviceUpstreamDefault)
	b.serviceUpstream[id] = on
	if !on {
		return false
	}
	value, key, set := lookupAnnotation(ing, KeyServiceUpstream)
	if !set {
		key, value = "service-upstream (the ConfigMap's)", "true"
	}
	seen := map[string]bool{}
	check := func(backend *networkingv1.IngressBackend) {
		if backend == nil || backend.Service == nil || seen[backend.Service.Name] {
			return
		}
		seen[backend.Service.Name] = true
		svc := b.service(ing.Namespace, backend.Service.Name)
		if svc == nil || svc.Type == corev1.ServiceTypeExternalName {
			return // the path's own Problem says so
		}
		if _, ok := clusterIP(svc); !ok {
			b.annotationProblem(ing, key, value, fmt.Sprintf("Service %s/%s has no cluster IP (headless); its endpoints are used", svc.Namespace, svc.Name))
		}
	}
	check(ing.Spec.DefaultBackend)
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP != nil {
			for i := range rule.HTTP.Paths {
				check(&rule.HTTP.Paths[i].Backend)
			}
		}
	}
	return true
}

// withServiceUpstream returns the variant of ref that ing's
// service-upstream sends to the Service's cluster IP, or ref itself. Its
// name ends in serviceUpstreamMark, which ResolveBackend reads.
func (b *builder) withServiceUpstream(ref backendRef, ing *networkingv1.Ingress) backendRef {
	if !b.serviceUpstreamOf(ing) {
		return ref
	}
	if !strings.Contains(ref.name, variantSeparator) {
		ref.name += variantSeparator + ing.Namespace + "/" + ing.Name
	}
	ref.name += serviceUpstreamMark
	ref.serviceUpstream = true
	return ref
}

// clusterIP returns the cluster IP of svc, if it has a usable one.
func clusterIP(svc *Service) (string, bool) {
	ip := svc.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone {
		return "", false
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil || addr.Zone() != "" || addr.IsUnspecified() || addr.IsMulticast() {
		return "", false
	}
	return addr.String(), true
}

// serviceEndpoints are the endpoints of a service-upstream backend: the
// cluster IP and the Service port; ok is false when the Service has no
// cluster IP. A cluster IP the endpoint check refuses is a Problem on the
// Service and no endpoint.
func (b *Builder) serviceEndpoints(svc *Service, port *ServicePort) ([]Endpoint, bool) {
	ip, ok := clusterIP(svc)
	if !ok {
		return nil, false
	}
	if reason := b.targets.CheckEndpoint(netip.MustParseAddr(ip), port.Port); reason != "" {
		b.endpointRefused("Service", svc.Namespace, svc.Name, fmt.Sprintf("spec.clusterIP %q: refused: %s; no endpoint", ip, reason))
		return []Endpoint{}, true
	}
	return []Endpoint{{Address: ip, Port: port.Port}}, true
}

// markRegexHosts finds the hosts where some Ingress (not a canary) has
// use-regex or a rewrite-target: there every path of every Ingress is a
// regex, as ingress-nginx writes every location of such a server
// "~* ^PATH".
func (b *builder) markRegexHosts(ours []*networkingv1.Ingress) {
	for _, ing := range ours {
		if b.isCanary(ing) || !b.useRegex(ing) {
			continue
		}
		for _, rule := range ing.Spec.Rules {
			if b.regexHosts == nil {
				b.regexHosts = make(map[string]regexOwner)
			}
			if _, marked := b.regexHosts[rule.Host]; !marked {
				b.regexHosts[rule.Host] = regexOwner{ingress: ing.Namespace + "/" + ing.Name, annotation: b.regexAnnotation(ing)}
			}
		}
	}
}

// regexOwner is the first Ingress that makes the paths of a host regexes,
// and the annotation that does.
type regexOwner struct {
	ingress    string
	annotation string // keyUseRegex or keyRewriteTarget
}

// regexAnnotation names the annotation that makes the paths of ing
// regexes: use-regex, else rewrite-target (useRegex says one does).
func (b *builder) regexAnnotation(ing *networkingv1.Ingress) string {
	if b.boolAnnotation(ing, keyUseRegex, false) {
		return keyUseRegex
	}
	return keyRewriteTarget
}

// Why a path matches otherwise than its pathType says (Location.MatchReason).
const matchImplementationSpecific = "ImplementationSpecific is matched as Prefix"

// pathMatch returns how path p (of kind kind) of ing on host matches: a
// regex for an ImplementationSpecific path of an Ingress with use-regex,
// and for every path on a host where some Ingress has it; else pathType.
// An Exact or Prefix path that is no valid regex keeps its matching, with
// a Problem. why says what made the match differ from kind ("" when it
// does not): it costs a string only on a host of regexes.
func (b *builder) pathMatch(ing *networkingv1.Ingress, useRegex bool, host string, p *networkingv1.HTTPIngressPath,
	kind networkingv1.PathType, pathType PathType) (match PathType, why string) {
	if useRegex && kind == networkingv1.PathTypeImplementationSpecific {
		return PathRegex, "ImplementationSpecific with " + b.regexAnnotation(ing) + " on this Ingress is a regex"
	}
	owner, regexHost := b.regexHosts[host]
	if !regexHost {
		if kind == networkingv1.PathTypeImplementationSpecific {
			return pathType, matchImplementationSpecific
		}
		return pathType, ""
	}
	path := p.Path
	if kind != networkingv1.PathTypeImplementationSpecific {
		if reason := validRegexPath(path); reason != "" {
			b.ingressProblem(ing, fmt.Sprintf("path %q on %s: Ingress %s has %s, which makes every path of the host a regex, but this one %s; it keeps its %s matching",
				clip(path), describeHost(host), owner.ingress, owner.annotation, reason, kind))
			return pathType, ""
		}
	}
	return PathRegex, string(kind) + " became Regex: " + owner.annotation + " on Ingress " + owner.ingress + " makes every path of the host a regex"
}

// addWWWRedirects gives each server with a location of an Ingress that
// has from-to-www-redirect its other name: www.HOST, or HOST without its
// www., which Lua answers with a redirect to HOST. A name that is a host
// or an alias already is a Problem and left alone, as ingress-nginx skips
// it. When the host's certificate covers the other name, it is served for
// it too.
func (b *builder) addWWWRedirects(m *Model) {
	if len(b.wwwKeys) == 0 {
		return
	}
	taken := make(map[string]bool, m.Servers.Len())
	for s := range m.Servers.All() {
		taken[s.Host] = true
		for _, a := range s.Aliases {
			taken[a] = true
		}
	}
	for s := range m.Servers.All() {
		owner := ""
		for _, loc := range s.Locations {
			if loc.Proxy != nil && loc.Proxy.FromToWWWRedirect {
				owner = loc.Ingress
				break
			}
		}
		if owner == "" {
			continue
		}
		namespace, name, _ := strings.Cut(owner, "/")
		problem := func(reason string) {
			b.problem("Ingress", namespace, name, fmt.Sprintf("annotation %s: %s", b.wwwKeys[owner], reason))
		}
		if strings.HasPrefix(s.Host, "*.") {
			problem(fmt.Sprintf("host %q is a wildcard; no redirect", s.Host))
			continue
		}
		from := "www." + s.Host
		if rest, ok := strings.CutPrefix(s.Host, "www."); ok {
			from = rest
		}
		if reason := validHost(from); reason != "" || !strings.Contains(from, ".") {
			problem(fmt.Sprintf("%q is no host name to redirect from; no redirect", from))
			continue
		}
		if taken[from] {
			problem(fmt.Sprintf("host %q is served by a rule or an alias already; no redirect from it to %q", from, s.Host))
			continue
		}
		taken[from] = true
		s.WWWRedirect = from
		claim, ok := b.tlsHosts[s.Host]
		if _, claimed := b.tlsHosts[from]; !ok || claimed {
			continue
		}
		if cs := b.checked[claim.cert]; cs != nil && cs.leaf != nil && cs.leaf.VerifyHostname(from) == nil {
			b.tlsHosts[from] = claim
			b.certHosts[claim.cert] = append(b.certHosts[claim.cert], from)
		}
	}
}

// sizeOf reads a NginxSize (no g: the buffer directives refuse it).
func sizeOf(size string) (int64, bool) {
	if !NginxSize.MatchString(size) {
		return 0, false
	}
	return SizeBytes(size)
}

// checkTemporalRedirectCode checks temporal-redirect-code.
var checkTemporalRedirectCode = intIn("a redirect code", temporalRedirectLeast, temporalRedirectMost)

// checkSatisfy checks satisfy (spaces around it do not count).
func checkSatisfy(value string) string {
	return oneOf("all", "any")(strings.TrimSpace(value))
}

// checkPositiveSize checks an nginx size above 0 (ParseNginxSize's).
func checkPositiveSize(value string) string {
	_, reason := ParseNginxSize(value, false)
	return reason
}
