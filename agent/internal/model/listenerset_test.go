package model

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Tests of ListenerSets: which attach to their Gateway, their listeners'
// conflicts with the Gateway's and older ListenerSets', routes attached to
// them, and hostile ones. Names follow the conformance test they stand in
// for where there is one.

func newListenerSet(namespace, name, gwNamespace, gwName string, listeners ...gatewayv1.Listener) *gatewayv1.ListenerSet {
	ls := &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(baseTime)},
	}
	ls.Spec.ParentRef.Name = gatewayv1.ObjectName(gwName)
	if gwNamespace != "" {
		ns := gatewayv1.Namespace(gwNamespace)
		ls.Spec.ParentRef.Namespace = &ns
	}
	for _, l := range listeners {
		ls.Spec.Listeners = append(ls.Spec.Listeners, gatewayv1.ListenerEntry(l))
	}
	return ls
}

// allowingListeners sets gw's spec.allowedListeners.namespaces.
func allowingListeners(gw *gatewayv1.Gateway, from gatewayv1.FromNamespaces, selector map[string]string) *gatewayv1.Gateway {
	gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: &from}}
	if selector != nil {
		gw.Spec.AllowedListeners.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return gw
}

// setParent refers to ListenerSet namespace/name, with an optional section.
func setParent(namespace, name, section string) gatewayv1.ParentReference {
	p := parentOf(namespace, name, section)
	group, kind := gatewayv1.Group(gatewayGroup), gatewayv1.Kind(kindListenerSet)
	p.Group, p.Kind = &group, &kind
	return p
}

func listenerSetStatusOf(t *testing.T, m Model, namespace, name string) GatewayStatus {
	t.Helper()
	return statusIn(t, "ListenerSet", m.GatewayAPI.ListenerSets, namespace, name)
}

func attachedListenerSets(g GatewayStatus) int32 {
	if g.AttachedListenerSets == nil {
		return -1
	}
	return *g.AttachedListenerSets
}

// wantSetServed fails unless ListenerSet namespace/name is Accepted and
// Programmed with its listeners served.
func wantSetServed(t *testing.T, m Model, namespace, name string, listeners ...string) {
	t.Helper()
	s := listenerSetStatusOf(t, m, namespace, name)
	wantCondition(t, name, s.Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, name, s.Conditions, condProgrammed, true, reasonProgrammed)
	for _, l := range listeners {
		ls := listenerStatusOf(t, s, l)
		wantCondition(t, l, ls.Conditions, condAccepted, true, reasonAccepted)
		wantCondition(t, l, ls.Conditions, condResolvedRefs, true, reasonResolvedRefs)
		wantCondition(t, l, ls.Conditions, condProgrammed, true, reasonProgrammed)
	}
}

func wantSetNotAllowed(t *testing.T, m Model, namespace, name string) {
	t.Helper()
	s := listenerSetStatusOf(t, m, namespace, name)
	wantCondition(t, name, s.Conditions, condAccepted, false, reasonNotAllowed)
	wantCondition(t, name, s.Conditions, condProgrammed, false, reasonNotAllowed)
}

