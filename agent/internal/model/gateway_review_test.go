package model

import (
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Hostile-tenant review of issue 30's Gateway API parts: each test is an
// attack a tenant that may only create objects in its own namespace can
// try, and what it costs (a Problem naming its object, nothing else).

// A Gateway or ListenerSet listener on a port the ingress pod holds on its
// address is not accepted (PortUnavailable), named in a Problem; the
// Gateway's other listeners keep serving. Render would refuse some and,
// with them, every tenant's configuration; an HTTP one on the Ingress
// servers' port of every address would take every Ingress's connections
// to the Gateway's address (in the chart, the pod's IP).
func TestGatewayListenerOnNginxPorts(t *testing.T) {
	passthrough := gatewayv1.TLSModePassthrough
	tlsOn := func(port int32) gatewayv1.Listener { return tlsListener("bad", port, "", passthrough) }
	every := IngressPorts{HTTP: 80, HTTPS: 443, Status: 10246}
	own := IngressPorts{Address: gwPool[0], HTTP: 80, HTTPS: 443}
	other := IngressPorts{Address: "127.0.0.1", HTTP: 80, HTTPS: 443}
	for _, tc := range []struct {
		name        string
		bad         gatewayv1.Listener
		ports       IngressPorts
		passthrough bool
		refused     bool
	}{
		{"TLS on the HTTP port of every address", tlsOn(80), every, false, true},
		{"TLS on the HTTPS port of every address", tlsOn(443), every, false, true},
		{"TLS on the status port", tlsOn(10246), every, false, true},
		{"TLS on the HTTPS port of another address", tlsOn(443), other, false, false},
		{"HTTP on the Ingress servers' own address and port", httpListener("bad", 80, ""), own, false, true},
		{"HTTP on the Ingress servers' port of every address", httpListener("bad", 80, ""), every, false, true},
		{"HTTPS on the Ingress servers' HTTPS port of every address", httpListener("bad", 443, ""), every, false, true},
		{"HTTP on the Ingress servers' port of another address", httpListener("bad", 80, ""), other, false, false},
		{"the agent's admin port", httpListener("bad", 10254, ""), other, false, true},
		{"HTTP on the ssl-passthrough port", httpListener("bad", 443, ""), every, true, true},
		{"HTTP on the ssl-passthrough port of another address", httpListener("bad", 443, ""), other, true, false},
		{"no ports known", tlsOn(443), IngressPorts{}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := newGateway("default", "gw", tc.bad, httpListener("good", 8080, ""))
			s := gwSnapshot(gw)
			s.IngressPorts, s.SSLPassthrough = tc.ports, tc.passthrough
			s.Targets.PodPorts = []int32{tc.ports.HTTP, tc.ports.HTTPS, tc.ports.Status, 10254} // as run.go makes them
			m, problems := Build(s)
			g := gatewayStatusOf(t, m, "default", "gw")
			wantCondition(t, "good", listenerStatusOf(t, g, "good").Conditions, condAccepted, true, reasonAccepted)
			bad := listenerStatusOf(t, g, "bad")
			if !tc.refused {
				wantCondition(t, "bad", bad.Conditions, condAccepted, true, reasonAccepted)
				return
			}
			wantCondition(t, "bad", bad.Conditions, condAccepted, false, reasonPortUnavailable)
			wantCondition(t, "gateway", g.Conditions, condAccepted, true, reasonListenersNotValid)
			if len(problems) != 1 || problems[0].Name != "gw" || !strings.Contains(problems[0].Reason, "port") {
				t.Errorf("problems %v, want one naming Gateway gw and the port", problems)
			}
			for _, l := range m.Listeners {
				if l.Port != 8080 {
					t.Errorf("served listener %s", dump(l))
				}
			}
			if len(m.Stream.Gateways) != 0 {
				t.Errorf("TLS fronts %s, want none", dump(m.Stream.Gateways))
			}
		})
	}

	// A ListenerSet's listener: the Problem names the ListenerSet.
	gw := allowingListeners(newGateway("infra", "gw", httpListener("gw", 8080, "")), gatewayv1.NamespacesFromAll, nil)
	s := gwSnapshot(gw, newListenerSet("tenant", "ls", "infra", "gw", tlsOn(443), httpListener("fine", 8081, "")))
	s.IngressPorts = every
	m, problems := Build(s)
	ls := listenerSetStatusOf(t, m, "tenant", "ls")
	wantCondition(t, "ls bad", listenerStatusOf(t, ls, "bad").Conditions, condAccepted, false, reasonPortUnavailable)
	wantCondition(t, "ls fine", listenerStatusOf(t, ls, "fine").Conditions, condAccepted, true, reasonAccepted)
	if len(problems) != 1 || problems[0].Kind != kindListenerSet || problems[0].Name != "ls" {
		t.Errorf("problems %v, want one naming ListenerSet tenant/ls", problems)
	}
}

