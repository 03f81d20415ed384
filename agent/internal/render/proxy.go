package render

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// proxyView is what the template's "redirects" and "proxy" sections print
// for one location: model.ProxySettings, plus what render derives from the
// location (the rewrite's regex, gRPC or not).
type proxyView struct {
	model.ProxySettings
	// GRPC says the location uses grpc_pass: the timeouts, retries and
	// buffer size are grpc_* directives, and the proxy-only ones are left out.
	GRPC bool
	// RewriteRegex is the regex whose match the rewrite replaces with
	// RewriteTarget: the location's path, anchored, case-insensitive;
	// "" when there is no rewrite.
	RewriteRegex string
	// NextUpstream are the tokens of NextUpstream, each quoted on its own.
	NextUpstream []string
	// SSLProtocols are the tokens of SSL.Protocols; SSLVerifyCA is the CA
	// file a verifying location trusts: SSL.CAFile, or, without one, the
	// agent's self-signed default certificate, which no backend's
	// certificate chains to, so that every request fails rather than go
	// unchecked.
	SSLProtocols []string
	SSLVerifyCA  string
	// Upstream is the upstream block the location proxies to:
	// "restysync_upstream", or for backend TLS settings of their own one
	// upstream per distinct settings (tlsUpstreamName), because nginx keeps
	// idle connections per upstream block and by address only: a
	// connection made without verification or another client certificate
	// must never be reused for these.
	Upstream string
	// Module is the nginx module that talks to the backend, "proxy",
	// "grpc" or "fastcgi": the prefix of its directives.
	Module string
	// FastCGIParams are the fastcgi_param lines of an FCGI location;
	// MirrorTo, when set, mirrors its requests; ResponseHeaderList are its
	// custom response headers, ResponseHides the backend headers they
	// replace, and OwnRequestID and OwnSTS say they hold X-Request-ID or
	// Strict-Transport-Security, which then replace the http block's
	// (fcgimirror.go).
	FastCGIParams      []fastCGIParamView
	MirrorTo           *mirrorView
	ResponseHeaderList []responseHeaderView
	ResponseHides      []string
	OwnRequestID       bool
	OwnSTS             bool
	// Keys are the buffers, cookie and Location rewrites and rate limits
	// (proxykeys.go).
	Keys proxyKeysView
}

// newProxyView derives the proxyView of a location rendered at path (an
// nginx location path; regex says it is a regex) from the model's settings.
func newProxyView(p model.ProxySettings, protocol, path string, regex bool) (proxyView, error) {
	v := proxyView{ProxySettings: p, GRPC: protocol == model.ProtocolGRPC || protocol == model.ProtocolGRPCS}
	if p.NextUpstream != "" {
		v.NextUpstream = strings.Fields(p.NextUpstream)
	}
	if err := addProxySSL(&v, p, protocol); err != nil {
		return proxyView{}, err
	}
	if p.RewriteTarget != "" {
		if regex {
			v.RewriteRegex = "(?i)" + path // path is already anchored with "^"
		} else {
			// An Exact or Prefix location: the rewrite matches the path
			// literally, at the start of the URI.
			v.RewriteRegex = "(?i)^" + regexp.QuoteMeta(strings.TrimSuffix(path, "/"))
		}
	}
	if p.RedirectURL != "" && (p.RedirectCode < 300 || p.RedirectCode > 308) {
		return proxyView{}, fmt.Errorf("redirect code %d: must be 300..308", p.RedirectCode)
	}
	for _, n := range []int{p.ConnectTimeout, p.SendTimeout, p.ReadTimeout, p.NextUpstreamTimeout} {
		if n < 0 {
			return proxyView{}, fmt.Errorf("negative timeout %d", n)
		}
	}
	if err := addFastCGI(&v, p, protocol); err != nil {
		return proxyView{}, err
	}
	if err := addMirror(&v, p); err != nil {
		return proxyView{}, err
	}
	if err := addResponseHeaders(&v, p); err != nil {
		return proxyView{}, err
	}
	var err error
	if v.Keys, err = newProxyKeysView(p); err != nil {
		return proxyView{}, err
	}
	return v, nil
}

// QuoteRewrite is Quote for the replacement of a rewrite: it lets "$"
// through only before a digit 1 to 9, where nginx reads it as the capture
// group of the rewrite's regex. Any other "$" is an error, as in Quote.
func QuoteRewrite(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && (i+1 == len(s) || s[i+1] < '1' || s[i+1] > '9') {
			return "", fmt.Errorf("%q: \"$\" at byte %d is not followed by a capture group number 1 to 9", s, i)
		}
	}
	return quote(s, true)
}
