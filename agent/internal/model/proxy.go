package model

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	keyRewriteTarget       = "rewrite-target"
	KeyProxyBodySize       = "proxy-body-size"
	KeyProxyConnectTimeout = "proxy-connect-timeout"
	KeyProxySendTimeout    = "proxy-send-timeout"
	KeyProxyReadTimeout    = "proxy-read-timeout"
	KeyProxyBuffering      = "proxy-buffering"
	KeyProxyBufferSize     = "proxy-buffer-size"
	keyUpstreamVhost       = "upstream-vhost"
	keyXForwardedPrefix    = "x-forwarded-prefix"
	KeyEnableAccessLog     = "enable-access-log"
	// ingress-nginx's ConfigMap has keys of these names too
	// (configmap.notSupportedYet).
	KeyProxyRequestBuffering    = "proxy-request-buffering"
	KeyProxyNextUpstream        = "proxy-next-upstream"
	KeyProxyNextUpstreamTimeout = "proxy-next-upstream-timeout"
)

// Proxy and routing annotations, ingress-nginx compatible (issue 8): how a
// location rewrites, redirects and proxies a request. They shape the nginx
// location, so they are structure: changing one is a reload. Each is read
// once per Ingress by readProxy; a bad value is a Problem on the Ingress and
// leaves that one setting at its default, the rest of the Ingress is served.

// ProxySettings are the proxy and routing settings of one Location. The
// zero value is every default: nothing is rendered for it. It is
// comparable on purpose: the plan compares Locations with ==.
type ProxySettings struct {
	// RewriteTarget replaces the request URI before it is proxied
	// (annotation rewrite-target; default none). It may name the capture
	// groups of the path's regex as $1 to $9. It implies use-regex.
	RewriteTarget string
	// AppRoot is where a request for "/" is redirected with a 302
	// (annotation app-root; default none).
	AppRoot string
	// RedirectURL answers every request with RedirectCode and this
	// Location (annotations temporal-redirect, 302, which wins over
	// permanent-redirect, permanent-redirect-code or 301; default none).
	RedirectURL  string
	RedirectCode int

	// BodySize is the largest request body, an nginx size ("8m"; "0" is
	// no limit), larger ones answer 413 (annotation proxy-body-size;
	// default "": nginx's and ingress-nginx's 1m).
	BodySize string
	// ConnectTimeout, SendTimeout and ReadTimeout are seconds (annotations
	// proxy-connect-timeout, proxy-send-timeout, proxy-read-timeout;
	// default 0: 5 s, 60 s, 60 s). They apply to gRPC backends too.
	ConnectTimeout int
	SendTimeout    int
	ReadTimeout    int
	// Buffering and RequestBuffering are "on", "off" or "" (annotations
	// proxy-buffering, proxy-request-buffering; default "": nginx's "on").
	Buffering        string
	RequestBuffering string
	// BufferSize is the buffer for the response head, an nginx size
	// (annotation proxy-buffer-size; default "": 4k).
	BufferSize string
	// NextUpstream are the failures after which a request is tried on the
	// next endpoint, tokens of nginx's proxy_next_upstream in a fixed order
	// (annotation proxy-next-upstream; default "": "error timeout"). A
	// request already sent is retried only when it is idempotent, unless
	// NextUpstream holds non_idempotent. How many endpoints one request
	// tries is Policy.Tries (proxy-next-upstream-tries).
	NextUpstream string
	// NextUpstreamTimeout bounds, in seconds, the time in which a request
	// may be passed to the next endpoint (annotation
	// proxy-next-upstream-timeout; default 0: no bound).
	NextUpstreamTimeout int
	// HTTPVersion is "1.0", "1.1" or "" (annotation proxy-http-version;
	// default "": 1.1).
	HTTPVersion string
	// UpstreamVhost is the Host header sent to the backend (annotation
	// upstream-vhost; default "": the client's host).
	UpstreamVhost string
	// XForwardedPrefix is sent to the backend as X-Forwarded-Prefix
	// (annotation x-forwarded-prefix; default "": not sent).
	XForwardedPrefix string
	// SSL is TLS to an HTTPS or GRPCS backend (proxy-ssl-*; proxyssl.go).
	SSL ProxySSL
	// AccessLogOff turns the access log off for the location (annotation
	// enable-access-log "false"; default: the global setting).
	AccessLogOff bool
	// FastCGI are the fastcgi_index and fastcgi_param of a location whose
	// Protocol is ProtocolFCGI (fastcgi-index, fastcgi-params-configmap;
	// fastcgi.go).
	FastCGI FastCGI
	// Mirror sends a copy of each request to another URL, whose answer is
	// ignored (mirror-target, mirror-host, mirror-request-body; mirror.go).
	Mirror Mirror
	// ResponseHeaders are added to every response of the location
	// (custom-headers, a ConfigMap; responseheaders.go): "Name: value"
	// lines sorted by name, a "$" written "${restysync_dollar}".
	ResponseHeaders string

	// The keys below are read in proxykeys.go.

	// BuffersNumber, BusyBuffersSize and MaxTempFileSize go with
	// BufferSize (annotations proxy-buffers-number, proxy-busy-buffers-size,
	// proxy-max-temp-file-size; defaults 0, "", "": 4 buffers, twice the
	// buffer, 1024m). When one of the four is set, the location writes all
	// four (Buffers), checked together as nginx checks them.
	BuffersNumber   int
	BusyBuffersSize string
	MaxTempFileSize string
	// ClientBodyBufferSize is client_body_buffer_size, an nginx size
	// (annotation client-body-buffer-size; default "": the ConfigMap's,
	// else nginx's 8k|16k).
	ClientBodyBufferSize string
	// CookieDomain and CookiePath rewrite the Domain and Path of the
	// backend's Set-Cookie: "FROM TO", or "off" (annotations
	// proxy-cookie-domain, proxy-cookie-path; default "": the ConfigMap's,
	// else off).
	CookieDomain string
	CookiePath   string
	// RedirectFrom and RedirectTo rewrite the backend's Location and
	// Refresh headers (proxy_redirect; annotations proxy-redirect-from,
	// proxy-redirect-to): RedirectFrom "off", or both set, each with its
	// variables written "${name}" (redirectVariables). Default "".
	RedirectFrom string
	RedirectTo   string
	// LimitRate and LimitRateAfter are limit_rate and limit_rate_after,
	// "Nk" (kilobytes, as ingress-nginx writes them) or "0" (annotations
	// limit-rate, limit-rate-after; default "": the ConfigMap's, else none).
	LimitRate      string
	LimitRateAfter string
	// SatisfyAny lets a request in when any of the source ranges, basic
	// auth or external auth lets it in, instead of all of them (annotation
	// satisfy "any"; default all).
	SatisfyAny bool
	// PreserveTrailingSlash keeps a trailing "/" of the URI in the HTTPS
	// redirect's Location, which is dropped by default, as ingress-nginx
	// does (annotation preserve-trailing-slash). Lua applies it: it is not
	// part of a profile.
	PreserveTrailingSlash bool
	// FromToWWWRedirect makes the server of the location answer for
	// www.HOST (or HOST without www.) too, with a redirect to HOST
	// (annotation from-to-www-redirect; Server.WWWRedirect). It is not
	// part of a profile.
	FromToWWWRedirect bool
}

