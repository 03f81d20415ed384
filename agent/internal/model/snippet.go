package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/snippet"
)

// Snippet annotations (configuration-snippet, server-snippet,
// auth-snippet) and the ConfigMap's snippets, read as typed directives,
// never as text: package snippet tokenizes each with nginx's grammar and
// holds it against an allowlist; what it accepts becomes fields of the
// model (headers, proxy settings, auth_request_set, locations with a
// fixed answer) that render writes through its quoting function. One
// directive off the allowlist refuses its whole snippet (a Problem naming
// the directive and why); the rest of the Ingress is served.
//
// A proxy setting an annotation has too (proxy_read_timeout and
// proxy-read-timeout) lands on the same ProxySettings field: when both are
// set and disagree, the annotation wins and the snippet gets a Problem.
// Within snippets, configuration-snippet wins over server-snippet, which
// wins over the ConfigMap's location-snippet, server-snippet and
// http-snippet, header by header.

// Keys of the snippet annotations Build reads (without prefix).
const (
	configurationSnippetKey = "configuration-snippet"
	ServerSnippetKey        = "server-snippet"
	authSnippetKey          = "auth-snippet"
)

// GlobalSnippets are the ConfigMap's snippet keys as written ("" for
// none): their headers apply to every location, in this order, the later
// winning a header of the same name. CheckGlobalSnippet says what each
// refuses; a refused one is not applied.
type GlobalSnippets struct {
	HTTP, Server, Location string
}

// CheckGlobalSnippet checks the text of one of the ConfigMap's snippet
// keys (http-snippet, server-snippet, location-snippet): "" when it is
// accepted, else why it is refused.
func CheckGlobalSnippet(text string) string {
	if _, refusal := snippet.Parse(snippet.Global, text, snippet.Options{}); refusal != nil {
		return refusal.Error()
	}
	return ""
}

// SnippetSettings are what snippets give one location. The zero value is
// none. Lists are canonical strings, so that Location stays comparable.
// Values hold nginx variables written "${name}" (checked against the
// snippet allowlist), and literal text for ingress-nginx's per-location
// variables ($service_name and friends).
type SnippetSettings struct {
	// RequestHeaders are set on the request to the backend: "Name: value"
	// lines, one per name (compared without case); an empty value is not
	// sent. They replace the standard header of their name (Host,
	// X-Forwarded-For, ...).
	RequestHeaders string
	// ResponseHeaders are added to 2xx and 3xx responses (add_header),
	// AlwaysHeaders to every response (add_header ... always,
	// more_set_headers): "Name: value" lines.
	ResponseHeaders string
	AlwaysHeaders   string
	// SetHeaders are the "Name: value" lines of more_set_headers, which
	// replace a header of the response whoever wrote it (the backend or
	// nginx), when nginx has the headers-more module (HeadersMore);
	// without it they are in AlwaysHeaders and HideHeaders (the
	// emulation), and SetHeaders is "".
	SetHeaders string
	// HeadersMore says SetHeaders and ClearHeaders are written as
	// more_set_headers and more_clear_headers (Snapshot.HeadersMore); set
	// only when either holds a header.
	HeadersMore bool
	// HideHeaders are the backend's response headers not passed on,
	// ClearHeaders those the response never carries (more_clear_headers,
	// restysync's own X-Request-ID and Strict-Transport-Security
	// included), PassHeaders those nginx hides by default and passes
	// here: names joined by ",".
	HideHeaders  string
	ClearHeaders string
	PassHeaders  string
	// ServerTokensOff hides nginx's version in the location's responses.
	ServerTokensOff bool
	// AuthRequestSet are the auth-snippet's auth_request_set: "VAR
	// UPSTREAM" lines, VAR the nginx variable (snippet.AuthSetPrefix and
	// a number), UPSTREAM the auth response's variable
	// ("upstream_http_x_user").
	AuthRequestSet string
}

