package model

import (
	"net/netip"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// podTargets are the Targets of a pod at 10.244.1.7 whose nginx listens on
// 80, 443 and 10246 and whose agent serves its admin server on 10254.
var podTargets = Targets{
	PodAddresses: []netip.Addr{netip.MustParseAddr("10.244.1.7"), netip.MustParseAddr("fd00:10:244::7")},
	PodPorts:     []int32{80, 443, 10246, 10254},
}

func TestCheckURL(t *testing.T) {
	allowed := podTargets
	allowed.Allowed = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16")}
	local := podTargets
	local.Local = true
	tests := []struct {
		url     string
		targets Targets
		routed  bool
		// refused is a part of the reason, "" when the URL is fine.
		refused string
	}{
		{url: "http://auth.auth.svc.cluster.local/check", refused: ""},
		{url: "https://auth.example.com:8443/check?x=${request_uri}", refused: ""},
		{url: "http://10.0.0.5:4180/oauth2/auth", refused: ""},
		{url: "http://[2001:db8::1]:9000/", refused: ""},
		{url: "https://test.env.com${request_uri}", refused: ""},
		{url: "http://a.test${uri}", refused: ""},
		// unix sockets, in every spelling nginx takes.
		{url: "http://unix:/var/run/restysync/restysync.sock:/backends", refused: "unix socket"},
		{url: "http://UNIX:/x.sock:/p", refused: "unix socket"},
		{url: "HTTPS://Unix:/x.sock", refused: "unix socket"},
		{url: "http://unix:/x.sock:/p", targets: allowed, refused: "unix socket"},
		{url: "http://unix:/x.sock:/p", targets: local, refused: "unix socket"},
		// loopback.
		{url: "http://127.0.0.1:10254/debug/state", refused: "port 10254"},
		{url: "http://127.0.0.1:9000/", refused: "loopback"},
		{url: "http://127.9.9.9/", refused: "port 80"},
		{url: "http://127.1:9000/", refused: "loopback"},
		{url: "http://2130706433:9000/", refused: "loopback"},
		{url: "http://0x7f000001:9000/", refused: "loopback"},
		{url: "http://0x7f.1:9000/", refused: "loopback"},
		{url: "http://0177.0.0.1:9000/", refused: "loopback"},
		{url: "http://127.0.0.1.:9000/", refused: "loopback"},
		{url: "http://[::1]:9000/", refused: "loopback"},
		{url: "http://[::ffff:127.0.0.1]:9000/", refused: "loopback"},
		{url: "http://[::ffff:7f00:1]:9000/", refused: "loopback"},
		{url: "http://[::127.0.0.1]:9000/", refused: "loopback"},
		{url: "http://[0:0:0:0:0:0:0:1]:9000/", refused: "loopback"},
		{url: "http://localhost:9000/", refused: "loopback"},
		{url: "http://LOCALHOST./", refused: "loopback"},
		{url: "http://admin.localhost/", refused: "loopback"},
		{url: "http://ip6-localhost/", refused: "loopback"},
		// link-local and metadata.
		{url: "http://169.254.169.254/latest/meta-data/", refused: "link-local"},
		{url: "http://0xa9fea9fe/", refused: "link-local"},
		{url: "http://[fe80::1]/", refused: "link-local"},
		{url: "http://[::ffff:169.254.169.254]/", refused: "link-local"},
		{url: "http://[fd00:ec2::254]/", refused: "metadata"},
		// unspecified.
		{url: "http://0.0.0.0:9000/", refused: "unspecified"},
		{url: "http://0:9000/", refused: "unspecified"},
		{url: "http://[::]:9000/", refused: "unspecified"},
		{url: "http://[::ffff:0.0.0.0]:9000/", refused: "unspecified"},
		// the pod's own addresses.
		{url: "http://10.244.1.7:9000/", refused: "ingress pod itself"},
		{url: "http://[fd00:10:244::7]:9000/", refused: "ingress pod itself"},
		{url: "http://[::ffff:10.244.1.7]:9000/", refused: "ingress pod itself"},
		// spellings that hide the host.
		{url: "http://a.test@127.0.0.1/", refused: "user information"},
		{url: "http://%31%32%37.0.0.1/", refused: "percent-encoding"},
		{url: "http://[fe80::1%25eth0]/", refused: "percent-encoding"},
		{url: "http://127.0.0.1:/", refused: "empty port"},
		{url: "http://a.test:99999/", refused: "not 1..65535"},
		{url: "http://[::1/", refused: "unclosed"},
		{url: "http://999.1.1.1/", refused: "neither a DNS name"},
		{url: "http://a.08/", refused: "neither a DNS name"},
		{url: "http://restysync_upstream/", refused: "neither a DNS name"},
		// variables in the host.
		{url: "http://${host}/auth", refused: "variable"},
		{url: "http://${http_host}/auth", routed: true, refused: "variable"},
		{url: "http://${restysync_forwarded_host}/auth", routed: true, refused: "variable"},
		{url: "http://a.${host}/auth", routed: true, refused: "variable"},
		{url: "http://${host}${request_uri}", routed: true, refused: ""},
		{url: "https://${host}/oauth2/auth", routed: true, refused: ""},
		{url: "https://${host}:8443/oauth2/auth", routed: true, refused: ""},
		{url: "https://${host}.evil/oauth2/auth", routed: true, refused: "after ${host}"},
		{url: "http://127.0.0.1:${remote_addr}/", refused: "variable"},
		// what a platform allows, and what it cannot.
		{url: "http://127.0.0.1:9000/", targets: allowed, refused: ""},
		{url: "http://169.254.169.254/", targets: allowed, refused: ""},
		{url: "http://127.0.0.1:10254/debug/state", targets: allowed, refused: "port 10254"},
		{url: "http://10.244.1.7:9000/", targets: allowed, refused: "ingress pod itself"},
		// the file source: loopback, but not the pod's ports.
		{url: "http://127.0.0.1:9000/", targets: local, refused: ""},
		{url: "http://localhost:9000/", targets: local, refused: ""},
		{url: "http://127.0.0.1:10254/debug/state", targets: local, refused: "port 10254"},
		{url: "http://localhost:80/", targets: local, refused: "loopback"},
		{url: "http://169.254.169.254/", targets: local, refused: "link-local"},
	}
	for _, tt := range tests {
		targets := tt.targets
		if targets.PodPorts == nil {
			targets = podTargets
		}
		got := targets.CheckURL(tt.url, tt.routed)
		switch {
		case tt.refused == "" && got != "":
			t.Errorf("CheckURL(%q) = %q, want it allowed", tt.url, got)
		case tt.refused != "" && !strings.Contains(got, tt.refused):
			t.Errorf("CheckURL(%q) = %q, want a refusal mentioning %q", tt.url, got, tt.refused)
		}
	}
}

func TestCheckEndpoint(t *testing.T) {
	local := podTargets
	local.Local = true
	allowed := podTargets
	allowed.Allowed = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}
	tests := []struct {
		addr    string
		port    int32
		targets Targets
		refused string
	}{
		{addr: "10.244.2.9", port: 8080},
		{addr: "2001:db8::1", port: 8080},
		{addr: "127.0.0.1", port: 8080, refused: "loopback"},
		{addr: "::1", port: 8080, refused: "loopback"},
		{addr: "::ffff:127.0.0.1", port: 8080, refused: "loopback"},
		{addr: "169.254.169.254", port: 80, refused: "link-local"},
		{addr: "fe80::1", port: 80, refused: "link-local"},
		{addr: "0.0.0.0", port: 8080, refused: "unspecified"},
		{addr: "10.244.1.7", port: 8080, refused: "ingress pod itself"},
		{addr: "10.244.1.7", port: 10254, refused: "port 10254"},
		{addr: "127.0.0.5", port: 8080, targets: local},
		{addr: "10.244.1.7", port: 8080, targets: local},
		{addr: "127.0.0.5", port: 80, targets: local, refused: "port 80"},
		{addr: "10.244.1.7", port: 10254, targets: local, refused: "port 10254"},
		{addr: "169.254.169.254", port: 80, targets: local, refused: "link-local"},
		{addr: "169.254.169.254", port: 80, targets: allowed},
	}
	for _, tt := range tests {
		targets := tt.targets
		if targets.PodPorts == nil {
			targets = podTargets
		}
		got := targets.CheckEndpoint(netip.MustParseAddr(tt.addr), tt.port)
		switch {
		case tt.refused == "" && got != "":
			t.Errorf("CheckEndpoint(%s, %d) = %q, want it allowed", tt.addr, tt.port, got)
		case tt.refused != "" && !strings.Contains(got, tt.refused):
			t.Errorf("CheckEndpoint(%s, %d) = %q, want a refusal mentioning %q", tt.addr, tt.port, got, tt.refused)
		}
	}
}

