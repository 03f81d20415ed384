package model

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// newBackendTLSPolicy targets Service service (and section, when not "") of
// namespace "infra" with the CAs of the ConfigMaps named and hostname.
func newBackendTLSPolicy(name, service, section, hostname string, caConfigMaps ...string) *gatewayv1.BackendTLSPolicy {
	p := &gatewayv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name, Generation: 2, CreationTimestamp: metav1.NewTime(baseTime)},
		Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: gatewayv1.ObjectName(service)}}},
			Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: gatewayv1.PreciseHostname(hostname)},
		},
	}
	if section != "" {
		s := gatewayv1.SectionName(section)
		p.Spec.TargetRefs[0].SectionName = &s
	}
	for _, cm := range caConfigMaps {
		p.Spec.Validation.CACertificateRefs = append(p.Spec.Validation.CACertificateRefs, gatewayv1.LocalObjectReference{Kind: "ConfigMap", Name: gatewayv1.ObjectName(cm)})
	}
	return p
}

// tlsRouteSnapshot is a Gateway infra/gw (HTTP on 80) with a route that
// sends /a to Service secure:443 (port "https") and /b to secure:8443
// (port "other"), and objects.
func tlsRouteSnapshot(objects ...any) Snapshot {
	route := newRoute("infra", "app", parentList(parentOf("", "gw", "")), nil,
		routeRule(matchList(pathMatch(gatewayv1.PathMatchExact, "/a")), backendTo("", "secure", 443)),
		routeRule(matchList(pathMatch(gatewayv1.PathMatchExact, "/b")), backendTo("", "secure", 8443)))
	base := []any{newGateway("infra", "gw", httpListener("http", 80, "")), route,
		service("infra", "secure", servicePort("https", 443), servicePort("other", 8443))}
	return gwSnapshot(append(base, objects...)...)
}

// shareOf returns the first share of the location of path on the Gateway's front.
func shareOf(t *testing.T, m Model, path string) WeightedBackend {
	t.Helper()
	r, ok := gatewayRoute(m, FrontName(gwPool[0], 80), anyHost)
	if !ok {
		t.Fatalf("no route; routes %v", routeHosts(m))
	}
	for _, l := range r.Locations {
		if l.Path == path && l.Rule != nil && len(l.Rule.Backends) > 0 {
			return l.Rule.Backends[0]
		}
	}
	t.Fatalf("no location %s in %s", path, dump(r.Locations))
	return WeightedBackend{}
}

// policyAncestor returns the conditions of policy name for Gateway infra/gw.
func policyAncestor(t *testing.T, m Model, name string) []Condition {
	t.Helper()
	for r := range m.GatewayAPI.Routes.All() {
		if r.Kind == kindBackendTLSPolicy && r.Name == name {
			for _, p := range r.Parents {
				if p.Namespace == "infra" && p.Name == "gw" {
					return p.Conditions
				}
			}
		}
	}
	t.Fatalf("no ancestor infra/gw for BackendTLSPolicy %s in %s", name, dump(m.GatewayAPI.Routes))
	return nil
}