// Redirect codes: a permanent-redirect-code outside [300, 308] is a
// Problem and 301 is used, as ingress-nginx does.
const (
	DefaultPermanentRedirectCode = 301
	TemporalRedirectCode         = 302
)

// nextUpstreamTokens are the values proxy-next-upstream takes, in the order
// NextUpstream lists them: those of nginx's proxy_next_upstream that
// ingress-nginx allows.
var nextUpstreamTokens = []string{
	"error", "timeout", "invalid_header",
	"http_500", "http_502", "http_503", "http_504", "http_403", "http_404", "http_429",
	"non_idempotent", "off",
}

// nginxSize is an nginx size: a number of bytes, or of k, m or g.
var nginxSize = regexp.MustCompile(`^[0-9]{1,9}[kKmMgG]?$`)

// uriPath is an absolute URI path of bounded length in URL characters:
// no space, quote, backslash, "$", "{", "}" or "#".
var uriPath = regexp.MustCompile(`^/[A-Za-z0-9._~!&'()*+,;=:@%/-]{0,255}$`)

// rewriteTarget is a URI path, with an optional query, that may name
// capture groups $1 to $9 and nothing else with "$".
var rewriteTarget = regexp.MustCompile(`^/(?:[A-Za-z0-9._~!&'()*+,;=:@%/?-]|\$[1-9]){0,255}$`)

// hostPort is a DNS name with an optional port, as a Host header holds it.
var hostPort = regexp.MustCompile(`^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?)(:[0-9]{1,5})?$`)

// Bounds of the timeouts, in seconds.
const (
	maxProxyTimeout        = 24 * 3600
	maxNextUpstreamTimeout = 3600
	maxRedirectURL         = 2048
	maxServerAliases       = 32
)