// ListenerSetDefaultNotAllowed, ListenerSetAllowedNamespaceNone,
// ListenerSetAllowedNamespaceSame and ListenerSetAllowedNamespaceSelector.
func TestListenerSetAllowedNamespaces(t *testing.T) {
	gwIn := func(from gatewayv1.FromNamespaces) *gatewayv1.Gateway {
		gw := newGateway("infra", "gw", allowFrom(httpListener("gw", 80, "gw.example.com"), gatewayv1.NamespacesFromAll, nil))
		if from != "" {
			allowingListeners(gw, from, map[string]string{"allowed": "ns"})
		}
		return gw
	}
	sets := []any{
		nsObject("infra", nil), nsObject("selected", map[string]string{"allowed": "ns"}), nsObject("other", nil),
		newListenerSet("infra", "same", "infra", "gw", httpListener("same", 80, "same.example.com")),
		newListenerSet("selected", "selected", "infra", "gw", httpListener("selected", 80, "selected.example.com")),
		newListenerSet("other", "other", "infra", "gw", httpListener("other", 80, "other.example.com")),
	}
	for _, c := range []struct {
		name    string
		from    gatewayv1.FromNamespaces
		allowed []string // namespaces whose ListenerSet attaches
	}{
		{"ListenerSetDefaultNotAllowed", "", nil},
		{"ListenerSetAllowedNamespaceNone", gatewayv1.NamespacesFromNone, nil},
		{"ListenerSetAllowedNamespaceSame", gatewayv1.NamespacesFromSame, []string{"infra"}},
		{"ListenerSetAllowedNamespaceSelector", gatewayv1.NamespacesFromSelector, []string{"selected"}},
		{"allowedListeners All", gatewayv1.NamespacesFromAll, []string{"infra", "other", "selected"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := Build(gwSnapshot(append([]any{gwIn(c.from)}, sets...)...))
			g := gatewayStatusOf(t, m, "infra", "gw")
			wantCondition(t, "gateway", g.Conditions, condAccepted, true, reasonAccepted)
			want := int32(len(c.allowed))
			if c.from == "" {
				want = -1 // not written: the Gateway does not use the field
			}
			if got := attachedListenerSets(g); got != want {
				t.Errorf("attachedListenerSets: %d, want %d", got, want)
			}
			if len(g.Listeners) != 1 {
				t.Errorf("the Gateway's status lists its own listeners only: %s", dump(g.Listeners))
			}
			var hosts []string
			for ns, name := range map[string]string{"infra": "same", "other": "other", "selected": "selected"} {
				if slices.Contains(c.allowed, ns) {
					wantSetServed(t, m, ns, name, name)
					hosts = append(hosts, FrontKey(front1, name+".example.com"))
				} else {
					wantSetNotAllowed(t, m, ns, name)
				}
			}
			hosts = append(hosts, FrontKey(front1, "gw.example.com"))
			slices.Sort(hosts)
			if got := routeHosts(m); !reflect.DeepEqual(got, hosts) {
				t.Errorf("route hosts: %v, want %v", got, hosts)
			}
		})
	}
}