func TestBackendTLSPolicy(t *testing.T) {
	ca, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
	m, problems := Build(tlsRouteSnapshot(newBackendTLSPolicy("tls", "secure", "", "secure.infra.test", "ca"), caConfigMap("infra", "ca", ca)))
	if len(problems) != 0 {
		t.Errorf("problems: %v", problems)
	}
	if len(m.BackendTLS) != 1 {
		t.Fatalf("BackendTLS = %s, want one", dump(m.BackendTLS))
	}
	tls := m.BackendTLS[0]
	if !strings.HasPrefix(tls.Name, BackendTLSPrefix) || tls.ServerName != "secure.infra.test" || !strings.HasPrefix(tls.CAFile, "auth/infra_tls.") {
		t.Errorf("BackendTLS = %s", dump(tls))
	}
	if !slices.ContainsFunc(m.AuthFiles, func(f AuthFile) bool { return f.Name == tls.CAFile && strings.Contains(f.Content, "BEGIN CERTIFICATE") }) {
		t.Errorf("AuthFiles %s lack the CA %s", dump(m.AuthFiles), tls.CAFile)
	}
	for _, path := range []string{"/a", "/b"} {
		if s := shareOf(t, m, path); s.TLS != tls.Name || s.Backend == "" {
			t.Errorf("%s: share %s, want TLS %s", path, dump(s), tls.Name)
		}
	}
	conds := policyAncestor(t, m, "tls")
	wantCondition(t, "policy", conds, condAccepted, true, reasonAccepted)
	wantCondition(t, "policy", conds, condResolvedRefs, true, reasonResolvedRefs)

	// New content of the CA is a new file and a new location (a reload);
	// the name of the location stays a hash, never a user string.
	other, _ := testcert.New(t, 2, time.Now().Add(time.Hour), "ca2.test")
	m2, _ := Build(tlsRouteSnapshot(newBackendTLSPolicy("tls", "secure", "", "secure.infra.test", "ca"), caConfigMap("infra", "ca", other)))
	if len(m2.BackendTLS) != 1 || m2.BackendTLS[0].Name == tls.Name || m2.BackendTLS[0].CAFile == tls.CAFile {
		t.Errorf("after a CA change: %s, before %s", dump(m2.BackendTLS), dump(tls))
	}
}

// Of two policies on one target the older wins, the other is Conflicted;
// a policy of the port's section applies there before one of the Service.
func TestBackendTLSPolicyConflicts(t *testing.T) {
	ca, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
	older := olderBy(newBackendTLSPolicy("older", "secure", "", "older.test", "ca"), -5)
	newer := newBackendTLSPolicy("newer", "secure", "", "newer.test", "ca")
	section := newBackendTLSPolicy("section", "secure", "https", "section.test", "ca")
	m, _ := Build(tlsRouteSnapshot(older, newer, section, caConfigMap("infra", "ca", ca)))
	wantCondition(t, "older", policyAncestor(t, m, "older"), condAccepted, true, reasonAccepted)
	wantCondition(t, "newer", policyAncestor(t, m, "newer"), condAccepted, false, reasonConflicted)
	wantCondition(t, "section", policyAncestor(t, m, "section"), condAccepted, true, reasonAccepted)
	names := map[string]string{}
	for _, t := range m.BackendTLS {
		names[t.Name] = t.ServerName
	}
	if got := names[shareOf(t, m, "/a").TLS]; got != "section.test" {
		t.Errorf("/a (port https) checks %q, want the section's section.test", got)
	}
	if got := names[shareOf(t, m, "/b").TLS]; got != "older.test" {
		t.Errorf("/b (port other) checks %q, want the older policy's older.test", got)
	}
}