// serverAliasKey is the server-alias annotation, less its prefix.
const serverAliasKey = "server-alias"

// aliasClaim is one Ingress's server-alias: extra names for the servers
// of hosts. Claims are kept oldest Ingress first.
type aliasClaim struct {
	ing     *networkingv1.Ingress
	hosts   []string
	aliases []string
}

// readProxy reads the proxy and routing annotations of ing but
// server-alias and returns its ProxySettings.
func (b *builder) readProxy(ing *networkingv1.Ingress) ProxySettings {
	var p ProxySettings
	b.readRewrite(ing, &p)
	b.readRedirects(ing, &p)
	b.readProxyLimits(ing, &p)
	b.readNextUpstream(ing, &p)
	b.readUpstreamHeaders(ing, &p)
	b.readProxySSL(ing, &p)
	b.readMirror(ing, &p)
	b.readProxyKeys(ing, &p)
	p.AccessLogOff = !b.boolAnnotation(ing, KeyEnableAccessLog, true)
	return p
}

// rewriteImpliesRegex says whether ing has a rewrite-target, which makes
// its ImplementationSpecific paths regular expressions, as use-regex does.
func rewriteImpliesRegex(ing *networkingv1.Ingress) bool {
	value, _, ok := lookupAnnotation(ing, keyRewriteTarget)
	return ok && value != ""
}