// ListenerSetHostnameConflict: the Gateway's listeners keep their
// hostnames, then the oldest ListenerSet's; a ListenerSet whose every
// listener conflicts is not accepted.
func TestListenerSetHostnameConflict(t *testing.T) {
	gw := allowingListeners(newGateway("infra", "gw", httpListener("gw", 80, "gw.example.com"), httpListener("taken", 80, "taken.example.com")), gatewayv1.NamespacesFromSame, nil)
	first := newListenerSet("infra", "first", "", "gw", httpListener("own", 80, "first.example.com"),
		httpListener("taken", 80, "taken.example.com"), httpListener("shared", 80, "shared.example.com"))
	onlyTaken := newListenerSet("infra", "only-taken", "", "gw", httpListener("taken", 80, "taken.example.com"))
	// Created later than first, though before it by name.
	second := olderBy(newListenerSet("infra", "a-second", "", "gw", httpListener("own", 80, "second.example.com"),
		httpListener("shared", 80, "shared.example.com")), 1)
	onlyShared := olderBy(newListenerSet("infra", "b-only-shared", "", "gw", httpListener("shared", 80, "shared.example.com")), 2)
	m, problems := Build(gwSnapshot(gw, first, onlyTaken, second, onlyShared))

	g := gatewayStatusOf(t, m, "infra", "gw")
	for _, l := range []string{"gw", "taken"} {
		wantCondition(t, l, listenerStatusOf(t, g, l).Conditions, condProgrammed, true, reasonProgrammed)
	}
	if got := attachedListenerSets(g); got != 2 {
		t.Errorf("attachedListenerSets: %d, want 2 (first and a-second)", got)
	}
	conflicted := func(s GatewayStatus, name string) {
		t.Helper()
		l := listenerStatusOf(t, s, name)
		wantCondition(t, s.Name+"/"+name, l.Conditions, condAccepted, false, reasonHostnameConflict)
		wantCondition(t, s.Name+"/"+name, l.Conditions, condProgrammed, false, reasonHostnameConflict)
		wantCondition(t, s.Name+"/"+name, l.Conditions, condConflicted, true, reasonHostnameConflict)
	}
	s := listenerSetStatusOf(t, m, "infra", "first")
	wantCondition(t, "first", s.Conditions, condAccepted, true, reasonListenersNotValid)
	wantCondition(t, "first", s.Conditions, condProgrammed, true, reasonProgrammed)
	conflicted(s, "taken")
	wantCondition(t, "first/shared", listenerStatusOf(t, s, "shared").Conditions, condProgrammed, true, reasonProgrammed)
	s = listenerSetStatusOf(t, m, "infra", "a-second")
	conflicted(s, "shared")
	wantCondition(t, "a-second/own", listenerStatusOf(t, s, "own").Conditions, condProgrammed, true, reasonProgrammed)
	for _, name := range []string{"only-taken", "b-only-shared"} {
		s := listenerSetStatusOf(t, m, "infra", name)
		wantCondition(t, name, s.Conditions, condAccepted, false, reasonListenersNotValid)
		wantCondition(t, name, s.Conditions, condProgrammed, false, reasonListenersNotValid)
	}
	for _, p := range problems {
		if p.Kind == kindListenerSet && strings.Contains(p.Reason, "infra/") {
			t.Errorf("a conflict names no other ListenerSet: %v", p)
		}
	}
}

// ListenerSetProtocolConflict: a TCP listener on the Gateway's HTTP port
// conflicts (before its protocol is found unsupported); an HTTPS listener
// on a port of its own is served.
func TestListenerSetProtocolConflict(t *testing.T) {
	gw := allowingListeners(newGateway("infra", "gw", httpListener("gw", 80, "gw.example.com")), gatewayv1.NamespacesFromSame, nil)
	tcp := gatewayv1.Listener{Name: "tcp", Port: 80, Protocol: gatewayv1.TCPProtocolType}
	set := newListenerSet("infra", "set", "", "gw", httpListener("http", 80, "set.example.com"), tcp,
		httpsListener("https", 8443, "set.example.com", secretRef("", "cert")))
	m, _ := Build(gwSnapshot(gw, set, tlsSecret("infra", "cert", newPair(certExpiry, "set.example.com"))))
	s := listenerSetStatusOf(t, m, "infra", "set")
	l := listenerStatusOf(t, s, "tcp")
	wantCondition(t, "tcp", l.Conditions, condAccepted, false, reasonProtocolConflict)
	wantCondition(t, "tcp", l.Conditions, condProgrammed, false, reasonProtocolConflict)
	wantCondition(t, "tcp", l.Conditions, condConflicted, true, reasonProtocolConflict)
	wantCondition(t, "https", listenerStatusOf(t, s, "https").Conditions, condProgrammed, true, reasonProgrammed)
	want := []Listener{{Address: "127.0.50.1", Port: 80, Front: front1}, {Address: "127.0.50.1", Port: 8443, HTTPS: true, Front: "127.0.50.1:8443"}}
	if !reflect.DeepEqual(m.Listeners, want) {
		t.Errorf("listeners: %s, want %s", dump(m.Listeners), dump(want))
	}
	if !slices.ContainsFunc(m.Certificates.Slice(), func(c Certificate) bool {
		return c.Name == "infra/cert" && slices.Contains(c.Hosts, FrontKey("127.0.50.1:8443", "set.example.com"))
	}) {
		t.Errorf("the ListenerSet's certificate is not served on its front: %s", dump(m.Certificates))
	}
}

