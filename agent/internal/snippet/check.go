package snippet

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/restysync/restysync/agent/internal/chars"
)

// Context is where a snippet goes, which decides what it may hold.
type Context int

const (
	// Configuration is the annotation configuration-snippet: it applies to
	// each location of the Ingress.
	Configuration Context = iota + 1
	// Server is the annotation server-snippet: its top-level directives
	// apply to the Ingress's locations on its hosts, and it may add
	// location blocks with a fixed answer.
	Server
	// Auth is the annotation auth-snippet: auth_request_set next to the
	// location's auth_request.
	Auth
	// Global is the ConfigMap's http-snippet, server-snippet and
	// location-snippet: headers and server_tokens for every location.
	Global
)

// SettingDirectives are the directives a snippet sets a proxy setting of
// the model with: those of the Directive column of model.Annotations (its
// test checks they are the same), each setting what an annotation sets.
var SettingDirectives = []string{
	"proxy_ssl_verify", "proxy_http_version", "proxy_connect_timeout", "proxy_send_timeout", "proxy_read_timeout",
	"proxy_buffering", "proxy_request_buffering", "proxy_buffer_size", "client_max_body_size",
	"proxy_buffers", "client_body_buffer_size", "proxy_busy_buffers_size",
}

// Options are what Check needs to know of the Ingress besides the text.
type Options struct {
	// AuthVariables are the names (without "$") the Ingress's auth-snippet
	// sets with auth_request_set, with their nginx variables
	// (AuthVariables): values of the other snippets may use them.
	AuthVariables map[string]string
	// BufferSettings accepts proxy_buffers, client_body_buffer_size and
	// proxy_busy_buffers_size (the model has fields for them); without it
	// they are refused as not supported yet.
	BufferSettings bool
	// HeadersMore says nginx has the headers-more module
	// (render.Settings.HeadersMore): more_set_headers and
	// more_clear_headers may then name the headers nginx writes itself
	// (Server, Date, Content-Type); without it they are refused, as the
	// emulation cannot replace them.
	HeadersMore bool
}

// Refusal is why a snippet is refused: the first directive off the
// allowlist, its line and the reason. Directive is "" when the text does
// not parse.
type Refusal struct {
	Directive string
	Line      int
	Reason    string
}

func (r *Refusal) Error() string {
	switch {
	case r.Directive == "" && r.Line == 0:
		return r.Reason
	case r.Directive == "":
		return fmt.Sprintf("line %d: %s", r.Line, r.Reason)
	}
	return fmt.Sprintf("%s (line %d): %s", r.Directive, r.Line, r.Reason)
}

// Header is one header a snippet sets: Value "" on a request header
// means it is not sent.
type Header struct {
	Name  string
	Value Value
	// Always adds a response header to every response, not only to 2xx
	// and 3xx ones (add_header's "always"; more_set_headers always does).
	Always    bool
	Directive string
	Line      int
}

// Setting is a proxy setting that an annotation has too, checked and
// written canonically: "on"/"off", "1.0"/"1.1", seconds for timeouts
// ("90"), an nginx size ("8k"), "NUMBER SIZE" for proxy_buffers.
type Setting struct {
	Directive string
	Value     string
	Line      int
}

// Location is a location block of a server-snippet: no backend, a fixed
// answer.
type Location struct {
	// Modifier is "" (a prefix), "^~" (a prefix that stops the regex
	// search), "=" (exact), "~" (regex) or "~*" (case-insensitive regex).
	Modifier string
	Path     string
	Line     int
	// Code is the status of its return (0: none: after Rules, the
	// location answers 404), Text its body or, for a redirect code, the
	// URL ("" none).
	Code        int
	Text        Value
	DefaultType string
	Headers     []Header
	// Rules are allow/deny in order: "allow 10.0.0.0/8", "deny all".
	Rules []string
}

