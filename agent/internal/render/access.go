package render

// Access control of a location (model.AccessSettings): source ranges with
// allow/deny, basic auth with auth_basic_user_file, rate limits with
// limit_req/limit_conn over zones declared once in the http block, CORS
// with rewrite-phase "if"s and a Lua header filter, and custom error pages
// through named locations of the server.
//
// Basic auth uses nginx's own auth_basic against an htpasswd file the agent
// writes into the shared dir (apply.WriteAuthFiles), rather than a check in
// Lua: nginx already speaks every htpasswd hash (crypt(3) bcrypt and SHA-2,
// apr1, {SHA}, {SSHA}, {PLAIN}), which Lua would have to reimplement, and it
// reads the file on every request, so a changed Secret needs no reload.
//
// CORS headers are set by restysync.access in header_filter_by_lua rather
// than by add_header: an add_header in a location drops every add_header
// the http block sets (X-Request-ID, HSTS), and the values travel in
// variables set by the location, so no user string is ever Lua source.

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// accessView is what the template's "access" section prints for one
// location.
type accessView struct {
	// Denied: the location answers 503 and nothing else is printed.
	Denied bool
	// DenySources and AllowSources are masked CIDRs; with AllowSources
	// every other client is denied.
	DenySources  []string
	AllowSources []string
	// AuthFile and AuthRealm: basic auth when AuthFile is not "".
	AuthFile  string
	AuthRealm string
	// Limits are limit_req and limit_conn lines, in ingress-nginx's order:
	// connections, per minute, per second.
	ConnZone  string
	ConnLimit int
	ReqLimits []reqLimitView
	CORS      *corsView
	// Errors, when set, intercepts the listed codes into named locations.
	Errors *errorsView
	// Auth, when set, asks an auth service first (extauth.go).
	Auth *authView
	// HeaderFilter: the profile runs restysync.access's header filter (CORS,
	// the auth service's cookie).
	HeaderFilter bool
	// ClientCert, when set, sends the client certificate's headers and
	// checks its subject (model.ClientCert).
	ClientCert *model.ClientCert
	// ProxyHeaders: the profile sets headers of its own, so it repeats the
	// http block's proxy_set_header lines, which a location's own replace.
	ProxyHeaders bool
	// WAF, when set, runs ModSecurity (modsecurity.go; set by
	// addModSecurity, which knows the agent's settings).
	WAF *modSecurityView
}

type reqLimitView struct {
	LimitZone  string
	LimitBurst int
}

type corsView struct {
	// AnyOrigin answers every origin with "*"; otherwise OriginRegex (an
	// anchored case-insensitive regex of the allowed origins) decides and
	// the request's Origin is echoed.
	AnyOrigin   bool
	OriginRegex string
	Methods     string
	Headers     string
	Expose      string
	Credentials bool
	CORSMaxAge  int
}

type errorsView struct {
	Pages []errorPageRef
	// Guard names the error backend; its error locations answer only a
	// request whose profile set it (errorGuard).
	Guard string
	// Namespace, Ingress, Service and ServicePort of the location, sent
	// to the error backend as X-Namespace and friends.
	Namespace   string
	Ingress     string
	Service     string
	ServicePort string
}

type errorPageRef struct {
	PageCode     int
	PageLocation string // "@restysync_error_<hash>_<code>"
}

// errorLocationView is one named location of a server that asks the error
// backend for the page of one code.
type errorLocationView struct {
	ErrorLocation string
	ErrorCode     int
	Backend       string
	Guard         string
}

// accessHTTPView is what the http block needs for the locations' limits.
type accessHTTPView struct {
	// ExemptKeys map a client address to the limit key, "" (not counted)
	// for the exempt networks of limit-whitelist.
	ExemptKeys []exemptKeyView
	ReqZones   []reqZoneView
	ConnZones  []connZoneView
}

type exemptKeyView struct {
	GeoVar, KeyVar string // variable names without "$"
	Networks       []string
}

