package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// External authentication (model.ExternalAuth): a location's profile asks
// auth_request of an internal location, one per distinct auth service
// setting, in the server block; a 401 goes to a named location that
// redirects to the sign-in URL. The subrequest shares the request's
// variables, so the profile computes $restysync_escaped_request_uri before
// the auth location's URL uses it.
//
// Every Ingress shares one server block and one cache zone, so an auth
// location is named by a hash of every setting that decides the service's
// answer (hashName: no tenant can make its settings collide with
// another's and take its location), and a cached answer is keyed by what the
// service hears that the user's auth-cache-key may leave out: the scheme
// and host the router matched (and a trusted proxy's X-Forwarded-Host),
// the client's method, the location, and the values of the variables in
// its URL and proxy-set-headers (see authCacheKey). ingress-nginx keys by
// its server's name, the location's path and the user's key; we have no
// server per host, and path-based decisions belong in the user's key
// ($request_uri), as there.
//
// The auth service hears the host the router matched: X-Original-URL and
// $http_host in auth URLs are $restysync_http_host, which is $host (nginx
// takes it from an absolute request line before the Host header, in lower
// case, and the router matches it) with the Host header's port when that
// header names the same host.

// authPrefix is the URI of the internal auth locations.
const authPrefix = "/_restysync/auth/"

// authView is what a location's profile prints for external auth.
type authView struct {
	// Location is the internal location auth_request asks.
	Location string
	// Headers are the auth response's headers copied onto the request.
	Headers []authHeaderView
	// Signin is the named location a 401 goes to; "" answers the 401.
	Signin string
	// AlwaysSetCookie sends the auth response's Set-Cookie with every
	// response (else 2xx and 3xx ones only).
	AlwaysSetCookie bool
	// Sets are the auth-snippet's auth_request_set lines (snippet.go):
	// Var takes the auth response's Upstream; Name is unused.
	Sets []authHeaderView
}

type authHeaderView struct {
	Name     string // as the backend gets it
	Var      string // auth_request_set's variable, "restysync_auth_<n>"
	Upstream string // $upstream_http_<name>
}

// authLocationView is one internal location that asks an auth service.
type authLocationView struct {
	Location string
	// Target, Redirect and CacheKey are strings whose ${vars} nginx expands
	// (the template quotes them with quoteVars); Redirect "" sends
	// $request_uri.
	Target        string
	Method        string
	Redirect      string
	CacheKey      string
	CacheDuration string
	// ProxyHeaders are set on the request to the auth service
	// (auth-proxy-set-headers); values with ${vars}, quoted with quoteVars.
	ProxyHeaders []proxyHeaderView
}

type proxyHeaderView struct{ Name, Value string }

// signinView is a named location that redirects a 401 to a sign-in URL.
type signinView struct {
	Name string
	URL  string // with ${vars}; the template quotes it with quoteVars
}

// QuoteWithVariables quotes s like Quote but lets through variables written
// "${name}" (lower-case letters, digits, "_"), which nginx expands; any
// other "$" is refused. Only the model's canonical values, whose variables
// it has checked against its allow list, come here.
func QuoteWithVariables(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if i+1 >= len(s) || s[i+1] != '{' || end < 0 || !isVarName(s[i+2:i+end]) {
			return "", fmt.Errorf("%q: a \"$\" that is not ${name}", s)
		}
	}
	return quote(s, true)
}

func isVarName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return s != ""
}

func newAuthLocationView(a model.ExternalAuth) (authLocationView, error) {
	v := authLocationView{Target: a.URL, Redirect: a.RequestRedirect}
	if _, err := QuoteWithVariables(a.URL); err != nil {
		return v, fmt.Errorf("auth URL: %w", err)
	}
	if _, err := QuoteWithVariables(a.RequestRedirect); err != nil {
		return v, fmt.Errorf("auth request redirect: %w", err)
	}
	if a.CacheKey != "" {
		if _, err := QuoteWithVariables(a.CacheKey); err != nil {
			return v, fmt.Errorf("auth cache key: %w", err)
		}
		for _, f := range strings.Fields(a.CacheDuration) {
			if !isVarName(f) { // digits and a unit letter
				return v, fmt.Errorf("auth cache duration %q", a.CacheDuration)
			}
		}
		v.CacheDuration = a.CacheDuration
	}
	if a.Method != "" {
		if !isVarName(strings.ToLower(a.Method)) {
			return v, fmt.Errorf("auth method %q", a.Method)
		}
		v.Method = a.Method
	}
	if a.ProxySetHeaders != "" {
		for _, line := range strings.Split(a.ProxySetHeaders, "\n") {
			name, value, ok := strings.Cut(line, ": ")
			if !ok || !isHeaderName(name) {
				return v, fmt.Errorf("auth proxy header %q", line)
			}
			if _, err := QuoteWithVariables(value); err != nil {
				return v, fmt.Errorf("auth proxy header %s: %w", name, err)
			}
			v.ProxyHeaders = append(v.ProxyHeaders, proxyHeaderView{Name: name, Value: value})
		}
	}
	v.Location = hashName(authPrefix, v.Target, v.Method, v.Redirect, a.CacheKey, v.CacheDuration, a.ProxySetHeaders)
	if a.CacheKey != "" {
		v.CacheKey = authCacheKey(v, a.CacheKey)
	}
	return v, nil
}

