package model

import (
	"crypto/tls"
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func tlsListener(name string, port int32, hostname string, mode gatewayv1.TLSModeType) gatewayv1.Listener {
	l := httpListener(name, port, hostname)
	l.Protocol = gatewayv1.TLSProtocolType
	l.TLS = &gatewayv1.ListenerTLSConfig{Mode: &mode}
	return l
}

func newTLSRoute(namespace, name string, parents []gatewayv1.ParentReference, hostnames []string, backends ...gatewayv1.BackendRef) *gatewayv1.TLSRoute {
	r := &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(baseTime)}}
	r.Spec.ParentRefs = parents
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	r.Spec.Rules = []gatewayv1.TLSRouteRule{{BackendRefs: backends}}
	return r
}

func tlsBackend(namespace, service string, port int32) gatewayv1.BackendRef {
	return backendTo(namespace, service, port).BackendRef
}

// tlsFront finds the TLS front on address:port.
func tlsFront(t *testing.T, m Model, address string, port int32) TLSFront {
	t.Helper()
	i := slices.IndexFunc(m.Stream.Gateways, func(f TLSFront) bool { return f.Front == FrontName(address, port) })
	if i < 0 {
		t.Fatalf("no TLS front %s in %s", FrontName(address, port), dump(m.Stream.Gateways))
	}
	return m.Stream.Gateways[i]
}

func TestTLSRoutePassthrough(t *testing.T) {
	gw := newGateway("default", "gw", tlsListener("tls", 443, "*.example.com", gatewayv1.TLSModePassthrough))
	route := newTLSRoute("default", "r", parentList(parentOf("", "gw", "")), []string{"abc.example.com", "other.org"}, tlsBackend("", "web", 80))
	m, _ := Build(gwSnapshot(gw, route))

	f := tlsFront(t, m, gwPool[0], 443)
	want := []TLSHost{{Host: "abc.example.com", Backend: "tcp:default/web:80", Route: "default/r"}}
	if !slices.Equal(f.Hosts, want) {
		t.Errorf("hosts = %s, want %s", dump(f.Hosts), dump(want))
	}
	i := slices.IndexFunc(m.Stream.Backends, func(b StreamBackend) bool { return b.Name == "tcp:default/web:80" })
	if i < 0 || len(m.Stream.Backends[i].Endpoints) == 0 {
		t.Errorf("stream backends = %s, want tcp:default/web:80 with endpoints", dump(m.Stream.Backends))
	}
	if len(m.Listeners) != 0 {
		t.Errorf("HTTP listeners = %s, want none: the stream module serves a passthrough listener", dump(m.Listeners))
	}
	g := gatewayStatusOf(t, m, "default", "gw")
	wantCondition(t, "gateway", g.Conditions, condProgrammed, true, reasonProgrammed)
	l := listenerStatusOf(t, g, "tls")
	if !slices.Equal(l.SupportedKinds, []string{kindTLSRoute}) || l.AttachedRoutes != 1 {
		t.Errorf("listener = %s, want kinds [TLSRoute] and 1 route", dump(l))
	}
	wantCondition(t, "listener", l.Conditions, condProgrammed, true, reasonProgrammed)
	st := routeStatusOf(t, m, "default", "r")
	if st.Kind != kindTLSRoute || len(st.Parents) != 1 {
		t.Fatalf("route status = %s", dump(st))
	}
	wantCondition(t, "route", st.Parents[0].Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "route", st.Parents[0].Conditions, condResolvedRefs, true, reasonResolvedRefs)
}

func TestTLSRouteListeners(t *testing.T) {
	kinds := tlsListener("kinds", 443, "", gatewayv1.TLSModePassthrough)
	kinds.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "TCPRoute"}, {Kind: "TLSRoute"}}}
	objects := []any{
		newGateway("default", "terminate", tlsListener("tls", 8443, "", gatewayv1.TLSModeTerminate)),
		newGateway("default", "kinds", kinds),
		newGateway("default", "http", httpListener("http", 80, "")),
		newGateway("default", "exact", tlsListener("tls", 443, "abc.example.com", gatewayv1.TLSModePassthrough)),
		newTLSRoute("default", "to-http", parentList(parentOf("", "http", "")), []string{"abc.example.com"}, tlsBackend("", "web", 80)),
		newTLSRoute("default", "no-section", parentList(parentOf("", "exact", "nope")), []string{"abc.example.com"}, tlsBackend("", "web", 80)),
		newTLSRoute("default", "mismatch", parentList(parentOf("", "exact", "")), []string{"x.example.org"}, tlsBackend("", "web", 80)),
	}
	m, _ := Build(gwSnapshot(objects...))

	// Terminate (the default mode) without a certificate.
	wantCondition(t, "terminate", listenerStatusOf(t, gatewayStatusOf(t, m, "default", "terminate"), "tls").Conditions, condResolvedRefs, false, reasonInvalidCertificateRef)
	l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "kinds"), "kinds")
	if !slices.Equal(l.SupportedKinds, []string{kindTLSRoute}) {
		t.Errorf("supported kinds = %v, want [TLSRoute]", l.SupportedKinds)
	}
	wantCondition(t, "kinds", l.Conditions, condResolvedRefs, false, reasonInvalidRouteKinds)
	for name, reason := range map[string]gatewayv1.RouteConditionReason{
		"to-http":    gatewayv1.RouteReasonNotAllowedByListeners,
		"no-section": gatewayv1.RouteReasonNoMatchingParent,
		"mismatch":   gatewayv1.RouteReasonNoMatchingListenerHostname,
	} {
		wantCondition(t, name, routeStatusOf(t, m, "default", name).Parents[0].Conditions, condAccepted, false, string(reason))
	}
	if n := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "exact"), "tls").AttachedRoutes; n != 0 {
		t.Errorf("exact listener: %d routes attached, want 0", n)
	}
	if f := tlsFront(t, m, gatewayStatusOf(t, m, "default", "exact").Addresses[0], 443); len(f.Hosts) != 0 {
		t.Errorf("exact front hosts = %s, want none (every name closed)", dump(f.Hosts))
	}
}