// ListenerSetHTTPRouting, ListenerSetGatewayParentSectionNameNotFound,
// ListenerSetRouteStatusScopedToParentRef and
// ListenerSetDualParentRefIndependence: a route whose parentRef names the
// Gateway attaches to its own listeners only, one that names a
// ListenerSet to that ListenerSet's only.
func TestListenerSetRouteAttachment(t *testing.T) {
	gw := allowingListeners(newGateway("infra", "gw", allowFrom(httpListener("gw", 80, "gw.example.com"), gatewayv1.NamespacesFromAll, nil)), gatewayv1.NamespacesFromSame, nil)
	set := newListenerSet("infra", "set", "", "gw",
		allowFrom(httpListener("one", 80, "one.example.com"), gatewayv1.NamespacesFromAll, nil),
		allowFrom(httpListener("two", 80, "two.example.com"), gatewayv1.NamespacesFromAll, nil))
	rule := func(path string) gatewayv1.HTTPRouteRule {
		return routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, path)), backendTo("", "web", 80))
	}
	both := newRoute("infra", "both", parentList(parentOf("", "gw", ""), setParent("", "set", "")), nil, rule("/both"))
	gwOnly := newRoute("infra", "gw-only", parentList(parentOf("", "gw", "")), nil, rule("/gw"))
	setSection := newRoute("infra", "set-section", parentList(setParent("", "set", "one")), nil, rule("/one"))
	wrongParent := newRoute("infra", "wrong-parent", parentList(parentOf("", "gw", "one"), setParent("", "set", "two")), nil, rule("/two"))
	m, _ := Build(gwSnapshot(gw, set, both, gwOnly, setSection, wrongParent, webIn("infra")))

	paths := func(host string) []string {
		r, ok := gatewayRoute(m, front1, host)
		if !ok {
			t.Fatalf("no route for %s: %v", host, routeHosts(m))
		}
		var out []string
		for _, l := range r.Locations {
			out = append(out, l.Path)
		}
		return out
	}
	for host, want := range map[string][]string{
		"gw.example.com":  {"/both", "/both/", "/gw", "/gw/"},
		"one.example.com": {"/both", "/both/", "/one", "/one/"},
		"two.example.com": {"/both", "/both/", "/two", "/two/"},
	} {
		if got := paths(host); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: paths %v, want %v", host, got, want)
		}
	}
	s := listenerSetStatusOf(t, m, "infra", "set")
	for name, attached := range map[string]int32{"one": 2, "two": 2} {
		if got := listenerStatusOf(t, s, name).AttachedRoutes; got != attached {
			t.Errorf("listener %s: attachedRoutes %d, want %d", name, got, attached)
		}
	}
	if got := listenerStatusOf(t, gatewayStatusOf(t, m, "infra", "gw"), "gw").AttachedRoutes; got != 2 {
		t.Errorf("the Gateway's listener: attachedRoutes %d, want 2", got)
	}
	r := routeStatusOf(t, m, "infra", "both")
	if len(r.Parents) != 2 || r.Parents[0].Kind != "" || r.Parents[1].Kind != kindListenerSet || r.Parents[1].Name != "set" {
		t.Errorf("parents of both: %s", dump(r.Parents))
	}
	r = routeStatusOf(t, m, "infra", "gw-only")
	if len(r.Parents) != 1 || r.Parents[0].Kind != "" {
		t.Errorf("a route has status for its own parentRefs only: %s", dump(r.Parents))
	}
	r = routeStatusOf(t, m, "infra", "wrong-parent")
	wantCondition(t, "wrong-parent via the Gateway", r.Parents[0].Conditions, condAccepted, false, string(gatewayv1.RouteReasonNoMatchingParent))
	wantCondition(t, "wrong-parent via the ListenerSet", r.Parents[1].Conditions, condAccepted, true, reasonAccepted)
}