// A tenant's newer Gateway that asks for the address an older Gateway of
// another tenant is served on (spec.addresses) does not take it: the older
// one keeps its address, and its clients never reach the newer one's
// listeners; the newer one is AddressNotUsable, named in a Problem.
func TestGatewayStaticAddressTakesNoOlderGatewaysAddress(t *testing.T) {
	ip := gatewayv1.IPAddressType
	victim := newGateway("tenant-a", "gw", httpListener("http", 80, ""))
	thief := olderBy(newGateway("tenant-b", "gw", httpListener("http", 80, "")), 5)
	for _, tc := range []struct {
		name   string
		served map[string][]string
		shows  string
	}{
		{"served on it by the last build", map[string][]string{"tenant-a/gw": {gwPool[1]}}, ""},
		{"its status shows it", nil, gwPool[1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim.Status.Addresses = statusAddresses(tc.shows)
			thief.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: &ip, Value: gwPool[1]}}
			s := gwSnapshot(victim, thief)
			s.GatewayAddressesServed = tc.served
			m, problems := Build(s)
			a := gatewayStatusOf(t, m, "tenant-a", "gw")
			if len(a.Addresses) != 1 || a.Addresses[0] != gwPool[1] {
				t.Errorf("tenant-a/gw on %v, want it kept on %s", a.Addresses, gwPool[1])
			}
			b := gatewayStatusOf(t, m, "tenant-b", "gw")
			wantCondition(t, "thief", b.Conditions, condProgrammed, false, reasonAddressNotUsable)
			if len(problems) != 1 || problems[0].Namespace != "tenant-b" || !strings.Contains(problems[0].Reason, "already used by Gateway tenant-a/gw") {
				t.Errorf("problems %v, want one naming tenant-b's Gateway", problems)
			}
		})
	}

	// An older Gateway's static address still moves a newer one that the
	// pool gave it.
	owner := olderBy(newGateway("tenant-a", "pinned", httpListener("http", 80, "")), -5)
	owner.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: &ip, Value: gwPool[0]}}
	newer := newGateway("tenant-b", "pooled", httpListener("http", 80, ""))
	s := gwSnapshot(owner, newer)
	s.GatewayAddressesServed = map[string][]string{"tenant-b/pooled": {gwPool[0]}}
	m, _ := Build(s)
	if got := gatewayStatusOf(t, m, "tenant-a", "pinned").Addresses; len(got) != 1 || got[0] != gwPool[0] {
		t.Errorf("the older static Gateway on %v, want %s", got, gwPool[0])
	}
	if got := gatewayStatusOf(t, m, "tenant-b", "pooled").Addresses; len(got) != 1 || got[0] == gwPool[0] {
		t.Errorf("the newer pool Gateway on %v, want another address", got)
	}
}

// A tenant's TLSRoute that names a host an older TLSRoute of another
// tenant holds on a shared listener does not get it, and is told so: a
// Problem names the route and the host (not the other route); the older
// route keeps the host.
func TestTLSRouteHostHeldByAnOlderRoute(t *testing.T) {
	shared := allowFrom(tlsListener("tls", 443, "*.example.com", gatewayv1.TLSModePassthrough), gatewayv1.NamespacesFromAll, nil)
	gw := newGateway("infra", "gw", shared)
	owner := newTLSRoute("default", "a", parentList(parentOf("infra", "gw", "")), []string{"a.example.com"}, tlsBackend("", "web", 80))
	thief := olderBy(newTLSRoute("tenant-b", "b", parentList(parentOf("infra", "gw", "")), []string{"a.example.com", "b.example.com"}, tlsBackend("", "web", 80)), 5)
	m, problems := Build(gwSnapshot(gw, owner, thief))
	f := tlsFront(t, m, gatewayStatusOf(t, m, "infra", "gw").Addresses[0], 443)
	hosts := map[string]string{}
	for _, h := range f.Hosts {
		hosts[h.Host] = h.Route
	}
	if hosts["a.example.com"] != "default/a" || hosts["b.example.com"] != "tenant-b/b" {
		t.Errorf("front hosts %s, want a.example.com kept by default/a", dump(f.Hosts))
	}
	told := false
	for _, p := range problems {
		if p.Kind == kindTLSRoute && p.Namespace == "tenant-b" && p.Name == "b" {
			told = told || strings.Contains(p.Reason, `"a.example.com"`) && !strings.Contains(p.Reason, "default/a")
			t.Logf("problem: %s", p.Reason)
		}
	}
	if !told {
		t.Errorf("problems %v, want one naming tenant-b/b and a.example.com (and not the older route)", problems)
	}
}