// AuthSet is one auth_request_set: Var (without "$", as written; Nginx
// the variable nginx.conf names, see AuthSetPrefix) takes the auth
// response's Upstream variable ("upstream_http_x_user",
// "upstream_status").
type AuthSet struct {
	Var      string
	Nginx    string
	Upstream string
	Line     int
}

// Result is what an accepted snippet means, in the order written.
type Result struct {
	// RequestHeaders are set on the request to the backend
	// (proxy_set_header, more_set_input_headers, more_clear_input_headers).
	RequestHeaders []Header
	// ResponseHeaders are added to the response (add_header,
	// more_set_headers).
	ResponseHeaders []Header
	// HideHeaders are the backend's response headers not passed on
	// (proxy_hide_header, and the names of more_set_headers and
	// more_clear_headers); ClearHeaders are those the response must not
	// carry at all (more_clear_headers), nginx's own included.
	HideHeaders  []string
	ClearHeaders []string
	// PassHeaders are the backend's headers nginx hides by default and
	// passes here (proxy_pass_header).
	PassHeaders     []string
	ServerTokensOff bool
	// Settings are proxy settings an annotation has too.
	Settings  []Setting
	Locations []Location
	AuthSets  []AuthSet
}

// Parse is Tokenize and Check: the meaning of text in ctx, or why it is
// refused.
func Parse(ctx Context, text string, opts Options) (Result, *Refusal) {
	dirs, err := Tokenize(text)
	if err != nil {
		var syntax *SyntaxError
		if errors.As(err, &syntax) {
			if syntax.Block != "" && syntax.Block != "location" {
				// Say why the block's directive is refused rather than
				// why its content does not parse (Lua code, say).
				return Result{}, &Refusal{Directive: clip(syntax.Block), Line: syntax.BlockLine, Reason: refusedReason(ctx, syntax.Block)}
			}
			if syntax.Line == 0 {
				return Result{}, &Refusal{Reason: "the snippet " + syntax.Msg}
			}
			return Result{}, &Refusal{Line: syntax.Line, Reason: "does not parse as nginx config: " + syntax.Msg}
		}
		return Result{}, &Refusal{Reason: err.Error()}
	}
	return Check(ctx, dirs, opts)
}

// Check holds each directive against the allowlist of ctx: the first one
// off it refuses the snippet.
func Check(ctx Context, dirs []Directive, opts Options) (Result, *Refusal) {
	c := &checker{ctx: ctx, opts: opts}
	for _, d := range dirs {
		if r := checkChars(d); r != nil {
			return Result{}, r
		}
		if r := c.top(d); r != nil {
			return Result{}, r
		}
	}
	return c.res, nil
}

type checker struct {
	ctx  Context
	opts Options
	res  Result
}

func refuse(d Directive, format string, args ...any) *Refusal {
	return &Refusal{Directive: clip(d.Name), Line: d.Line, Reason: fmt.Sprintf(format, args...)}
}

// checkChars refuses a directive, or one in its block, whose name or
// arguments hold a character package chars refuses anywhere in
// nginx.conf. Arguments may hold a tab, CR or LF here: parseValue allows
// them only in the text of a return.
func checkChars(d Directive) *Refusal {
	if err := chars.Check(d.Name); err != nil {
		return refuse(d, "the name %v", err)
	}
	for i, a := range d.Args {
		if err := chars.CheckText(a); err != nil {
			return refuse(d, "argument %d %v", i+1, err)
		}
	}
	for _, in := range d.Block {
		if r := checkChars(in); r != nil {
			return r
		}
	}
	return nil
}

