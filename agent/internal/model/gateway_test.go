package model

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Tests of the Gateway processor's GatewayClasses, Gateways, addresses
// and listeners. Names follow the conformance test they stand in for.

const front1 = "127.0.50.1:80"

func TestGatewayClassAccepted(t *testing.T) {
	s := gwSnapshot(gatewayClass("other", "example.com/other"))
	m, problems := Build(s)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	if len(m.GatewayAPI.Classes) != 1 {
		t.Fatalf("classes: got %s, want ours only", dump(m.GatewayAPI.Classes))
	}
	c := m.GatewayAPI.Classes[0]
	wantCondition(t, "class", c.Conditions, condAccepted, true, reasonAccepted)
	if c.Name != gwClass || c.Generation != 1 || !reflect.DeepEqual(c.SupportedFeatures, GatewaySupportedFeatures) {
		t.Errorf("class status: %s", dump(c))
	}
	if !slices.IsSorted(GatewaySupportedFeatures) {
		t.Errorf("GatewaySupportedFeatures is not sorted")
	}
}

// A kind whose CRD is not installed takes its features out of the
// class's supportedFeatures: the conformance suite, and users, read them as
// what the cluster's Gateways can do.
func TestGatewayClassFeaturesOfKindsNotServed(t *testing.T) {
	s := gwSnapshot()
	s.GatewayKindsNotServed = []string{"TLSRoute", "BackendTLSPolicy"}
	m, _ := Build(s)
	got := m.GatewayAPI.Classes[0].SupportedFeatures
	for _, gone := range []string{"TLSRoute", "TLSRouteModeMixed", "TLSRouteModeTerminate", "BackendTLSPolicy", "GatewayBackendClientCertificate"} {
		if slices.Contains(got, gone) {
			t.Errorf("supportedFeatures %v hold %s", got, gone)
		}
	}
	if !slices.Contains(got, "HTTPRoute") || !slices.Contains(got, "GRPCRoute") || len(got) != len(GatewaySupportedFeatures)-5 {
		t.Errorf("supportedFeatures %v, want all but the 5 of TLSRoute and BackendTLSPolicy", got)
	}
}

func TestGatewayClassWithParametersRef(t *testing.T) {
	s := gwSnapshot(newGateway("default", "gw", httpListener("http", 80, "")))
	s.GatewayClasses.At(0).Spec.ParametersRef = &gatewayv1.ParametersReference{Kind: "ConfigMap", Name: "x"}
	m, problems := Build(s)
	wantCondition(t, "class", m.GatewayAPI.Classes[0].Conditions, condAccepted, false, reasonInvalidParameters)
	if len(m.GatewayAPI.Gateways) != 0 || len(m.Listeners) != 0 || len(problems) != 1 {
		t.Errorf("a class that is not accepted serves nothing: %s, problems %v", dump(m.GatewayAPI), problems)
	}
}

func TestGatewaySimpleListener(t *testing.T) {
	m, problems := Build(gwSnapshot(newGateway("default", "gw", httpListener("http", 80, ""))))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	want := []Listener{{Address: "127.0.50.1", Port: 80, Front: front1}}
	if !reflect.DeepEqual(m.Listeners, want) {
		t.Errorf("listeners: got %s, want %s", dump(m.Listeners), dump(want))
	}
	g := gatewayStatusOf(t, m, "default", "gw")
	wantCondition(t, "gateway", g.Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "gateway", g.Conditions, condProgrammed, true, reasonProgrammed)
	if !reflect.DeepEqual(g.Addresses, []string{"127.0.50.1"}) {
		t.Errorf("addresses: %v", g.Addresses)
	}
	l := listenerStatusOf(t, g, "http")
	for _, c := range []struct {
		typ    string
		status bool
		reason string
	}{{condAccepted, true, reasonAccepted}, {condResolvedRefs, true, reasonResolvedRefs}, {condProgrammed, true, reasonProgrammed}, {condConflicted, false, reasonNoConflicts}} {
		wantCondition(t, "listener", l.Conditions, c.typ, c.status, c.reason)
	}
	if !reflect.DeepEqual(l.SupportedKinds, []string{kindHTTPRoute, kindGRPCRoute}) {
		t.Errorf("supported kinds: %v", l.SupportedKinds)
	}
}

