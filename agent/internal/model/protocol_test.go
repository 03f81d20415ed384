package model

import (
	"testing"
)

// locationsByHost returns the first location of every server of m by host
// ("" for the default server).
func locationsByHost(m Model) map[string]Location {
	out := map[string]Location{}
	for _, s := range append([]*Server{&m.Default}, m.Servers.Slice()...) {
		if len(s.Locations) > 0 {
			out[s.Host] = s.Locations[0]
		}
	}
	return out
}

// ssl-redirect is on by default for hosts that listen for HTTPS (their own
// spec.tls or another Ingress's), off for the others and the default
// server; ssl-redirect "false" turns it off, force-ssl-redirect turns it
// on without TLS.
func TestSSLRedirect(t *testing.T) {
	tlsOwn := newIngress("default", "own", withTLS("cert", "own.test"), rule("own.test", prefix("/", "web", 80)),
		defaultBackendTo(backend("web", 80)))
	plain := newIngress("default", "plain", createdAt(1), rule("plain.test", prefix("/", "web", 80)))
	// Another Ingress's spec.tls makes shared.test listen for HTTPS: the
	// paths of this one redirect too.
	shared := newIngress("default", "shared", createdAt(2), rule("shared.test", prefix("/a", "web", 80)))
	sharedTLS := newIngress("default", "shared-tls", createdAt(3), withTLS("cert", "shared.test"), rule("shared.test", prefix("/b", "web", 80)))
	off := newIngress("default", "off", createdAt(4), withTLS("cert", "off.test"),
		annotation("nginx.ingress.kubernetes.io/ssl-redirect", "false"), rule("off.test", prefix("/", "web", 80)))
	forced := newIngress("default", "forced", createdAt(5),
		annotation("restysync.io/force-ssl-redirect", "true"), rule("forced.test", prefix("/", "web", 80)))
	// restysync.io/ wins over nginx.ingress.kubernetes.io/.
	both := newIngress("default", "both", createdAt(6), withTLS("cert", "both.test"),
		annotation("restysync.io/ssl-redirect", "true"), annotation("nginx.ingress.kubernetes.io/ssl-redirect", "false"),
		rule("both.test", prefix("/", "web", 80)))
	bad := newIngress("default", "bad", createdAt(7), withTLS("cert", "bad.test"),
		annotation("restysync.io/ssl-redirect", "yes"), rule("bad.test", prefix("/", "web", 80)))

	m, problems := Build(snapshotOf(tlsOwn, plain, shared, sharedTLS, off, forced, both, bad))
	got := map[string]bool{}
	for _, s := range append([]*Server{&m.Default}, m.Servers.Slice()...) {
		for _, l := range s.Locations {
			got[s.Host+l.Path] = l.SSLRedirect
		}
	}
	want := map[string]bool{
		"/": false, "own.test/": true, "plain.test/": false, "shared.test/a": true, "shared.test/b": true,
		"off.test/": false, "forced.test/": true, "both.test/": true, "bad.test/": true,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: SSLRedirect %v (present %v), want %v", k, g, ok, w)
		}
	}
	if !findProblem(problems, "bad", `annotation restysync.io/ssl-redirect "yes": is not true or false; true is used`) {
		t.Errorf("no problem for the bad ssl-redirect: %v", problems)
	}
}

func TestBackendProtocol(t *testing.T) {
	ing := func(name, value string, minutes int) Snapshot {
		return snapshotOf(newIngress("default", name, createdAt(minutes),
			annotation("nginx.ingress.kubernetes.io/backend-protocol", value), rule(name+".test", prefix("/", "web", 80))))
	}
	for _, tc := range []struct {
		value, want string
		problem     bool
	}{
		{"HTTP", ProtocolHTTP, false},
		{"HTTPS", ProtocolHTTPS, false},
		{"GRPC", ProtocolGRPC, false},
		{"grpcs", ProtocolGRPCS, false},
		{"AJP", ProtocolHTTP, true},
		{"http2", ProtocolHTTP, true},
	} {
		m, problems := Build(ing("a", tc.value, 0))
		if got := locationsByHost(m)["a.test"].Protocol; got != tc.want {
			t.Errorf("backend-protocol %q: Protocol %q, want %q", tc.value, got, tc.want)
		}
		if got := findProblem(problems, "a", "annotation nginx.ingress.kubernetes.io/backend-protocol"); got != tc.problem {
			t.Errorf("backend-protocol %q: problem %v, want %v (%v)", tc.value, got, tc.problem, problems)
		}
	}
	// The default backend of an Ingress speaks its protocol too.
	m, _ := Build(snapshotOf(newIngress("default", "d", annotation("restysync.io/backend-protocol", "GRPC"),
		defaultBackendTo(backend("web", 80)))))
	if got := locationsByHost(m)[""].Protocol; got != ProtocolGRPC {
		t.Errorf("default backend: Protocol %q, want GRPC", got)
	}
}

// A canary splits the main location: the location keeps the main
// Ingress's protocol and redirect, whatever the canary says.
func TestLocationOptionsOfCanaryAreTheMainOnes(t *testing.T) {
	main := newIngress("default", "main", withTLS("cert", "a.test"), annotation("restysync.io/backend-protocol", "HTTPS"),
		rule("a.test", prefix("/", "web", 80)))
	canary := newIngress("default", "canary", createdAt(1), annotation("restysync.io/canary", "true"),
		annotation("restysync.io/backend-protocol", "GRPC"), annotation("restysync.io/ssl-redirect", "false"),
		rule("a.test", prefix("/", "web", 80)))
	m, _ := Build(snapshotOf(main, canary))
	l := locationsByHost(m)["a.test"]
	if l.Protocol != ProtocolHTTPS || !l.SSLRedirect {
		t.Errorf("location %+v: want the main Ingress's HTTPS and redirect", l)
	}
}
