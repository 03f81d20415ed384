package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// clientTLSServerView is the server block of a host that checks client
// certificates (model.ClientTLS). Every other host is served by the
// default server; this one answers the same locations through the same
// router and profiles, with ssl_verify_client on top.
type clientTLSServerView struct {
	Host string
	// Aliases are the host's server-alias names that are no host of
	// their own: the router serves them the host's locations, so they are
	// checked here too, as in ingress-nginx's server of the host.
	Aliases   []string
	CAFile    string
	CRLFile   string
	Verify    string
	Depth     int
	ErrorPage string
}

var clientVerifyModes = map[string]bool{"on": true, "optional": true, "optional_no_ca": true}

// clientTLSServers returns the server blocks of m's hosts that check client
// certificates, in host order. A host without spec.tls gets one too, with
// the default certificate, as in ingress-nginx: its HTTPS requests are
// routed by its own locations, which must not skip the check.
func clientTLSServers(m model.Model) ([]clientTLSServerView, error) {
	var out []clientTLSServerView
	hosts := make(map[string]bool, m.Servers.Len())
	for srv := range m.Servers.All() {
		hosts[srv.Host] = true
	}
	for srv := range m.Servers.All() {
		c := srv.ClientTLSSettings()
		if c.CAFile == "" {
			continue
		}
		if _, err := serverName(srv.Host); err != nil {
			return nil, err
		}
		if !clientVerifyModes[c.Verify] || c.Depth < 1 || c.Depth > 100 {
			return nil, fmt.Errorf("host %s: client certificate settings %+v", srv.Host, c)
		}
		for _, f := range []string{c.CAFile, c.CRLFile, c.ErrorPage} {
			if _, err := Quote(f); err != nil {
				return nil, fmt.Errorf("host %s: %w", srv.Host, err)
			}
		}
		v := clientTLSServerView{Host: srv.Host, CAFile: c.CAFile, CRLFile: c.CRLFile,
			Verify: c.Verify, Depth: c.Depth, ErrorPage: c.ErrorPage}
		for _, alias := range srv.Aliases {
			if hosts[alias] {
				continue // a server of its own takes the name (routesOf)
			}
			if _, err := serverName(alias); err != nil {
				return nil, fmt.Errorf("host %s: alias: %w", srv.Host, err)
			}
			v.Aliases = append(v.Aliases, alias)
		}
		out = append(out, v)
	}
	return out, nil
}

// defaultServerNames returns the exact names the default server must name
// in its server_name, sorted: every name the router serves (a server's
// exact host, its aliases, its www redirect) that a client-TLS wildcard
// server's regex matches and that no client-TLS server names.
//
// nginx picks the server of a TLS handshake by SNI, and of a request by
// Host, among names: exact, then wildcard, then regex, then the default
// server. The router serves every host from the default server "_", so
// without its name there, a.test of one Ingress would land in the regex
// server of another's "*.test" that checks client certificates: a.test's
// clients would have to show a certificate of that CA. ingress-nginx has
// a server per host, and the exact one wins; naming a.test in the default
// server gives the same. An Ingress wildcard matches one label only, so no
// other wildcard host falls under it; names without a Server (unknown
// hosts) do, as in ingress-nginx.
func defaultServerNames(m model.Model, servers []clientTLSServerView) []string {
	wildcards := map[string]bool{}
	own := map[string]bool{}
	for _, s := range servers {
		if strings.HasPrefix(s.Host, "*.") {
			wildcards[s.Host] = true
		} else {
			own[s.Host] = true
		}
		for _, alias := range s.Aliases {
			own[alias] = true
		}
	}
	if len(wildcards) == 0 {
		return nil
	}
	var names []string
	add := func(name string) {
		if name == "" || strings.HasPrefix(name, "*.") || own[name] {
			return
		}
		if _, parent, ok := strings.Cut(name, "."); ok && wildcards["*."+parent] {
			names = append(names, name)
		}
	}
	for srv := range m.Servers.All() {
		add(srv.Host)
		for _, alias := range srv.Aliases {
			add(alias)
		}
		add(srv.WWWRedirect)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// serverNamesHash returns nginx's server_names_hash_bucket_size and
// server_names_hash_max_size for the exact names in the server_name
// directives, zeros (nginx's defaults) when there are none. nginx refuses
// to start when the longest name does not fit a bucket (by default a
// cache line: 64 bytes hold a name of at most 46 characters) and warns
// when the names do not fit max_size buckets (by default 512). Here a
// bucket holds four entries of the longest name (an entry is a pointer,
// the name and 2 bytes, aligned to 8) and there are up to as many buckets
// as names: nginx finds a hash without a long search (5,000 names of 10
// to 250 characters: nginx -t under 0.5 s, no warning).
func serverNamesHash(names ...[]string) (bucketSize, maxSize int) {
	count, longest := 0, 0
	for _, list := range names {
		for _, name := range list {
			count++
			longest = max(longest, len(name))
		}
	}
	if count == 0 {
		return 0, 0
	}
	bucketSize = 128
	for bucketSize < 4*(longest+32) {
		bucketSize *= 2
	}
	return bucketSize, max(512, count)
}