func TestTLSRouteBackendRefs(t *testing.T) {
	gw := newGateway("default", "gw", allowFrom(tlsListener("tls", 443, "", gatewayv1.TLSModePassthrough), gatewayv1.NamespacesFromAll, nil))
	unknown := tlsBackend("", "web", 80)
	unknown.Kind = new(gatewayv1.Kind("Pod"))
	objects := []any{gw, nsObject("other", nil),
		newTLSRoute("default", "missing", parentList(parentOf("", "gw", "")), []string{"missing.example.com"}, tlsBackend("", "nope", 443)),
		newTLSRoute("default", "kind", parentList(parentOf("", "gw", "")), []string{"kind.example.com"}, unknown),
		newTLSRoute("other", "grant", parentList(parentOf("default", "gw", "")), []string{"grant.example.com"}, tlsBackend("default", "web", 80)),
		newTLSRoute("default", "any", parentList(parentOf("", "gw", "")), nil, tlsBackend("", "web", 80)),
	}
	m, _ := Build(gwSnapshot(objects...))
	for _, c := range []struct {
		namespace, name string
		reason          gatewayv1.RouteConditionReason
	}{
		{"default", "missing", gatewayv1.RouteReasonBackendNotFound},
		{"default", "kind", gatewayv1.RouteReasonInvalidKind},
		{"other", "grant", gatewayv1.RouteReasonRefNotPermitted},
	} {
		conditions := routeStatusOf(t, m, c.namespace, c.name).Parents[0].Conditions
		wantCondition(t, c.name, conditions, condAccepted, true, reasonAccepted)
		wantCondition(t, c.name, conditions, condResolvedRefs, false, string(c.reason))
	}
	// The API server requires a hostname; from the file source a TLSRoute
	// without one is not accepted rather than take every name.
	wantCondition(t, "any", routeStatusOf(t, m, "default", "any").Parents[0].Conditions, condAccepted, false, string(gatewayv1.RouteReasonUnsupportedValue))
	want := []TLSHost{
		{Host: "grant.example.com", Route: "other/grant"},
		{Host: "kind.example.com", Route: "default/kind"},
		{Host: "missing.example.com", Route: "default/missing"},
	}
	if got := tlsFront(t, m, gwPool[0], 443).Hosts; !slices.Equal(got, want) {
		t.Errorf("hosts = %s, want %s", dump(got), dump(want))
	}

	granted := append(objects, referenceGrant("default", kindTLSRoute, "other", "Service", ""))
	m, _ = Build(gwSnapshot(granted...))
	wantCondition(t, "granted", routeStatusOf(t, m, "other", "grant").Parents[0].Conditions, condResolvedRefs, true, reasonResolvedRefs)
}

// A Terminate listener and a Passthrough one share a port (mixed): the
// front passes abc.example.com through and ends TLS for tls.example.com
// with the listener's certificate, whose files are the model's AuthFiles.
func TestTLSRouteTerminate(t *testing.T) {
	pair := newPair(certExpiry, "tls.example.com")
	terminate := tlsListener("terminate", 8883, "tls.example.com", gatewayv1.TLSModeTerminate)
	terminate.TLS.CertificateRefs = []gatewayv1.SecretObjectReference{secretRef("", "cert")}
	gw := newGateway("default", "gw", terminate, tlsListener("pass", 8883, "abc.example.com", gatewayv1.TLSModePassthrough))
	objects := []any{gw, tlsSecret("default", "cert", pair),
		newTLSRoute("default", "ended", parentList(parentOf("", "gw", "")), []string{"tls.example.com"}, tlsBackend("", "web", 80)),
		newTLSRoute("default", "passed", parentList(parentOf("", "gw", "")), []string{"abc.example.com"}, tlsBackend("", "web", 80)),
	}
	m, problems := Build(gwSnapshot(objects...))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	f := tlsFront(t, m, gwPool[0], 8883)
	if len(f.Hosts) != 2 || f.Hosts[0].Host != "abc.example.com" || f.Hosts[0].CertFile != "" || f.Hosts[1].Host != "tls.example.com" {
		t.Fatalf("hosts = %s", dump(f.Hosts))
	}
	ended := f.Hosts[1]
	if ended.Backend != "tcp:default/web:80" || ended.CertFile == "" || ended.KeyFile == "" {
		t.Errorf("terminated host = %s", dump(ended))
	}
	files := map[string]string{}
	for _, a := range m.AuthFiles {
		files[a.Name] = a.Content
	}
	if _, err := tls.X509KeyPair([]byte(files[ended.CertFile]), []byte(files[ended.KeyFile])); err != nil {
		t.Errorf("auth files %v do not hold the certificate %s and key %s: %v", slices.Collect(maps.Keys(files)), ended.CertFile, ended.KeyFile, err)
	}
	g := gatewayStatusOf(t, m, "default", "gw")
	for _, name := range []string{"terminate", "pass"} {
		l := listenerStatusOf(t, g, name)
		wantCondition(t, name, l.Conditions, condAccepted, true, reasonAccepted)
		wantCondition(t, name, l.Conditions, condProgrammed, true, reasonProgrammed)
		if !slices.Equal(l.SupportedKinds, []string{kindTLSRoute}) || l.AttachedRoutes != 1 {
			t.Errorf("listener %s = %s, want kinds [TLSRoute] and 1 route", name, dump(l))
		}
	}
}