// readRewrite reads rewrite-target and app-root.
func (b *builder) readRewrite(ing *networkingv1.Ingress, p *ProxySettings) {
	if value, key, ok := lookupAnnotation(ing, keyRewriteTarget); ok && value != "" {
		if reason := checkRewriteTarget(value); reason == "" {
			p.RewriteTarget = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; no rewrite")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "app-root"); ok {
		if reason := checkAppRoot(value); reason == "" {
			p.AppRoot = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; no redirect")
		}
	}
}

// readRedirects reads temporal-redirect, permanent-redirect and
// permanent-redirect-code.
func (b *builder) readRedirects(ing *networkingv1.Ingress, p *ProxySettings) {
	code := DefaultPermanentRedirectCode
	if value, key, ok := lookupAnnotation(ing, "permanent-redirect-code"); ok {
		if reason := checkPermanentRedirectCode(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; 301 is used")
		} else {
			code, _ = strconv.Atoi(value)
		}
	}
	if value, key, ok := lookupAnnotation(ing, "permanent-redirect"); ok {
		if reason := checkRedirectURL(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; no redirect")
		} else {
			p.RedirectURL, p.RedirectCode = value, code
		}
	}
	if value, key, ok := lookupAnnotation(ing, "temporal-redirect"); ok {
		if reason := checkRedirectURL(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; no temporal redirect")
		} else {
			p.RedirectURL, p.RedirectCode = value, b.temporalRedirectCode(ing)
		}
	}
}

// checkRedirectURL returns why value cannot be the Location of a
// redirect, or "": it must be an absolute http or https URL with a host,
// printable, without "$" (nginx would expand it).
func checkRedirectURL(value string) string {
	if len(value) > maxRedirectURL {
		return fmt.Sprintf("is longer than %d bytes", maxRedirectURL)
	}
	for _, r := range value {
		if r <= ' ' || r >= 0x7f || r == '$' || r == '"' || r == '\\' {
			return fmt.Sprintf("contains %q; want a URL in printable ASCII without \"$\"", r)
		}
	}
	u, err := url.Parse(value)
	if err != nil {
		return "is not a URL"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "is not an http or https URL"
	}
	if u.Host == "" || u.User != nil {
		return "has no host, or has user information"
	}
	return ""
}

// The checks of the proxy's keys (the table's Check column).
var (
	checkOnOff                 = oneOf("on", "off")
	checkHTTPVersion           = oneOf("1.0", "1.1")
	checkRewriteTarget         = matching(rewriteTarget, `is not a path starting with "/" in URL characters, with "$" only before a capture group number 1 to 9`)
	checkXForwardedPrefix      = matching(uriPath, `is not a path starting with "/" in URL characters`)
	checkPermanentRedirectCode = intIn("a redirect code", 300, 308)
)

// checkSize checks an nginx size; zero says whether "0" is allowed.
func checkSize(value string, zero bool) string {
	if !nginxSize.MatchString(value) || (!zero && strings.TrimLeft(strings.TrimRight(value, "kKmMgG"), "0") == "") {
		return `is not an nginx size such as "512k" or "8m" (digits, then k, m or g)`
	}
	return ""
}

// checkAppRoot checks app-root: a path other than "/".
func checkAppRoot(value string) string {
	if uriPath.MatchString(value) && value != "/" {
		return ""
	}
	return `is not a path other than "/" (starting with "/", URL characters only)`
}

// readProxyLimits reads the sizes, timeouts, buffering and HTTP version.
func (b *builder) readProxyLimits(ing *networkingv1.Ingress, p *ProxySettings) {
	p.BodySize = b.sizeAnnotation(ing, KeyProxyBodySize, true)
	p.BufferSize = b.bufferSizeAnnotation(ing, KeyProxyBufferSize)
	p.ConnectTimeout = b.intAnnotation(ing, KeyProxyConnectTimeout, 0, 1, maxProxyTimeout)
	p.SendTimeout = b.intAnnotation(ing, KeyProxySendTimeout, 0, 1, maxProxyTimeout)
	p.ReadTimeout = b.intAnnotation(ing, KeyProxyReadTimeout, 0, 1, maxProxyTimeout)
	p.Buffering = b.onOffAnnotation(ing, KeyProxyBuffering)
	p.RequestBuffering = b.onOffAnnotation(ing, KeyProxyRequestBuffering)
	if value, key, ok := lookupAnnotation(ing, "proxy-http-version"); ok {
		if reason := checkHTTPVersion(value); reason == "" {
			p.HTTPVersion = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; 1.1 is used")
		}
	}
}

// sizeAnnotation reads an nginx size; zero says whether "0" is allowed.
func (b *builder) sizeAnnotation(ing *networkingv1.Ingress, name string, zero bool) string {
	value, key, ok := lookupAnnotation(ing, name)
	if !ok {
		return ""
	}
	if reason := checkSize(value, zero); reason != "" {
		b.annotationProblem(ing, key, value, reason+"; the default is used")
		return ""
	}
	return value
}

// onOffAnnotation reads "on" or "off" ("" when absent or bad).
func (b *builder) onOffAnnotation(ing *networkingv1.Ingress, name string) string {
	value, key, ok := lookupAnnotation(ing, name)
	if !ok {
		return ""
	}
	if reason := checkOnOff(value); reason != "" {
		b.annotationProblem(ing, key, value, reason+"; the default is used")
		return ""
	}
	return value
}

// readNextUpstream reads proxy-next-upstream and proxy-next-upstream-timeout.
func (b *builder) readNextUpstream(ing *networkingv1.Ingress, p *ProxySettings) {
	p.NextUpstreamTimeout = b.intAnnotation(ing, KeyProxyNextUpstreamTimeout, 0, 0, maxNextUpstreamTimeout)
	value, key, ok := lookupAnnotation(ing, KeyProxyNextUpstream)
	if !ok {
		return
	}
	tokens, reason := parseNextUpstream(value)
	if reason != "" {
		b.annotationProblem(ing, key, value, reason+`; "error timeout" is used`)
		return
	}
	p.NextUpstream = tokens
}

// parseNextUpstream checks a proxy-next-upstream value and returns its
// tokens without duplicates, in the order of nextUpstreamTokens.
func parseNextUpstream(value string) (string, string) {
	fields := strings.Fields(value)
	if len(fields) == 0 {
		return "", "is empty"
	}
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if !slices.Contains(nextUpstreamTokens, f) {
			return "", fmt.Sprintf("%q is not one of %s", clip(f), strings.Join(nextUpstreamTokens, ", "))
		}
		seen[f] = true
	}
	if seen["off"] && len(seen) > 1 {
		return "", `"off" must stand alone`
	}
	out := make([]string, 0, len(seen))
	for _, t := range nextUpstreamTokens {
		if seen[t] {
			out = append(out, t)
		}
	}
	return strings.Join(out, " "), ""
}

// readUpstreamHeaders reads upstream-vhost and x-forwarded-prefix.
func (b *builder) readUpstreamHeaders(ing *networkingv1.Ingress, p *ProxySettings) {
	if value, key, ok := lookupAnnotation(ing, keyUpstreamVhost); ok {
		if vhost, reason := parseUpstreamVhost(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; the client's host is sent")
		} else {
			p.UpstreamVhost = vhost
		}
	}
	if value, key, ok := lookupAnnotation(ing, keyXForwardedPrefix); ok {
		if reason := checkXForwardedPrefix(value); reason == "" {
			p.XForwardedPrefix = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; no X-Forwarded-Prefix")
		}
	}
}