// authCacheKey is the proxy_cache_key of auth location v whose user key
// (auth-cache-key) is userKey: the scheme and host the auth service is
// told (X-Original-URL, and X-Forwarded-Host, which a trusted proxy
// sets), the client's method (X-Original-Method), the location (every
// setting), the values its URL and proxy-set-headers take for this
// request when they use variables, then the user's key. Spaces part them:
// the user's key has none, and nginx refuses them in the request line and
// Host header.
func authCacheKey(v authLocationView, userKey string) string {
	parts := []string{"${restysync_forwarded_proto}://${restysync_http_host}", "${restysync_forwarded_host}", "${request_method}", v.Location}
	if strings.Contains(v.Target, "${") {
		parts = append(parts, "${restysync_auth_target}")
	}
	for _, h := range v.ProxyHeaders {
		if strings.Contains(h.Value, "${") {
			parts = append(parts, h.Value)
		}
	}
	return strings.Join(append(parts, userKey), " ")
}

func newAuthView(a model.ExternalAuth) (*authView, error) {
	loc, err := newAuthLocationView(a)
	if err != nil {
		return nil, err
	}
	v := &authView{Location: loc.Location, AlwaysSetCookie: a.AlwaysSetCookie}
	if a.ResponseHeaders != "" {
		for _, name := range strings.Split(a.ResponseHeaders, ",") {
			if !isHeaderName(name) {
				return nil, fmt.Errorf("auth response header %q", name)
			}
			lower := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
			v.Headers = append(v.Headers, authHeaderView{Name: name, Var: "restysync_auth_" + lower, Upstream: "upstream_http_" + lower})
		}
	}
	if a.Signin != "" {
		s, err := newSigninView(a.Signin)
		if err != nil {
			return nil, err
		}
		v.Signin = s.Name
	}
	return v, nil
}

func newSigninView(url string) (signinView, error) {
	if _, err := QuoteWithVariables(url); err != nil {
		return signinView{}, fmt.Errorf("auth sign-in URL: %w", err)
	}
	return signinView{Name: hashName("@restysync_signin_", url), URL: url}, nil
}

// isHeaderName: letters, digits and "-" only, which is what a variable
// name made of it can hold.
func isHeaderName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return s != "" && len(s) <= 128
}

// authLocations returns the internal auth and sign-in locations of m's
// locations, each once, sorted by name.
func authLocations(m model.Model) ([]authLocationView, []signinView, error) {
	authNames, signinNames := nameTable{}, nameTable{}
	var auths []authLocationView
	var signins []signinView
	for loc := range m.AllLocations() {
		a := loc.AccessSettings().ExternalAuth
		if a.URL == "" || loc.AccessSettings().Denied != "" {
			continue
		}
		v, err := newAuthLocationView(a)
		if err != nil {
			return nil, nil, fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
		}
		if auths, err = declare(authNames, auths, v.Location, v, ownerOf(loc)); err != nil {
			return nil, nil, err
		}
		if a.Signin != "" {
			s, err := newSigninView(a.Signin)
			if err != nil {
				return nil, nil, fmt.Errorf("path %q of %s: %w", loc.Path, loc.Ingress, err)
			}
			if signins, err = declare(signinNames, signins, s.Name, s, ownerOf(loc)); err != nil {
				return nil, nil, err
			}
		}
	}
	slices.SortFunc(auths, func(a, b authLocationView) int { return strings.Compare(a.Location, b.Location) })
	slices.SortFunc(signins, func(a, b signinView) int { return strings.Compare(a.Name, b.Name) })
	return auths, signins, nil
}
