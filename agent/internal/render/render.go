// Package render is the render stage of the pipeline (source → model → render → plan → apply):
// it turns the model into nginx.conf bytes and the routes Lua serves.
//
// Render fills templates/nginx.conf.tmpl with typed view structs. The
// template holds no logic that can fail silently; every user-supplied
// string reaches nginx.conf through Quote (or serverName, for the regex
// that an Ingress wildcard host needs). The hash of the bytes is embedded in
// them, in init_by_lua, so that the Lua status API reports which config the
// workers run: a reload is confirmed by its hash, not by the exit code of
// kill.
package render

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/templates"
)

// Names of the files nginx uses in the shared dir. nginx runs with
// -p SharedDir -c ConfigName.
const (
	ConfigName = "nginx.conf"
	PIDName    = "nginx.pid"
	// SocketName is the unix socket of the Lua config API.
	SocketName = "restysync.sock"
	// ErrorLogName is nginx's error log in the shared dir, at level error
	// only: where the agent reads why nginx refused a reload (apply). The
	// log at HTTP.ErrorLogLevel goes to nginx's stderr.
	ErrorLogName = "logs/error.log"
)

// Settings are the parts of nginx.conf that come from the agent's flags
// rather than from Kubernetes.
type Settings struct {
	// SharedDir is the absolute path of the folder nginx and the agent share;
	// nginx runs with -p SharedDir. It holds nginx.conf, nginx.pid, the API
	// socket, lua/, logs/ and tmp/ (the last two must exist before nginx starts).
	SharedDir string
	// HTTPPort is the port of the HTTP servers. Required.
	HTTPPort int
	// HTTPSPort is the port every server also listens on with TLS (and
	// HTTP/2). Required.
	HTTPSPort int
	// StatusPort is the port of nginx's status server, whose GET /healthz
	// answers 200 while nginx serves: the nginx container's probes. 0 (the
	// default) renders none.
	StatusPort int
	// ListenAddress is the IP address the HTTP servers listen on; "" (the
	// default) means every IPv4 address.
	ListenAddress string
	// LoadModules are paths of dynamic modules, emitted as load_module lines
	// in this order (ndk before lua for Debian's nginx), but for those
	// Nginx has built in (Nginx.LoadsBuiltIn). Default none.
	LoadModules []string
	// Nginx is the nginx rendered for (nginx.go): the zero value, not
	// detected, renders forms every version takes.
	Nginx Nginx
	// WorkerProcesses is "auto" (the default, when empty) or a number.
	WorkerProcesses string
	// LuaDictMB is the size of Lua's shared dict in MB, where the config
	// API keeps every backend, route and certificate (0: DefaultLuaDictMB).
	// nginx keeps a shared dict over a reload only at the same size: a
	// reload to another size starts it empty, as a cold start (the saved
	// state, then the agent's pushes), so it is a flag, not sized from the
	// model.
	LuaDictMB int
	// HTTPSRedirectPort is the port in the Location of the HTTP → HTTPS
	// redirect (model.Location.SSLRedirect): the port clients reach nginx's
	// HTTPS port on, when a Service maps another one to it. 0 means HTTPSPort;
	// 443 is left out of the URL.
	HTTPSRedirectPort int
	// HSTS adds Strict-Transport-Security to every response over HTTPS,
	// with max-age HSTSMaxAge (seconds) and the includeSubDomains and
	// preload directives when set. Off in the zero Settings.
	HSTS                  bool
	HSTSMaxAge            int
	HSTSIncludeSubdomains bool
	HSTSPreload           bool
	// TrustedProxies are the networks whose X-Forwarded-For, -Proto, -Host
	// and -Port nginx passes on (and, for -Proto, believes when it decides
	// on the HTTPS redirect and HSTS). From any other address they are
	// replaced by nginx's own values. Default none.
	TrustedProxies []netip.Prefix
	// HTTP are the http-block settings the agent's ConfigMap may change
	// (http.go); nil renders DefaultHTTP().
	HTTP *HTTP
	// Resolvers are the DNS servers (IP addresses, with an optional
	// port) nginx asks for the names in auth-url; none: an auth-url must
	// name its host by address.
	Resolvers []string
	// SSLPassthrough puts nginx's stream module on the HTTPS port
	// (--enable-ssl-passthrough): it reads the name each TLS client asks
	// for (SNI) and passes the connections for model.Stream.Passthrough's
	// hosts to their backends untouched, and every other one to the HTTPS
	// servers, which then listen on a unix socket in SharedDir and learn
	// the client's address from the PROXY protocol (stream.go).
	SSLPassthrough bool
	// ModSecurity are the settings of the ModSecurity module: whether it
	// is built in, its rules files and rule engine (modsecurity.go).
	ModSecurity ModSecurity
	// Limits are the platform's maxima for Ingresses (flags
	// --max-proxy-body-size, --max-client-body-buffer-size,
	// --max-regex-paths-per-host; ConfigMap keys of the same names):
	// render does not read them, the model does (model.Snapshot.Limits).
	Limits model.Limits
	// AllowXAccelRedirect honours X-Accel-Redirect in backends' answers
	// (--allow-x-accel-redirect); off, nginx ignores it like the other
	// X-Accel-* headers. Either way an internal location answers 404 to a
	// request it was not made for.
	AllowXAccelRedirect bool
	// RequestMetrics turns the request metrics per Ingress on
	// (requestmetrics.go); nil leaves them off, and nginx records nothing.
	RequestMetrics *RequestMetrics
}