// refusedFamilies say why directives that have no place in a snippet are
// refused, by name; familyReason finds those named by a pattern.
var refusedFamilies = map[string]string{
	"alias":                  "reads files outside the config (CVE-2021-25742): any file the nginx workers may read, the shared dir's keys and certificates included",
	"root":                   "serves files from nginx's disk, where the shared dir holds every key and certificate",
	"include":                "reads any file into the config",
	"load_module":            "loads code into nginx",
	"proxy_pass":             "sends requests to any address, around the Ingress's backends and their checks",
	"grpc_pass":              "sends requests to any address, around the Ingress's backends and their checks",
	"set":                    "sets variables the generated config relies on (the backend, the auth file, the rate-limit key)",
	"if":                     "runs conditions inside the generated location, where nginx's if can skip its checks",
	"rewrite":                "rewrites the URI the generated checks and routes went by; use the rewrite-target annotation",
	"return":                 "answers every request of the location before its checks; use permanent-redirect or temporal-redirect, or a location block in server-snippet",
	"allow":                  "is not supported here; use the allowlist-source-range annotation",
	"deny":                   "is not supported here; use the denylist-source-range annotation",
	"error_page":             "is not supported yet; use the custom-http-errors annotation",
	"auth_request":           "is not supported here; use the auth-url annotation",
	"auth_basic":             "is not supported here; use the auth-type and auth-secret annotations",
	"auth_basic_user_file":   "reads any file as a password file; use the auth-secret annotation",
	"internal":               "is not supported in a snippet",
	"resolver":               "changes the DNS server nginx asks for every name; use --dns-server",
	"access_log":             "writes files anywhere nginx may; use the enable-access-log annotation",
	"error_log":              "writes files anywhere nginx may",
	"ssl_certificate":        "reads key files from disk and changes TLS for every host of the server",
	"ssl_certificate_key":    "reads key files from disk and changes TLS for every host of the server",
	"limit_req":              "is not supported here; use the limit-rps annotation",
	"limit_conn":             "is not supported here; use the limit-connections annotation",
	"modsecurity":            "is not supported",
	"modsecurity_rules":      "is not supported",
	"modsecurity_rules_file": "is not supported",
	"mirror":                 "sends copies of requests to any address",
	"sub_filter":             "is not supported yet",
	"try_files":              "serves files from nginx's disk, where the shared dir holds every key and certificate",
	"autoindex":              "lists folders of nginx's disk",
	"server":                 "is not allowed in a snippet",
	"http":                   "is not allowed in a snippet",
	"upstream":               "is not allowed in a snippet",
	"map":                    "is not allowed in a snippet",
	"geo":                    "is not allowed in a snippet",
	"lua_package_path":       "makes nginx load Lua code from any folder",
	"lua_code_cache":         "turns off the Lua code cache of every location",
}

// familyReason says why name is refused, for the families no single
// name covers; "" for any other name.
func familyReason(name string) string {
	switch {
	case strings.Contains(name, "_by_lua"), strings.HasPrefix(name, "lua_"), strings.HasPrefix(name, "perl"), strings.HasPrefix(name, "js_"):
		return "runs code in nginx's workers, which hold every certificate, key and Secret nginx reads"
	case strings.HasSuffix(name, "_pass"):
		return "sends requests to any address, around the Ingress's backends and their checks"
	case strings.HasPrefix(name, "ssl_"), strings.HasPrefix(name, "proxy_ssl_") && name != "proxy_ssl_verify":
		return "is not supported here; TLS settings come from the ssl-* and proxy-ssl-* annotations"
	case strings.HasSuffix(name, "_temp_path"), strings.HasSuffix(name, "_cache_path"), strings.HasSuffix(name, "_file"):
		return "names files on nginx's disk"
	}
	return ""
}

// refusedReason is the reason for a directive off the allowlist of ctx.
func refusedReason(ctx Context, name string) string {
	if r := refusedFamilies[name]; r != "" {
		return r
	}
	if r := familyReason(name); r != "" {
		return r
	}
	switch ctx {
	case Auth:
		return "is not on the allowlist: an auth-snippet may hold only auth_request_set"
	case Global:
		return "is not on the allowlist: a ConfigMap snippet may hold only headers (add_header, more_set_headers, more_clear_headers, more_set_input_headers, proxy_set_header, proxy_hide_header, proxy_pass_header) and server_tokens off"
	}
	return "is not on the snippet allowlist"
}