// A policy that cannot be used fails its Service's shares closed (500),
// with the spec's reasons; hostile values never reach the model's
// BackendTLS, and a ConfigMap of another namespace is never read.
func TestBackendTLSPolicyRefused(t *testing.T) {
	ca, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
	wrongKind := newBackendTLSPolicy("p", "secure", "", "secure.test")
	wrongKind.Spec.Validation.CACertificateRefs = []gatewayv1.LocalObjectReference{{Group: "example.com", Kind: "Vault", Name: "ca"}}
	withSAN := newBackendTLSPolicy("p", "secure", "", "secure.test", "ca")
	withSAN.Spec.Validation.SubjectAltNames = []gatewayv1.SubjectAltName{{Type: gatewayv1.HostnameSubjectAltNameType, Hostname: "x.test"}}
	wellKnown := newBackendTLSPolicy("p", "secure", "", "secure.test")
	system := gatewayv1.WellKnownCACertificatesSystem
	wellKnown.Spec.Validation.WellKnownCACertificates = &system
	for _, tt := range []struct {
		name             string
		objects          []any
		accepted         string
		resolved, reason string // the ResolvedRefs reason, "" when true
	}{
		{"missing ConfigMap", []any{newBackendTLSPolicy("p", "secure", "", "secure.test", "ca")}, reasonNoValidCACertificate, "", reasonInvalidCACertificateRef},
		{"ConfigMap of another namespace", []any{newBackendTLSPolicy("p", "secure", "", "secure.test", "ca"), caConfigMap("other", "ca", ca)}, reasonNoValidCACertificate, "", reasonInvalidCACertificateRef},
		{"no ca.crt", []any{newBackendTLSPolicy("p", "secure", "", "secure.test", "ca"), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "ca"}}}, reasonNoValidCACertificate, "", reasonInvalidCACertificateRef},
		{"not a certificate", []any{newBackendTLSPolicy("p", "secure", "", "secure.test", "ca"), caConfigMap("infra", "ca", "\"; ssl off; #")}, reasonNoValidCACertificate, "", reasonInvalidCACertificateRef},
		{"not a ConfigMap", []any{wrongKind, caConfigMap("infra", "ca", ca)}, reasonNoValidCACertificate, "", reasonInvalidKind},
		{"hostname with a quote", []any{newBackendTLSPolicy("p", "secure", "", "a.test\"; proxy_ssl_verify off; #", "ca"), caConfigMap("infra", "ca", ca)}, reasonInvalid, "ok", ""},
		{"hostname with a variable", []any{newBackendTLSPolicy("p", "secure", "", "$host", "ca"), caConfigMap("infra", "ca", ca)}, reasonInvalid, "ok", ""},
		{"wildcard hostname", []any{newBackendTLSPolicy("p", "secure", "", "*.test", "ca"), caConfigMap("infra", "ca", ca)}, reasonInvalid, "ok", ""},
		{"subjectAltNames", []any{withSAN, caConfigMap("infra", "ca", ca)}, reasonInvalid, "ok", ""},
		{"wellKnownCACertificates", []any{wellKnown}, reasonInvalid, "ok", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, problems := Build(tlsRouteSnapshot(tt.objects...))
			if len(m.BackendTLS) != 0 {
				t.Errorf("BackendTLS = %s, want none", dump(m.BackendTLS))
			}
			if s := shareOf(t, m, "/a"); s.Backend != "" || s.TLS != "" {
				t.Errorf("share %s, want none (500)", dump(s))
			}
			if !slices.ContainsFunc(problems, func(p Problem) bool { return p.Kind == kindBackendTLSPolicy && p.Name == "p" }) {
				t.Errorf("no Problem on the policy: %v", problems)
			}
			conds := policyAncestor(t, m, "p")
			wantCondition(t, "policy", conds, condAccepted, false, tt.accepted)
			if tt.reason != "" {
				wantCondition(t, "policy", conds, condResolvedRefs, false, tt.reason)
			}
			// The route itself is accepted: only the share fails.
			wantCondition(t, "route", routeStatusOf(t, m, "infra", "app").Parents[0].Conditions, condAccepted, true, reasonAccepted)
		})
	}
}

// A Service no route sends to gives its policy no ancestor, and a policy
// of another kind of target is left alone.
func TestBackendTLSPolicyWithoutRoutes(t *testing.T) {
	ca, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
	m, _ := Build(tlsRouteSnapshot(newBackendTLSPolicy("idle", "unused", "", "x.test", "ca"), caConfigMap("infra", "ca", ca)))
	for r := range m.GatewayAPI.Routes.All() {
		if r.Kind == kindBackendTLSPolicy {
			t.Errorf("status of %s without a route to its Service: %s", r.Name, dump(r))
		}
	}
	if len(m.BackendTLS) != 0 || shareOf(t, m, "/a").TLS != "" {
		t.Errorf("BackendTLS %s for a Service no policy targets", dump(m.BackendTLS))
	}
}