// ignoredHeaders are the headers of upstream answers nginx ignores
// (proxy_ignore_headers and its FastCGI, gRPC, uwsgi and SCGI twins; the
// gRPC one is missing from nginx's docs, but gRPC backends do send nginx
// to X-Accel-Redirect's location without it): a backend
// must not steer nginx. X-Accel-Redirect is last, as allowXAccel drops it.
var ignoredHeaders = []string{"X-Accel-Expires", "X-Accel-Limit-Rate", "X-Accel-Buffering", "X-Accel-Charset", "X-Accel-Redirect"}

// ignoreHeaders returns the arguments of the *_ignore_headers directives.
func ignoreHeaders(allowXAccelRedirect bool) []string {
	if allowXAccelRedirect {
		return ignoredHeaders[:len(ignoredHeaders)-1]
	}
	return ignoredHeaders
}

// resolvers returns the resolver directive's arguments, IPv6 addresses
// in brackets; checkSettings has checked each.
func resolvers(list []string) string {
	var out []string
	for _, r := range list {
		if ap, err := netip.ParseAddrPort(r); err == nil {
			out = append(out, ap.String())
		} else if a, err := netip.ParseAddr(r); err == nil {
			if a.Is6() {
				out = append(out, "["+a.String()+"]")
			} else {
				out = append(out, a.String())
			}
		}
	}
	return strings.Join(out, " ")
}

// Config is a rendered nginx.conf.
type Config struct {
	Bytes []byte
	// Hash is the hex SHA-256 of Bytes with the hash itself left out; it is
	// embedded in Bytes and reported back by the Lua status API.
	Hash string
	// Profiles are the shared location profiles in it, sorted by name.
	Profiles []Profile
	// Files are the files under the shared dir its profiles name, sorted:
	// a profile kept from an earlier config may name a file of a Secret
	// that changed since, which must stay until that profile goes.
	Files []string
	// BackendTLS are the names of the Gateway servers' backend TLS
	// locations (gateway.go), sorted: a route whose share names one nginx
	// does not run yet waits for the reload that brings it.
	BackendTLS []string
	// view is what the template printed, kept so that Changes can say
	// what differs between two configs without diffing their text.
	view *confView
}

// hashPlaceholder stands in for the hash while the bytes are hashed. It
// holds '$', which Quote rejects, so no user string can contain it.
const hashPlaceholder = "$restysync_config_hash$"

// maxHSTSMaxAge bounds HSTS max-age: ten years, well past what preload
// lists ask for (one year).
const maxHSTSMaxAge = 10 * 365 * 24 * 3600