// FixedResponse is the answer of a location block of a server-snippet:
// it has no backend (Location.Backend is "") and answers by itself, after
// nginx's rules: return runs in the rewrite phase, before allow and deny.
type FixedResponse struct {
	// Set says the location is one.
	Set bool
	// Code is the status return answers with; 0 is no return: after
	// Rules the location answers 404 (it has no files to serve).
	Code int
	// Text is the body, or for 301, 302, 303, 307 and 308 the Location
	// URL, with "${name}" variables; it may hold a tab, CR or LF (a body).
	// "" is none.
	Text string
	// DefaultType is the body's Content-Type ("" nginx's text/plain).
	DefaultType string
	// Rules are allow and deny in order: "allow 10.0.0.0/8,deny all".
	Rules string
}

// snippetState is what Build holds of the snippets.
type snippetState struct {
	// off is Snapshot.SnippetAnnotationsOff.
	off bool
	// headersMore is Snapshot.HeadersMore.
	headersMore bool
	// global are the accepted ConfigMap snippets, lowest precedence first.
	global []snippet.Result
	// byIngress by "namespace/name"; order the Ingresses, oldest first.
	byIngress map[string]*ingressSnippets
	order     []string
}

func newSnippetState(s Snapshot) snippetState {
	return snippetState{off: s.SnippetAnnotationsOff, headersMore: s.HeadersMore,
		global: parseGlobalSnippets(s.GlobalSnippets, snippet.Options{HeadersMore: s.HeadersMore})}
}

// ingressSnippets are what the snippets of one Ingress said.
type ingressSnippets struct {
	ing *networkingv1.Ingress
	// keys are the full annotation keys, by short key.
	keys map[string]string
	// server and config are the accepted server- and configuration-snippet.
	server, config snippet.Result
	// authSets are the auth-snippet's; authVars their names and nginx
	// variables.
	authSets []snippet.AuthSet
	authVars map[string]string
	// locations are the server-snippet's location blocks, checked.
	locations []snippetLocation
}

// snippetLocation is a checked location block of a server-snippet.
type snippetLocation struct {
	spec     snippet.Location
	path     string
	pathType PathType
	// describe is how a Problem names it: "location ~ ^/x (line 2)".
	describe string
}

// parseGlobalSnippets returns the accepted ConfigMap snippets, lowest
// precedence first.
func parseGlobalSnippets(g GlobalSnippets, opts snippet.Options) []snippet.Result {
	var out []snippet.Result
	for _, text := range []string{g.HTTP, g.Server, g.Location} {
		if strings.TrimSpace(text) == "" {
			continue
		}
		if res, refusal := snippet.Parse(snippet.Global, text, opts); refusal == nil {
			out = append(out, res)
		}
	}
	return out
}

// snippetAnnotationsOffReason is the Problem of a snippet annotation when
// snippets are turned off.
const snippetAnnotationsOffReason = "snippet annotations are turned off (--allow-snippet-annotations=false, or the ConfigMap's " +
	"allow-snippet-annotations: \"false\"); ignored, the rest of the Ingress is served"

// snippetRefused reports a refused snippet annotation.
func (b *builder) snippetRefused(ing *networkingv1.Ingress, key string, r *snippet.Refusal) {
	b.problems = append(b.problems, Problem{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name, Refused: true,
		Reason: clipReason(fmt.Sprintf("annotation %s: refused: %s; the snippet is ignored, the rest of the Ingress is served", key, r.Error()))})
}