// A Gateway's spec.tls.backend.clientCertificateRef: its listeners present
// the certificate; a bad reference is ResolvedRefs false with the
// spec's reasons, and the Gateway stays accepted.
func TestGatewayBackendClientCertificate(t *testing.T) {
	certPEM, keyPEM := testcert.New(t, 3, time.Now().Add(time.Hour), "client.test")
	clientSecret := func(namespace, name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: corev1.SecretTypeTLS, Data: data}
	}
	good := map[string][]byte{"tls.crt": []byte(certPEM), "tls.key": []byte(keyPEM)}
	gatewayWith := func(ref gatewayv1.SecretObjectReference) *gatewayv1.Gateway {
		gw := newGateway("infra", "gw", httpListener("http", 80, ""))
		gw.Spec.TLS = &gatewayv1.GatewayTLSConfig{Backend: &gatewayv1.GatewayBackendTLS{ClientCertificateRef: &ref}}
		return gw
	}
	kind := gatewayv1.Kind("ConfigMap")
	wrongKind := secretRef("", "client")
	wrongKind.Kind = &kind
	for _, tt := range []struct {
		name    string
		objects []any
		reason  string // the ResolvedRefs reason; "" when resolved
	}{
		{"resolved", []any{gatewayWith(secretRef("", "client")), clientSecret("infra", "client", good)}, ""},
		{"granted in another namespace", []any{gatewayWith(secretRef("certs", "client")), clientSecret("certs", "client", good),
			referenceGrant("certs", "Gateway", "infra", "Secret", "client")}, ""},
		{"missing", []any{gatewayWith(secretRef("", "client"))}, reasonInvalidClientCertRef},
		{"not a Secret", []any{gatewayWith(wrongKind), clientSecret("infra", "client", good)}, reasonInvalidClientCertRef},
		{"no key", []any{gatewayWith(secretRef("", "client")), clientSecret("infra", "client", map[string][]byte{"tls.crt": []byte(certPEM)})}, reasonInvalidClientCertRef},
		{"another namespace without a grant", []any{gatewayWith(secretRef("certs", "client")), clientSecret("certs", "client", good)}, reasonRefNotPermitted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := Build(gwSnapshot(tt.objects...))
			st := gatewayStatusOf(t, m, "infra", "gw")
			wantCondition(t, "Gateway", st.Conditions, condAccepted, true, reasonAccepted)
			if len(m.Listeners) != 1 {
				t.Fatalf("listeners %s", dump(m.Listeners))
			}
			l := m.Listeners[0]
			if tt.reason != "" {
				wantCondition(t, "Gateway", st.Conditions, condResolvedRefs, false, tt.reason)
				if l.BackendCertFile != "" || l.BackendKeyFile != "" {
					t.Errorf("listener presents %s without a usable certificate", dump(l))
				}
				return
			}
			wantCondition(t, "Gateway", st.Conditions, condResolvedRefs, true, reasonResolvedRefs)
			for _, f := range []string{l.BackendCertFile, l.BackendKeyFile} {
				if f == "" || !slices.ContainsFunc(m.AuthFiles, func(a AuthFile) bool { return a.Name == f }) {
					t.Errorf("listener file %q not among AuthFiles %v", f, dump(m.AuthFiles))
				}
			}
		})
	}
}