// checkHostPort returns why value is not a lower-case DNS name with an
// optional port, or "".
func checkHostPort(value string) string {
	m := hostPort.FindStringSubmatch(value)
	if m == nil {
		return "is not a lower-case host name with an optional :port"
	}
	if len(dnsNameErrors(m[1])) > 0 {
		return "is not a valid DNS name"
	}
	if m[3] != "" {
		if port, _ := strconv.Atoi(m[3][1:]); port < 1 || port > 65535 {
			return "has a port outside 1..65535"
		}
	}
	return ""
}

// readServerAlias reads server-alias: a comma-separated list of extra host
// names for the servers of ing's hosts. Invalid names are Problems and left out.
func (b *builder) readServerAlias(ing *networkingv1.Ingress) []string {
	value, key, ok := lookupAnnotation(ing, serverAliasKey)
	if !ok {
		return nil
	}
	var aliases []string
	for _, name := range strings.Split(value, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if reason := checkAlias(name); reason != "" {
			b.annotationProblem(ing, key, name, reason+"; left out")
			continue
		}
		if len(aliases) == maxServerAliases {
			b.annotationProblem(ing, key, value, fmt.Sprintf("has more than %d names; the rest are left out", maxServerAliases))
			break
		}
		if !slices.Contains(aliases, name) {
			aliases = append(aliases, name)
		}
	}
	return aliases
}

// recordProxy reads the proxy settings and the server-alias of ing (id
// "namespace/name") once per Build, for finishLocation and
// addServerAliases. Ingresses come oldest first.
func (b *builder) recordProxy(ing *networkingv1.Ingress, id string) {
	settings := b.readProxy(ing)
	if settings != (ProxySettings{}) {
		if b.proxySettings == nil {
			b.proxySettings = make(map[string]ProxySettings)
		}
		b.proxySettings[id] = settings
	}
	aliases := b.readServerAlias(ing)
	if len(aliases) == 0 {
		return
	}
	var hosts []string
	for _, rule := range ing.Spec.Rules {
		if rule.Host != "" && !strings.HasPrefix(rule.Host, "*.") && validHost(rule.Host) == "" && !slices.Contains(hosts, rule.Host) {
			hosts = append(hosts, rule.Host)
		}
	}
	if len(hosts) == 0 {
		_, key, _ := lookupAnnotation(ing, serverAliasKey)
		b.annotationProblem(ing, key, strings.Join(aliases, ","), "the Ingress has no rule with an exact host to add them to; ignored")
		return
	}
	b.aliasClaims = append(b.aliasClaims, aliasClaim{ing: ing, hosts: hosts, aliases: aliases})
}

// addServerAliases gives each server the aliases the Ingresses of its host
// ask for. An alias that is a host of its own, or that an older Ingress
// gave to another server, is a Problem and left out: a host always wins
// over an alias, and the oldest Ingress wins a conflict.
func (b *builder) addServerAliases(m *Model) {
	if len(b.aliasClaims) == 0 {
		return
	}
	index := make(map[string]*Server, m.Servers.Len())
	for s := range m.Servers.All() {
		index[s.Host] = s
	}
	owner := make(map[string]string) // alias → host it was given to
	for _, c := range b.aliasClaims {
		_, key, _ := lookupAnnotation(c.ing, serverAliasKey)
		for _, host := range c.hosts {
			srv, ok := index[host]
			if !ok {
				continue // the host serves nothing
			}
			for _, alias := range c.aliases {
				if _, isHost := b.servers[alias]; isHost {
					b.annotationProblem(c.ing, key, alias, "is the host of a rule; the rule wins, alias left out")
					continue
				}
				if other, taken := owner[alias]; taken {
					if other != host {
						b.annotationProblem(c.ing, key, alias, fmt.Sprintf("is already an alias of host %q; left out", other))
					}
					continue
				}
				owner[alias] = host
				srv.Aliases = append(srv.Aliases, alias)
			}
		}
	}
	for srv := range m.Servers.All() {
		slices.Sort(srv.Aliases)
	}
}

// checkServerAliases checks server-alias: the reason of its first bad
// name (readServerAlias reports each and leaves it out).
func checkServerAliases(value string) string {
	for _, name := range strings.Split(value, ",") {
		if name = strings.TrimSpace(name); name != "" {
			if reason := checkAlias(name); reason != "" {
				return reason
			}
		}
	}
	return ""
}

// checkAlias checks one name of server-alias: an exact host name.
func checkAlias(name string) string {
	if strings.HasPrefix(name, "*.") {
		return "is a wildcard; an alias must be an exact host name"
	}
	return validHost(name)
}