func TestGatewayListenerUnsupportedProtocol(t *testing.T) {
	only := newGateway("default", "only-unsupported", gatewayv1.Listener{Name: "invalid", Port: 1111, Protocol: "INVALID"})
	mixed := newGateway("default", "mixed", httpListener("http", 80, ""), gatewayv1.Listener{Name: "invalid", Port: 1111, Protocol: "INVALID"})
	m, problems := Build(gwSnapshot(only, mixed))

	g := gatewayStatusOf(t, m, "default", "only-unsupported")
	wantCondition(t, "only", g.Conditions, condAccepted, false, reasonListenersNotValid)
	l := listenerStatusOf(t, g, "invalid")
	wantCondition(t, "only", l.Conditions, condAccepted, false, reasonUnsupportedProtocol)
	if len(l.SupportedKinds) != 0 || l.SupportedKinds == nil {
		t.Errorf("supported kinds: got %#v, want empty", l.SupportedKinds)
	}

	g = gatewayStatusOf(t, m, "default", "mixed")
	wantCondition(t, "mixed", g.Conditions, condAccepted, true, reasonListenersNotValid)
	wantCondition(t, "mixed http", listenerStatusOf(t, g, "http").Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "mixed invalid", listenerStatusOf(t, g, "invalid").Conditions, condAccepted, false, reasonUnsupportedProtocol)
	if len(problems) != 2 || !strings.Contains(problems[0].Reason, `protocol "INVALID" is not supported`) {
		t.Errorf("problems: %v", problems)
	}
	// Only the valid listener of the mixed Gateway is served.
	for _, l := range m.Listeners {
		if l.Port == 1111 {
			t.Errorf("the unsupported listener is served: %s", dump(m.Listeners))
		}
	}
}

func TestGatewayInvalidRouteKind(t *testing.T) {
	only := newGateway("default", "only", allowFrom(httpListener("http", 80, ""), gatewayv1.NamespacesFromAll, nil))
	only.Spec.Listeners[0].AllowedRoutes.Kinds = []gatewayv1.RouteGroupKind{{Kind: "InvalidRoute"}}
	both := newGateway("default", "both", allowFrom(httpListener("http", 80, ""), gatewayv1.NamespacesFromAll, nil))
	both.Spec.Listeners[0].AllowedRoutes.Kinds = []gatewayv1.RouteGroupKind{{Kind: "InvalidRoute"}, {Kind: "HTTPRoute"}}
	m, _ := Build(gwSnapshot(only, both))

	l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "only"), "http")
	wantCondition(t, "only", l.Conditions, condResolvedRefs, false, reasonInvalidRouteKinds)
	if len(l.SupportedKinds) != 0 {
		t.Errorf("only: supported kinds %v, want none", l.SupportedKinds)
	}
	l = listenerStatusOf(t, gatewayStatusOf(t, m, "default", "both"), "http")
	wantCondition(t, "both", l.Conditions, condResolvedRefs, false, reasonInvalidRouteKinds)
	if !reflect.DeepEqual(l.SupportedKinds, []string{kindHTTPRoute}) {
		t.Errorf("both: supported kinds %v, want HTTPRoute", l.SupportedKinds)
	}
}

func TestGatewayInvalidTLSConfiguration(t *testing.T) {
	malformed := &corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("Hello world\n"), "tls.key": []byte("Hello world\n")}}
	malformed.Namespace, malformed.Name = "default", "malformed"
	group, kind := gatewayv1.Group("wrong.group.company.io"), gatewayv1.Kind("WrongKind")
	wrongGroup, wrongKind := secretRef("", "good"), secretRef("", "good")
	wrongGroup.Group, wrongKind.Kind = &group, &kind
	for name, ref := range map[string]gatewayv1.SecretObjectReference{
		"nonexistent":       secretRef("", "nonexistent"),
		"unsupported-group": wrongGroup,
		"unsupported-kind":  wrongKind,
		"malformed":         secretRef("", "malformed"),
	} {
		t.Run(name, func(t *testing.T) {
			gw := newGateway("default", "gw", httpsListener("https", 443, "", ref))
			m, problems := Build(gwSnapshot(gw, malformed, tlsSecret("default", "good", newPair(certExpiry, "a.example.com"))))
			l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "gw"), "https")
			wantCondition(t, name, l.Conditions, condResolvedRefs, false, reasonInvalidCertificateRef)
			wantCondition(t, name, l.Conditions, condProgrammed, false, reasonInvalid)
			if len(m.Listeners) != 0 || m.Certificates.Len() != 0 || len(problems) == 0 {
				t.Errorf("listeners %s, certificates %d, problems %v", dump(m.Listeners), m.Certificates.Len(), problems)
			}
		})
	}
}

