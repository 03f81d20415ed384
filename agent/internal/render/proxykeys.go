package render

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// proxyKeysView is what the template's "proxy" section (for a location)
// and the http block (for the ConfigMap's keys) print of the response
// buffers, client_body_buffer_size, the Set-Cookie and Location rewrites
// and limit_rate (model/proxykeys.go). Every field is checked here again:
// the render stage's own guard.
type proxyKeysView struct {
	// Buffers are the four buffer directives, nil when none is set.
	Buffers *model.ProxyBuffers
	// ClientBodyBufferSize, LimitRate and LimitRateAfter are nginx sizes.
	ClientBodyBufferSize string
	LimitRate            string
	LimitRateAfter       string
	// CookieDomain and CookiePath are the arguments of proxy_cookie_domain
	// and proxy_cookie_path: FROM and TO, or "off".
	CookieDomain []string
	CookiePath   []string
	// RedirectOff writes "proxy_redirect off"; else RedirectFrom and
	// RedirectTo, with ${vars}, are proxy_redirect's arguments when set.
	RedirectOff  bool
	RedirectFrom string
	RedirectTo   string
}

// rate is a limit_rate as model.ParseRate writes it.
var rate = regexp.MustCompile(`^(0|[1-9][0-9]{0,9}k)$`)

// newProxyKeysView checks the keys of p and returns their view.
func newProxyKeysView(p model.ProxySettings) (proxyKeysView, error) {
	var v proxyKeysView
	if bufs, ok := p.Buffers(); ok {
		if reason := bufs.Check(); reason != "" {
			return v, fmt.Errorf("proxy buffers %+v: %s", bufs, reason)
		}
		v.Buffers = &bufs
	}
	if s := p.ClientBodyBufferSize; s != "" && !model.NginxSize.MatchString(s) {
		return v, fmt.Errorf("client body buffer size %q: not an nginx size", s)
	}
	v.ClientBodyBufferSize = p.ClientBodyBufferSize
	for _, r := range []string{p.LimitRate, p.LimitRateAfter} {
		if r != "" && !rate.MatchString(r) {
			return v, fmt.Errorf("limit rate %q: want 0 or kilobytes (Nk)", r)
		}
	}
	v.LimitRate, v.LimitRateAfter = p.LimitRate, p.LimitRateAfter
	for _, c := range []struct {
		value string
		path  bool
		out   *[]string
	}{{p.CookieDomain, false, &v.CookieDomain}, {p.CookiePath, true, &v.CookiePath}} {
		if c.value == "" {
			continue
		}
		if checked, reason := model.ParseCookieRewrite(c.value, c.path); reason != "" || checked != c.value {
			return v, fmt.Errorf("cookie rewrite %q: %s", c.value, reason)
		}
		*c.out = strings.Fields(c.value)
	}
	switch {
	case p.RedirectFrom == "off":
		v.RedirectOff = true
	case p.RedirectFrom != "" || p.RedirectTo != "":
		if p.RedirectFrom == "" || p.RedirectTo == "" || strings.HasPrefix(p.RedirectFrom, "~") {
			return v, fmt.Errorf("proxy redirect %q to %q: want both", p.RedirectFrom, p.RedirectTo)
		}
		for _, s := range []string{p.RedirectFrom, p.RedirectTo} {
			if _, err := QuoteWithVariables(s); err != nil {
				return v, fmt.Errorf("proxy redirect: %w", err)
			}
		}
		v.RedirectFrom, v.RedirectTo = p.RedirectFrom, p.RedirectTo
	}
	return v, nil
}

// proxyKeys are the ConfigMap's keys of proxyKeysView, as the settings of
// a location would hold them.
func (h HTTP) proxyKeys() model.ProxySettings {
	return model.ProxySettings{
		BufferSize: h.ProxyBufferSize, BuffersNumber: h.ProxyBuffersNumber, BusyBuffersSize: h.ProxyBusyBuffersSize,
		MaxTempFileSize: h.ProxyMaxTempFileSize, ClientBodyBufferSize: h.ClientBodyBufferSize,
		CookieDomain: h.ProxyCookieDomain, CookiePath: h.ProxyCookiePath,
		RedirectFrom: h.ProxyRedirectFrom, RedirectTo: h.ProxyRedirectTo,
		LimitRate: h.LimitRate, LimitRateAfter: h.LimitRateAfter,
	}
}
