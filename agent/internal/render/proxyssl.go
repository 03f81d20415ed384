package render

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// TLS to the backend (model.ProxySSL; model/proxyssl.go reads it): the
// location's proxy_ssl_* directives, and an upstream block of its own for
// each distinct setting, so that two settings never share idle
// connections.

// defaultUpstream is the upstream block of every location without backend
// TLS settings of its own.
const defaultUpstream = "restysync_upstream"

// tlsUpstreamName is the upstream block of the locations with backend TLS
// settings s.
func tlsUpstreamName(s model.ProxySSL) string {
	if s == (model.ProxySSL{}) {
		return defaultUpstream
	}
	return hashName(defaultUpstream+"_tls_", fmt.Sprintf("%+v", s))
}

// upstreamView is an upstream block of its own for backend TLS settings.
type upstreamView struct{ Name string }

// profileFileRef finds the files under the shared dir a profile names (the
// CAs and client certificates of backend TLS; htpasswd files are named by
// a variable).
var profileFileRef = regexp.MustCompile(`"(auth/[a-z0-9-]{1,63}_[a-z0-9.-]{1,253})"`)

// profileFiles returns the files under the shared dir the profiles name,
// sorted (Config.Files).
func profileFiles(profiles []Profile) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range profiles {
		for _, m := range profileFileRef.FindAllStringSubmatch(p.Body, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out
}

// tlsUpstreamRef finds the upstream blocks of backend TLS settings in a
// rendered profile.
var tlsUpstreamRef = regexp.MustCompile(defaultUpstream + `_tls_[0-9a-f]{` + strconv.Itoa(nameDigits) + `}\b`)

// tlsUpstreams returns the upstream blocks the profiles proxy to, each
// once, sorted: those of the model's locations and those of profiles kept
// from an earlier config, which must keep their upstream too. Two
// different backend TLS settings of m named alike are an error: they
// would share idle connections.
func tlsUpstreams(m model.Model, profiles []Profile) ([]upstreamView, error) {
	names := nameTable{}
	for loc := range m.AllLocations() {
		if loc.Protocol == model.ProtocolHTTPS || loc.Protocol == model.ProtocolGRPCS {
			if _, err := names.claim(tlsUpstreamName(loc.ProxySettings().SSL), loc.ProxySettings().SSL, ownerOf(loc)); err != nil {
				return nil, err
			}
		}
	}
	seen := map[string]bool{}
	var out []upstreamView
	for _, p := range profiles {
		for _, name := range tlsUpstreamRef.FindAllString(p.Body, -1) {
			if !seen[name] {
				seen[name] = true
				out = append(out, upstreamView{Name: name})
			}
		}
	}
	slices.SortFunc(out, func(a, b upstreamView) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// addProxySSL derives the backend TLS part of v from p, for a location of
// protocol.
func addProxySSL(v *proxyView, p model.ProxySettings, protocol string) error {
	v.SSLProtocols = strings.Fields(p.SSL.Protocols)
	v.Upstream = defaultUpstream
	if protocol == model.ProtocolHTTPS || protocol == model.ProtocolGRPCS {
		v.Upstream = tlsUpstreamName(p.SSL)
	}
	if p.SSL.Verify {
		v.SSLVerifyCA = cmp.Or(p.SSL.CAFile, FallbackCertName)
	}
	if p.SSL.VerifyDepth < 0 || (p.SSL.CertFile == "") != (p.SSL.KeyFile == "") {
		return fmt.Errorf("backend TLS settings %+v", p.SSL)
	}
	return nil
}