func TestParseLooseIPv4(t *testing.T) {
	for in, want := range map[string]string{
		"127.1": "127.0.0.1", "2130706433": "127.0.0.1", "0x7f000001": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"10.1.2": "10.1.0.2", "0": "0.0.0.0", "1.2.3.4": "1.2.3.4",
	} {
		got, ok := parseLooseIPv4(in)
		if !ok || got.String() != want {
			t.Errorf("parseLooseIPv4(%q) = %v, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"256.1.1.1", "1.2.3.4.5", "4294967296", "0x", "08", "a.b", "1..2", ""} {
		if got, ok := parseLooseIPv4(in); ok {
			t.Errorf("parseLooseIPv4(%q) = %v, want none", in, got)
		}
	}
}

// Every field that becomes a URL nginx connects to goes through CheckURL:
// refused, it is a refused Problem naming the Ingress and the key, and the
// location fails closed (auth) or goes without (mirror).
func TestTargetFields(t *testing.T) {
	const unixURL = "http://unix:/var/run/restysync/restysync.sock:/backends"
	const adminURL = "http://127.0.0.1:10254/debug/state"
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		defaultOnly bool // the Ingress's only rule has no host
		global      string
		// wantDenied: the location answers 503; wantMirror: its mirror target.
		wantDenied bool
		wantMirror string
		refused    string
	}{
		{name: "auth-url unix", annotations: map[string]string{nginxPrefix + "auth-url": unixURL}, wantDenied: true, refused: "auth-url: refused"},
		{name: "auth-url admin", annotations: map[string]string{nginxPrefix + "auth-url": adminURL}, wantDenied: true, refused: "auth-url: refused"},
		{name: "auth-url metadata", annotations: map[string]string{nginxPrefix + "auth-url": "http://169.254.169.254/"}, wantDenied: true, refused: "link-local"},
		{name: "auth-url of our prefix", annotations: map[string]string{"restysync.io/auth-url": "http://localhost/"}, wantDenied: true, refused: "restysync.io/auth-url: refused"},
		{name: "auth-url $host on a named host", annotations: map[string]string{nginxPrefix + "auth-url": "https://$host/oauth2/auth"}},
		{name: "auth-url $host on the default server", defaultOnly: true,
			annotations: map[string]string{nginxPrefix + "auth-url": "https://$host/oauth2/auth"}, wantDenied: true, refused: "variable"},
		{name: "auth-signin is a redirect, not fetched", annotations: map[string]string{
			nginxPrefix + "auth-url": "http://auth.test/", nginxPrefix + "auth-signin": "http://127.0.0.1/start"}},
		{name: "mirror-target unix", annotations: map[string]string{nginxPrefix + "mirror-target": unixURL}, refused: "mirror-target: refused"},
		{name: "mirror-target admin", annotations: map[string]string{nginxPrefix + "mirror-target": adminURL}, refused: "port 10254"},
		{name: "mirror-target fine", annotations: map[string]string{nginxPrefix + "mirror-target": "http://m.test/"}, wantMirror: "http://m.test/"},
		{name: "global-auth-url unix", global: unixURL, wantDenied: true, refused: "global-auth-url: refused"},
		{name: "global-auth-url $host on a named host", global: "https://${host}/oauth2/auth"},
		{name: "global-auth-url $host on the default server", global: "https://${host}/oauth2/auth", defaultOnly: true,
			wantDenied: true, refused: "global-auth-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := "app.example.com"
			if tc.defaultOnly {
				host = ""
			}
			opts := []ingressOption{rule(host, prefix("/", "web", 80))}
			for k, v := range tc.annotations {
				opts = append(opts, annotation(k, v))
			}
			s := snapshotOf(newIngress("default", "app", opts...))
			s.Targets = podTargets
			s.GlobalAuth = ExternalAuth{URL: tc.global}
			m, problems := Build(s)
			var found *Location
			for l := range m.AllLocations() {
				found = l
			}
			if found == nil {
				t.Fatalf("no location; problems %v", problems)
			}
			if denied := found.AccessSettings().Denied != ""; denied != tc.wantDenied {
				t.Errorf("denied %q, want %v", found.AccessSettings().Denied, tc.wantDenied)
			}
			if found.ProxySettings().Mirror.Target != tc.wantMirror {
				t.Errorf("mirror %q, want %q", found.ProxySettings().Mirror.Target, tc.wantMirror)
			}
			if tc.refused == "" {
				if len(problems) > 0 {
					t.Errorf("unexpected problems %v", problems)
				}
				return
			}
			if len(problems) != 1 || !strings.Contains(problems[0].Reason, tc.refused) {
				t.Fatalf("problems %v, want one mentioning %q", problems, tc.refused)
			}
		})
	}
}