// readSnippets reads the snippet annotations of ing (id "namespace/name"),
// after its proxy settings (recordProxy) and before its access settings,
// whose auth-signin may use the auth-snippet's variables.
func (b *builder) readSnippets(ing *networkingv1.Ingress, id string) {
	st := &ingressSnippets{ing: ing, keys: map[string]string{}}
	texts := map[string]string{}
	for _, short := range []string{authSnippetKey, ServerSnippetKey, configurationSnippetKey} {
		text, key, ok := lookupAnnotation(ing, short)
		if !ok {
			continue
		}
		st.keys[short] = key
		if b.snippets.off {
			b.problems = append(b.problems, Problem{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name, Refused: true,
				Reason: fmt.Sprintf("annotation %s: refused: %s", key, snippetAnnotationsOffReason)})
			continue
		}
		texts[short] = text
	}
	if text, ok := texts[authSnippetKey]; ok {
		res, refusal := snippet.Parse(snippet.Auth, text, snippet.Options{})
		if refusal != nil {
			b.snippetRefused(ing, st.keys[authSnippetKey], refusal)
		} else if len(res.AuthSets) > 0 {
			st.authSets, st.authVars = res.AuthSets, snippet.AuthVariables(res.AuthSets)
		}
	}
	opts := snippet.Options{AuthVariables: st.authVars, BufferSettings: true, HeadersMore: b.snippets.headersMore}
	if text, ok := texts[ServerSnippetKey]; ok {
		res, refusal := snippet.Parse(snippet.Server, text, opts)
		var locations []snippetLocation
		if refusal == nil {
			locations, refusal = checkSnippetLocations(res.Locations)
		}
		if refusal != nil {
			b.snippetRefused(ing, st.keys[ServerSnippetKey], refusal)
		} else {
			st.server, st.locations = res, locations
		}
	}
	if text, ok := texts[configurationSnippetKey]; ok {
		res, refusal := snippet.Parse(snippet.Configuration, text, opts)
		if refusal != nil {
			b.snippetRefused(ing, st.keys[configurationSnippetKey], refusal)
		} else {
			st.config = res
		}
	}
	b.applySnippetProxy(st, id)
	if b.snippets.byIngress == nil {
		b.snippets.byIngress = map[string]*ingressSnippets{}
	}
	b.snippets.byIngress[id] = st
	b.snippets.order = append(b.snippets.order, id)
}

// authSnippetVariable looks up a variable the auth-snippet of ing defines
// (for auth-signin and auth-request-redirect; extauth.go), by the name
// written, and returns the nginx variable.
func (b *builder) authSnippetVariable(ing *networkingv1.Ingress) func(string) (string, bool) {
	st := b.snippets.byIngress[ing.Namespace+"/"+ing.Name]
	if st == nil || len(st.authVars) == 0 {
		return nil
	}
	return func(name string) (string, bool) {
		v, ok := st.authVars[name]
		return v, ok
	}
}

// checkSnippetLocations checks the paths of a server-snippet's location
// blocks as the model checks Ingress paths, and turns each into a path
// and path type.
func checkSnippetLocations(specs []snippet.Location) ([]snippetLocation, *snippet.Refusal) {
	var out []snippetLocation
	for _, spec := range specs {
		l := snippetLocation{spec: spec, path: spec.Path}
		l.describe = fmt.Sprintf("location %s (line %d)", strings.TrimSpace(spec.Modifier+" "+clip(spec.Path)), spec.Line)
		var reason string
		switch spec.Modifier {
		case "=":
			l.pathType, reason = PathExact, validPath(spec.Path)
		case "":
			l.pathType, reason = PathLiteralPrefix, validPath(spec.Path)
		case "^~":
			l.pathType, reason = PathPriorityPrefix, validPath(spec.Path)
		case "~", "~*":
			l.pathType = PathRegex
			l.path = snippetRegexPath(spec.Path, spec.Modifier == "~")
			reason = validRegexPath(l.path)
		}
		if reason != "" {
			return nil, &snippet.Refusal{Directive: "location", Line: spec.Line, Reason: fmt.Sprintf("the path %q %s", clip(spec.Path), reason)}
		}
		out = append(out, l)
	}
	return out, nil
}