// top checks one top-level directive.
func (c *checker) top(d Directive) *Refusal {
	if !utf8.ValidString(d.Name) {
		return refuse(d, "is not valid UTF-8")
	}
	if c.ctx == Auth {
		if d.Name != "auth_request_set" {
			return refuse(d, "%s", refusedReason(c.ctx, d.Name))
		}
		return c.authRequestSet(d)
	}
	if d.Name == "location" {
		if c.ctx != Server {
			return refuse(d, "location blocks are accepted in the server-snippet annotation only")
		}
		return c.location(d)
	}
	if d.HasBlock {
		return refuse(d, "%s", refusedReason(c.ctx, d.Name))
	}
	if r, ok := c.header(d, &c.res.ResponseHeaders, &c.res.RequestHeaders, true); ok {
		return r
	}
	switch d.Name {
	case "server_tokens":
		if len(d.Args) != 1 || d.Args[0] != "off" {
			return refuse(d, "only server_tokens off is accepted: the ConfigMap's server-tokens decides whether nginx tells its version")
		}
		c.res.ServerTokensOff = true
		return nil
	}
	if slices.Contains(SettingDirectives, d.Name) {
		if c.ctx == Global {
			return refuse(d, "is not accepted in a ConfigMap snippet; use the ConfigMap key of that setting")
		}
		return c.setting(d)
	}
	return refuse(d, "%s", refusedReason(c.ctx, d.Name))
}

// header checks d when it is a header directive (ok true), adding it to
// response or request; upstream allows the backend's response headers in
// values.
func (c *checker) header(d Directive, response, request *[]Header, top bool) (*Refusal, bool) {
	respScope := varScope{upstream: true, authSets: c.opts.AuthVariables}
	reqScope := varScope{authSets: c.opts.AuthVariables}
	switch d.Name {
	case "add_header":
		if len(d.Args) != 2 && !(len(d.Args) == 3 && d.Args[2] == "always") {
			return refuse(d, `wants a name, a value and optionally "always"`), true
		}
		if reason := responseHeaderName(d.Args[0]); reason != "" {
			return refuse(d, "%s", reason), true
		}
		value, reason := parseValue(d.Args[1], respScope, false)
		if reason != "" {
			return refuse(d, "%s: the value %s", clip(d.Args[0]), reason), true
		}
		*response = append(*response, Header{Name: d.Args[0], Value: value, Always: len(d.Args) == 3, Directive: d.Name, Line: d.Line})
		return nil, true
	}
	if !top {
		return nil, false
	}
	switch d.Name {
	case "more_set_headers", "more_set_input_headers":
		if len(d.Args) == 0 {
			return refuse(d, `wants "Name: value" arguments`), true
		}
		for _, a := range d.Args {
			if strings.HasPrefix(a, "-") {
				return refuse(d, "the option %s is not supported (its headers are set for every status and content type)", clip(a)), true
			}
			name, value := splitMoreHeader(a)
			if d.Name == "more_set_headers" {
				if reason := replaceableName(name, c.opts.HeadersMore); reason != "" {
					return refuse(d, "%q: %s", clip(a), reason), true
				}
				v, reason := parseValue(value, respScope, false)
				if reason != "" {
					return refuse(d, "%s: the value %s", clip(name), reason), true
				}
				c.res.HideHeaders = append(c.res.HideHeaders, name)
				if len(v) == 0 {
					c.res.ClearHeaders = append(c.res.ClearHeaders, name)
					continue
				}
				*response = append(*response, Header{Name: name, Value: v, Always: true, Directive: d.Name, Line: d.Line})
				continue
			}
			if reason := requestHeaderName(name); reason != "" {
				return refuse(d, "%q: %s", clip(a), reason), true
			}
			v, reason := parseValue(value, reqScope, false)
			if reason != "" {
				return refuse(d, "%s: the value %s", clip(name), reason), true
			}
			*request = append(*request, Header{Name: name, Value: v, Directive: d.Name, Line: d.Line})
		}
		return nil, true
	case "more_clear_headers", "more_clear_input_headers":
		if len(d.Args) == 0 {
			return refuse(d, "wants header names"), true
		}
		for _, name := range d.Args {
			if strings.HasPrefix(name, "-") {
				return refuse(d, "the option %s is not supported", clip(name)), true
			}
			if strings.Contains(name, "*") {
				return refuse(d, "%q: wildcards are not supported; name each header", clip(name)), true
			}
			if d.Name == "more_clear_headers" {
				if reason := replaceableName(name, c.opts.HeadersMore); reason != "" {
					return refuse(d, "%q: %s", clip(name), reason), true
				}
				c.res.HideHeaders = append(c.res.HideHeaders, name)
				c.res.ClearHeaders = append(c.res.ClearHeaders, name)
				continue
			}
			if reason := requestHeaderName(name); reason != "" {
				return refuse(d, "%q: %s", clip(name), reason), true
			}
			*request = append(*request, Header{Name: name, Directive: d.Name, Line: d.Line})
		}
		return nil, true
	case "proxy_set_header":
		if len(d.Args) != 2 {
			return refuse(d, "wants a name and a value"), true
		}
		if reason := requestHeaderName(d.Args[0]); reason != "" {
			return refuse(d, "%s", reason), true
		}
		value, reason := parseValue(d.Args[1], reqScope, false)
		if reason != "" {
			return refuse(d, "%s: the value %s", clip(d.Args[0]), reason), true
		}
		*request = append(*request, Header{Name: d.Args[0], Value: value, Directive: d.Name, Line: d.Line})
		return nil, true
	case "proxy_hide_header", "proxy_pass_header":
		if len(d.Args) != 1 {
			return refuse(d, "wants one header name"), true
		}
		if reason := headerName(d.Args[0]); reason != "" {
			return refuse(d, "%s", reason), true
		}
		if d.Name == "proxy_hide_header" {
			c.res.HideHeaders = append(c.res.HideHeaders, d.Args[0])
		} else {
			c.res.PassHeaders = append(c.res.PassHeaders, d.Args[0])
		}
		return nil, true
	}
	return nil, false
}

