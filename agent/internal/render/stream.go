package render

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// Sockets in the shared dir behind the passthrough front (Settings.SSLPassthrough);
// no longer than SocketName, whose length checkSettings bounds.
const (
	// HTTPSSocketName is where the HTTPS servers listen when the stream
	// module owns the HTTPS port.
	HTTPSSocketName = "https.sock"
	// PassthroughSocketName is the stream server that drops the PROXY
	// protocol header before a passed-through host's backend.
	PassthroughSocketName = "tls-pass.sock"
)

// streamView is the stream block: the passthrough front on the HTTPS
// port, and the TCP and UDP services (model.Stream).
//
// nginx's stream module can send a PROXY protocol header per server, not
// per destination, so the front sends one on every connection: the HTTPS
// servers read the client's address from it, and the passed-through hosts
// take one more local hop, through a server that reads and drops it.
type streamView struct {
	// Passthrough says the front is there (Settings.SSLPassthrough), even
	// with no host passed through yet: the listeners stay put.
	Passthrough       bool
	Listen            string
	HTTPSSocket       string
	PassthroughSocket string
	PassthroughHosts  []passthroughView
	// MapHashBucketSize fits the longest host in the maps' hash (nginx
	// refuses to start when an entry does not fit a bucket).
	MapHashBucketSize int
	Upstreams         []streamUpstreamView
	Services          []streamServiceView
	// TLSFronts are the Gateway listeners of protocol TLS, mode
	// Passthrough (model.TLSFront): each a server and a map from SNI to
	// upstream, in the variable Variable.
	TLSFronts []tlsFrontView
}

type tlsFrontView struct {
	Listen   string
	Variable string
	// Hosts are exact names or wildcards ("*.example.com", which a map
	// with hostnames matches at any depth, as the Gateway API does);
	// Default takes every other name.
	Hosts   []passthroughView
	Default string
	// Terminators end TLS for the hosts of Terminate listeners: the
	// front sends those names to their Socket.
	Terminators []tlsTerminatorView
}

// tlsTerminatorView is a stream server on a unix socket that ends TLS
// with one certificate and sends the plain bytes to the upstream its
// map (in Variable) picks by SNI.
type tlsTerminatorView struct {
	Upstream, Socket, CertFile, KeyFile string
	Variable                            string
	Hosts                               []passthroughView
	Default                             string
}

type passthroughView struct {
	// Host is checked here and printed by serverName: quoted, or a regex
	// for a wildcard.
	Host     string
	Upstream string
}

type streamUpstreamView struct {
	Name string
	// Servers are "address:port", IPv6 in brackets; none closes each connection.
	Servers []string
}

type streamServiceView struct {
	Listen      string
	UDP         bool
	AcceptProxy bool
	SendProxy   bool
	Upstream    string
}

// newStreamView returns the stream block, or nil when there is none.
func newStreamView(st model.Stream, s Settings) (*streamView, error) {
	if !s.SSLPassthrough && len(st.Services) == 0 && len(st.Gateways) == 0 {
		return nil, nil
	}
	v := &streamView{Passthrough: s.SSLPassthrough}
	upstreams := make(map[string]string, len(st.Backends))
	for i, b := range st.Backends {
		u := streamUpstreamView{Name: "restysync_stream_" + strconv.Itoa(i)}
		for _, e := range b.Endpoints {
			addr, err := netip.ParseAddr(e.Address)
			if err != nil || e.Port < 1 || e.Port > 65535 {
				return nil, fmt.Errorf("stream backend %q: endpoint %s:%d is not an IP address and port", b.Name, e.Address, e.Port)
			}
			u.Servers = append(u.Servers, netip.AddrPortFrom(addr, uint16(e.Port)).String())
		}
		upstreams[b.Name] = u.Name
		v.Upstreams = append(v.Upstreams, u)
	}
	upstream := func(name string) (string, error) {
		u, ok := upstreams[name]
		if !ok {
			return "", fmt.Errorf("stream backend %q: not in the model's stream backends", name)
		}
		return u, nil
	}
	if s.SSLPassthrough {
		v.Listen = listen(s.ListenAddress, s.HTTPSPort)
		v.HTTPSSocket = "unix:" + filepath.Join(s.SharedDir, HTTPSSocketName)
		v.PassthroughSocket = "unix:" + filepath.Join(s.SharedDir, PassthroughSocketName)
		v.MapHashBucketSize = 64
		for _, h := range st.Passthrough {
			// An entry is a pointer, the name and 2 bytes, aligned to 8;
			// a bucket also ends in a pointer.
			for v.MapHashBucketSize < len(h.Host)+32 {
				v.MapHashBucketSize *= 2
			}
			if _, err := serverName(h.Host); err != nil {
				return nil, fmt.Errorf("passthrough %w", err)
			}
			u, err := upstream(h.Backend)
			if err != nil {
				return nil, err
			}
			v.PassthroughHosts = append(v.PassthroughHosts, passthroughView{Host: h.Host, Upstream: u})
		}
	}
	fronts, err := tlsFronts(st.Gateways, s, upstream)
	if err != nil {
		return nil, err
	}
	v.TLSFronts = fronts
	if len(fronts) > 0 {
		v.MapHashBucketSize = max(v.MapHashBucketSize, 64)
	}
	for _, f := range fronts {
		for _, h := range f.Hosts {
			for v.MapHashBucketSize < len(h.Host)+32 {
				v.MapHashBucketSize *= 2
			}
		}
	}
	for _, svc := range st.Services {
		if svc.Port < 1 || svc.Port > 65535 {
			return nil, fmt.Errorf("%s service port %d: not a port", svc.Protocol, svc.Port)
		}
		u, err := upstream(svc.Backend)
		if err != nil {
			return nil, err
		}
		v.Services = append(v.Services, streamServiceView{Listen: listen(s.ListenAddress, int(svc.Port)),
			UDP: svc.Protocol == corev1.ProtocolUDP, AcceptProxy: svc.AcceptProxyProtocol, SendProxy: svc.SendProxyProtocol, Upstream: u})
	}
	return v, nil
}