// snippetRegexPath turns the regex of "location ~ RE" (or "~*"), which
// nginx searches anywhere in the path, into a PathRegex: a regex matched
// case-insensitively from the start of the path, starting with "/". An
// RE anchored at "^/" keeps its text; another is searched for after any
// prefix. A case-sensitive one ("~") turns case-insensitivity off after
// the first "/", which has no case.
func snippetRegexPath(re string, caseSensitive bool) string {
	flag := ""
	if caseSensitive {
		flag = "(?-i)"
	}
	if rest, ok := strings.CutPrefix(re, "^/"); ok {
		return "/" + flag + rest
	}
	return "/?" + flag + ".*?(?:" + re + ")"
}

// applySnippetProxy puts the proxy settings of st's snippets on the
// Ingress's ProxySettings (b.proxySettings), server-snippet first, then
// configuration-snippet. A setting an annotation has set to another value
// is a Problem on the snippet and the annotation's stays.
func (b *builder) applySnippetProxy(st *ingressSnippets, id string) {
	if len(st.server.Settings)+len(st.config.Settings) == 0 {
		return
	}
	ing := st.ing
	before := b.proxySettings[id]
	p := before
	apply := func(short string, s snippet.Setting) {
		key := st.keys[short]
		conflict := func(annotation, have string) {
			_, full, _ := lookupAnnotation(ing, annotation)
			b.ingressProblem(ing, fmt.Sprintf("annotation %s: %s %s (line %d) disagrees with annotation %s %q; the annotation's is used",
				key, s.Directive, s.Value, s.Line, full, have))
		}
		// set applies the snippet's value to the field of ProxySettings
		// that directive sets, unless the annotation of that field (the
		// table's Directive column) set it.
		set := func(directive string) {
			text, number := proxyField(&p, directive)
			if text == nil && number == nil {
				return
			}
			annotation := annotationOfDirective(directive)
			if have := fieldOf(before, directive); have != "" {
				if have != s.Value {
					conflict(annotation, have)
				}
				return
			}
			if text != nil {
				*text = s.Value
			} else {
				*number, _ = strconv.Atoi(s.Value)
			}
		}
		switch s.Directive {
		case "proxy_ssl_verify":
			on := s.Value == "on"
			annotation := annotationOfDirective(s.Directive)
			if value, _, found := lookupAnnotation(ing, annotation); found && (value == "on" || value == "off") {
				if (value == "on") != on {
					conflict(annotation, value)
				}
				return
			}
			if on {
				p.SSL.Verify, p.SSL.VerifyDepth = true, 1
			} else {
				p.SSL.Verify, p.SSL.VerifyDepth = false, 0
			}
		case "proxy_buffers":
			// "NUMBER SIZE": the number of buffers, and the size of each,
			// which is proxy_buffer_size's too (as ingress-nginx writes them).
			number, size, _ := strings.Cut(s.Value, " ")
			s.Value = number
			set("proxy_buffers")
			s.Value = size
			set("proxy_buffer_size")
		default:
			set(s.Directive)
		}
	}
	for _, s := range st.server.Settings {
		apply(ServerSnippetKey, s)
	}
	for _, s := range st.config.Settings {
		apply(configurationSnippetKey, s)
	}
	if buffers, ok := p.Buffers(); ok {
		if reason := buffers.Check(); reason != "" {
			key := st.keys[configurationSnippetKey]
			if len(st.config.Settings) == 0 {
				key = st.keys[ServerSnippetKey]
			}
			b.ingressProblem(ing, fmt.Sprintf("annotation %s: the proxy buffers it sets: %s; the annotations' buffers are used", key, reason))
			p.BufferSize, p.BuffersNumber, p.BusyBuffersSize = before.BufferSize, before.BuffersNumber, before.BusyBuffersSize
		}
	}
	if p == before {
		return
	}
	if b.proxySettings == nil {
		b.proxySettings = make(map[string]ProxySettings)
	}
	b.proxySettings[id] = p
}