// maxSocketPath is the longest unix socket path Linux takes (sun_path less
// its terminating NUL).
const maxSocketPath = 107

var confTemplate = template.Must(template.New("nginx.conf").
	Option("missingkey=error").
	Funcs(template.FuncMap{"quote": Quote, "quoteRegex": QuoteRegex, "serverName": serverName,
		"quoteRewrite": QuoteRewrite, "quoteVars": QuoteWithVariables, "quoteText": QuoteText, "logFormat": quoteLogFormat}).
	Parse(templates.NginxConf))

// confView is what the template prints. User-supplied strings stay raw here
// and are quoted by the template through Quote.
type confView struct {
	SharedDir   string
	LoadModules []string
	// RequestMetrics, when not nil, has nginx record the request metrics.
	RequestMetrics *requestMetricsView
	// HTTP2Directive turns HTTP/2 on with "http2 on;" in each HTTPS
	// server, rather than with listen's "http2" (Nginx.HTTP2Directive).
	HTTP2Directive  bool
	WorkerProcesses string
	LuaDictMB       int
	LuaPackagePath  string
	ConfigHash      string
	APIListen       string
	HTTPListen      string
	HTTPSListen     string
	StatusListen    string // "" when there is no status server
	// FallbackCertificate and FallbackKey are the default certificate,
	// relative to the prefix (see WriteFallbackCertificate).
	FallbackCertificate string
	FallbackKey         string
	// HSTSHeader is the value of Strict-Transport-Security, built from
	// numbers and flags; "" when HSTS is off.
	HSTSHeader string
	// TrustedProxies are masked CIDRs ("10.0.0.0/8"); TrustAll says that
	// 0.0.0.0/0 and ::/0 were among them, which geo's default stands for.
	TrustedProxies []string
	TrustAll       bool
	// HTTP are the ConfigMap's settings (http.go).
	HTTP httpView
	// ErrorPages are the custom HTTP errors; ErrorBackend is the backend
	// that answers them (the default server's "/"), or "" for nginx's own
	// error pages.
	ErrorPages   []errorPageView
	ErrorBackend string
	// Access are the rate-limit zones of the locations (access.go).
	Access accessHTTPView
	// RedirectPort is the port of the HTTPS redirect's Location, 0 for 443
	// (left out of the URL).
	RedirectPort int
	// RouterBodySize is the router location's client_max_body_size: the
	// largest any location allows ("0" when one allows any size); Lua
	// holds each location's own limit (profiles.go).
	RouterBodySize string
	// AccessErrors are the named locations the locations' custom errors
	// go to (access.go).
	AccessErrors []errorLocationView
	// AuthLocations and SigninLocations are external auth's internal
	// locations (extauth.go); AuthCache says one of them caches answers.
	AuthLocations   []authLocationView
	SigninLocations []signinView
	AuthCache       bool
	// Resolvers are the DNS servers nginx asks for an auth service's name
	// (Settings.Resolvers), "" when none is set.
	Resolvers string
	// TLSUpstreams are the upstream blocks of backend TLS settings (proxy.go).
	TLSUpstreams []upstreamView
	// ClientTLSServers are the hosts that check client certificates, each
	// a server block of its own (clienttls.go).
	ClientTLSServers []clientTLSServerView
	// GatewayServers are the Gateway listeners' server blocks (gateway.go).
	GatewayServers []gatewayServerView
	// GatewayRetries are the named locations of the retry codes Gateway
	// routes name, in every Gateway server (gateway.go).
	GatewayRetries []gatewayRetryView
	// GatewayBackendTLS are the named locations of TLS to backends every
	// Gateway server holds (the first server's; gateway.go), for their
	// names.
	GatewayBackendTLS []backendTLSView
	// DefaultServerNames are exact names the default server names, so
	// that no client-TLS wildcard server takes them (clienttls.go).
	DefaultServerNames []string
	// ServerNamesHashBucketSize and ServerNamesHashMaxSize size the hash
	// of exact server names; 0 when only "_" and regexes are named.
	ServerNamesHashBucketSize, ServerNamesHashMaxSize int
	// Profiles are the shared location profiles (profiles.go).
	Profiles []Profile
	// Stream is the stream block, nil for none (stream.go).
	Stream *streamView
	// Mirror says which internal mirror locations the profiles name;
	// Dollar that one prints a literal "$" (fcgimirror.go).
	Mirror mirrorHTTPView
	Dollar bool
	// IgnoreHeaders are the upstream headers nginx ignores;
	// AllowXAccelRedirect says X-Accel-Redirect is not one of them.
	IgnoreHeaders       []string
	AllowXAccelRedirect bool
}