// TestGatewayResolvedRefs: the Gateway's own ResolvedRefs holds both
// kinds of reference of its spec.tls; the client certificate's reason
// comes first, then a port whose frontend CA references did not resolve
// (ListenersNotResolved); none without spec.tls.
func TestGatewayResolvedRefs(t *testing.T) {
	certPEM, keyPEM := testcert.New(t, 3, time.Now().Add(time.Hour), "client.test")
	cert, ca := newPair(certExpiry, "gw.example.org"), newPair(certExpiry, "ca")
	client := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "client"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte(certPEM), "tls.key": []byte(keyPEM)}}
	gatewayWith := func(backend bool, caName string) *gatewayv1.Gateway {
		gw := newGateway("infra", "gw", httpsListener("https", 443, "", secretRef("", "cert")))
		if caName != "" {
			withFrontend(gw, validationOf("", caRef("ConfigMap", "", caName), caRef("ConfigMap", "", "ca")), nil)
		}
		if backend {
			if gw.Spec.TLS == nil {
				gw.Spec.TLS = &gatewayv1.GatewayTLSConfig{}
			}
			ref := secretRef("", "client")
			gw.Spec.TLS.Backend = &gatewayv1.GatewayBackendTLS{ClientCertificateRef: &ref}
		}
		return gw
	}
	base := []any{tlsSecret("infra", "cert", cert), caConfigMap("infra", "ca", ca.certPEM)}
	for _, tt := range []struct {
		name    string
		objects []any
		reason  string // "" for True, "-" for no condition
	}{
		{"no spec.tls", []any{gatewayWith(false, "")}, "-"},
		{"both resolve", []any{gatewayWith(true, "ca"), client}, ""},
		{"a frontend CA is missing", []any{gatewayWith(true, "missing"), client}, reasonListenersNotResolved},
		{"the client certificate is missing too", []any{gatewayWith(true, "missing")}, reasonInvalidClientCertRef},
		{"frontend only, resolved", []any{gatewayWith(false, "ca")}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := Build(gwSnapshot(append(slices.Clone(base), tt.objects...)...))
			st := gatewayStatusOf(t, m, "infra", "gw")
			switch tt.reason {
			case "-":
				if slices.ContainsFunc(st.Conditions, func(c Condition) bool { return c.Type == condResolvedRefs }) {
					t.Errorf("a Gateway without spec.tls has ResolvedRefs: %s", dump(st.Conditions))
				}
			case "":
				wantCondition(t, "Gateway", st.Conditions, condResolvedRefs, true, reasonResolvedRefs)
			default:
				wantCondition(t, "Gateway", st.Conditions, condResolvedRefs, false, tt.reason)
			}
			wantCondition(t, "Gateway", st.Conditions, condAccepted, true, reasonAccepted)
		})
	}
}

// TestBackendTLSMirrors: copies are sent without TLS, so a mirror to a
// Service a policy applies to is left out, and so are the mirrors of a
// rule whose shares go over TLS; a Problem says each.
func TestBackendTLSMirrors(t *testing.T) {
	ca := newPair(certExpiry, "ca").certPEM
	policy := newBackendTLSPolicy("tls", "secure", "", "secure.infra.test", "ca")
	mirrorTo := func(service string, port int32, to gatewayv1.HTTPBackendRef) *gatewayv1.HTTPRoute {
		rule := routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/")), to)
		rule.Filters = []gatewayv1.HTTPRouteFilter{mirrorFilter("", service, port)}
		return newRoute("infra", "mirroring", parentList(parentOf("", "gw", "")), nil, rule)
	}
	for _, tt := range []struct {
		name  string
		route *gatewayv1.HTTPRoute
		want  string // in the route's problem
	}{
		{"a mirror to a TLS Service", mirrorTo("secure", 443, backendTo("", "plain", 80)), "a BackendTLSPolicy applies to Service infra/secure"},
		{"a rule to a TLS Service", mirrorTo("plain", 80, backendTo("", "secure", 443)), "mirrors are not supported with backends a BackendTLSPolicy applies to"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, problems := Build(gwSnapshot(newGateway("infra", "gw", httpListener("http", 80, "")), tt.route, policy, caConfigMap("infra", "ca", ca),
				service("infra", "secure", servicePort("https", 443)), service("infra", "plain", servicePort("http", 80))))
			for r := range m.GatewayRoutes.All() {
				for _, l := range r.Locations {
					if l.Rule != nil && len(l.Rule.Mirrors) > 0 {
						t.Errorf("route %s keeps mirrors %s", r.Host, dump(l.Rule.Mirrors))
					}
				}
			}
			if !slices.ContainsFunc(problems, func(p Problem) bool { return p.Name == "mirroring" && strings.Contains(p.Reason, tt.want) }) {
				t.Errorf("no problem of the route holding %q: %s", tt.want, dump(problems))
			}
		})
	}
}
