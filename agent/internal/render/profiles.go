package render

// Every host is routed by Lua (restysync.routes), and nginx.conf holds no
// server block per host: the default server's "location /" asks Lua for
// the request's host and path. A location that needs nothing but the
// balancer (model.Location.Plain) is served right there. Any other gets a
// profile: its directives (body size, buffers, rewrites, CORS, basic auth,
// limits, ...) rendered once per distinct text as a named location, which
// the router jumps to (ngx.exec). Ingresses mostly come from a few charts,
// so the same settings repeat: nginx.conf grows with the settings a cluster
// uses, not with its Ingresses, and a new Ingress whose settings have a
// profile is a routes push, not a reload.
//
// What is per Ingress stays per Ingress without being written into the
// profile: the backend ($restysync_backend), the htpasswd file
// ($restysync_auth_file) and the Ingress that rate limits count for
// ($restysync_ingress, part of every zone's key) travel with the route and
// are set by Lua before the jump. The client_max_body_size check of a
// request with a Content-Length happens when nginx picks a location, which
// a jump to a named location skips: the router location allows the
// largest size any location does, and Lua checks each location's own. A
// body without Content-Length (chunked, HTTP/2) is checked as nginx reads
// it, against the location it is read in: a profile has its own limit,
// and a location without one jumps to @restysync_body, which has the
// http block's, when that is smaller than the router's (MaxBody set).
//
// A named or internal location is entered only by the request it was made
// for: Lua sets $restysync_profile to the profile it jumps to, a profile
// sets $restysync_auth_guard and $restysync_error_guard for its auth and
// error locations, and each answers 404 to any other request, such as one a
// backend's X-Accel-Redirect (--allow-x-accel-redirect) sent there. A
// variable costs one write and one compare; ngx.ctx would not survive the
// jump.

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// profilePrefix begins the name of every profile.
const profilePrefix = "@restysync_p_"

// profileName is the shape of a profile's name.
var profileName = regexp.MustCompile(`^` + profilePrefix + `[0-9a-f]{` + strconv.Itoa(nameDigits) + `}$`)

// DefaultRoute is the name of the route of the default server's locations
// (rules without a host, the default backend): the one a host without a
// route of its own gets, as nginx's server_name "_".
const DefaultRoute = "_"

// Profile is one shared profile: a named location and its directives,
// rendered by the template's "location-body" (through Quote and friends).
type Profile struct {
	Name string // "@restysync_p_<hash of Body>"
	Body string
}

// profiler renders the profiles of one render, each distinct set of
// settings once: at 10,000 annotated locations with a few settings that
// is a few template runs, not 10,000.
type profiler struct {
	byKey map[profileKey]Profile
	names nameTable // every profile's name and body, kept ones included
}

func newProfiler() profiler {
	return profiler{byKey: map[profileKey]Profile{}, names: nameTable{}}
}

// profileKey is everything of a location its profile's body depends on
// (the htpasswd file is not: the body names it by variable).
type profileKey struct {
	proxy    model.ProxySettings
	access   model.AccessSettings
	protocol string
	rewrite  string // the rewrite's regex, made of the location's path
	owner    string // Ingress and backend, which custom errors name
	// snippet and fixed are what snippets gave the location (snippet.go).
	snippet model.SnippetSettings
	fixed   model.FixedResponse
}

// of returns the named location of lv's profile and its body, or "" when
// lv is plain and the router serves it directly.
func (p profiler) of(lv locationView) (name, body string, err error) {
	loc := *lv.source
	if loc.Plain() {
		return "", "", nil
	}
	key := profileKey{proxy: loc.ProxySettings(), access: loc.AccessSettings(), protocol: loc.Protocol, rewrite: lv.Proxy.RewriteRegex,
		snippet: loc.SnippetSettings(), fixed: loc.FixedSettings()}
	if key.access.BasicAuth.File != "" {
		key.access.BasicAuth.File = "by variable" // which file is no part of the body
	}
	if loc.AccessSettings().Errors.Codes != "" {
		key.owner = loc.Ingress + " " + loc.Backend
	}
	if known, ok := p.byKey[key]; ok {
		return known.Name, known.Body, nil
	}
	if lv.Snippet, err = newSnippetView(loc, lv.Proxy); err != nil {
		return "", "", fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
	}
	if lv.Fixed, err = newFixedView(loc.FixedSettings()); err != nil {
		return "", "", fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
	}
	tmpl := "location-body"
	if lv.Fixed != nil {
		tmpl = "fixed-body" // a server-snippet's location: no backend
	}
	var buf bytes.Buffer
	if err := confTemplate.ExecuteTemplate(&buf, tmpl, lv); err != nil {
		return "", "", fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
	}
	body = buf.String()
	name = hashName(profilePrefix, body)
	if _, err := p.names.claim(name, body, ownerOf(&loc)); err != nil {
		return "", "", err
	}
	p.byKey[key] = Profile{Name: name, Body: body}
	return name, body, nil
}