// ListenerSetAllowedRoutesNamespaces: "Same" on a ListenerSet's listener
// is the ListenerSet's namespace.
func TestListenerSetAllowedRoutesSame(t *testing.T) {
	gw := allowingListeners(newGateway("infra", "gw", httpListener("gw", 80, "gw.example.com")), gatewayv1.NamespacesFromAll, nil)
	set := newListenerSet("tenant", "set", "infra", "gw", httpListener("same", 80, "tenant.example.com"))
	rule := routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/")), backendTo("", "web", 80))
	inTenant := newRoute("tenant", "in-tenant", parentList(setParent("", "set", "")), nil, rule)
	inInfra := newRoute("infra", "in-infra", parentList(setParent("tenant", "set", "")), nil, rule)
	m, _ := Build(gwSnapshot(gw, set, inTenant, inInfra, webIn("tenant"), webIn("infra")))
	wantCondition(t, "in-tenant", routeStatusOf(t, m, "tenant", "in-tenant").Parents[0].Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "in-infra", routeStatusOf(t, m, "infra", "in-infra").Parents[0].Conditions, condAccepted, false, string(gatewayv1.RouteReasonNotAllowedByListeners))
}

// ListenerSetReferenceGrant: a grant to ListenerSets of a namespace lets
// their listeners use the Secret; one to the Gateway does not.
func TestListenerSetReferenceGrant(t *testing.T) {
	gw := allowingListeners(newGateway("infra", "gw", httpsListener("gw", 443, "gw.example.com", secretRef("certs", "cert"))), gatewayv1.NamespacesFromAll, nil)
	granted := newListenerSet("infra", "granted", "", "gw", httpsListener("l", 443, "granted.example.com", secretRef("certs", "cert")))
	notGranted := newListenerSet("tenant", "not-granted", "infra", "gw", httpsListener("l", 443, "other.example.com", secretRef("certs", "cert")))
	toGateway := referenceGrant("certs", "Gateway", "infra", "Secret", "")
	toSets := referenceGrant("certs", kindListenerSet, "infra", "Secret", "")
	toSets.Name = "grant-sets"
	m, _ := Build(gwSnapshot(gw, granted, notGranted, toGateway, toSets, tlsSecret("certs", "cert", newPair(certExpiry, "*.example.com"))))
	wantSetServed(t, m, "infra", "granted", "l")
	s := listenerSetStatusOf(t, m, "tenant", "not-granted")
	wantCondition(t, "not-granted", s.Conditions, condAccepted, false, reasonListenersNotValid)
	wantCondition(t, "not-granted", s.Conditions, condProgrammed, false, reasonListenersNotValid)
	wantCondition(t, "not-granted/l", listenerStatusOf(t, s, "l").Conditions, condResolvedRefs, false, reasonRefNotPermitted)

	// The grant to the Gateway alone does not serve the ListenerSet's.
	m, _ = Build(gwSnapshot(gw, granted, toGateway, tlsSecret("certs", "cert", newPair(certExpiry, "*.example.com"))))
	wantCondition(t, "granted/l", listenerStatusOf(t, listenerSetStatusOf(t, m, "infra", "granted"), "l").Conditions, condResolvedRefs, false, reasonRefNotPermitted)
}