// Every endpoint address goes through CheckEndpoint: a refused one is a
// Problem on its slice, and the rest of the slice is served.
func TestTargetEndpoints(t *testing.T) {
	slice := endpointSlice("default", "web-abc", "web", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)),
		ready("10.0.0.1", "127.0.0.1", "169.254.169.254", "10.244.1.7"))
	admin := endpointSlice("default", "web-admin", "web", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 10254)), ready("10.244.1.7"))
	s := snapshotOf(newIngress("default", "app", rule("app.example.com", prefix("/", "web", 80))))
	s.EndpointSlices = ListOf(slice, admin)
	s.Targets = podTargets
	m, problems := Build(s)
	if got := m.Backends.At(0).Endpoints; len(got) != 1 || got[0] != (Endpoint{"10.0.0.1", 8080}) {
		t.Errorf("endpoints %v, want only 10.0.0.1:8080", got)
	}
	want := []string{
		`web-abc: endpoints[0].addresses[1] "127.0.0.1" port 8080: refused: is 127.0.0.1, a loopback address`,
		`web-abc: endpoints[0].addresses[2] "169.254.169.254" port 8080: refused: is 169.254.169.254, a link-local address`,
		`web-abc: endpoints[0].addresses[3] "10.244.1.7" port 8080: refused: is 10.244.1.7, an address of the ingress pod itself`,
		`web-admin: endpoints[0].addresses[0] "10.244.1.7" port 10254: refused: is 10.244.1.7 at port 10254`,
	}
	if len(problems) != len(want) {
		t.Fatalf("problems %v, want %d", problems, len(want))
	}
	for i, p := range problems {
		// Refused: restysync check names the slice and fails.
		if p.Kind != "EndpointSlice" || !p.Refused || !strings.HasPrefix(p.Name+": "+p.Reason, want[i]) {
			t.Errorf("problem %d: %v, want %s", i, p, want[i])
		}
	}

	// The fast path checks the same way.
	b, fast := ResolveBackend(m.Backends.At(0).Name, webService, s.EndpointSlices.Slice(), podTargets)
	if len(b.Endpoints) != 1 || len(fast) != len(want) {
		t.Errorf("ResolveBackend: endpoints %v, problems %v", b.Endpoints, fast)
	}

	// The file source keeps loopback, not the pod's ports.
	s.Targets.Local = true
	m, problems = Build(s)
	if got := len(m.Backends.At(0).Endpoints); got != 3 {
		t.Errorf("local: endpoints %v, want 10.0.0.1, 10.244.1.7 and 127.0.0.1 at 8080", m.Backends.At(0).Endpoints)
	}
	if len(problems) != 2 {
		t.Errorf("local: problems %v, want the metadata address and the admin port", problems)
	}
}

// A service-upstream backend's cluster IP is an endpoint too.
func TestTargetClusterIP(t *testing.T) {
	svc := service("default", "web", servicePort("http", 80))
	svc.ClusterIP = "127.0.0.1"
	s := snapshotOf(newIngress("default", "app", rule("app.example.com", prefix("/", "web", 80)),
		annotation(nginxPrefix+"service-upstream", "true")))
	s.Services = ListOf(svc)
	s.Targets = podTargets
	m, problems := Build(s)
	if m.Backends.Len() != 1 || len(m.Backends.At(0).Endpoints) != 0 {
		t.Errorf("backends %v, want one without endpoints", m.Backends)
	}
	if len(problems) != 1 || problems[0].Kind != "Service" || !problems[0].Refused || !strings.Contains(problems[0].Reason, "refused: is 127.0.0.1") {
		t.Errorf("problems %v, want the Service's cluster IP refused", problems)
	}
}