func TestGatewayHTTPSListenerCertificate(t *testing.T) {
	pair := newPair(certExpiry, "a.example.com")
	gw := newGateway("default", "gw", httpsListener("https", 443, "a.example.com", secretRef("", "cert")), httpsListener("any", 443, "", secretRef("", "cert")))
	m, problems := Build(gwSnapshot(gw, tlsSecret("default", "cert", pair)))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	want := []Listener{{Address: "127.0.50.1", Port: 443, HTTPS: true, Front: "127.0.50.1:443"}}
	if !reflect.DeepEqual(m.Listeners, want) {
		t.Errorf("listeners: %s", dump(m.Listeners))
	}
	if m.Certificates.Len() != 1 || !reflect.DeepEqual(m.Certificates.At(0).Hosts, []string{"127.0.50.1:443 *", "127.0.50.1:443 a.example.com"}) {
		t.Errorf("certificates: %s", dump(m.Certificates))
	}
}

func TestGatewaySecretReferenceGrants(t *testing.T) {
	pair := newPair(certExpiry, "a.example.com")
	gw := func() *gatewayv1.Gateway {
		return newGateway("default", "gw", httpsListener("https", 443, "", secretRef("certs", "cert")))
	}
	secret := tlsSecret("certs", "cert", pair)
	for _, c := range []struct {
		name     string // the conformance test
		grant    *gatewayv1.ReferenceGrant
		resolved bool
	}{
		{"GatewaySecretMissingReferenceGrant", nil, false},
		{"GatewaySecretInvalidReferenceGrant", referenceGrant("certs", "Gateway", "default", "Secret", "other"), false},
		{"GatewaySecretReferenceGrantSpecific", referenceGrant("certs", "Gateway", "default", "Secret", "cert"), true},
		{"GatewaySecretReferenceGrantAllInNamespace", referenceGrant("certs", "Gateway", "default", "Secret", ""), true},
		{"grant from another namespace", referenceGrant("certs", "Gateway", "elsewhere", "Secret", ""), false},
		{"grant in the wrong namespace", referenceGrant("default", "Gateway", "default", "Secret", ""), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			objects := []any{gw(), secret}
			if c.grant != nil {
				objects = append(objects, c.grant)
			}
			m, _ := Build(gwSnapshot(objects...))
			l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "gw"), "https")
			if c.resolved {
				wantCondition(t, c.name, l.Conditions, condResolvedRefs, true, reasonResolvedRefs)
				wantCondition(t, c.name, l.Conditions, condProgrammed, true, reasonProgrammed)
			} else {
				wantCondition(t, c.name, l.Conditions, condResolvedRefs, false, reasonRefNotPermitted)
			}
		})
	}
}

func TestGatewayListenerConflicts(t *testing.T) {
	gw := newGateway("default", "gw",
		httpListener("a", 80, "a.example.com"), httpListener("a-again", 80, "a.example.com"),
		httpListener("b", 80, "b.example.com"),
		httpListener("plain", 8443, ""), httpsListener("tls", 8443, "", secretRef("", "cert")))
	m, _ := Build(gwSnapshot(gw, tlsSecret("default", "cert", newPair(certExpiry, "a.example.com"))))
	g := gatewayStatusOf(t, m, "default", "gw")
	for name, reason := range map[string]string{"a": reasonHostnameConflict, "a-again": reasonHostnameConflict, "plain": reasonProtocolConflict, "tls": reasonProtocolConflict} {
		l := listenerStatusOf(t, g, name)
		wantCondition(t, name, l.Conditions, condConflicted, true, reason)
		wantCondition(t, name, l.Conditions, condProgrammed, false, reasonInvalid)
	}
	wantCondition(t, "b", listenerStatusOf(t, g, "b").Conditions, condConflicted, false, reasonNoConflicts)
	wantCondition(t, "gateway", g.Conditions, condAccepted, true, reasonListenersNotValid)
	want := []Listener{{Address: "127.0.50.1", Port: 80, Front: front1}}
	if !reflect.DeepEqual(m.Listeners, want) {
		t.Errorf("listeners: %s", dump(m.Listeners))
	}
}

