package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// What snippet annotations gave a location (model.SnippetSettings), and
// the locations of server-snippets (model.FixedResponse): typed values,
// written by the template's "snippet" and "fixed-body" through the quoting
// functions. A snippet's text never reaches nginx.conf.
//
// nginx inherits proxy_set_header, add_header and proxy_hide_header into
// a location only when the location has none of its own. A profile with
// headers of its own therefore repeats the http block's: the standard
// request headers (the template's "proxy-headers", standardRequestHeaders
// here: keep both in step), with the snippet's replacing the one of their
// name; and the response headers and hidden headers of the http block
// (X-Request-ID, Strict-Transport-Security), unless custom-headers'
// "response-headers" already wrote them.

// standardRequestHeaders are the template's "proxy-headers", in order,
// values written for quoteVars.
var standardRequestHeaders = []proxyHeaderView{
	{"Host", "${restysync_upstream_host}"},
	{"X-Forwarded-Prefix", "${restysync_forwarded_prefix}"},
	{"X-Real-IP", "${remote_addr}"},
	{"X-Forwarded-For", "${restysync_forwarded_for}"},
	{"X-Forwarded-Proto", "${restysync_forwarded_proto}"},
	{"X-Forwarded-Host", "${restysync_forwarded_host}"},
	{"X-Forwarded-Port", "${restysync_forwarded_port}"},
	{"X-Request-ID", "${restysync_request_id}"},
	{"Upgrade", "${http_upgrade}"},
	{"Connection", "${connection_upgrade}"},
}

// standardResponseHeaders are the http block's add_header lines;
// Strict-Transport-Security's variable adds the backend's own back when
// HSTS is off (see the template), so a profile may hide it either way.
var standardResponseHeaders = []responseView{
	{Name: "X-Request-ID", Value: "${restysync_request_id}", Always: true},
	{Name: "Strict-Transport-Security", Value: "${restysync_hsts}", Always: true},
}

// standardHiddenHeaders are the http block's proxy_hide_header lines.
var standardHiddenHeaders = []string{"X-Request-ID", "Strict-Transport-Security"}

// snippetView is what a profile prints for model.SnippetSettings.
type snippetView struct {
	ServerTokensOff bool
	// RequestHeaders, when any, are every request header of the location:
	// the standard ones, the snippet's in the place of theirs, then the
	// snippet's others.
	RequestHeaders []proxyHeaderView
	// ResponseHeaders and HideHeaders, when any, are every add_header and
	// proxy_hide_header of the location, the http block's first.
	ResponseHeaders []responseView
	HideHeaders     []string
	PassHeaders     []string
	// SetHeaders ("Name: value", ${vars}) and ClearHeaders are the
	// more_set_headers and more_clear_headers lines, when nginx has the
	// headers-more module (model.SnippetSettings.HeadersMore).
	SetHeaders   []string
	ClearHeaders []string
	// AuthSets are the auth-snippet's auth_request_set lines when the
	// location does not ask an auth service (they go next to auth_request
	// when it does): they define the variables its headers may name.
	AuthSets []authHeaderView
}

// responseView is one add_header; Value may hold ${vars}.
type responseView struct {
	Name   string
	Value  string
	Always bool
}

// fixedView is what a server-snippet's location prints.
type fixedView struct {
	Rules       []ruleView
	DefaultType string
	// Code 0: no return; the location answers 404 after its rules.
	Code int
	Text string // with ${vars}; quoteText writes it
}

type ruleView struct {
	Allow  bool
	Source string // "all" or a masked CIDR
}

// QuoteText is QuoteWithVariables for a body: a tab, CR and LF are
// written as nginx's \t, \r and \n escapes, which its parser reads back
// as the characters; other control characters are refused, and "$" only
// starts a ${name}, as in QuoteWithVariables.
func QuoteText(s string) (string, error) {
	if _, err := QuoteWithVariables(strings.NewReplacer("\t", " ", "\r", " ", "\n", " ").Replace(s)); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// headerLines splits "Name: value" lines, each name checked.
func headerLines(lines string) ([]proxyHeaderView, error) {
	if lines == "" {
		return nil, nil
	}
	var out []proxyHeaderView
	for _, line := range strings.Split(lines, "\n") {
		name, value, ok := strings.Cut(line, ": ")
		if !ok || !isTokenName(name) {
			return nil, fmt.Errorf("header %q", line)
		}
		if _, err := QuoteWithVariables(value); err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		out = append(out, proxyHeaderView{Name: name, Value: value})
	}
	return out, nil
}

// isTokenName: an HTTP field name (RFC 9110 token) without "$", as the
// model checks snippet header names.
func isTokenName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != "" && len(s) <= 128
}

func nameSet(list []string) map[string]bool {
	out := make(map[string]bool, len(list))
	for _, n := range list {
		out[strings.ToLower(n)] = true
	}
	return out
}

func splitNames(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	out := strings.Split(list, ",")
	for _, n := range out {
		if !isTokenName(n) {
			return nil, fmt.Errorf("header name %q", n)
		}
	}
	return out, nil
}