// proxyField returns the field of p that the snippet directive sets: a
// text one or a number one, or neither when the directive sets none.
func proxyField(p *ProxySettings, directive string) (text *string, number *int) {
	switch directive {
	case "proxy_http_version":
		return &p.HTTPVersion, nil
	case "proxy_connect_timeout":
		return nil, &p.ConnectTimeout
	case "proxy_send_timeout":
		return nil, &p.SendTimeout
	case "proxy_read_timeout":
		return nil, &p.ReadTimeout
	case "proxy_buffering":
		return &p.Buffering, nil
	case "proxy_request_buffering":
		return &p.RequestBuffering, nil
	case "proxy_buffer_size":
		return &p.BufferSize, nil
	case "client_max_body_size":
		return &p.BodySize, nil
	case "client_body_buffer_size":
		return &p.ClientBodyBufferSize, nil
	case "proxy_busy_buffers_size":
		return &p.BusyBuffersSize, nil
	case "proxy_buffers":
		return nil, &p.BuffersNumber
	}
	return nil, nil
}

// fieldOf returns, as text, the ProxySettings field the snippet directive
// sets ("" when it holds the default): an annotation present with a bad
// value left its field at the default, and then a snippet's value applies.
func fieldOf(p ProxySettings, directive string) string {
	text, number := proxyField(&p, directive)
	switch {
	case text != nil:
		return *text
	case number != nil && *number != 0:
		return strconv.Itoa(*number)
	}
	return ""
}

// locationValues are the values of ingress-nginx's per-location variables
// for one location.
type locationValues map[string]string

func newLocationValues(loc Location, host string) locationValues {
	namespace, name, _ := strings.Cut(loc.Ingress, "/")
	v := locationValues{snippet.LocationNamespace: namespace, snippet.LocationIngressName: name, snippet.LocationServerName: host}
	if host == "" {
		v[snippet.LocationServerName] = "_"
	}
	if _, service, ok := BackendService(loc.Backend); ok {
		v[snippet.LocationServiceName] = service
		_, rest, _ := strings.Cut(baseBackendName(loc.Backend), "/")
		_, port, _ := strings.Cut(rest, ":")
		v[snippet.LocationServicePort] = port
	}
	return v
}

// resolve writes value canonically: nginx variables as "${name}", the
// per-location ones as their text.
func (lv locationValues) resolve(value snippet.Value) string {
	var b strings.Builder
	for _, part := range value {
		switch {
		case part.Var.Name == "":
			b.WriteString(part.Text)
		case part.Var.PerLocation != "":
			b.WriteString(lv[part.Var.PerLocation])
		default:
			b.WriteString("${" + part.Var.Nginx + "}")
		}
	}
	return b.String()
}

// headerSet collects headers by name (without case): a later layer
// replaces an earlier one's headers of the names it sets.
type headerSet struct {
	names []string            // lower case, in the order first set
	lines map[string][]string // by lower-case name: "Name: value" lines
}

func (h *headerSet) layer(headers []snippet.Header, values locationValues, keep func(snippet.Header) bool) {
	seen := map[string]bool{}
	for _, hd := range headers {
		if keep != nil && !keep(hd) {
			continue
		}
		lower := strings.ToLower(hd.Name)
		if h.lines == nil {
			h.lines = map[string][]string{}
		}
		if _, ok := h.lines[lower]; !ok {
			h.names = append(h.names, lower)
		}
		if !seen[lower] {
			h.lines[lower] = nil // this layer replaces earlier ones
			seen[lower] = true
		}
		h.lines[lower] = append(h.lines[lower], hd.Name+": "+values.resolve(hd.Value))
	}
}

// last keeps one line per name, the last one (request headers: nginx
// would send a header set twice twice).
func (h *headerSet) last() {
	for name, lines := range h.lines {
		if len(lines) > 1 {
			h.lines[name] = lines[len(lines)-1:]
		}
	}
}

