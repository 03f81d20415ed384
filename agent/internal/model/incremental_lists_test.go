package model

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Incremental gives Build's model at each step of a random sequence of
// new, changed and removed Ingresses and HTTPRoutes, and every list a
// Build handed out stays as it was: the next list is made from the last
// (editedList, sortedList), never in one handed out.
func TestIncrementalHandedListsStayAsTheyWere(t *testing.T) {
	s := gwSnapshot(gw80())
	base := benchSnapshot(30)
	s.Ingresses, s.IngressClasses, s.IngressClass = base.Ingresses, base.IngressClasses, base.IngressClass
	s.Services, s.EndpointSlices = base.Services, base.EndpointSlices
	route := func(i int, host string) *gatewayv1.HTTPRoute {
		return newRoute("default", fmt.Sprintf("r%d", i), toGW(), []string{host}, routeRule(nil, backendTo("", fmt.Sprintf("app-%d", i%30), 80)))
	}
	for i := range 20 {
		s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), route(i, fmt.Sprintf("r%d.example.com", i)))...)
	}
	inc := NewIncremental()
	checkIncremental(t, inc, s, "first")
	type handed struct {
		servers     List[*Server]
		copyServers []*Server
		routes      List[*Route]
		copyRoutes  []*Route
		status      List[*RouteStatus]
		copyStatus  []*RouteStatus
		backends    List[Backend]
		copyBackend []Backend
	}
	var kept []handed
	keep := func(m Model) {
		kept = append(kept, handed{m.Servers, m.Servers.Slice(), m.GatewayRoutes, m.GatewayRoutes.Slice(),
			m.GatewayAPI.Routes, m.GatewayAPI.Routes.Slice(), m.Backends, m.Backends.Slice()})
	}
	rng := rand.New(rand.NewPCG(42, 1))
	for step := range 120 {
		i := rng.IntN(40)
		switch rng.IntN(4) {
		case 0: // an Ingress comes, or changes host
			ing := newIngress("default", fmt.Sprintf("new-%d", i), createdAt(i), rule(fmt.Sprintf("h%d-%d.example.com", i, rng.IntN(3)), prefix("/", "app-1", 80)))
			if at := slices.IndexFunc(s.Ingresses.Slice(), func(o *networkingv1.Ingress) bool { return o.Name == ing.Name }); at >= 0 {
				s.Ingresses = withAt(s.Ingresses, at, ing)
			} else {
				s.Ingresses = ListOf(append(s.Ingresses.Slice(), ing)...)
			}
		case 1: // an Ingress goes
			if s.Ingresses.Len() > 1 {
				at := rng.IntN(s.Ingresses.Len())
				s.Ingresses = ListOf(slices.Delete(s.Ingresses.Slice(), at, at+1)...)
			}
		case 2: // a route comes, or changes host
			r := route(100+i, fmt.Sprintf("g%d-%d.example.com", i, rng.IntN(3)))
			s.HTTPRoutes = ListOf(s.HTTPRoutes.Slice()...)
			if at := slices.IndexFunc(s.HTTPRoutes.Slice(), func(o *gatewayv1.HTTPRoute) bool { return o.Name == r.Name }); at >= 0 {
				s.HTTPRoutes = withAt(s.HTTPRoutes, at, r)
			} else {
				s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), r)...)
			}
		case 3: // a route goes
			if s.HTTPRoutes.Len() > 1 {
				at := rng.IntN(s.HTTPRoutes.Len())
				s.HTTPRoutes = ListOf(slices.Delete(s.HTTPRoutes.Slice(), at, at+1)...)
			}
		}
		got, gotProblems, _ := inc.Build(s)
		want, wantProblems := Build(s)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotProblems, wantProblems) {
			t.Fatalf("step %d: the incremental model differs:\n got %s %v\nwant %s %v", step, dump(got), gotProblems, dump(want), wantProblems)
		}
		keep(got)
	}
	for i, h := range kept {
		if !slices.Equal(h.servers.Slice(), h.copyServers) || !slices.Equal(h.routes.Slice(), h.copyRoutes) || !slices.Equal(h.status.Slice(), h.copyStatus) ||
			!reflect.DeepEqual(h.backends.Slice(), h.copyBackend) {
			t.Fatalf("the lists handed out by build %d changed since", i)
		}
	}
}