func TestGatewayAddressesFromThePool(t *testing.T) {
	a := newGateway("default", "a", httpListener("http", 80, ""))
	b := olderBy(newGateway("default", "b", httpListener("http", 80, "")), -1)
	for _, step := range []struct {
		name         string
		aShows       string // the address a's status shows
		bShows       string
		wantA, wantB string
	}{
		{"the oldest Gateway takes the first address, the next the next", "", "", "127.0.50.2", "127.0.50.1"},
		{"a Gateway keeps the address its status shows", "127.0.50.3", "", "127.0.50.3", "127.0.50.1"},
		{"an older Gateway that shows the same address keeps it", "127.0.50.3", "127.0.50.3", "127.0.50.1", "127.0.50.3"},
	} {
		a.Status.Addresses, b.Status.Addresses = statusAddresses(step.aShows), statusAddresses(step.bShows)
		m, _ := Build(gwSnapshot(a, b))
		got := []string{gatewayStatusOf(t, m, "default", "a").Addresses[0], gatewayStatusOf(t, m, "default", "b").Addresses[0]}
		if want := []string{step.wantA, step.wantB}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: a and b got %v, want %v", step.name, got, want)
		}
	}
}

// Two Gateways created together, seen one after the other, before either
// status is written: each keeps the address the last build served it on,
// rather than swapping them build after build.
func TestGatewayAddressesKeptBetweenBuilds(t *testing.T) {
	a := newGateway("default", "a", httpListener("http", 80, ""))
	b := newGateway("default", "b", httpListener("http", 80, "")) // same second: a sorts first
	var served map[string][]string
	for i, step := range []struct {
		objects      []any
		wantA, wantB string
	}{
		{[]any{b}, "", "127.0.50.1"},
		{[]any{a, b}, "127.0.50.2", "127.0.50.1"},
		{[]any{a, b}, "127.0.50.2", "127.0.50.1"},
		{[]any{a, b}, "127.0.50.2", "127.0.50.1"},
	} {
		snap := gwSnapshot(step.objects...)
		snap.GatewayAddressesServed = served
		m, _ := Build(snap)
		served = map[string][]string{}
		got := map[string]string{}
		for _, g := range m.GatewayAPI.Gateways {
			served[g.Namespace+"/"+g.Name] = g.Addresses
			if len(g.Addresses) > 0 {
				got[g.Name] = g.Addresses[0]
			}
		}
		if got["a"] != step.wantA || got["b"] != step.wantB {
			t.Errorf("build %d: a on %q, b on %q; want %q and %q", i+1, got["a"], got["b"], step.wantA, step.wantB)
		}
	}
}

func statusAddresses(address string) []gatewayv1.GatewayStatusAddress {
	if address == "" {
		return nil
	}
	return []gatewayv1.GatewayStatusAddress{{Value: address}}
}

func TestGatewayAddressPoolExhausted(t *testing.T) {
	var objects []any
	for i, name := range []string{"a", "b", "c", "d"} {
		objects = append(objects, olderBy(newGateway("default", name, httpListener("http", 80, "")), i))
	}
	m, problems := Build(gwSnapshot(objects...))
	g := gatewayStatusOf(t, m, "default", "d")
	wantCondition(t, "d", g.Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "d", g.Conditions, condProgrammed, false, reasonAddressNotAssigned)
	if len(g.Addresses) != 0 || len(m.Listeners) != 3 || len(problems) != 1 || problems[0].Name != "d" {
		t.Errorf("addresses %v, listeners %s, problems %v", g.Addresses, dump(m.Listeners), problems)
	}
}

func TestGatewayStaticAddresses(t *testing.T) {
	ip := gatewayv1.IPAddressType
	fake := gatewayv1.AddressType("test/fake-invalid-type")
	gw := newGateway("default", "gw", httpListener("http", 8080, ""))
	gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: &fake, Value: "fake address teehee!"}, {Type: &ip, Value: "10.9.9.9"}, {Type: &ip, Value: "127.0.50.3"}}
	m, _ := Build(gwSnapshot(gw))
	wantCondition(t, "unsupported type", gatewayStatusOf(t, m, "default", "gw").Conditions, condAccepted, false, reasonUnsupportedAddress)

	gw.Spec.Addresses = gw.Spec.Addresses[1:]
	m, _ = Build(gwSnapshot(gw))
	g := gatewayStatusOf(t, m, "default", "gw")
	wantCondition(t, "unusable", g.Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "unusable", g.Conditions, condProgrammed, false, reasonAddressNotUsable)
	if len(m.Listeners) != 0 {
		t.Errorf("a Gateway with an unusable address is served: %s", dump(m.Listeners))
	}

	gw.Spec.Addresses = gw.Spec.Addresses[1:]
	m, _ = Build(gwSnapshot(gw))
	g = gatewayStatusOf(t, m, "default", "gw")
	wantCondition(t, "usable", g.Conditions, condProgrammed, true, reasonProgrammed)
	if !reflect.DeepEqual(g.Addresses, []string{"127.0.50.3"}) || len(m.Listeners) != 1 || m.Listeners[0].Front != "127.0.50.3:8080" {
		t.Errorf("addresses %v, listeners %s", g.Addresses, dump(m.Listeners))
	}
}