// maxHeaderName bounds a header name.
const maxHeaderName = 128

// headerName returns why s is not an HTTP field name (RFC 9110 token)
// nginx.conf can hold, or "". "$" is a tchar, but nginx.conf has no way
// to write it outside a variable.
func headerName(s string) string {
	if s == "" {
		return "the header name is empty"
	}
	if len(s) > maxHeaderName {
		return fmt.Sprintf("the header name is longer than %d bytes", maxHeaderName)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return fmt.Sprintf("%q is not a header name (letters, digits and !#%%&'*+-.^_`|~ of RFC 9110)", clip(s))
	}
	return ""
}

// framingHeaders decide where a message ends: set by a snippet, they
// would let one request or response be read as two.
var framingHeaders = []string{"content-length", "transfer-encoding", "connection", "keep-alive"}

// ownHeaders are the response headers nginx writes itself, which
// proxy_hide_header and add_header cannot replace; headers-more can.
var ownHeaders = []string{"server", "date", "content-type"}

func responseHeaderName(s string) string {
	if r := headerName(s); r != "" {
		return r
	}
	if slices.Contains(framingHeaders, strings.ToLower(s)) {
		return fmt.Sprintf("%s frames the response: a snippet may not set it", s)
	}
	return ""
}

// replaceableName returns why more_set_headers or more_clear_headers may
// not name s, or "": the framing headers never, nginx's own (ownHeaders)
// only with the headers-more module (headersMore).
func replaceableName(s string, headersMore bool) string {
	if r := headerName(s); r != "" {
		return r
	}
	if slices.Contains(framingHeaders, strings.ToLower(s)) {
		return fmt.Sprintf("%s frames the response: a snippet may not set or clear it", s)
	}
	if slices.Contains(ownHeaders, strings.ToLower(s)) && !headersMore {
		return fmt.Sprintf("%s is written by nginx itself: without the headers-more module (this nginx has it neither built in nor loaded, or has not been detected yet) it cannot be replaced or removed", s)
	}
	return ""
}

