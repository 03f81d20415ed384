package render

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/restysync/restysync/agent/internal/ciphers"
	"github.com/restysync/restysync/agent/internal/model"
)

// HTTP are the settings of the http block (and worker_connections) that
// the agent's ConfigMap may change; package configmap fills them from its
// keys. A nil Settings.HTTP renders DefaultHTTP. Every string here reaches
// nginx.conf through Quote or a check of its own in checkHTTP: the
// ConfigMap is user input.
type HTTP struct {
	// MaxWorkerConnections is worker_connections (max-worker-connections).
	// Default 16384.
	MaxWorkerConnections int
	// KeepAlive is keepalive_timeout in seconds (keep-alive); 0 turns
	// client keep-alive off. Default 75.
	KeepAlive int
	// KeepAliveRequests is keepalive_requests (keep-alive-requests).
	// Default 1000.
	KeepAliveRequests int
	// UpstreamKeepaliveConnections is the keepalive of the upstream: idle
	// connections to backends each worker keeps (upstream-keepalive-connections);
	// 0 turns upstream keep-alive off. Default 320.
	UpstreamKeepaliveConnections int
	// UpstreamKeepaliveTimeout is the upstream's keepalive_timeout in
	// seconds (upstream-keepalive-timeout). Default 60.
	UpstreamKeepaliveTimeout int
	// ClientMaxBodySize is client_max_body_size (proxy-body-size): digits
	// with an optional k, m or g; "0" means no limit. Default "1m".
	ClientMaxBodySize string
	// Proxy*Timeout are proxy_ and grpc_ connect, read and send timeouts
	// in seconds (proxy-connect-timeout, proxy-read-timeout,
	// proxy-send-timeout). Defaults 5, 60 and 60.
	ProxyConnectTimeout int
	ProxyReadTimeout    int
	ProxySendTimeout    int
	// ForwardedForHeader is the request header a trusted proxy reports the
	// client's address chain in (forwarded-for-header). Default
	// "X-Forwarded-For".
	ForwardedForHeader string
	// ComputeFullForwardedFor, for a request from a trusted proxy, sends
	// the backend that header's chain with the proxy's address appended;
	// when false, only the client address the proxy reports (the chain's
	// last entry). From any other address the backend always gets nginx's
	// own $remote_addr. Default true (compute-full-forwarded-for).
	ComputeFullForwardedFor bool
	// AccessLog turns the access log on, in LogFormat, to AccessLogPath
	// (enable-access-log, disable-access-log, access-log-path). Default
	// off.
	AccessLog bool
	// AccessLogPath is "/dev/stdout", "/dev/stderr" or a file under logs/
	// in the shared dir ("logs/access.log"). Default "/dev/stdout".
	AccessLogPath string
	// ErrorLogLevel is the level of nginx's error log on stderr, the
	// container's log (error-log-level): one of ErrorLogLevels. Default
	// "notice", as ingress-nginx. The copy in ErrorLogName the agent reads
	// is at "error" whatever this says.
	ErrorLogLevel string
	// LogFormat is the access log's format (log-format-upstream): text and
	// variables of logVariables only, without ' or \. Default
	// DefaultLogFormat.
	LogFormat string
	// LogEscape is how variables are escaped in the access log:
	// "" (nginx's default), "json" (log-format-escape-json) or "none"
	// (log-format-escape-none).
	LogEscape string
	// SkipAccessLogURLs are request URIs (path and query, exactly as
	// sent) the access log leaves out (skip-access-log-urls).
	SkipAccessLogURLs []string
	// SSLProtocols are ssl_protocols (ssl-protocols), each one of
	// TLSv1, TLSv1.1, TLSv1.2, TLSv1.3. Default TLSv1.2 TLSv1.3.
	SSLProtocols []string
	// SSLCiphers is ssl_ciphers in OpenSSL's syntax (ssl-ciphers), only
	// [A-Za-z0-9:+!_-]. Default DefaultSSLCiphers.
	SSLCiphers string
	// Gzip compresses responses of GzipTypes (and text/html, always) of at
	// least GzipMinLength bytes at GzipLevel (use-gzip, gzip-types,
	// gzip-min-length, gzip-level). Defaults off, DefaultGzipTypes, 256, 1.
	Gzip          bool
	GzipLevel     int
	GzipMinLength int
	GzipTypes     []string
	// ProxyBuffering buffers responses from backends (proxy-buffering:
	// "on" or "off"). Default off, as in ingress-nginx: responses stream
	// to the client as the backend sends them.
	ProxyBuffering bool
	// ServerTokens puts nginx's version in the Server header and in error
	// pages (server-tokens). Default off.
	ServerTokens bool
	// CustomHTTPErrors are the status codes (300..599) that nginx answers
	// itself, from backends too (custom-http-errors): with the body of
	// the default backend (Ingress spec.defaultBackend) when there is one,
	// told the code in X-Code, else nginx's own error page. Default none.
	CustomHTTPErrors []int
	// ProxyBufferSize, ProxyBuffersNumber, ProxyBusyBuffersSize and
	// ProxyMaxTempFileSize are the response buffers of every location
	// without buffer annotations (proxy-buffer-size, proxy-buffers-number,
	// proxy-busy-buffers-size, proxy-max-temp-file-size). Default "", 0:
	// nginx's own; when one is set, all four are written, the others at
	// ingress-nginx's defaults (4k, 4, twice the buffer, 1024m).
	ProxyBufferSize      string
	ProxyBuffersNumber   int
	ProxyBusyBuffersSize string
	ProxyMaxTempFileSize string
	// ClientBodyBufferSize is client_body_buffer_size
	// (client-body-buffer-size). Default "": nginx's 8k|16k.
	ClientBodyBufferSize string
	// ProxyCookieDomain and ProxyCookiePath rewrite the backends'
	// Set-Cookie: "FROM TO" or "off" (proxy-cookie-domain,
	// proxy-cookie-path). Default "": off.
	ProxyCookieDomain string
	ProxyCookiePath   string
	// ProxyRedirectFrom and ProxyRedirectTo rewrite the backends' Location
	// (proxy-redirect-from, proxy-redirect-to), as the annotations do.
	// Default "": nginx's default.
	ProxyRedirectFrom string
	ProxyRedirectTo   string
	// LimitRate and LimitRateAfter are limit_rate and limit_rate_after,
	// "Nk" or "0" (limit-rate, limit-rate-after, kilobytes). Default "":
	// none.
	LimitRate      string
	LimitRateAfter string
}