// serverView is the locations of one model.Server in nginx's terms.
type serverView struct {
	Host      string
	HTTPS     bool
	Locations []locationView
}

type locationView struct {
	Exact   bool
	Regex   bool // Path is a case-insensitive regex anchored at the start
	Path    string
	Backend string
	// SSLRedirect and Protocol are those of model.Location.
	SSLRedirect bool
	Protocol    string
	// Proxy are the proxy and routing settings (proxy.go).
	Proxy proxyView
	// Access are the access-control settings (access.go).
	Access accessView
	// Snippet and Fixed are what snippets gave the location and, for a
	// server-snippet's location, its answer (snippet.go); nil for none.
	// profiler.of sets them.
	Snippet *snippetView
	Fixed   *fixedView
	// source is the model's location it was made from (a pointer: a
	// model of 10,000 hosts would otherwise be copied once more).
	source *model.Location
}

// Render renders nginx.conf for m. The same m and s give the same bytes.
// keep are profiles of an earlier config that routes Lua still holds jump
// to: they stay in nginx.conf, so that no request meets a named location
// that is gone, until Lua no longer needs them (profiles.go).
func Render(m model.Model, s Settings, keep ...Profile) (Config, error) {
	if err := checkSettings(s); err != nil {
		return Config{}, err
	}
	views, err := serverViews(m)
	if err != nil {
		return Config{}, err
	}
	if err := addModSecurity(views, s); err != nil {
		return Config{}, err
	}
	return renderConf(m, s, views, newProfiler(), keep)
}

// Build is Render and Routes at once: the syncer's full sync, which makes
// each location's view and profile once for both.
func Build(m model.Model, s Settings, keep ...Profile) (Config, []model.Route, error) {
	if err := checkSettings(s); err != nil {
		return Config{}, nil, err
	}
	views, err := serverViews(m)
	if err != nil {
		return Config{}, nil, err
	}
	if err := addModSecurity(views, s); err != nil {
		return Config{}, nil, err
	}
	profiles := newProfiler()
	cfg, err := renderConf(m, s, views, profiles, keep)
	if err != nil {
		return Config{}, nil, err
	}
	routes, err := routesOf(m, s, views, profiles)
	if err != nil {
		return Config{}, nil, err
	}
	return cfg, routes, nil
}

func renderConf(m model.Model, s Settings, views []serverView, profiles profiler, keep []Profile) (Config, error) {
	view, err := newConfView(m, s, views, profiles, keep)
	if err != nil {
		return Config{}, err
	}
	var buf bytes.Buffer
	buf.Grow(4096 + 512*m.Servers.Len())
	if err := confTemplate.Execute(&buf, view); err != nil {
		return Config{}, fmt.Errorf("rendering nginx.conf: %w", err)
	}
	out := buf.Bytes()
	if n := bytes.Count(out, []byte(hashPlaceholder)); n != 1 {
		return Config{}, fmt.Errorf("rendering nginx.conf: the template holds the hash placeholder %d times, want once", n)
	}
	sum := sha256.Sum256(out)
	hash := hex.EncodeToString(sum[:])
	out = bytes.Replace(out, []byte(hashPlaceholder), []byte(hash), 1)
	return Config{Bytes: out, Hash: hash, Profiles: view.Profiles, Files: profileFiles(view.Profiles),
		BackendTLS: backendTLSNames(view.GatewayBackendTLS), view: &view}, nil
}