func requestHeaderName(s string) string {
	if r := headerName(s); r != "" {
		return r
	}
	switch strings.ToLower(s) {
	case "content-length", "transfer-encoding":
		return fmt.Sprintf("%s frames the request body: a snippet may not set it", s)
	}
	return ""
}

// Bounds of the proxy settings, as the annotations have them.
const maxTimeout = 24 * 3600

// setting checks a proxy setting an annotation has too.
func (c *checker) setting(d Directive) *Refusal {
	want := 1
	if d.Name == "proxy_buffers" {
		want = 2
	}
	if len(d.Args) != want {
		return refuse(d, "wants %d argument(s)", want)
	}
	v := d.Args[0]
	var value, reason string
	switch d.Name {
	case "proxy_ssl_verify", "proxy_buffering", "proxy_request_buffering":
		if v == "on" || v == "off" {
			value = v
		} else {
			reason = `wants "on" or "off"`
		}
	case "proxy_http_version":
		if v == "1.0" || v == "1.1" {
			value = v
		} else {
			reason = `wants "1.0" or "1.1"`
		}
	case "proxy_connect_timeout", "proxy_send_timeout", "proxy_read_timeout":
		digits := strings.TrimSuffix(v, "s")
		n, err := strconv.Atoi(digits)
		if err != nil || !isDigits(digits) || n < 1 || n > maxTimeout {
			reason = fmt.Sprintf("wants seconds from 1 to %d (\"90\" or \"90s\")", maxTimeout)
		} else {
			value = strconv.Itoa(n)
		}
	case "client_max_body_size":
		if !isSize(v, true) {
			reason = `wants an nginx size such as "8m" or "1g" (digits, then k, m or g; 0 is no limit)`
		} else {
			value = v
		}
	case "proxy_buffer_size", "client_body_buffer_size", "proxy_busy_buffers_size":
		if !isSize(v, false) || isZeroSize(v) {
			reason = `wants an nginx size above 0 such as "8k" or "1m" (digits, then k or m)`
		} else {
			value = v
		}
	case "proxy_buffers":
		n, err := strconv.Atoi(v)
		if err != nil || !isDigits(v) || n < 2 || n > 1024 || !isSize(d.Args[1], false) || isZeroSize(d.Args[1]) {
			reason = `wants a number from 2 to 1024 and an nginx size above 0 ("4 8k")`
		} else {
			value = strconv.Itoa(n) + " " + d.Args[1]
		}
	}
	if reason != "" {
		return refuse(d, "%s", reason)
	}
	switch d.Name {
	case "proxy_buffers", "client_body_buffer_size", "proxy_busy_buffers_size":
		if !c.opts.BufferSettings {
			return refuse(d, "is not supported yet")
		}
	}
	c.res.Settings = append(c.res.Settings, Setting{Directive: d.Name, Value: value, Line: d.Line})
	return nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isSize: 1 to 9 digits and an optional k or m, and g when giga says
// so (client_max_body_size takes it, the buffer sizes do not).
func isSize(s string, giga bool) bool {
	units := "kKmM"
	if giga {
		units = "kKmMgG"
	}
	digits := s
	if n := len(s); n > 0 && strings.IndexByte(units, s[n-1]) >= 0 {
		digits = s[:n-1]
	}
	return isDigits(digits) && len(digits) <= 9
}

func isZeroSize(s string) bool {
	return strings.Trim(strings.TrimRight(s, "kKmMgG"), "0") == ""
}

// location checks a location block of a server-snippet.
func (c *checker) location(d Directive) *Refusal {
	if !d.HasBlock {
		return refuse(d, "wants a block")
	}
	loc := Location{Line: d.Line}
	switch len(d.Args) {
	case 1:
		loc.Path = d.Args[0]
	case 2:
		loc.Modifier, loc.Path = d.Args[0], d.Args[1]
		switch loc.Modifier {
		case "=", "~", "~*", "^~":
		default:
			return refuse(d, "%q is not a location modifier (=, ~, ~*, ^~)", clip(loc.Modifier))
		}
	default:
		return refuse(d, "wants a path, with an optional modifier (=, ~, ~*, ^~)")
	}
	if strings.HasPrefix(loc.Path, "@") {
		return refuse(d, "named locations are not supported")
	}
	if err := chars.Check(loc.Path); err != nil {
		return refuse(d, "the path %v", err)
	}
	returned := false
	for _, in := range d.Block {
		if !utf8.ValidString(in.Name) {
			return refuse(in, "is not valid UTF-8")
		}
		if in.HasBlock {
			return refuse(in, "blocks inside a server-snippet location are not accepted")
		}
		if r, ok := c.header(in, &loc.Headers, nil, false); ok {
			if r != nil {
				return r
			}
			continue
		}
		switch in.Name {
		case "return":
			if returned {
				return refuse(in, "a location may hold one return")
			}
			returned = true
			if r := c.locationReturn(in, &loc); r != nil {
				return r
			}
		case "default_type":
			if len(in.Args) != 1 {
				return refuse(in, "wants one MIME type")
			}
			if reason := mimeType(in.Args[0]); reason != "" {
				return refuse(in, "%s", reason)
			}
			loc.DefaultType = in.Args[0]
		case "allow", "deny":
			if len(in.Args) != 1 {
				return refuse(in, "wants one address, CIDR or all")
			}
			source := in.Args[0]
			if source != "all" {
				p, ok := parsePrefix(source)
				if !ok {
					return refuse(in, "%q is not an IP address, a CIDR or all", clip(source))
				}
				source = p.String()
			}
			loc.Rules = append(loc.Rules, in.Name+" "+source)
		default:
			reason := refusedFamilies[in.Name]
			if reason == "" {
				reason = familyReason(in.Name)
			}
			if reason == "" {
				reason = "is not on the allowlist: a server-snippet location may hold only return, default_type, add_header, allow and deny"
			}
			return refuse(in, "%s", reason)
		}
	}
	c.res.Locations = append(c.res.Locations, loc)
	return nil
}

// redirectCodes are the codes whose return takes a URL.
var redirectCodes = []int{301, 302, 303, 307, 308}

func (c *checker) locationReturn(d Directive, loc *Location) *Refusal {
	scope := varScope{authSets: c.opts.AuthVariables}
	var text string
	switch len(d.Args) {
	case 1:
		a := d.Args[0]
		if isDigits(a) {
			loc.Code, _ = strconv.Atoi(a)
			break
		}
		if !strings.HasPrefix(a, "http://") && !strings.HasPrefix(a, "https://") && !strings.HasPrefix(a, "$scheme") {
			return refuse(d, "wants a status code, a code and a text, or a URL")
		}
		loc.Code, text = 302, a
	case 2:
		if !isDigits(d.Args[0]) || len(d.Args[0]) > 3 {
			return refuse(d, "%q is not a status code", clip(d.Args[0]))
		}
		loc.Code, _ = strconv.Atoi(d.Args[0])
		text = d.Args[1]
	default:
		return refuse(d, "wants a status code, a code and a text, or a URL")
	}
	if (loc.Code < 200 || loc.Code > 599) && loc.Code != 444 {
		return refuse(d, "%d is not a status code from 200 to 599 (or 444)", loc.Code)
	}
	if len(d.Args) == 1 && text == "" {
		return nil
	}
	redirect := slices.Contains(redirectCodes, loc.Code)
	// A redirect's $http_host is the host the router matched (render's
	// $restysync_http_host, with the client's port): a Host header that
	// disagrees with an absolute request line must not set the Location.
	scope.routedHTTPHost = redirect
	value, reason := parseValue(text, scope, !redirect)
	if reason != "" {
		return refuse(d, "the text %s", reason)
	}
	if redirect && len(value) == 0 {
		return refuse(d, "a redirect wants a URL")
	}
	loc.Text = value
	if len(value) == 0 {
		loc.Text = Value{{Text: ""}}
	}
	return nil
}

// mimeType returns why s is not a MIME type nginx.conf can hold.
func mimeType(s string) string {
	typ, sub, ok := strings.Cut(s, "/")
	if !ok || typ == "" || sub == "" || len(s) > 128 {
		return fmt.Sprintf("%q is not a MIME type (type/subtype)", clip(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' && c != ' ' || c == 0x7f || c == '"' || c == '\\' || c == '$' || c >= 0x80 {
			return fmt.Sprintf("%q is not a MIME type (type/subtype)", clip(s))
		}
	}
	return ""
}

// parsePrefix reads a CIDR or an address, masked.
func parsePrefix(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err == nil && p.Addr().Zone() == ""
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

// authRequestSet checks "auth_request_set $name $upstream_http_x" (or
// $upstream_status).
func (c *checker) authRequestSet(d Directive) *Refusal {
	if d.HasBlock || len(d.Args) != 2 {
		return refuse(d, "wants a variable and the auth response's $upstream_http_NAME or $upstream_status")
	}
	name, ok := strings.CutPrefix(d.Args[0], "$")
	name = strings.ToLower(name)
	if !ok || !isVarName(name) || len(name) > maxVariableName {
		return refuse(d, "%q is not a variable ($ and lower-case letters, digits, \"_\")", clip(d.Args[0]))
	}
	up, ok := strings.CutPrefix(d.Args[1], "$")
	if ok && strings.HasPrefix(up, "{") && strings.HasSuffix(up, "}") {
		up = up[1 : len(up)-1]
	}
	up = strings.ToLower(up)
	rest, isHeader := strings.CutPrefix(up, "upstream_http_")
	if !ok || !isVarName(up) || len(up) > maxVariableName || !(up == "upstream_status" || isHeader && rest != "") {
		return refuse(d, "%q: the value may only be the auth response's $upstream_http_NAME or $upstream_status", clip(d.Args[1]))
	}
	nginx := ""
	for _, s := range c.res.AuthSets {
		if s.Var == name {
			nginx = s.Nginx
		}
	}
	if nginx == "" {
		if len(AuthVariables(c.res.AuthSets)) == MaxAuthSets {
			return refuse(d, "sets more than %d variables", MaxAuthSets)
		}
		nginx = AuthSetPrefix + strconv.Itoa(len(AuthVariables(c.res.AuthSets))+1)
	}
	c.res.AuthSets = append(c.res.AuthSets, AuthSet{Var: name, Nginx: nginx, Upstream: up, Line: d.Line})
	return nil
}

// AuthVariables returns the names sets define, with their nginx
// variables: Options.AuthVariables.
func AuthVariables(sets []AuthSet) map[string]string {
	out := make(map[string]string, len(sets))
	for _, s := range sets {
		out[s.Var] = s.Nginx
	}
	return out
}

// splitMoreHeader splits a headers-more argument as that module does: the
// name ends at the first ':' or white space, and the value starts after
// the ':' and white space that follow ("X-A: b", "X-A b" and "X-A:b" all
// set X-A to b; "X-A" alone clears it).
func splitMoreHeader(arg string) (name, value string) {
	arg = strings.TrimLeft(arg, " \t\r\n")
	end := strings.IndexFunc(arg, func(r rune) bool { return r == ':' || r == ' ' || r == '\t' || r == '\r' || r == '\n' })
	if end < 0 {
		return arg, ""
	}
	name, rest := arg[:end], arg[end:]
	rest = strings.TrimLeft(rest, ": \t\r\n")
	return name, strings.TrimSpace(rest)
}
