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
}

// newProxyView derives the proxyView of a location rendered at path (an
// nginx location path; regex says it is a regex) from the model's settings.
func newProxyView(p model.ProxySettings, protocol, path string, regex bool) (proxyView, error) {
	v := proxyView{ProxySettings: p, GRPC: protocol == model.ProtocolGRPC || protocol == model.ProtocolGRPCS}
	if p.NextUpstream != "" {
		v.NextUpstream = strings.Fields(p.NextUpstream)
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