// newConfView is the view nginx.conf is rendered from: what the settings
// decide (settingsConfView), then what the model does (addModel).
func newConfView(m model.Model, s Settings, views []serverView, profiles profiler, keep []Profile) (confView, error) {
	view, err := settingsConfView(s)
	if err != nil {
		return confView{}, err
	}
	if err := view.addModel(m, s, views, profiles, keep); err != nil {
		return confView{}, err
	}
	return view, nil
}

// The size of Lua's shared dict (Settings.LuaDictMB), in MB. 64 MB holds
// 50,000 plain Ingresses, and about 43,000 certificates alone (P-256, 1.5 KB
// each in the dict: the chain and key, their hosts and hash).
const (
	DefaultLuaDictMB = 64
	MinLuaDictMB     = 16
	MaxLuaDictMB     = 4096
)

// settingsConfView is the part of the conf view the settings alone
// decide. render.Cache makes it once per Settings and adds one host's
// model to a copy of it (Cache.hostConf), where a whole view for each
// host made ~40% of a full sync's garbage at 50,000 hosts.
func settingsConfView(s Settings) (confView, error) {
	workers := s.WorkerProcesses
	if workers == "" {
		workers = "auto"
	}
	view := confView{
		SharedDir:       s.SharedDir,
		LoadModules:     LoadModuleLines(s),
		HTTP2Directive:  s.Nginx.HTTP2Directive(),
		WorkerProcesses: workers,
		LuaDictMB:       cmp.Or(s.LuaDictMB, DefaultLuaDictMB),
		LuaPackagePath:  luaPackagePath(s.SharedDir),
		ConfigHash:      hashPlaceholder,
		APIListen:       "unix:" + filepath.Join(s.SharedDir, SocketName),
		HTTPListen:      listen(s.ListenAddress, s.HTTPPort),
		HTTPSListen:     listen(s.ListenAddress, s.HTTPSPort),

		FallbackCertificate: FallbackCertName,
		FallbackKey:         FallbackKeyName,
		HSTSHeader:          hstsHeader(s),
		IgnoreHeaders:       ignoreHeaders(s.AllowXAccelRedirect),
		AllowXAccelRedirect: s.AllowXAccelRedirect,
	}
	if s.StatusPort != 0 {
		view.StatusListen = listen(s.ListenAddress, s.StatusPort)
	}
	if s.SSLPassthrough {
		view.HTTPSListen = "unix:" + filepath.Join(s.SharedDir, HTTPSSocketName)
	}
	view.TrustedProxies, view.TrustAll = trustedNetworks(s.TrustedProxies)
	view.HTTP = newHTTPView(httpSettings(s))
	var err error
	if view.RequestMetrics, err = newRequestMetricsView(s.RequestMetrics); err != nil {
		return confView{}, err
	}
	if h := httpSettings(s); len(h.CustomHTTPErrors) > 0 {
		view.ErrorPages = newErrorPages(h.CustomHTTPErrors)
	}
	redirectPort := cmp.Or(s.HTTPSRedirectPort, s.HTTPSPort)
	if redirectPort == 443 {
		redirectPort = 0
	}
	view.RedirectPort = redirectPort
	view.Resolvers = resolvers(s.Resolvers)
	return view, nil
}

// httpSettings are the http block's settings of s.
func httpSettings(s Settings) HTTP {
	if s.HTTP != nil {
		return *s.HTTP
	}
	return DefaultHTTP()
}