func TestGatewayStaticAddressTakenByOlder(t *testing.T) {
	ip := gatewayv1.IPAddressType
	older := olderBy(newGateway("default", "older", httpListener("http", 80, "")), -1)
	younger := newGateway("default", "younger", httpListener("http", 80, ""))
	for _, g := range []*gatewayv1.Gateway{older, younger} {
		g.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: &ip, Value: "127.0.50.2"}}
	}
	m, _ := Build(gwSnapshot(older, younger))
	wantCondition(t, "older", gatewayStatusOf(t, m, "default", "older").Conditions, condProgrammed, true, reasonProgrammed)
	wantCondition(t, "younger", gatewayStatusOf(t, m, "default", "younger").Conditions, condProgrammed, false, reasonAddressNotUsable)

	// An even older pool Gateway that shows the address in its status
	// keeps it: a static address takes no older Gateway's (another
	// tenant's clients would reach the newer one's listeners).
	pooled := olderBy(newGateway("default", "pooled", httpListener("http", 80, "")), -5)
	pooled.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "127.0.50.2"}}
	m, _ = Build(gwSnapshot(older, younger, pooled))
	wantCondition(t, "older", gatewayStatusOf(t, m, "default", "older").Conditions, condProgrammed, false, reasonAddressNotUsable)
	wantCondition(t, "younger", gatewayStatusOf(t, m, "default", "younger").Conditions, condProgrammed, false, reasonAddressNotUsable)
	if got := gatewayStatusOf(t, m, "default", "pooled").Addresses; !reflect.DeepEqual(got, []string{"127.0.50.2"}) {
		t.Errorf("pooled: %v", got)
	}
}

func TestGatewayAddressEmpty(t *testing.T) {
	ip := gatewayv1.IPAddressType
	gw := newGateway("default", "gw", httpListener("http", 8080, ""))
	gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: &ip}}
	m, _ := Build(gwSnapshot(gw))
	g := gatewayStatusOf(t, m, "default", "gw")
	wantCondition(t, "gw", g.Conditions, condProgrammed, true, reasonProgrammed)
	if !reflect.DeepEqual(g.Addresses, []string{"127.0.50.1"}) {
		t.Errorf("addresses: %v", g.Addresses)
	}
}

func TestGatewayOfAnotherClassIgnored(t *testing.T) {
	gw := newGateway("default", "gw", httpListener("http", 80, ""))
	gw.Spec.GatewayClassName = "other"
	r := newRoute("default", "r", parentList(parentOf("", "gw", "")), nil, routeRule(nil, backendTo("", "web", 80)))
	m, problems := Build(gwSnapshot(gw, r))
	if len(m.GatewayAPI.Gateways) != 0 || m.GatewayAPI.Routes.Len() != 0 || m.GatewayRoutes.Len() != 0 || len(problems) != 0 {
		t.Errorf("another class's Gateway and its routes are ours: %s, problems %v", dump(m.GatewayAPI), problems)
	}
}

// TestCoveringHostsAgreesWithCovers: the index emitGroup looks hosts up
// by gives exactly the patterns covers accepts.
func TestCoveringHostsAgreesWithCovers(t *testing.T) {
	names := []string{"_", "a.b.c", "b.c", "c", "*.b.c", "*.c", "*.a.b.c", "x.a.b.c", "ab.c", "*.bc", "a.bc"}
	for _, key := range names {
		for _, pattern := range names {
			if got, want := slices.Contains(coveringHosts(key), pattern), covers(pattern, key); got != want {
				t.Errorf("key %q, pattern %q: coveringHosts says %v, covers %v", key, pattern, got, want)
			}
		}
	}
	for _, c := range []struct{ listener, route, want string }{
		{"", "a.example.com", "a.example.com"},
		{"*.example.com", "a.b.example.com", "a.b.example.com"},
		{"*.example.com", "example.com", ""},
		{"a.example.com", "*.example.com", "a.example.com"},
		{"*.example.com", "*.a.example.com", "*.a.example.com"},
		{"*.a.example.com", "*.example.com", "*.a.example.com"},
		{"*.example.com", "*.example.org", ""},
		{"a.example.com", "b.example.com", ""},
		{"*.xample.com", "a.example.com", ""},
	} {
		if got := intersectHostname(c.listener, c.route); got != c.want {
			t.Errorf("intersect(%q, %q) = %q, want %q", c.listener, c.route, got, c.want)
		}
	}
}