type reqZoneView struct {
	ZoneName, ZoneKey, ZoneRate string // ZoneKey is a variable name without "$"
}

type connZoneView struct {
	ZoneName, ZoneKey string
}

// limitZoneSize is each zone's shared memory, as ingress-nginx has it:
// about 80,000 client addresses.
const limitZoneSize = "5m"

// limitKey returns the variable (without "$") a zone counts by: the
// Ingress and the client address ($restysync_limit_key, the Ingress set by
// Lua from the route), or for a limit-whitelist the same but "" for the
// exempt networks. Zones are shared by every Ingress with the same limit
// (so a profile is too); the Ingress in the key keeps the counters apart.
func limitKey(exempt string) string {
	if exempt == "" {
		return "restysync_limit_key"
	}
	return hashName("restysync_limit_key_", exempt)
}

// Zone names: per limit and key, so that a changed limit gets a fresh zone.
func reqZoneName(unit string, rate int, exempt string) string {
	return hashName("restysync_req_", unit, strconv.Itoa(rate), exempt)
}

func connZoneName(exempt string) string {
	return hashName("restysync_conn_", exempt)
}

// newAccessView checks and prints the access settings of loc.
func newAccessView(loc model.Location) (accessView, error) {
	a := loc.AccessSettings()
	if a.Denied != "" {
		return accessView{Denied: true}, nil
	}
	var v accessView
	var err error
	if v.DenySources, err = splitCIDRs(a.DenySources); err != nil {
		return accessView{}, fmt.Errorf("deny sources: %w", err)
	}
	if v.AllowSources, err = splitCIDRs(a.AllowSources); err != nil {
		return accessView{}, fmt.Errorf("allow sources: %w", err)
	}
	if a.BasicAuth.File != "" {
		if err := checkAuthFileName(a.BasicAuth.File); err != nil {
			return accessView{}, err
		}
		v.AuthFile, v.AuthRealm = a.BasicAuth.File, a.BasicAuth.Realm
		if v.AuthRealm == "off" || strings.ContainsAny(v.AuthRealm, `"\`) {
			return accessView{}, fmt.Errorf("auth realm %q: cannot be sent", v.AuthRealm)
		}
	}
	r := a.RateLimit
	if r.RPS < 0 || r.RPM < 0 || r.Connections < 0 || r.BurstMultiplier < 0 {
		return accessView{}, fmt.Errorf("negative rate limit %+v", r)
	}
	if _, err := splitCIDRs(r.Exempt); err != nil {
		return accessView{}, fmt.Errorf("rate limit exempt networks: %w", err)
	}
	if r.Connections > 0 {
		v.ConnZone, v.ConnLimit = connZoneName(r.Exempt), r.Connections
	}
	burst := max(r.BurstMultiplier, 1)
	if r.RPM > 0 {
		v.ReqLimits = append(v.ReqLimits, reqLimitView{LimitZone: reqZoneName("m", r.RPM, r.Exempt), LimitBurst: r.RPM * burst})
	}
	if r.RPS > 0 {
		v.ReqLimits = append(v.ReqLimits, reqLimitView{LimitZone: reqZoneName("s", r.RPS, r.Exempt), LimitBurst: r.RPS * burst})
	}
	if a.CORS.Enabled {
		if v.CORS, err = newCORSView(a.CORS); err != nil {
			return accessView{}, fmt.Errorf("CORS: %w", err)
		}
	}
	if a.Errors.Codes != "" {
		if v.Errors, err = newErrorsView(loc); err != nil {
			return accessView{}, fmt.Errorf("custom errors: %w", err)
		}
	}
	if a.ExternalAuth.URL != "" {
		if v.Auth, err = newAuthView(a.ExternalAuth); err != nil {
			return accessView{}, err
		}
		if v.Auth.Sets, err = authSetViews(loc.SnippetSettings().AuthRequestSet); err != nil {
			return accessView{}, err
		}
	}
	v.HeaderFilter = v.CORS != nil || v.Auth != nil
	if a.ClientCert.Headers {
		cc := a.ClientCert
		if _, err := QuoteRegex(cc.MatchCN); err != nil {
			return accessView{}, fmt.Errorf("client certificate subject regex: %w", err)
		}
		v.ClientCert = &cc
	}
	v.ProxyHeaders = v.ClientCert != nil || (v.Auth != nil && len(v.Auth.Headers) > 0)
	// A snippet's request headers come with the standard ones (snippet.go).
	v.ProxyHeaders = v.ProxyHeaders && loc.SnippetSettings().RequestHeaders == ""
	return v, nil
}

// splitCIDRs splits a canonical list of the model and checks each entry.
func splitCIDRs(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	out := strings.Split(list, ",")
	for _, s := range out {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p || p.Addr().Zone() != "" {
			return nil, fmt.Errorf("%q: not a masked CIDR", s)
		}
	}
	return out, nil
}

// authFileName is the only shape of htpasswd file name render prints.
var authFileName = regexp.MustCompile(`^auth/[a-z0-9-]{1,63}_[a-z0-9.-]{1,253}$`)

func checkAuthFileName(name string) error {
	if !authFileName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("auth file %q: want auth/<namespace>_<secret>", name)
	}
	return nil
}

// corsOrigin is an origin as the model canonicalises it.
var corsOrigin = regexp.MustCompile(`^([a-z][a-z0-9+.-]*)://(\*\.)?([a-z0-9.-]+)(:[0-9]{1,5})?$`)

// corsList is a list of header names or methods as the model checks them;
// no character nginx or Lua would read.
var corsList = regexp.MustCompile("^[!#%&'*+.^_`|~0-9A-Za-z, -]*$")

func newCORSView(c model.CORS) (*corsView, error) {
	v := &corsView{Methods: c.AllowMethods, Headers: c.AllowHeaders, Expose: c.ExposeHeaders,
		Credentials: c.AllowCredentials, CORSMaxAge: c.MaxAge}
	for _, list := range []string{v.Methods, v.Headers, v.Expose} {
		if !corsList.MatchString(list) {
			return nil, fmt.Errorf("%q: not a list of tokens", list)
		}
	}
	if c.MaxAge < 0 {
		return nil, fmt.Errorf("max age %d: negative", c.MaxAge)
	}
	if c.AllowOrigins == "*" {
		v.AnyOrigin = true
		return v, nil
	}
	var alternatives []string
	for _, origin := range strings.Split(c.AllowOrigins, ",") {
		m := corsOrigin.FindStringSubmatch(origin)
		if m == nil {
			return nil, fmt.Errorf("origin %q: not an origin", origin)
		}
		re := regexp.QuoteMeta(m[1]) + "://"
		if m[2] != "" {
			re += `[^.:/]+\.`
		}
		re += regexp.QuoteMeta(m[3]) + m[4] // the port is digits and ":"
		alternatives = append(alternatives, re)
	}
	slices.Sort(alternatives)
	v.OriginRegex = "^(" + strings.Join(alternatives, "|") + ")$"
	return v, nil
}

func newErrorsView(loc model.Location) (*errorsView, error) {
	e := loc.AccessSettings().Errors
	namespace, ingress, _ := strings.Cut(loc.Ingress, "/")
	_, service, _ := model.BackendService(loc.Backend)
	_, port, _ := strings.Cut(strings.SplitN(loc.Backend, "@", 2)[0], ":")
	v := &errorsView{Guard: errorGuard(e.Backend), Namespace: namespace, Ingress: ingress, Service: service, ServicePort: port}
	for _, text := range strings.Split(e.Codes, ",") {
		code, err := strconv.Atoi(text)
		if err != nil || code < 400 || !model.ErrorPageCode(code) {
			return nil, fmt.Errorf("code %q: want 400..599 but 499", text)
		}
		v.Pages = append(v.Pages, errorPageRef{PageCode: code, PageLocation: errorLocationName(e.Backend, code)})
	}
	return v, nil
}

func errorLocationName(backend string, code int) string {
	return hashName("@restysync_error_", backend) + "_" + strconv.Itoa(code)
}

// errorGuard is the value of $restysync_error_guard a profile sets for
// the error locations of backend, and they check.
func errorGuard(backend string) string {
	return nameDigest([]string{"error-guard", backend})
}

// accessErrorLocations returns the named locations the locations of a
// server send their custom errors to, one per error backend and code,
// sorted by name.
func accessErrorLocations(m model.Model) ([]errorLocationView, error) {
	names := nameTable{}
	var out []errorLocationView
	for loc := range m.AllLocations() {
		e := loc.AccessSettings().Errors
		if e.Codes == "" || loc.AccessSettings().Denied != "" {
			continue
		}
		for _, text := range strings.Split(e.Codes, ",") {
			code, err := strconv.Atoi(text)
			if err != nil {
				continue // newAccessView has refused it
			}
			v := errorLocationView{ErrorLocation: errorLocationName(e.Backend, code), ErrorCode: code, Backend: e.Backend, Guard: errorGuard(e.Backend)}
			if out, err = declare(names, out, v.ErrorLocation, v, ownerOf(loc)); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(out, func(a, b errorLocationView) int { return strings.Compare(a.ErrorLocation, b.ErrorLocation) })
	return out, nil
}

// newAccessHTTPView collects the zones and keys every location's limits
// need, sorted by name.
func newAccessHTTPView(m model.Model) (accessHTTPView, error) {
	var v accessHTTPView
	names := nameTable{} // keys and zones: their prefixes differ
	for srv := range serversOf(&m) {
		for _, loc := range srv.Locations {
			r := loc.AccessSettings().RateLimit
			if loc.AccessSettings().Denied != "" || (r.RPS == 0 && r.RPM == 0 && r.Connections == 0) {
				continue
			}
			key := limitKey(r.Exempt)
			var err error
			if r.Exempt != "" {
				networks, _ := splitCIDRs(r.Exempt) // newAccessView has checked them
				k := exemptKeyView{GeoVar: hashName("restysync_limit_exempt_", r.Exempt), KeyVar: key, Networks: networks}
				if _, err := names.claim(k.GeoVar, k, ownerOf(&loc)); err != nil {
					return accessHTTPView{}, err
				}
				if v.ExemptKeys, err = declare(names, v.ExemptKeys, k.KeyVar, k, ownerOf(&loc)); err != nil {
					return accessHTTPView{}, err
				}
			}
			for _, limit := range []struct {
				unit string
				rate int
			}{{"m", r.RPM}, {"s", r.RPS}} {
				if limit.rate <= 0 {
					continue
				}
				z := reqZoneView{ZoneName: reqZoneName(limit.unit, limit.rate, r.Exempt), ZoneKey: key,
					ZoneRate: strconv.Itoa(limit.rate) + "r/" + limit.unit}
				if v.ReqZones, err = declare(names, v.ReqZones, z.ZoneName, z, ownerOf(&loc)); err != nil {
					return accessHTTPView{}, err
				}
			}
			if r.Connections > 0 {
				z := connZoneView{ZoneName: connZoneName(r.Exempt), ZoneKey: key}
				if v.ConnZones, err = declare(names, v.ConnZones, z.ZoneName, z, ownerOf(&loc)); err != nil {
					return accessHTTPView{}, err
				}
			}
		}
	}
	slices.SortFunc(v.ExemptKeys, func(a, b exemptKeyView) int { return strings.Compare(a.KeyVar, b.KeyVar) })
	slices.SortFunc(v.ReqZones, func(a, b reqZoneView) int { return strings.Compare(a.ZoneName, b.ZoneName) })
	slices.SortFunc(v.ConnZones, func(a, b connZoneView) int { return strings.Compare(a.ZoneName, b.ZoneName) })
	return v, nil
}