// addModel adds to view, made by settingsConfView of s, what m decides.
func (view *confView) addModel(m model.Model, s Settings, views []serverView, profiles profiler, keep []Profile) error {
	h := httpSettings(s)
	var err error
	if view.Stream, err = newStreamView(m.Stream, s); err != nil {
		return err
	}
	if view.Access, err = newAccessHTTPView(m); err != nil {
		return err
	}
	if len(h.CustomHTTPErrors) > 0 {
		view.ErrorBackend = errorBackend(m.Default)
	}
	if view.Profiles, err = newProfiles(views, profiles, keep); err != nil {
		return err
	}
	view.RouterBodySize = routerBodySize(m, h.ClientMaxBodySize)
	if view.AccessErrors, err = accessErrorLocations(m); err != nil {
		return err
	}
	if view.AuthLocations, view.SigninLocations, err = authLocations(m); err != nil {
		return err
	}
	for _, a := range view.AuthLocations {
		view.AuthCache = view.AuthCache || a.CacheKey != ""
	}
	if view.TLSUpstreams, err = tlsUpstreams(m, view.Profiles); err != nil {
		return err
	}
	view.Mirror, view.Dollar = profileNeeds(view.Profiles)
	if view.ClientTLSServers, err = clientTLSServers(m); err != nil {
		return err
	}
	if view.GatewayRetries, err = gatewayRetries(m); err != nil {
		return err
	}
	if view.GatewayServers, err = gatewayServers(m, s); err != nil {
		return err
	}
	for i := range view.GatewayServers {
		view.GatewayServers[i].AccessLog = view.HTTP.AccessLog
	}
	view.GatewayBackendTLS = gatewayBackendTLS(view.GatewayServers)
	view.TLSUpstreams = gatewayTLSUpstreams(view.GatewayServers, view.TLSUpstreams)
	view.DefaultServerNames = defaultServerNames(m, view.ClientTLSServers)
	var exact []string
	for _, s := range view.ClientTLSServers {
		if !strings.HasPrefix(s.Host, "*.") {
			exact = append(exact, s.Host)
		}
		exact = append(exact, s.Aliases...)
	}
	view.ServerNamesHashBucketSize, view.ServerNamesHashMaxSize = serverNamesHash(exact, view.DefaultServerNames)
	return nil
}

// serversOf yields m's default server, then its servers in order.
func serversOf(m *model.Model) iter.Seq[*model.Server] {
	return func(yield func(*model.Server) bool) {
		if !yield(&m.Default) {
			return
		}
		for srv := range m.Servers.All() {
			if !yield(srv) {
				return
			}
		}
	}
}

// serverViews returns the views of the default server and of every
// server, in the model's order, each host checked and present once.
func serverViews(m model.Model) ([]serverView, error) {
	views := make([]serverView, 0, 1+m.Servers.Len())
	def, err := newServerView(m.Default)
	if err != nil {
		return nil, fmt.Errorf("default server: %w", err)
	}
	def.HTTPS = true
	views = append(views, def)
	hosts := make(map[string]bool, m.Servers.Len())
	for srv := range m.Servers.All() {
		if hosts[srv.Host] {
			return nil, fmt.Errorf("server %q: host appears twice", srv.Host)
		}
		hosts[srv.Host] = true
		for _, name := range append([]string{srv.Host}, srv.Aliases...) {
			if _, err := serverName(name); err != nil {
				return nil, fmt.Errorf("server %q: %w", srv.Host, err)
			}
		}
		sv, err := newServerView(*srv)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", srv.Host, err)
		}
		views = append(views, sv)
	}
	return views, nil
}

// luaPackagePath finds the bundled modules in the shared dir; the trailing
// ";;" keeps the default path, where Debian's resty.core and OpenResty's own
// libraries live.
func luaPackagePath(sharedDir string) string {
	lua := filepath.Join(sharedDir, "lua")
	return lua + "/?.lua;" + lua + "/?/init.lua;;"
}

func listen(address string, port int) string {
	p := strconv.Itoa(port)
	if address == "" {
		return p
	}
	return netip.AddrPortFrom(netip.MustParseAddr(address), uint16(port)).String()
}