// drop removes the header of lower-case name.
func (h *headerSet) drop(name string) {
	if _, ok := h.lines[name]; ok {
		delete(h.lines, name)
		h.names = slices.DeleteFunc(h.names, func(n string) bool { return n == name })
	}
}

func (h *headerSet) String() string {
	var out []string
	for _, name := range h.names {
		out = append(out, h.lines[name]...)
	}
	return strings.Join(out, "\n")
}

// nameList joins names without duplicates (compared without case).
func nameList(lists ...[]string) string {
	var out []string
	seen := map[string]bool{}
	for _, list := range lists {
		for _, n := range list {
			if lower := strings.ToLower(n); !seen[lower] {
				seen[lower] = true
				out = append(out, n)
			}
		}
	}
	return strings.Join(out, ",")
}

// clientCertHeaders are the request headers a location that checks client
// certificates sets (clienttls.go).
var clientCertHeaders = []string{"ssl-client-verify", "ssl-client-subject-dn", "ssl-client-issuer-dn", "ssl-client-cert"}

// finishSnippet gives loc, on the server of host, the headers of the
// ConfigMap's snippets and of its Ingress's snippets. A header an
// annotation sets too (upstream-vhost's Host, auth-response-headers,
// custom-headers) is a Problem on the snippet, and the annotation's stays.
// It writes ls.snippet, reading ls's proxy and access settings.
func (b *builder) finishSnippet(loc Location, ls *locationSettings, host string) {
	if loc.FixedSettings().Set {
		return
	}
	st := b.snippets.byIngress[loc.Ingress]
	if len(b.snippets.global) == 0 && (st == nil || (len(st.authSets) == 0 && isEmptyResult(st.server) && isEmptyResult(st.config))) {
		return
	}
	values := newLocationValues(loc, host)
	taken := map[string]string{} // request header (lower case) → the annotation that sets it
	if ls.proxy.UpstreamVhost != "" {
		taken["host"] = keyUpstreamVhost
	}
	if ls.proxy.XForwardedPrefix != "" {
		taken[keyXForwardedPrefix] = keyXForwardedPrefix
	}
	if h := ls.access.ExternalAuth.ResponseHeaders; h != "" {
		for _, name := range strings.Split(h, ",") {
			taken[strings.ToLower(name)] = keyAuthResponseHeaders
		}
	}
	if ls.access.ClientCert.Headers {
		for _, name := range clientCertHeaders {
			taken[name] = keyAuthTLSSecret
		}
	}
	custom := map[string]bool{} // response headers custom-headers sets
	if ls.proxy.ResponseHeaders != "" {
		custom["x-request-id"], custom["strict-transport-security"] = true, true
		for _, line := range strings.Split(ls.proxy.ResponseHeaders, "\n") {
			name, _, _ := strings.Cut(line, ":")
			custom[strings.ToLower(name)] = true
		}
	}
	var req, resp, always, set headerSet
	var hide, clear, pass []string
	s := &ls.snippet
	layer := func(res snippet.Result, short string) {
		report := st != nil && short != ""
		keepReq := func(h snippet.Header) bool {
			annotation, ok := taken[strings.ToLower(h.Name)]
			if ok && report {
				b.ingressProblem(st.ing, fmt.Sprintf("annotation %s: %s %s (line %d): the annotation %s sets this header; the annotation's is used",
					st.keys[short], h.Directive, h.Name, h.Line, annotation))
			}
			return !ok
		}
		keepResp := func(h snippet.Header) bool {
			ok := custom[strings.ToLower(h.Name)]
			if ok && report {
				b.ingressProblem(st.ing, fmt.Sprintf("annotation %s: %s %s (line %d): the annotation custom-headers sets the response headers; the annotation's are used",
					st.keys[short], h.Directive, h.Name, h.Line))
			}
			return !ok
		}
		req.layer(res.RequestHeaders, values, keepReq)
		var plain, alw, more []snippet.Header
		for _, h := range res.ResponseHeaders {
			switch {
			case h.Directive == "more_set_headers" && b.snippets.headersMore:
				more = append(more, h)
			case h.Always:
				alw = append(alw, h)
			default:
				plain = append(plain, h)
			}
		}
		resp.layer(plain, values, keepResp)
		always.layer(alw, values, keepResp)
		set.layer(more, values, keepResp)
		hide = append(hide, res.HideHeaders...)
		clear = append(clear, res.ClearHeaders...)
		pass = append(pass, res.PassHeaders...)
		// The ConfigMap's server_tokens off is its server-tokens key
		// (package configmap).
		s.ServerTokensOff = s.ServerTokensOff || (short != "" && res.ServerTokensOff)
	}
	for _, g := range b.snippets.global {
		layer(g, "")
	}
	if st != nil {
		layer(st.server, ServerSnippetKey)
		layer(st.config, configurationSnippetKey)
	}
	req.last()
	set.last()
	// more_set_headers replaces the header whoever wrote it: an
	// add_header of the same name would add a second one.
	for _, name := range set.names {
		resp.drop(name)
		always.drop(name)
	}
	s.RequestHeaders, s.ResponseHeaders, s.AlwaysHeaders = req.String(), resp.String(), always.String()
	s.SetHeaders = set.String()
	s.HideHeaders, s.PassHeaders = nameList(hide), nameList(pass)
	// custom-headers writes the response headers, restysync's own too.
	clear = slices.DeleteFunc(clear, func(n string) bool { return custom[strings.ToLower(n)] })
	s.ClearHeaders = nameList(clear)
	s.HeadersMore = b.snippets.headersMore && (s.SetHeaders != "" || s.ClearHeaders != "")
	if st != nil && len(st.authSets) > 0 {
		// Set without an auth service too: the variables must exist for
		// the headers that name them.
		if ls.access.ExternalAuth.URL == "" && ls.access.Denied == "" {
			b.ingressProblem(st.ing, fmt.Sprintf("annotation %s: the Ingress has no auth-url (nor the ConfigMap a global-auth-url): its auth_request_set lines do nothing",
				st.keys[authSnippetKey]))
		}
		var lines []string
		for _, a := range st.authSets {
			lines = append(lines, a.Nginx+" "+a.Upstream)
		}
		s.AuthRequestSet = strings.Join(lines, "\n")
	}
}