// A tenant's ListenerSet cannot take the Gateway's hostname or port, not
// even when it is older than the Gateway, nor a hostname of an older
// tenant's; its hostile names and ports are Problems on it alone, and the
// rest is served.
func TestListenerSetHostile(t *testing.T) {
	gw := allowingListeners(newGateway("infra", "gw",
		allowFrom(httpListener("shop", 80, "shop.example.com"), gatewayv1.NamespacesFromAll, nil),
		httpsListener("tls", 443, "shop.example.com", secretRef("", "cert"))), gatewayv1.NamespacesFromAll, nil)
	olderThief := olderBy(newListenerSet("evil", "thief", "infra", "gw",
		httpListener("steal", 80, "shop.example.com"),
		httpListener("plain-on-tls", 443, "other.example.com"),
		httpListener("bad-name", 80, "bad name\";\n}"),
		httpListener("bad-port", 0, "port.example.com"),
		gatewayv1.Listener{Name: "tcp", Port: 9000, Protocol: gatewayv1.TCPProtocolType},
		httpListener("fine", 80, "evil.example.com")), -60)
	shop := newRoute("infra", "shop", parentList(parentOf("", "gw", "shop")), nil,
		routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/")), backendTo("", "web", 80)))
	m, problems := Build(gwSnapshot(gw, olderThief, shop, webIn("infra"), tlsSecret("infra", "cert", newPair(certExpiry, "shop.example.com"))))

	g := gatewayStatusOf(t, m, "infra", "gw")
	for _, l := range []string{"shop", "tls"} {
		wantCondition(t, l, listenerStatusOf(t, g, l).Conditions, condProgrammed, true, reasonProgrammed)
	}
	r, ok := gatewayRoute(m, front1, "shop.example.com")
	if !ok || len(r.Locations) == 0 || slices.ContainsFunc(r.Locations, func(l RouteLocation) bool { return l.Rule == nil || l.Rule.Route != "HTTPRoute infra/shop" }) {
		t.Fatalf("the Gateway's route is not served whole: %s", dump(m.GatewayRoutes))
	}
	s := listenerSetStatusOf(t, m, "evil", "thief")
	wantCondition(t, "thief", s.Conditions, condAccepted, true, reasonListenersNotValid)
	for name, reason := range map[string]string{"steal": reasonHostnameConflict, "plain-on-tls": reasonProtocolConflict, "bad-name": reasonUnsupportedValue, "bad-port": reasonUnsupportedValue, "tcp": reasonUnsupportedProtocol} {
		wantCondition(t, name, listenerStatusOf(t, s, name).Conditions, condAccepted, false, reason)
	}
	wantCondition(t, "fine", listenerStatusOf(t, s, "fine").Conditions, condProgrammed, true, reasonProgrammed)
	for _, p := range problems {
		if p.Kind == kindListenerSet && (p.Namespace != "evil" || p.Name != "thief") || p.Kind == kindGateway {
			t.Errorf("a problem of the ListenerSet's on another object: %v", p)
		}
	}
	for _, want := range []string{"127.0.50.1:80", "127.0.50.1:443"} {
		if !slices.ContainsFunc(m.Listeners, func(l Listener) bool { return l.Front == want }) {
			t.Errorf("front %s missing: %s", want, dump(m.Listeners))
		}
	}
	if len(m.Listeners) != 2 {
		t.Errorf("a hostile listener made a front: %s", dump(m.Listeners))
	}
}

// A ListenerSet with duplicate listener names (the file source has no
// CRD to refuse them) keeps the first; ListenerSets past the merged bound
// are TooManyListeners; a ListenerSet of a Gateway that is not ours, or
// naming another kind, is left alone.
func TestListenerSetBounds(t *testing.T) {
	gw := allowingListeners(newGateway("infra", "gw", httpListener("gw", 80, "gw.example.com")), gatewayv1.NamespacesFromAll, nil)
	dup := newListenerSet("infra", "dup", "", "gw", httpListener("l", 80, "a.example.com"), httpListener("l", 80, "b.example.com"))
	notOurs := newListenerSet("infra", "not-ours", "", "missing", httpListener("l", 80, "c.example.com"))
	objects := []any{gw, dup, notOurs}
	for i := range maxMergedListeners / maxListeners {
		var ls []gatewayv1.Listener
		for j := range maxListeners {
			ls = append(ls, httpListener("l"+strconv.Itoa(j), 80, "h"+strconv.Itoa(j)+".s"+strconv.Itoa(i)+".example.com"))
		}
		objects = append(objects, olderBy(newListenerSet("many", "set-"+strconv.Itoa(i), "infra", "gw", ls...), 1+i))
	}
	m, _ := Build(gwSnapshot(objects...))
	s := listenerSetStatusOf(t, m, "infra", "dup")
	if len(s.Listeners) != 1 {
		t.Errorf("duplicate names: %s", dump(s.Listeners))
	}
	for _, st := range m.GatewayAPI.ListenerSets {
		if st.Name == "not-ours" {
			t.Errorf("status for a ListenerSet of a Gateway that is not ours")
		}
	}
	last := listenerSetStatusOf(t, m, "many", "set-"+strconv.Itoa(maxMergedListeners/maxListeners-1))
	wantCondition(t, "last", listenerStatusOf(t, last, "l63").Conditions, condAccepted, false, reasonTooManyListeners)
}

// FuzzListenerSetBuild: whatever a tenant's ListenerSet holds, two builds
// agree, every route key and front is well-formed, and the Gateway's own
// listener and route keep serving.
func FuzzListenerSetBuild(f *testing.F) {
	f.Add("shop.example.com", "HTTP", int32(80), "All", "s")
	f.Add("*.example.com", "HTTPS", int32(443), "Same", "s")
	f.Add("", "TCP", int32(80), "Selector", "s")
	f.Add("a b\";\n}", "HTTP", int32(0), "None", "s\x00")
	f.Add("Upper.Example", "TLS", int32(70000), "Other", "")
	f.Fuzz(func(t *testing.T, hostname, protocol string, port int32, from, name string) {
		gw := allowingListeners(newGateway("infra", "gw", allowFrom(httpListener("shop", 80, "shop.example.com"), gatewayv1.NamespacesFromAll, nil)),
			gatewayv1.FromNamespaces(from), map[string]string{"team": "a"})
		l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.ProtocolType(protocol)}
		if hostname != "" {
			h := gatewayv1.Hostname(hostname)
			l.Hostname = &h
		}
		if protocol == "HTTPS" {
			l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{secretRef("", "cert")}}
		}
		set := newListenerSet("tenant", "set", "infra", "gw", l, httpListener(name, port, hostname))
		rule := routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/")), backendTo("", "web", 80))
		shop := newRoute("infra", "shop", parentList(parentOf("", "gw", "")), nil, rule)
		tenant := newRoute("tenant", "tenant", parentList(setParent("", "set", name)), []string{"shop.example.com"}, rule)
		s := gwSnapshot(gw, set, shop, tenant, webIn("infra"), webIn("tenant"), nsObject("tenant", map[string]string{"team": "a"}),
			tlsSecret("tenant", "cert", newPair(certExpiry, "*.example.com")))
		m, problems := Build(s)
		again, againProblems := Build(s)
		if !reflect.DeepEqual(m, again) || !reflect.DeepEqual(problems, againProblems) {
			t.Fatal("two builds of one snapshot differ")
		}
		for r := range m.GatewayRoutes.All() {
			front, host, ok := strings.Cut(r.Host, " ")
			if !ok || !strings.HasPrefix(front, "127.0.50.1:") || host != anyHost && validHost(host) != "" {
				t.Fatalf("emitted route key %q", r.Host)
			}
		}
		for _, ln := range m.Listeners {
			if ln.Port < 1 || ln.Port > 65535 || ln.Front != FrontName(ln.Address, ln.Port) {
				t.Fatalf("listener %+v", ln)
			}
		}
		r, ok := gatewayRoute(m, front1, "shop.example.com")
		if !ok || len(r.Locations) == 0 || slices.ContainsFunc(r.Locations, func(l RouteLocation) bool { return l.Rule == nil || l.Rule.Route != "HTTPRoute infra/shop" }) {
			t.Fatalf("the Gateway's route on shop.example.com: %s", dump(r))
		}
		wantCondition(t, "shop", listenerStatusOf(t, gatewayStatusOf(t, m, "infra", "gw"), "shop").Conditions, condProgrammed, true, reasonProgrammed)
	})
}