// newServerView turns the model's locations into nginx locations. Exact
// "/p" is "location = /p". Prefix "/" is "location /". Prefix "/p" is the
// element-wise match "/p", "/p/", "/p/...": "location = /p" (unless an
// Exact "/p" takes it) and "location /p/". nginx picks the exact match
// first and then the longest prefix, which is Ingress's "Exact beats Prefix,
// longest prefix wins".
func newServerView(srv model.Server) (serverView, error) {
	type key struct {
		exact bool
		path  string
	}
	exactPaths := make(map[string]bool)
	for _, loc := range srv.Locations {
		if loc.PathType == model.PathExact {
			exactPaths[loc.Path] = true
		}
	}
	n := 0
	for _, loc := range srv.Locations {
		n++
		if loc.PathType == model.PathPrefix && loc.Path != "/" {
			n++ // "= /p" and "/p/"
		}
	}
	view := serverView{Host: srv.Host, HTTPS: srv.HTTPS, Locations: make([]locationView, 0, n)}
	seen := make(map[key]bool, n)
	var regexes []locationView
	add := func(exact bool, path string, loc *model.Location) error {
		k := key{exact, path}
		if seen[k] {
			return fmt.Errorf("location %s %q (path %q of %s) is rendered twice", matchName(exact), path, loc.Path, loc.Ingress)
		}
		seen[k] = true
		proxy, err := newProxyView(loc.ProxySettings(), loc.Protocol, path, false)
		if err != nil {
			return fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
		}
		access, err := newAccessView(*loc)
		if err != nil {
			return fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
		}
		view.Locations = append(view.Locations, locationView{Exact: exact, Path: path, Backend: loc.Backend,
			SSLRedirect: loc.SSLRedirect, Protocol: loc.Protocol, Proxy: proxy, Access: access, source: loc})
		return nil
	}
	for i := range srv.Locations {
		loc := &srv.Locations[i]
		if !strings.HasPrefix(loc.Path, "/") {
			return serverView{}, fmt.Errorf("path %q of %s: must start with \"/\"", loc.Path, loc.Ingress)
		}
		switch loc.Protocol {
		case model.ProtocolHTTP, model.ProtocolHTTPS, model.ProtocolGRPC, model.ProtocolGRPCS, model.ProtocolFCGI:
		default:
			return serverView{}, fmt.Errorf("path %q of %s: unknown backend protocol %q", loc.Path, loc.Ingress, loc.Protocol)
		}
		var err error
		switch {
		case loc.PathType == model.PathExact:
			err = add(true, loc.Path, loc)
		case loc.PathType == model.PathPrefix && loc.Path == "/":
			err = add(false, "/", loc)
		case loc.PathType == model.PathPrefix && strings.HasSuffix(loc.Path, "/"):
			err = fmt.Errorf("prefix path %q of %s: must not end in \"/\"", loc.Path, loc.Ingress)
		case loc.PathType == model.PathLiteralPrefix || loc.PathType == model.PathPriorityPrefix:
			err = add(false, loc.Path, loc) // a server-snippet's "location /p" or "^~ /p"
		case loc.PathType == model.PathPrefix:
			if !exactPaths[loc.Path] {
				err = add(true, loc.Path, loc)
			}
			if err == nil {
				err = add(false, loc.Path+"/", loc)
			}
		case loc.PathType == model.PathRegex:
			var proxy proxyView
			if proxy, err = newProxyView(loc.ProxySettings(), loc.Protocol, "^"+loc.Path, true); err != nil {
				err = fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
				break
			}
			var access accessView
			if access, err = newAccessView(*loc); err != nil {
				err = fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
				break
			}
			regexes = append(regexes, locationView{Regex: true, Path: "^" + loc.Path, Backend: loc.Backend,
				SSLRedirect: loc.SSLRedirect, Protocol: loc.Protocol, Proxy: proxy, Access: access, source: loc})
		default:
			err = fmt.Errorf("path %q of %s: unknown path type %q", loc.Path, loc.Ingress, loc.PathType)
		}
		if err != nil {
			return serverView{}, err
		}
	}
	// nginx tries regex locations in the order written, after the exact
	// ones and before the prefixes: longest first, as ingress-nginx does.
	slices.SortStableFunc(regexes, func(a, b locationView) int { return cmp.Compare(len(b.Path), len(a.Path)) })
	view.Locations = append(view.Locations, regexes...)
	return view, nil
}

// hstsHeader is the Strict-Transport-Security value of s, or "" when HSTS
// is off. It is built from a number and flags only.
func hstsHeader(s Settings) string {
	if !s.HSTS {
		return ""
	}
	v := "max-age=" + strconv.Itoa(s.HSTSMaxAge)
	if s.HSTSIncludeSubdomains {
		v += "; includeSubDomains"
	}
	if s.HSTSPreload {
		v += "; preload"
	}
	return v
}