func isEmptyResult(r snippet.Result) bool {
	return len(r.RequestHeaders)+len(r.ResponseHeaders)+len(r.HideHeaders)+len(r.ClearHeaders)+len(r.PassHeaders) == 0 && !r.ServerTokensOff
}

// addSnippetLocations adds the location blocks of server-snippets to the
// servers of their Ingresses' hosts, after every Ingress path: a path an
// Ingress serves wins, and the snippet location is a Problem. Between
// snippets, the oldest Ingress wins.
func (b *builder) addSnippetLocations() {
	for _, id := range b.snippets.order {
		st := b.snippets.byIngress[id]
		if len(st.locations) == 0 {
			continue
		}
		ing := st.ing
		key := st.keys[ServerSnippetKey]
		for _, host := range snippetHosts(ing) {
			locations := b.server(host)
			for _, sl := range st.locations {
				if owner, taken := snippetLocationTaken(locations, sl); taken {
					what := "Ingress " + owner.Ingress + " serves that path"
					if owner.FixedSettings().Set {
						what = "an older server-snippet (Ingress " + owner.Ingress + ") has that location"
					}
					b.ingressProblem(ing, fmt.Sprintf("annotation %s: %s: %s on %s; the snippet location is left out", key, sl.describe, what, describeHost(host)))
					continue
				}
				locations[locationKey{sl.path, sl.pathType}] = b.fixedLocation(st, id, host, sl)
			}
		}
	}
}