// Defaults of HTTP that are strings.
const (
	// DefaultLogFormat is ingress-nginx's log-format-upstream with its
	// variables turned into restysync's: $restysync_backend is the backend
	// ("namespace/service:port"), $restysync_request_id the X-Request-ID.
	DefaultLogFormat = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time [$restysync_backend] [] $upstream_addr $upstream_response_length $upstream_response_time $upstream_status $restysync_request_id`
	// DefaultSSLCiphers is ingress-nginx's default: forward secrecy, AEAD only.
	DefaultSSLCiphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"
)

// DefaultGzipTypes is ingress-nginx's default gzip-types.
var DefaultGzipTypes = []string{
	"application/atom+xml", "application/javascript", "application/x-javascript", "application/json",
	"application/rss+xml", "application/vnd.ms-fontobject", "application/x-font-ttf",
	"application/x-web-app-manifest+json", "application/xhtml+xml", "application/xml",
	"font/opentype", "image/svg+xml", "image/x-icon", "text/css", "text/javascript",
	"text/plain", "text/x-component",
}

// DefaultHTTP returns the settings nginx.conf has without a ConfigMap.
func DefaultHTTP() HTTP {
	return HTTP{
		MaxWorkerConnections:         16384,
		KeepAlive:                    75,
		KeepAliveRequests:            1000,
		UpstreamKeepaliveConnections: 320,
		UpstreamKeepaliveTimeout:     60,
		ClientMaxBodySize:            "1m",
		ProxyConnectTimeout:          5,
		ProxyReadTimeout:             60,
		ProxySendTimeout:             60,
		ForwardedForHeader:           "X-Forwarded-For",
		ComputeFullForwardedFor:      true,
		AccessLogPath:                "/dev/stdout",
		ErrorLogLevel:                "notice",
		LogFormat:                    DefaultLogFormat,
		SSLProtocols:                 []string{"TLSv1.2", "TLSv1.3"},
		SSLCiphers:                   DefaultSSLCiphers,
		GzipLevel:                    1,
		GzipMinLength:                256,
		GzipTypes:                    slices.Clone(DefaultGzipTypes),
	}
}

// WorkerOpenFiles is worker_rlimit_nofile: twice MaxWorkerConnections.
// worker_connections counts every socket of a worker (clients, backends,
// Lua's cosockets), so the second half is room for the temp files of
// buffered bodies and the logs. nginx raises the workers' soft limit to it,
// which the container's hard limit must allow (else nginx logs an alert
// and the workers keep the limit they had).
func (h HTTP) WorkerOpenFiles() int { return 2 * h.MaxWorkerConnections }

// Bounds of the numbers of HTTP, shared with package configmap.
const (
	MinWorkerConnections = 256
	MaxWorkerConnections = 1 << 20
	MaxKeepAlive         = 3600
	MaxKeepAliveRequests = 10_000_000
	MaxUpstreamKeepalive = 100_000
	MaxConnectTimeout    = 75
	MaxProxyTimeout      = 3600
	MaxGzipMinLength     = 1 << 30
	MaxGzipTypes         = 100
	MaxLogFormat         = 4096
	MaxSkipLogURLs       = 64
)

// LogEscapes are the values of HTTP.LogEscape.
var LogEscapes = []string{"", "json", "none"}

// ErrorLogLevels are nginx's error_log levels, most verbose first
// (HTTP.ErrorLogLevel).
var ErrorLogLevels = []string{"debug", "info", "notice", "warn", "error", "crit", "alert", "emerg"}

// SSLProtocolNames are the ssl_protocols tokens HTTP.SSLProtocols may hold.
var SSLProtocolNames = []string{"TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}

var (
	// BodySize is a client_max_body_size: at most 9 digits, an optional unit.
	BodySize = regexp.MustCompile(`^[0-9]{1,9}[kKmMgG]?$`)
	// HeaderName is an HTTP header name restysync can map to an nginx
	// variable ($http_...).
	HeaderName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
	// MIMEType is a lower-case type/subtype of RFC 6838 characters (no '$').
	MIMEType = regexp.MustCompile(`^[a-z0-9][a-z0-9!#&^_.+-]{0,63}/[a-z0-9][a-z0-9!#&^_.+-]{0,63}$`)
	// SkipLogURL is a request URI skip-access-log-urls may name: a path
	// and query of URI characters, no '$', quote, space or backslash.
	SkipLogURL = regexp.MustCompile(`^/[A-Za-z0-9._~!&()*+,;=:@%/?-]{0,255}$`)
	// AccessLogFile is an access log file under logs/ in the shared dir.
	AccessLogFile = regexp.MustCompile(`^logs/[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)
	// logVariable finds the variables of a log format: $name or ${name}.
	logVariable = regexp.MustCompile(`\$(\{[A-Za-z0-9_]*\}|[A-Za-z0-9_]*)`)
)

// logVariables are the nginx variables a log format may use, besides the
// prefixed families of logVariablePrefixes.
var logVariables = map[string]bool{
	"remote_addr": true, "remote_port": true, "remote_user": true, "time_local": true, "time_iso8601": true,
	"msec": true, "request": true, "request_method": true, "request_uri": true, "uri": true, "args": true,
	"query_string": true, "status": true, "body_bytes_sent": true, "bytes_sent": true, "request_length": true,
	"request_time": true, "host": true, "hostname": true, "server_name": true, "server_addr": true,
	"server_port": true, "server_protocol": true, "scheme": true, "https": true, "connection": true,
	"connection_requests": true, "pipe": true, "request_id": true, "ssl_protocol": true, "ssl_cipher": true,
	"ssl_server_name": true, "upstream_addr": true, "upstream_status": true, "upstream_response_time": true,
	"upstream_response_length": true, "upstream_connect_time": true, "upstream_header_time": true,
	"upstream_bytes_received": true, "upstream_bytes_sent": true, "proxy_add_x_forwarded_for": true,
	"restysync_backend": true, "restysync_request_id": true, "restysync_forwarded_for": true,
	"restysync_forwarded_proto": true, "restysync_forwarded_host": true,
}

// logVariablePrefixes are variable families a log format may use: request
// and response headers, cookies and query arguments.
var logVariablePrefixes = []string{"http_", "sent_http_", "upstream_http_", "cookie_", "arg_"}

// LogVariableAllowed says whether a log format may use $name.
func LogVariableAllowed(name string) bool {
	if logVariables[name] {
		return true
	}
	for _, prefix := range logVariablePrefixes {
		if rest, ok := strings.CutPrefix(name, prefix); ok && rest != "" && strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789_") == "" {
			return true
		}
	}
	return false
}

// CheckLogFormat accepts a log format of printable ASCII without ' or \
// (it is written between single quotes) whose variables are all allowed.
func CheckLogFormat(format string) error {
	if format == "" {
		return errors.New("is empty")
	}
	if len(format) > MaxLogFormat {
		return fmt.Errorf("is %d bytes long, longer than %d", len(format), MaxLogFormat)
	}
	for i := 0; i < len(format); i++ {
		if c := format[i]; c < 0x20 || c > 0x7e || c == '\'' || c == '\\' {
			return fmt.Errorf("contains %q at byte %d; want printable ASCII without ' and \\", c, i)
		}
	}
	for _, m := range logVariable.FindAllStringSubmatch(format, -1) {
		name := strings.TrimSuffix(strings.TrimPrefix(m[1], "{"), "}")
		if name == "" {
			return errors.New(`has a "$" that names no variable`)
		}
		if !LogVariableAllowed(name) {
			return fmt.Errorf("uses $%s, which is not a variable restysync allows in a log format", name)
		}
	}
	return nil
}

// quoteLogFormat writes a checked log format between single quotes.
func quoteLogFormat(format string) (string, error) {
	if err := CheckLogFormat(format); err != nil {
		return "", fmt.Errorf("log format: %w", err)
	}
	return "'" + format + "'", nil
}

// httpView is what the template prints of HTTP.
type httpView struct {
	HTTP
	// ForwardedForVariable is the nginx variable of ForwardedForHeader,
	// without "$" ("http_x_forwarded_for").
	ForwardedForVariable string
	// ClassicForwardedFor is the X-Forwarded-For chain with the full
	// chain kept: nginx's own $proxy_add_x_forwarded_for does it.
	ClassicForwardedFor bool
	// SSLProtocolList is SSLProtocols joined by spaces; GzipTypeList the
	// same for GzipTypes.
	SSLProtocolList string
	// Keys are the ConfigMap's buffers, cookie and Location rewrites and
	// rate limits (proxykeys.go).
	Keys proxyKeysView
}

func newHTTPView(h HTTP) httpView {
	keys, _ := newProxyKeysView(h.proxyKeys()) // checkHTTP has checked them
	return httpView{
		HTTP:                 h,
		ForwardedForVariable: "http_" + strings.ReplaceAll(strings.ToLower(h.ForwardedForHeader), "-", "_"),
		ClassicForwardedFor:  h.ComputeFullForwardedFor && strings.EqualFold(h.ForwardedForHeader, "X-Forwarded-For"),
		SSLProtocolList:      strings.Join(h.SSLProtocols, " "),
		Keys:                 keys,
	}
}

// checkHTTP is the render stage's own guard over what the ConfigMap set.
func checkHTTP(h HTTP) error {
	for _, n := range []struct {
		name      string
		v, lo, hi int
	}{
		{"max worker connections", h.MaxWorkerConnections, MinWorkerConnections, MaxWorkerConnections},
		{"keep-alive", h.KeepAlive, 0, MaxKeepAlive},
		{"keep-alive requests", h.KeepAliveRequests, 1, MaxKeepAliveRequests},
		{"upstream keepalive connections", h.UpstreamKeepaliveConnections, 0, MaxUpstreamKeepalive},
		{"upstream keepalive timeout", h.UpstreamKeepaliveTimeout, 1, MaxKeepAlive},
		{"proxy connect timeout", h.ProxyConnectTimeout, 1, MaxConnectTimeout},
		{"proxy read timeout", h.ProxyReadTimeout, 1, MaxProxyTimeout},
		{"proxy send timeout", h.ProxySendTimeout, 1, MaxProxyTimeout},
		{"gzip level", h.GzipLevel, 1, 9},
		{"gzip min length", h.GzipMinLength, 0, MaxGzipMinLength},
	} {
		if n.v < n.lo || n.v > n.hi {
			return fmt.Errorf("%s %d: must be %d..%d", n.name, n.v, n.lo, n.hi)
		}
	}
	if !BodySize.MatchString(h.ClientMaxBodySize) {
		return fmt.Errorf("client max body size %q: want digits and an optional k, m or g", h.ClientMaxBodySize)
	}
	if !HeaderName.MatchString(h.ForwardedForHeader) {
		return fmt.Errorf("forwarded-for header %q: want a header name of letters, digits and '-'", h.ForwardedForHeader)
	}
	if h.AccessLogPath != "/dev/stdout" && h.AccessLogPath != "/dev/stderr" && !AccessLogFile.MatchString(h.AccessLogPath) {
		return fmt.Errorf("access log path %q: want /dev/stdout, /dev/stderr or logs/NAME", h.AccessLogPath)
	}
	if !slices.Contains(ErrorLogLevels, h.ErrorLogLevel) {
		return fmt.Errorf("error log level %q: want one of %s", h.ErrorLogLevel, strings.Join(ErrorLogLevels, ", "))
	}
	if err := CheckLogFormat(h.LogFormat); err != nil {
		return fmt.Errorf("log format: %w", err)
	}
	if !slices.Contains(LogEscapes, h.LogEscape) {
		return fmt.Errorf("log escape %q: want json, none or empty", h.LogEscape)
	}
	if len(h.SkipAccessLogURLs) > MaxSkipLogURLs {
		return fmt.Errorf("skip access log URLs: %d, more than %d", len(h.SkipAccessLogURLs), MaxSkipLogURLs)
	}
	for _, u := range h.SkipAccessLogURLs {
		if !SkipLogURL.MatchString(u) {
			return fmt.Errorf("skip access log URL %q: want a path (and query) of URI characters", u)
		}
	}
	if len(h.SSLProtocols) == 0 {
		return errors.New("SSL protocols: none")
	}
	for _, p := range h.SSLProtocols {
		if !slices.Contains(SSLProtocolNames, p) {
			return fmt.Errorf("SSL protocol %q: want one of %s", p, strings.Join(SSLProtocolNames, ", "))
		}
	}
	if err := ciphers.Check(h.SSLCiphers); err != nil {
		return fmt.Errorf("SSL ciphers %q: %w", h.SSLCiphers, err)
	}
	if len(h.GzipTypes) > MaxGzipTypes {
		return fmt.Errorf("gzip types: %d, more than %d", len(h.GzipTypes), MaxGzipTypes)
	}
	for _, t := range h.GzipTypes {
		if t != "*" && !MIMEType.MatchString(t) {
			return fmt.Errorf("gzip type %q: want a lower-case MIME type or *", t)
		}
	}
	for _, code := range h.CustomHTTPErrors {
		if !model.ErrorPageCode(code) {
			return fmt.Errorf("custom HTTP error %d: must be 300..599 but 499", code)
		}
	}
	if _, err := newProxyKeysView(h.proxyKeys()); err != nil {
		return err
	}
	return nil
}

// errorPageView is one custom HTTP error: its named location sends the
// request to the error backend, or answers with nginx's own page.
type errorPageView struct {
	Code int
	// Location is the named location, "@restysync_error_404".
	Location string
}

func newErrorPages(codes []int) []errorPageView {
	pages := make([]errorPageView, 0, len(codes))
	for _, code := range codes {
		pages = append(pages, errorPageView{Code: code, Location: "@restysync_error_" + strconv.Itoa(code)})
	}
	return pages
}

// errorBackend is the backend of the default server's "/": the default
// backend, which answers custom HTTP errors; "" when there is none.
func errorBackend(def model.Server) string {
	for _, loc := range def.Locations {
		if loc.Path == "/" && loc.PathType == model.PathPrefix {
			return loc.Backend
		}
	}
	return ""
}

// trustedNetworks masks the trusted proxies for geo. Both /0 networks
// (use-forwarded-headers without a list: everyone) become geo's default,
// which nginx would otherwise warn they duplicate.
func trustedNetworks(proxies []netip.Prefix) (networks []string, all bool) {
	var v4, v6 bool
	for _, p := range proxies {
		if p.Bits() == 0 {
			v4, v6 = v4 || p.Addr().Is4(), v6 || p.Addr().Is6()
		}
	}
	all = v4 && v6
	for _, p := range proxies {
		if all && p.Bits() == 0 {
			continue
		}
		networks = append(networks, p.Masked().String())
	}
	return networks, all
}