func matchName(exact bool) string {
	if exact {
		return "="
	}
	return "prefix"
}

func checkSettings(s Settings) error {
	for _, r := range s.Resolvers {
		ap, errPort := netip.ParseAddrPort(r)
		a, errAddr := netip.ParseAddr(r)
		if (errPort != nil || ap.Addr().Zone() != "") && (errAddr != nil || a.Zone() != "") {
			return fmt.Errorf("resolver %q: want an IP address with an optional port", r)
		}
	}
	if !filepath.IsAbs(s.SharedDir) || filepath.Clean(s.SharedDir) != s.SharedDir {
		return fmt.Errorf("shared dir %q: must be an absolute, clean path", s.SharedDir)
	}
	if strings.ContainsAny(s.SharedDir, ";?") {
		return fmt.Errorf("shared dir %q: must not contain ';' or '?', which mean something in lua_package_path", s.SharedDir)
	}
	if _, err := Quote(s.SharedDir); err != nil {
		return fmt.Errorf("shared dir: %w", err)
	}
	if socket := filepath.Join(s.SharedDir, SocketName); len(socket) > maxSocketPath {
		return fmt.Errorf("shared dir %q: the socket path %s is %d bytes long; a unix socket path may have at most %d", s.SharedDir, socket, len(socket), maxSocketPath)
	}
	for _, p := range []struct {
		name string
		port int
	}{{"HTTP port", s.HTTPPort}, {"HTTPS port", s.HTTPSPort}} {
		if p.port < 1 || p.port > 65535 {
			return fmt.Errorf("%s %d: must be 1..65535", p.name, p.port)
		}
	}
	if s.HTTPPort == s.HTTPSPort {
		return fmt.Errorf("HTTP and HTTPS port are both %d", s.HTTPPort)
	}
	if p := s.StatusPort; p != 0 && (p < 1 || p > 65535 || p == s.HTTPPort || p == s.HTTPSPort) {
		return fmt.Errorf("status port %d: must be 1..65535 and neither the HTTP nor the HTTPS port, or 0 for none", p)
	}
	if p := s.HTTPSRedirectPort; p < 0 || p > 65535 {
		return fmt.Errorf("HTTPS redirect port %d: must be 1..65535, or 0 for the HTTPS port", p)
	}
	if s.HSTS && (s.HSTSMaxAge < 0 || s.HSTSMaxAge > maxHSTSMaxAge) {
		return fmt.Errorf("HSTS max-age %d: must be 0..%d seconds", s.HSTSMaxAge, maxHSTSMaxAge)
	}
	for _, p := range s.TrustedProxies {
		if !p.IsValid() || p.Addr().Zone() != "" {
			return fmt.Errorf("trusted proxy %q: must be a CIDR without zone", p)
		}
	}
	if s.ListenAddress != "" {
		addr, err := netip.ParseAddr(s.ListenAddress)
		if err != nil || addr.Zone() != "" {
			return fmt.Errorf("listen address %q: must be an IP address without zone, or empty for all", s.ListenAddress)
		}
	}
	if m := s.LuaDictMB; m != 0 && (m < MinLuaDictMB || m > MaxLuaDictMB) {
		return fmt.Errorf("lua dict size %d MB: want %d..%d", m, MinLuaDictMB, MaxLuaDictMB)
	}
	if w := s.WorkerProcesses; w != "" && w != "auto" {
		if n, err := strconv.Atoi(w); err != nil || n < 1 || strconv.Itoa(n) != w {
			return fmt.Errorf("worker processes %q: want \"auto\" or a positive number", w)
		}
	}
	for _, module := range s.LoadModules {
		if module == "" {
			return errors.New("load module: empty path")
		}
	}
	if s.HTTP != nil {
		if err := checkHTTP(*s.HTTP); err != nil {
			return fmt.Errorf("ConfigMap settings: %w", err)
		}
	}
	if err := checkModSecurity(s.ModSecurity); err != nil {
		return fmt.Errorf("ModSecurity: %w", err)
	}
	return nil
}