// snippetHosts are the hosts a server-snippet of ing applies to: those
// of its rules, and the default server for a rule without a host (or an
// Ingress of a default backend only).
func snippetHosts(ing *networkingv1.Ingress) []string {
	var hosts []string
	if len(ing.Spec.Rules) == 0 {
		return []string{""}
	}
	for _, rule := range ing.Spec.Rules {
		if rule.Host != "" && validHost(rule.Host) != "" {
			continue
		}
		if !slices.Contains(hosts, rule.Host) {
			hosts = append(hosts, rule.Host)
		}
	}
	return hosts
}

// snippetLocationTaken returns the location of a server that takes the
// place of sl: the same nginx location, or the same path as an Ingress
// writes it (an exact "/p" and an Ingress's Prefix "/p", whose "= /p" it
// is; a prefix "/p" or "/p/" and a Prefix "/p").
func snippetLocationTaken(locations map[locationKey]Location, sl snippetLocation) (Location, bool) {
	var keys []locationKey
	switch sl.pathType {
	case PathExact:
		keys = []locationKey{{sl.path, PathExact}, {sl.path, PathPrefix}}
	case PathLiteralPrefix, PathPriorityPrefix:
		keys = []locationKey{{sl.path, PathLiteralPrefix}, {sl.path, PathPriorityPrefix}, {trimPrefixPath(sl.path), PathPrefix}}
	default:
		keys = []locationKey{{sl.path, sl.pathType}}
	}
	for _, k := range keys {
		if loc, ok := locations[k]; ok {
			return loc, true
		}
	}
	return Location{}, false
}

// fixedLocation is the model location of sl on host. Its response headers
// are its own add_header lines, or, without any, those it inherits from
// the server-snippet's top level and the ConfigMap's snippets, as nginx
// inherits add_header only into a location that has none. An add_header
// Content-Type with a literal value becomes its default_type: nginx would
// otherwise send two Content-Type headers.
func (b *builder) fixedLocation(st *ingressSnippets, id, host string, sl snippetLocation) Location {
	loc := Location{Path: sl.path, PathType: sl.pathType, Ingress: id}
	values := newLocationValues(loc, host)
	f := &FixedResponse{}
	loc.Fixed = f
	f.Set, f.Code, f.DefaultType = true, sl.spec.Code, sl.spec.DefaultType
	f.Text = values.resolve(sl.spec.Text)
	f.Rules = strings.Join(sl.spec.Rules, ",")
	var own []snippet.Header
	for _, h := range sl.spec.Headers {
		if strings.EqualFold(h.Name, "Content-Type") {
			if text, ok := h.Value.Literal(); ok && text != "" {
				f.DefaultType = text
				continue
			}
		}
		own = append(own, h)
	}
	var resp, always headerSet
	split := func(headers []snippet.Header) {
		var plain, alw []snippet.Header
		for _, h := range headers {
			if h.Always {
				alw = append(alw, h)
			} else {
				plain = append(plain, h)
			}
		}
		resp.layer(plain, values, nil)
		always.layer(alw, values, nil)
	}
	if len(sl.spec.Headers) > 0 {
		split(own)
	} else {
		for _, g := range b.snippets.global {
			split(g.ResponseHeaders)
		}
		split(st.server.ResponseHeaders)
	}
	headers := SnippetSettings{ResponseHeaders: resp.String(), AlwaysHeaders: always.String(), ServerTokensOff: st.server.ServerTokensOff}
	loc.Snippet = shareSetting(&b.shared.snippet, headers)
	return loc
}

// snippetCheck is the Check of a snippet annotation of kind: its text as
// snippet.Parse reads it without the Ingress's options (which variables
// its paths give are known to Build alone).
func snippetCheck(kind snippet.Context) func(string) string {
	return func(text string) string {
		if _, refusal := snippet.Parse(kind, text, snippet.Options{}); refusal != nil {
			return refusal.Error()
		}
		return ""
	}
}