// newProfiles returns the profiles of every location, one per distinct
// body, and those of keep, sorted by name.
func newProfiles(views []serverView, profiles profiler, keep []Profile) ([]Profile, error) {
	seen := map[string]bool{}
	var out []Profile
	for _, p := range keep {
		if !profileName.MatchString(p.Name) || p.Name != hashName(profilePrefix, p.Body) {
			return nil, fmt.Errorf("kept profile %q: not one render made", p.Name)
		}
		if _, err := profiles.names.claim(p.Name, p.Body, "a profile kept from the running config"); err != nil {
			return nil, err
		}
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	for _, sv := range views {
		for _, lv := range sv.Locations {
			name, body, err := profiles.of(lv)
			if err != nil {
				return nil, fmt.Errorf("server %q: %w", sv.Host, err)
			}
			if name != "" && !seen[name] {
				seen[name] = true
				out = append(out, Profile{Name: name, Body: body})
			}
		}
	}
	slices.SortFunc(out, func(a, b Profile) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Routes returns what Lua holds for every host, in the model's order: the
// default server's locations as DefaultRoute, each server's under its
// host, and again under each of its aliases that no server has as its
// host; then the Gateway API's routes (model.Model.GatewayRoutes) as they are.
// Each location says its profile, or is served by the router.
func Routes(m model.Model, s Settings) ([]model.Route, error) {
	views, err := serverViews(m)
	if err != nil {
		return nil, err
	}
	if err := addModSecurity(views, s); err != nil {
		return nil, err
	}
	return routesOf(m, s, views, newProfiler())
}

func routesOf(m model.Model, s Settings, views []serverView, profiles profiler) ([]model.Route, error) {
	var err error
	h := DefaultHTTP()
	if s.HTTP != nil {
		h = *s.HTTP
	}
	router, _ := sizeBytes(routerBodySize(m, h.ClientMaxBodySize))
	global := h.ClientMaxBodySize
	hosts := make(map[string]bool, m.Servers.Len()+1)
	for srv := range m.Servers.All() {
		hosts[srv.Host] = true
	}
	routes := make([]model.Route, 0, len(views))
	servers := append([]*model.Server{&m.Default}, m.Servers.Slice()...)
	for i, sv := range views {
		if len(sv.Locations) == 0 {
			continue
		}
		host := sv.Host
		if i == 0 {
			host = DefaultRoute
		}
		locations := make([]model.RouteLocation, len(sv.Locations))
		for j, lv := range sv.Locations {
			if locations[j], err = routeLocation(profiles, lv, global, router); err != nil {
				return nil, fmt.Errorf("server %q: %w", sv.Host, err)
			}
			if s.RequestMetrics != nil {
				locations[j] = withMetric(locations[j], metricLabels(lv.source.Ingress, lv.source.Backend, lv.source.Path, host))
			}
		}
		routes = append(routes, model.Route{Host: host, HTTPS: sv.HTTPS, Locations: locations})
		for _, alias := range servers[i].Aliases {
			if hosts[alias] {
				continue // a server of its own takes the name, as in nginx
			}
			if _, err := serverName(alias); err != nil {
				return nil, fmt.Errorf("server %q: alias: %w", sv.Host, err)
			}
			hosts[alias] = true
			routes = append(routes, model.Route{Host: alias, HTTPS: sv.HTTPS, Locations: locations})
		}
		if from := servers[i].WWWRedirect; from != "" && i > 0 && !hosts[from] {
			route, err := wwwRedirectRoute(from, sv, locations[0].Backend)
			if err != nil {
				return nil, err
			}
			hosts[from] = true
			routes = append(routes, route)
		}
	}
	gateway, err := gatewayRoutes(m, hosts)
	if err != nil {
		return nil, err
	}
	if s.RequestMetrics != nil {
		gateway = gatewayMetricLabels(gateway)
	}
	return append(routes, gateway...), nil
}

// wwwRedirectRoute is the route of the other name of sv's host
// (from-to-www-redirect): one location that Lua answers with a redirect
// to the host. Its backend, which no request reaches, is one of the host's.
func wwwRedirectRoute(from string, sv serverView, backend string) (model.Route, error) {
	for _, name := range []string{from, sv.Host} {
		if strings.HasPrefix(name, "*.") {
			return model.Route{}, fmt.Errorf("server %q: www redirect from %q: a wildcard", sv.Host, from)
		}
		if _, err := serverName(name); err != nil {
			return model.Route{}, fmt.Errorf("server %q: www redirect: %w", sv.Host, err)
		}
	}
	return model.Route{Host: from, HTTPS: sv.HTTPS, Locations: []model.RouteLocation{{Path: "/", Backend: backend, RouteOptions: &model.RouteOptions{RedirectHost: sv.Host}}}}, nil
}

// routeLocation is lv as Lua holds it. global is the ConfigMap's body
// size, router the router location's in bytes (0: any).
func routeLocation(profiles profiler, lv locationView, global string, router int64) (model.RouteLocation, error) {
	for _, v := range []string{lv.Path, lv.Backend} {
		if _, err := Quote(v); err != nil && !lv.Regex {
			return model.RouteLocation{}, err
		}
	}
	if lv.Regex {
		if _, err := QuoteRegex(lv.Path); err != nil {
			return model.RouteLocation{}, err
		}
	}
	profile, _, err := profiles.of(lv)
	if err != nil {
		return model.RouteLocation{}, err
	}
	rl := model.RouteLocation{Path: lv.Path, Exact: lv.Exact, Regex: lv.Regex, Backend: lv.Backend,
		SSLRedirect: lv.SSLRedirect, Profile: profile, PreserveTrailingSlash: lv.source.ProxySettings().PreserveTrailingSlash,
		NoRegex: lv.source.PathType == model.PathPriorityPrefix}
	var o model.RouteOptions
	if profile == "" {
		o.ConnectTimeout, o.SendTimeout, o.ReadTimeout = lv.Proxy.ConnectTimeout, lv.Proxy.SendTimeout, lv.Proxy.ReadTimeout
	} else {
		a := lv.source.AccessSettings().RateLimit
		if a.RPS > 0 || a.RPM > 0 || a.Connections > 0 {
			o.Ingress = lv.source.Ingress
		}
		o.AuthFile = lv.Access.AuthFile
		// auth-url, global-auth-url and mirror-target send requests to a
		// tenant's URL, which may resolve to nginx itself.
		rl.LoopGuard = lv.Access.Auth != nil || lv.Proxy.MirrorTo != nil
	}
	size := orDefault(lv.source.ProxySettings().BodySize, global)
	if n, ok := sizeBytes(size); ok && n > 0 && (router == 0 || n < router) {
		o.MaxBody = n
	}
	return rl.WithOptions(o), nil
}

func orDefault(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// routerBodySize is the largest client_max_body_size of any location of
// m, global for those without their own; "0" when one allows any size.
func routerBodySize(m model.Model, global string) string {
	largest, text := int64(-1), global
	for srv := range serversOf(&m) {
		for _, loc := range srv.Locations {
			size := orDefault(loc.ProxySettings().BodySize, global)
			n, ok := sizeBytes(size)
			if !ok {
				continue // newProxyView's checks refuse it
			}
			if n == 0 {
				return "0"
			}
			if n > largest {
				largest, text = n, size
			}
		}
	}
	return text
}

// sizeBytes reads an nginx size ("512", "8k", "1m", "2g"), as BodySize
// checks it.
func sizeBytes(size string) (int64, bool) {
	if !BodySize.MatchString(size) {
		return 0, false
	}
	return model.SizeBytes(size)
}