// newSnippetView checks and prints loc's snippet settings; proxy is the
// location's proxyView, whose custom-headers may write the http block's
// response headers already. nil when there is nothing to print.
func newSnippetView(loc model.Location, proxy proxyView) (*snippetView, error) {
	s := loc.SnippetSettings()
	if s == (model.SnippetSettings{}) {
		return nil, nil
	}
	v := &snippetView{ServerTokensOff: s.ServerTokensOff}
	if loc.AccessSettings().ExternalAuth.URL == "" || loc.AccessSettings().Denied != "" {
		var err error
		if v.AuthSets, err = authSetViews(s.AuthRequestSet); err != nil {
			return nil, err
		}
	}
	own, err := headerLines(s.RequestHeaders)
	if err != nil {
		return nil, fmt.Errorf("snippet request %w", err)
	}
	if len(own) > 0 {
		replaced := map[string]proxyHeaderView{}
		for _, h := range own {
			replaced[strings.ToLower(h.Name)] = h
		}
		for _, h := range standardRequestHeaders {
			if r, ok := replaced[strings.ToLower(h.Name)]; ok {
				h = r
				delete(replaced, strings.ToLower(h.Name))
			}
			v.RequestHeaders = append(v.RequestHeaders, h)
		}
		for _, h := range own {
			if _, ok := replaced[strings.ToLower(h.Name)]; ok {
				v.RequestHeaders = append(v.RequestHeaders, h)
			}
		}
	}
	plain, err := headerLines(s.ResponseHeaders)
	if err != nil {
		return nil, fmt.Errorf("snippet response %w", err)
	}
	always, err := headerLines(s.AlwaysHeaders)
	if err != nil {
		return nil, fmt.Errorf("snippet response %w", err)
	}
	hide, err := splitNames(s.HideHeaders)
	if err != nil {
		return nil, err
	}
	clear, err := splitNames(s.ClearHeaders)
	if err != nil {
		return nil, err
	}
	if v.PassHeaders, err = splitNames(s.PassHeaders); err != nil {
		return nil, err
	}
	more, err := headerLines(s.SetHeaders)
	if err != nil {
		return nil, fmt.Errorf("snippet response %w", err)
	}
	if s.HeadersMore {
		for _, h := range more {
			v.SetHeaders = append(v.SetHeaders, h.Name+": "+h.Value)
		}
		v.ClearHeaders = clear
	}
	if len(plain)+len(always)+len(more)+len(hide)+len(clear) > 0 {
		set := nameSet(clear)
		for _, h := range slices.Concat(plain, always, more) {
			set[strings.ToLower(h.Name)] = true
		}
		if len(proxy.ResponseHeaderList) == 0 { // else "response-headers" wrote these
			for _, h := range standardResponseHeaders {
				if !set[strings.ToLower(h.Name)] {
					v.ResponseHeaders = append(v.ResponseHeaders, h)
				} else if nameSet(clear)[strings.ToLower(h.Name)] {
					// Cleared: an empty value adds nothing, and keeps the
					// http block's line from being inherited.
					v.ResponseHeaders = append(v.ResponseHeaders, responseView{Name: h.Name, Value: "", Always: true})
				}
			}
			v.HideHeaders = append(v.HideHeaders, standardHiddenHeaders...)
		}
		hidden := nameSet(v.HideHeaders)
		for _, n := range hide {
			if !hidden[strings.ToLower(n)] {
				hidden[strings.ToLower(n)] = true
				v.HideHeaders = append(v.HideHeaders, n)
			}
		}
		for _, h := range plain {
			v.ResponseHeaders = append(v.ResponseHeaders, responseView{Name: h.Name, Value: h.Value})
		}
		for _, h := range always {
			v.ResponseHeaders = append(v.ResponseHeaders, responseView{Name: h.Name, Value: h.Value, Always: true})
		}
	}
	return v, nil
}

// newFixedView checks and prints a server-snippet location's answer.
func newFixedView(f model.FixedResponse) (*fixedView, error) {
	if !f.Set {
		return nil, nil
	}
	v := &fixedView{Code: f.Code, Text: f.Text, DefaultType: f.DefaultType}
	if f.Code != 0 && (f.Code < 200 || f.Code > 599) && f.Code != 444 {
		return nil, fmt.Errorf("return code %d", f.Code)
	}
	if f.Text != "" {
		if f.Code == 0 {
			return nil, fmt.Errorf("return text without a code")
		}
		if _, err := QuoteText(f.Text); err != nil {
			return nil, fmt.Errorf("return text: %w", err)
		}
	}
	if f.DefaultType != "" {
		if _, err := Quote(f.DefaultType); err != nil {
			return nil, fmt.Errorf("default type: %w", err)
		}
	}
	if f.Rules != "" {
		for _, r := range strings.Split(f.Rules, ",") {
			action, source, _ := strings.Cut(r, " ")
			if action != "allow" && action != "deny" {
				return nil, fmt.Errorf("access rule %q", r)
			}
			if source != "all" {
				p, err := netip.ParsePrefix(source)
				if err != nil || p.Masked() != p || p.Addr().Zone() != "" {
					return nil, fmt.Errorf("access rule %q: not a masked CIDR", r)
				}
			}
			v.Rules = append(v.Rules, ruleView{Allow: action == "allow", Source: source})
		}
	}
	return v, nil
}

// authSetViews are the auth-snippet's auth_request_set lines
// (model.SnippetSettings.AuthRequestSet), for the template's
// "access-auth".
func authSetViews(lines string) ([]authHeaderView, error) {
	if lines == "" {
		return nil, nil
	}
	var out []authHeaderView
	for _, line := range strings.Split(lines, "\n") {
		name, upstream, ok := strings.Cut(line, " ")
		if !ok || !isVarName(name) || !isVarName(upstream) || !strings.HasPrefix(name, "restysync_set_") ||
			!(upstream == "upstream_status" || strings.HasPrefix(upstream, "upstream_http_")) {
			return nil, fmt.Errorf("auth_request_set %q", line)
		}
		out = append(out, authHeaderView{Var: name, Upstream: upstream})
	}
	return out, nil
}