// A RequestMirror or a TLSRoute backend is an endpoint like any other:
// a tenant's Service whose slice points at the pod itself (loopback, the
// metadata address, the pod's address, the admin port) mirrors to or
// passes through to none of them, each a refused Problem on the slice.
func TestGatewayBackendsIntoThePod(t *testing.T) {
	evil := endpointSlice("tenant-b", "evil-1", "web", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 10254)),
		ready("127.0.0.1", "169.254.169.254", "10.244.1.7", "0.0.0.0"))
	route := newRoute("tenant-b", "r", parentList(parentOf("infra", "gw", "")), nil, mirrorRule("/m", mirrorFilter("", "web", 80)))
	tlsRoute := newTLSRoute("tenant-b", "t", parentList(parentOf("infra", "gw", "")), []string{"t.example.com"}, tlsBackend("", "web", 80))
	gw := newGateway("infra", "gw", allowFrom(httpListener("http", 80, ""), gatewayv1.NamespacesFromAll, nil),
		allowFrom(tlsListener("tls", 443, "", gatewayv1.TLSModePassthrough), gatewayv1.NamespacesFromAll, nil))
	s := gwSnapshot(gw, webIn("tenant-b"), route, tlsRoute)
	s.EndpointSlices = ListOf(append(s.EndpointSlices.Slice(), evil)...)
	s.Targets = podTargets
	m, problems := Build(s)
	for _, b := range m.Backends.Slice() {
		if b.Name == "tenant-b/web:80" && len(b.Endpoints) != 0 {
			t.Errorf("mirror backend endpoints %v, want none", b.Endpoints)
		}
	}
	for _, b := range m.Stream.Backends {
		if len(b.Endpoints) != 0 {
			t.Errorf("TLS backend %s endpoints %v, want none", b.Name, b.Endpoints)
		}
	}
	refused, leftOut := 0, 0
	for _, p := range problems {
		if p.Kind == "EndpointSlice" && p.Name == "evil-1" && strings.Contains(p.Reason, "address left out") {
			leftOut++
			if p.Refused {
				refused++
			}
		}
	}
	if refused != 3 || leftOut != 4 {
		t.Errorf("problems %v, want the four addresses of evil-1 left out, three refused as into the pod", problems)
	}
}

// A CORS filter's exposeHeaders may hold "*" beside header names (the
// CRD allows it, unlike the other lists): the model sends Lua what it
// takes, "*" alone without credentials, the names only with them ("*"
// cannot be used then). Lua refuses "*" beside names, and a refused rule
// fails the whole push, every tenant's route changes with it.
func TestGatewayCORSExposeWildcardAmongNames(t *testing.T) {
	for _, tc := range []struct {
		credentials bool
		want        []string
	}{
		{false, []string{"*"}},
		{true, []string{"X-A"}},
	} {
		cors := &gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"https://a.example.com"},
			ExposeHeaders: []gatewayv1.HTTPHeaderName{"*", "X-A"}, AllowCredentials: &tc.credentials}
		rule := routeRule(nil, backendTo("", "web", 80))
		rule.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterCORS, CORS: cors}}
		m, problems := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, rule)))
		route, _ := gatewayRoute(m, front1, "_")
		if len(problems) != 0 || len(route.Locations) == 0 || route.Locations[0].Rule.CORS == nil {
			t.Fatalf("problems %v, route %s", problems, dump(route))
		}
		if got := route.Locations[0].Rule.CORS.ExposeHeaders; !slices.Equal(got, tc.want) {
			t.Errorf("credentials %v: exposeHeaders %q, want %q", tc.credentials, got, tc.want)
		}
	}
}