// closedUpstream is the stream upstream that closes each connection.
const closedUpstream = "restysync_closed"

// tlsFronts returns the stream servers of the Gateway listeners of
// protocol TLS, or why one cannot be served: an address:port that is not
// one, or that the Ingress servers or the passthrough front hold.
func tlsFronts(fronts []model.TLSFront, s Settings, upstream func(string) (string, error)) ([]tlsFrontView, error) {
	var out []tlsFrontView
	for i, f := range fronts {
		a, err := netip.ParseAddr(f.Address)
		if err != nil || a.Zone() != "" || a.String() != f.Address || a.IsUnspecified() {
			return nil, fmt.Errorf("TLS passthrough listener %q: want a specified IP address in its canonical form, without zone", f.Address)
		}
		if f.Port < 1 || f.Port > 65535 {
			return nil, fmt.Errorf("TLS passthrough listener %s port %d: must be 1..65535", f.Address, f.Port)
		}
		if want := model.FrontName(f.Address, f.Port); f.Front != want {
			return nil, fmt.Errorf("TLS passthrough listener %s: front %q, want %q", want, f.Front, want)
		}
		if s.ListenAddress == "" || s.ListenAddress == f.Address {
			for _, p := range []int{s.HTTPPort, s.HTTPSPort, s.StatusPort} {
				if p == int(f.Port) {
					return nil, fmt.Errorf("TLS passthrough listener %s: port %d is the Ingress servers'", f.Front, f.Port)
				}
			}
		}
		v := tlsFrontView{Listen: netip.AddrPortFrom(a, uint16(f.Port)).String(), Variable: "restysync_tls_front_" + strconv.Itoa(i), Default: closedUpstream}
		for _, h := range f.Hosts {
			u := closedUpstream
			if h.Backend != "" {
				if u, err = upstream(h.Backend); err != nil {
					return nil, err
				}
			}
			if h.Host != "_" {
				if err := checkGatewayHost(h.Host); err != nil {
					return nil, fmt.Errorf("TLS listener %s: %w", f.Front, err)
				}
			}
			if h.CertFile != "" {
				t, err := terminator(&v, i, h, s)
				if err != nil {
					return nil, fmt.Errorf("TLS listener %s: %w", f.Front, err)
				}
				t.add(h.Host, u)
				u = t.Upstream
			}
			v.add(h.Host, u)
		}
		out = append(out, v)
	}
	return out, nil
}

// add sends host ("_": every other name) to upstream.
func (v *tlsFrontView) add(host, upstream string) {
	if host == "_" {
		v.Default = upstream
		return
	}
	v.Hosts = append(v.Hosts, passthroughView{Host: host, Upstream: upstream})
}

// add is tlsFrontView.add for the names a terminator ends TLS for.
func (t *tlsTerminatorView) add(host, upstream string) {
	if host == "_" {
		t.Default = upstream
		return
	}
	t.Hosts = append(t.Hosts, passthroughView{Host: host, Upstream: upstream})
}

// terminator returns the terminator of front v (number i) that ends TLS
// with h's certificate, added when it is the first.
func terminator(v *tlsFrontView, i int, h model.TLSHost, s Settings) (*tlsTerminatorView, error) {
	for k := range v.Terminators {
		if t := &v.Terminators[k]; t.CertFile == filepath.Join(s.SharedDir, h.CertFile) && t.KeyFile == filepath.Join(s.SharedDir, h.KeyFile) {
			return t, nil
		}
	}
	for _, f := range []string{h.CertFile, h.KeyFile} {
		if !strings.HasPrefix(f, "auth/") || strings.Contains(f, "..") || strings.ContainsAny(f, "\"\\$;{} \t\r\n") {
			return nil, fmt.Errorf("host %q: certificate file %q is not a file under auth/", h.Host, f)
		}
	}
	k := len(v.Terminators)
	// t<front>-<k>.sock: no longer than SocketName, so that checkSettings
	// bounds its path too.
	socket := fmt.Sprintf("t%d-%d.sock", i, k)
	if len(socket) > len(SocketName) {
		return nil, fmt.Errorf("too many TLS listeners for the socket names")
	}
	name := fmt.Sprintf("restysync_tls_end_%d_%d", i, k)
	v.Terminators = append(v.Terminators, tlsTerminatorView{Upstream: name, Variable: name + "_backend",
		Socket: "unix:" + filepath.Join(s.SharedDir, socket), Default: closedUpstream,
		CertFile: filepath.Join(s.SharedDir, h.CertFile), KeyFile: filepath.Join(s.SharedDir, h.KeyFile)})
	return &v.Terminators[k], nil
}

// checkGatewayHost checks a Gateway hostname before it is written, quoted,
// as a key of a map with hostnames: lower-case DNS labels, the first one
// "*" for a wildcard.
func checkGatewayHost(host string) error {
	name := strings.TrimPrefix(host, "*.")
	if len(host) > 253 || name == "" {
		return fmt.Errorf("host %q: not a host name", host)
	}
	for label := range strings.SplitSeq(name, ".") {
		if len(label) == 0 || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" ||
			label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("host %q: not a host name", host)
		}
	}
	return nil
}