// A new host's Build makes the next servers list from the last, sharing
// every chunk the new host does not fall in (editedList), and so the
// backends list when its Ingress brings its own Service (counted over an
// editedList): the Build allocates less than half a flat list of the
// hosts (8 bytes a host), and the lists handed out before stay as they
// were. A flat list made again per change was 400 KB of servers and, for
// a new Service, 2.4 MB of backends at 50,000 (2.04 MB of such a change's
// 2.7 MB: TestHeapAtScale -heap.own).
func TestNewHostSharesTheServersList(t *testing.T) {
	const n = 20000
	s := benchSnapshot(n)
	inc := NewIncremental()
	last, _, _ := inc.Build(s)
	if last.Servers.Len() != n || last.Backends.Len() != n {
		t.Fatalf("%d servers, %d backends, want %d", last.Servers.Len(), last.Backends.Len(), n)
	}
	list := uint64(8 * n)
	for added := 1; added <= 3; added++ {
		kept := last.Backends.Slice()
		name := fmt.Sprintf("new-%d", added)
		s.Ingresses = ListOf(append(s.Ingresses.Slice(), newIngress("default", name, createdAt(0),
			rule(name+".example.com", prefix("/", name, 80))))...)
		s.Services = ListOf(append(s.Services.Slice(), service("default", name, servicePort("http", 80)))...)
		s.EndpointSlices = ListOf(append(s.EndpointSlices.Slice(), endpointSlice("default", name+"-abc", name,
			discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready(fmt.Sprintf("10.255.0.%d", added))))...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, _, path := inc.Build(s)
		runtime.ReadMemStats(&after)
		if !path.Incremental || m.Servers.Len() != n+added || m.Backends.Len() != n+added {
			t.Fatalf("new host %d: path %+v, %d servers, %d backends", added, path, m.Servers.Len(), m.Backends.Len())
		}
		if got := after.TotalAlloc - before.TotalAlloc; got >= list/2 {
			t.Errorf("new host %d: the Build allocated %d bytes, want less than %d: the servers or backends list was copied", added, got, list/2)
		}
		if !m.Servers.Shares(last.Servers) || !m.Backends.Shares(last.Backends) {
			t.Errorf("new host %d: the servers list, or the backends list, shares no chunk with the last", added)
		}
		if _, found := m.Servers.Find(func(srv *Server) int { return strings.Compare(srv.Host, name+".example.com") }); !found {
			t.Errorf("new host %d: not in the list", added)
		}
		if _, found := m.Backends.Find(func(b Backend) int { return strings.Compare(b.Name, "default/"+name+":80") }); !found {
			t.Errorf("new host %d: its backend is not in the list", added)
		}
		if !reflect.DeepEqual(last.Backends.Slice(), kept) {
			t.Errorf("new host %d: the backends list handed out before changed", added)
		}
		last = m
	}
}

// A new HTTPRoute's Build makes the next route statuses list
// (GatewayAPI.Routes) from the last, sharing every chunk the new route's
// status does not fall in (editedList), as it does the Gateway routes
// list: a flat list made again per change was 400 KB at 50,000 routes.
// Fails when the statuses list is made anew.
func TestNewRouteSharesTheStatusesList(t *testing.T) {
	const n = 3000
	s := benchGatewaySnapshot(n)
	inc := NewIncremental()
	last, _, _ := inc.Build(s)
	if last.GatewayAPI.Routes.Len() != n {
		t.Fatalf("%d route statuses, want %d", last.GatewayAPI.Routes.Len(), n)
	}
	for added := 1; added <= 3; added++ {
		name := fmt.Sprintf("new-%d", added)
		s.HTTPRoutes = ListOf(append(s.HTTPRoutes.Slice(), newRoute("default", name, toGW(), []string{name + ".example.com"},
			routeRule(nil, backendTo("", "app-0", 80))))...)
		m, _, path := inc.Build(s)
		if !path.Incremental || path.Globals || m.GatewayAPI.Routes.Len() != n+added {
			t.Fatalf("new route %d: path %+v, %d route statuses", added, path, m.GatewayAPI.Routes.Len())
		}
		if !m.GatewayAPI.Routes.Shares(last.GatewayAPI.Routes) {
			t.Errorf("new route %d: the route statuses list shares no chunk with the last", added)
		}
		if !m.GatewayRoutes.Shares(last.GatewayRoutes) {
			t.Errorf("new route %d: the Gateway routes list shares no chunk with the last", added)
		}
		if _, found := m.GatewayAPI.Routes.Find(func(st *RouteStatus) int { return strings.Compare(st.Name, name) }); !found {
			t.Errorf("new route %d: no status", added)
		}
		last = m
	}
}

// A counted list whose changes put back what it holds hands out the very
// list it did before: an island built again for a Service whose endpoints
// the fast path already put into the list (remove, then add the equal
// backend) changes nothing, and costs no new chunk here nor a compare of
// every backend in the plan. A real change still makes a new list, which
// shares the chunks it does not touch; the list handed out stays as it was.
func TestCountedListKeepsItsListForTheSameValues(t *testing.T) {
	c := newCountedList(func(b Backend) string { return b.Name })
	const n = 3 * listChunk
	name := func(i int) string { return fmt.Sprintf("b%04d", i) }
	for i := range n {
		c.add(name(i), Backend{Name: name(i), Endpoints: []Endpoint{{Address: "10.0.0.1", Port: 80}}})
	}
	first := c.list_.list()
	c.remove(name(3))
	c.add(name(3), Backend{Name: name(3), Endpoints: []Endpoint{{Address: "10.0.0.1", Port: 80}}})
	if again := c.list_.list(); !again.Same(first) {
		t.Error("the same backend put back: a new list")
	}
	c.remove(name(3))
	c.add(name(3), Backend{Name: name(3), Endpoints: []Endpoint{{Address: "10.0.0.2", Port: 80}}})
	changed := c.list_.list()
	if changed.Same(first) || changed.At(3).Endpoints[0].Address != "10.0.0.2" || first.At(3).Endpoints[0].Address != "10.0.0.1" {
		t.Error("a changed backend: the list handed out changed, or the new one lacks the change")
	}
	if !changed.Shares(first) {
		t.Error("a changed backend: the new list shares no chunk with the last")
	}
	c.remove(name(4))
	if gone := c.list_.list(); gone.Len() != n-1 || changed.Len() != n {
		t.Errorf("a backend removed: %d in the new list, %d in the one before", gone.Len(), changed.Len())
	}
}

// sortedList and editedList take the same changes (pendingEdits) and
// hold the same values after each: get agrees before and after list, and
// the lists are equal, over random sets and deletes of a few keys at a
// time; a sortedList with dropSame hands out the very slice it did when
// the changes put back what it holds.
func TestSortedAndEditedListsAgree(t *testing.T) {
	type kv struct{ k, v string }
	key := func(x kv) string { return x.k }
	rng := rand.New(rand.NewPCG(7, 45))
	for _, dropSame := range []bool{false, true} {
		sorted, edited := newSortedList(key), newEditedList(key)
		sorted.dropSame = dropSame
		for round := range 300 {
			for range 1 + rng.IntN(40) {
				k := fmt.Sprintf("k%03d", rng.IntN(1200))
				if rng.IntN(3) == 0 {
					sorted.delete(k)
					edited.delete(k)
				} else {
					v := kv{k, fmt.Sprint(rng.IntN(2))}
					sorted.set(k, v)
					edited.set(k, v)
				}
				probe := fmt.Sprintf("k%03d", rng.IntN(1200))
				a, aok := sorted.get(probe)
				b, bok := edited.get(probe)
				if a != b || aok != bok {
					t.Fatalf("dropSame %v round %d: get(%s) = %v %v and %v %v", dropSame, round, probe, a, aok, b, bok)
				}
			}
			before := sorted.values
			got, want := sorted.list(), edited.list().Slice()
			if !slices.Equal(got, want) {
				t.Fatalf("dropSame %v round %d: the lists differ:\n%v\n%v", dropSame, round, got, want)
			}
			if dropSame && len(before) > 0 && slices.Equal(before, got) && &before[0] != &got[0] {
				t.Fatalf("round %d: the same values, a new slice", round)
			}
		}
	}
}

// compareRouteStatusKey orders a status against a key as comparing its
// routeStatusKey does, for keys of every shape near it.
func TestCompareRouteStatusKey(t *testing.T) {
	parts := []string{"", "a", "ab", "b", "a\x00", "HTTPRoute", "GRPCRoute"}
	var keys []string
	for _, ns := range parts {
		for _, name := range parts {
			keys = append(keys, ns, ns+"\x00"+name, ns+"\x00"+name+"\x00", ns+"\x00"+name+"\x00HTTPRoute", ns+"\x00"+name+"\x00HTTPRoutex", ns+"\x00"+name+"\x00A")
		}
	}
	for _, ns := range parts[:4] {
		for _, name := range parts[:4] {
			for _, kind := range parts[4:] {
				st := &RouteStatus{Namespace: ns, Name: name, Kind: kind}
				for _, key := range keys {
					if got, want := compareRouteStatusKey(st, key), strings.Compare(routeStatusKey(st), key); got != want {
						t.Errorf("%q against %q: %d, want %d", routeStatusKey(st), key, got, want)
					}
				}
			}
		}
	}
}

// A new TLS Ingress with its own Secret, and a rotated Secret, make the
// next certificates list from the last (editedList): it shares every chunk
// the change does not fall in, so that the plan and Lua's record compare
// (hash) only the certificates of the changed chunks, and the list handed
// out before stays as it was. An island built again that puts back its
// certificate as it was (a new path on a TLS Ingress) hands out the very
// list (List.Same). Fails when the sum hands out a flat copy of every
// certificate (a new list per change, 50,000 certificates at issue 31's
// scale).
func TestNewTLSHostSharesTheCertificatesList(t *testing.T) {
	const n = 3 * listChunk
	s := benchSnapshot(n)
	ingresses, secrets := s.Ingresses.Slice(), make([]*corev1.Secret, 0, n)
	for i, ing := range ingresses {
		name := fmt.Sprintf("app-%04d-tls", i)
		withTLS(name, ing.Spec.Rules[0].Host)(ing)
		secrets = append(secrets, tlsSecret("default", name, pairWild))
	}
	s.Ingresses, s.Secrets = ListOf(ingresses...), ListOf(secrets...)
	inc := NewIncremental()
	last, _, _ := inc.Build(s)
	if last.Certificates.Len() != n {
		t.Fatalf("%d certificates, want %d", last.Certificates.Len(), n)
	}
	// newChunks counts the chunks of m's certificates that last does not hold.
	newChunks := func(m, last Model) int {
		held := map[*Certificate]bool{}
		for c := range last.Certificates.eachChunk() {
			held[&c[0]] = true
		}
		fresh := 0
		for c := range m.Certificates.eachChunk() {
			if !held[&c[0]] {
				fresh++
			}
		}
		return fresh
	}
	step := func(what string, s Snapshot) Model {
		t.Helper()
		kept := last.Certificates.Slice()
		m, _, path := inc.Build(s)
		if !path.Incremental {
			t.Fatalf("%s: not an incremental build (%+v)", what, path)
		}
		if !reflect.DeepEqual(last.Certificates.Slice(), kept) {
			t.Errorf("%s: the certificates list handed out before changed", what)
		}
		if want, _ := Build(s); !reflect.DeepEqual(m.Certificates.Slice(), want.Certificates.Slice()) {
			t.Errorf("%s: the certificates differ from a full build's", what)
		}
		return m
	}

	name := "new-tls"
	s.Ingresses = ListOf(append(s.Ingresses.Slice(), newIngress("default", name, createdAt(0),
		rule(name+".example.com", prefix("/", "app-0", 80)), withTLS(name, name+".example.com")))...)
	s.Secrets = ListOf(append(s.Secrets.Slice(), tlsSecret("default", name, pairWild))...)
	m := step("new TLS host", s)
	if m.Certificates.Len() != n+1 || !m.Certificates.Shares(last.Certificates) || newChunks(m, last) != 1 {
		t.Errorf("new TLS host: %d certificates, %d chunks of %d new, want %d and 1 (the others shared)",
			m.Certificates.Len(), newChunks(m, last), chunkCount(m.Certificates), n+1)
	}
	if c, found := m.Certificates.Find(func(c Certificate) int { return strings.Compare(c.Name, "default/"+name) }); !found || !slices.Equal(c.Hosts, []string{name + ".example.com"}) {
		t.Errorf("new TLS host: its certificate %+v (found %v)", c, found)
	}
	last = m

	rotated := "app-0300-tls"
	secrets = s.Secrets.Slice()
	for i, sec := range secrets {
		if sec.Name == rotated {
			secrets[i] = tlsSecret("default", rotated, richPair)
		}
	}
	s.Secrets = ListOf(secrets...)
	m = step("rotated Secret", s)
	if !m.Certificates.Shares(last.Certificates) || newChunks(m, last) != 1 {
		t.Errorf("rotated Secret: %d chunks of %d new, want 1", newChunks(m, last), chunkCount(m.Certificates))
	}
	if c, _ := m.Certificates.Find(func(c Certificate) int { return strings.Compare(c.Name, "default/"+rotated) }); c.CertPEM != richPair.certPEM {
		t.Errorf("rotated Secret: the certificate is not the new content")
	}
	last = m

	ingresses = s.Ingresses.Slice()
	for i, ing := range ingresses {
		if ing.Name == "app-7" {
			changed := ing.DeepCopy()
			changed.Spec.Rules[0].HTTP.Paths = append(changed.Spec.Rules[0].HTTP.Paths, changed.Spec.Rules[0].HTTP.Paths[0])
			changed.Spec.Rules[0].HTTP.Paths[1].Path = "/more"
			ingresses[i] = changed
		}
	}
	s.Ingresses = ListOf(ingresses...)
	if m = step("new path on a TLS Ingress", s); !m.Certificates.Same(last.Certificates) {
		t.Errorf("new path on a TLS Ingress: a new certificates list (%d chunks of %d new), want the very last", newChunks(m, last), chunkCount(m.Certificates))
	}
}
