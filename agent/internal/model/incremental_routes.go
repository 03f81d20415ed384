package model

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// routeIslands are the HTTPRoutes of an Incremental in islands, so that a
// new, changed or deleted HTTPRoute costs its island, not every route.
//
// Two HTTPRoutes are in one island when a hostname of one covers (or is)
// a hostname of the other: only then can their locations meet under one
// host key of a front (gatewayhosts.go: a key holds the routes of every
// hostname that covers it, and a listener's hostname, when it narrows a
// route's wildcard, is covered by every wildcard that covers it too). The
// globals part is then built without HTTPRoutes (the base: classes,
// Gateways, listeners and their status), and each island beside it, a
// Build of the same Gateway API objects with its HTTPRoutes alone; from
// an island the model takes its routes' hosts, statuses, backends and
// problems, and its listeners' attachedRoutes, which add up. Each island
// is checked to see the base as the globals part did (Listeners, Gateway
// status but attachedRoutes), and a host key two islands serve sends the
// sync to a full build, so that a wrong island shows.
//
// Why islands of whole Builds rather than a memo of each route's compile:
// a Build of one route is Build's rules unchanged (attachment, precedence,
// isolation, status), so the one thing to prove is that islands do not
// see each other, which TestIncrementalEqualsBuild checks. Islands hold
// only where a route changes nothing else: with GRPCRoutes, TLSRoutes,
// ListenerSets or BackendTLSPolicies (a front's gRPC-only mark, a
// listener's kinds, a policy's ancestors run across routes), or an
// HTTPRoute without hostnames (its "_" covers every host of its
// listener), the globals part builds every HTTPRoute as before.
type routeIslands struct {
	// links link each HTTPRoute under its own hostnames (routeNames);
	// a route finds those that cover it through routeLinks.
	links
	// on: the HTTPRoutes are in islands; else the globals part has them.
	on bool
	// index is the HTTPRoutes by namespace and name; ordered says the
	// last list was sorted by them, each name once (diffList), and
	// changes are what changed since it (Incremental.Build).
	index   map[namespacedName]*gatewayv1.HTTPRoute
	ordered bool
	changes []objectChange[*gatewayv1.HTTPRoute]
	// built are the islands the last Build built.
	built []*island
	// base are the globals part's routes (its listeners' own hosts,
	// without locations) by Host.
	base map[string]*Route
	// hosts are the routes by Host: the base's, but those an island
	// serves (owned); statuses the islands' route statuses by
	// routeStatusKey; attached their attachedRoutes by listener of the
	// base's status.
	hosts    editedList[*Route]
	owned    map[string]bool
	statuses editedList[*RouteStatus]
	attached map[listenerAt]int32
	// listed says model handed hosts out before: the hosts' pending
	// keys are then what changed since (changedHosts). A buildGlobals
	// starts new routeIslands, so it is false after one.
	listed bool
}

// listenerAt is a listener by its index in GatewayAPIStatus.Gateways and
// in that Gateway's Listeners.
type listenerAt struct{ gateway, listener int }

type heldAttached struct {
	at listenerAt
	n  int32
}

func newRouteIslands(s Snapshot) routeIslands {
	r := routeIslands{
		links:    newLinks(s.HTTPRoutes.Len()),
		hosts:    newEditedList(func(route *Route) string { return route.Host }),
		statuses: newEditedList(routeStatusKey),
		attached: map[listenerAt]int32{},
		owned:    map[string]bool{},
	}
	r.statuses.compare = compareRouteStatusKey
	if s.GRPCRoutes.Len() > 0 || s.TLSRoutes.Len() > 0 || s.ListenerSets.Len() > 0 || s.BackendTLSPolicies.Len() > 0 {
		return r
	}
	index, unique := indexNamed(s.HTTPRoutes)
	if !unique {
		return r
	}
	for route := range s.HTTPRoutes.All() {
		if withoutHostnames(route) {
			return r
		}
	}
	r.on, r.index, r.ordered = true, index, isOrdered(s.HTTPRoutes)
	for key, route := range index {
		for _, name := range routeNames(route) {
			r.link(name, key)
		}
	}
	return r
}

// withoutHostnames: the route serves every host of its listeners.
func withoutHostnames(r *gatewayv1.HTTPRoute) bool { return len(r.Spec.Hostnames) == 0 }

// routeNames are r's hostnames, lower case (a name the Gateway API takes
// is lower case; linking more names than it takes only joins islands).
func routeNames(r *gatewayv1.HTTPRoute) []string {
	if r == nil {
		return nil
	}
	names := make([]string, 0, len(r.Spec.Hostnames))
	for _, h := range r.Spec.Hostnames {
		names = append(names, strings.ToLower(string(h)))
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// routeLinks are the names under which the routes that cover r's
// hostnames, or share one, are linked: each hostname and the wildcards
// that cover it (coveringHosts).
func routeLinks(r *gatewayv1.HTTPRoute) []string {
	var keys []string
	for _, name := range routeNames(r) {
		for _, h := range coveringHosts(name) {
			if h != anyHost {
				keys = append(keys, h)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// linksOf are the route links of the HTTPRoute key names now.
func (r *routeIslands) linksOf(key namespacedName) []string { return routeLinks(r.index[key]) }

// coveredBy are the HTTPRoutes with a hostname some wildcard of
// wildcards covers: those a route that takes such a wildcard joins, which
// its links do not find (they find the routes that cover it).
func (r *routeIslands) coveredBy(wildcards []string) []namespacedName {
	if len(wildcards) == 0 {
		return nil
	}
	var out []namespacedName
	for key, route := range r.index {
		if slices.ContainsFunc(routeNames(route), func(name string) bool {
			return slices.ContainsFunc(wildcards, func(w string) bool { return covers(w, name) })
		}) {
			out = append(out, key)
		}
	}
	return out
}

func routeStatusKey(st *RouteStatus) string {
	return st.Namespace + "\x00" + st.Name + "\x00" + st.Kind
}

// compareRouteStatusKey orders st against key as
// strings.Compare(routeStatusKey(st), key), without making the key.
func compareRouteStatusKey(st *RouteStatus, key string) int {
	for i, part := range [3]string{st.Namespace, st.Name, st.Kind} {
		if i > 0 { // the "\x00" before part
			switch {
			case key == "":
				return 1
			case key[0] != 0:
				return -1
			}
			key = key[1:]
		}
		n := min(len(part), len(key))
		if c := strings.Compare(part[:n], key[:n]); c != 0 {
			return c
		}
		if len(part) > len(key) {
			return 1
		}
		key = key[len(part):]
	}
	if key != "" {
		return -1
	}
	return 0
}

// setBase takes the globals part's model, built without HTTPRoutes.
func (r *routeIslands) setBase(m *Model) string {
	if m.GatewayAPI.Routes.Len() > 0 {
		return "the globals part beside route islands has route statuses"
	}
	r.base = make(map[string]*Route, m.GatewayRoutes.Len())
	for route := range m.GatewayRoutes.All() {
		if _, twice := r.base[route.Host]; twice || len(route.Locations) > 0 {
			return fmt.Sprintf("the globals part beside route islands serves %s", route.Host)
		}
		r.base[route.Host] = route
		r.hosts.set(route.Host, route)
	}
	return ""
}

// buildRouteIsland builds the HTTPRoutes keys beside the globals part.
func (x *Incremental) buildRouteIsland(keys []namespacedName) string {
	s := x.last
	s.Ingresses = List[*networkingv1.Ingress]{}
	routes := make([]*gatewayv1.HTTPRoute, len(keys))
	for i, k := range keys {
		routes[i] = x.routes.index[k]
	}
	s.HTTPRoutes = ListOf(routes...)
	is, m, problems := x.buildPart(s, keys, true)
	is.routeIsland = true
	for _, k := range keys {
		x.routes.islandOf[k] = is
	}
	x.routes.built = append(x.routes.built, is)
	var err string
	if is.held, err = x.sum.add(&Model{Backends: m.Backends}, problems); err != "" {
		return err
	}
	return x.routes.add(is, &m, &x.globalsModel)
}

// add takes the routes, statuses and attachedRoutes of island is, whose
// model is m, in; it says why it cannot.
func (r *routeIslands) add(is *island, m, base *Model) string {
	if !sameGatewayBase(base, m) {
		return "a route island sees other Gateways than the globals part"
	}
	for route := range m.GatewayRoutes.All() {
		if b, ok := r.base[route.Host]; ok && len(route.Locations) == 0 {
			if !reflect.DeepEqual(b, route) {
				return fmt.Sprintf("a route island serves %s otherwise than the globals part", route.Host)
			}
			continue
		}
		if r.owned[route.Host] {
			return fmt.Sprintf("%s is served by two route islands", route.Host)
		}
		r.owned[route.Host] = true
		r.hosts.set(route.Host, route)
		is.held.gatewayRoutes = append(is.held.gatewayRoutes, route.Host)
	}
	for st := range m.GatewayAPI.Routes.All() {
		key := routeStatusKey(st)
		if _, taken := r.statuses.get(key); taken {
			return fmt.Sprintf("%s %s/%s has its status from two route islands", st.Kind, st.Namespace, st.Name)
		}
		r.statuses.set(key, st)
		is.held.routeStatuses = append(is.held.routeStatuses, key)
	}
	for i, g := range m.GatewayAPI.Gateways {
		for j, l := range g.Listeners {
			if l.AttachedRoutes != 0 {
				at := listenerAt{i, j}
				r.attached[at] += l.AttachedRoutes
				is.held.attached = append(is.held.attached, heldAttached{at, l.AttachedRoutes})
			}
		}
	}
	return ""
}

// remove takes out what add took in.
func (r *routeIslands) remove(h held) {
	for _, host := range h.gatewayRoutes {
		delete(r.owned, host)
		if b, ok := r.base[host]; ok {
			r.hosts.set(host, b)
		} else {
			r.hosts.delete(host)
		}
	}
	for _, key := range h.routeStatuses {
		r.statuses.delete(key)
	}
	for _, a := range h.attached {
		if r.attached[a.at] -= a.n; r.attached[a.at] == 0 {
			delete(r.attached, a.at)
		}
	}
}

// dropAll takes every route island out of x.
func (r *routeIslands) dropAll(x *Incremental) {
	dropped := map[*island]bool{}
	for _, is := range r.islandOf {
		if !dropped[is] {
			dropped[is] = true
			x.drop(is)
		}
	}
}

// sameGatewayBase says whether part, an island's model, sees the
// listeners and Gateways base (the globals part's) does: all of its
// Gateway API status but the routes and their attachedRoutes.
func sameGatewayBase(base, part *Model) bool {
	a, b := base.GatewayAPI, part.GatewayAPI
	if !reflect.DeepEqual(base.Listeners, part.Listeners) || !reflect.DeepEqual(a.Classes, b.Classes) ||
		!reflect.DeepEqual(a.ListenerSets, b.ListenerSets) || !reflect.DeepEqual(a.Services, b.Services) ||
		len(a.Gateways) != len(b.Gateways) || len(base.BackendTLS) > 0 || len(part.BackendTLS) > 0 {
		return false
	}
	for i, g := range b.Gateways {
		want := a.Gateways[i]
		if len(g.Listeners) != len(want.Listeners) {
			return false
		}
		g.Listeners = slices.Clone(g.Listeners)
		for j := range g.Listeners {
			g.Listeners[j].AttachedRoutes = want.Listeners[j].AttachedRoutes
		}
		if !reflect.DeepEqual(g, want) {
			return false
		}
	}
	return true
}

// changedHosts are the hosts whose route may have changed since the
// routes model handed out last (call it before model); nil when it
// cannot say: the routes are not in islands, or they were built anew
// since (buildGlobals).
func (r *routeIslands) changedHosts() map[string]bool {
	if !r.on || !r.listed {
		return nil
	}
	hosts := make(map[string]bool, len(r.hosts.pending))
	for host := range r.hosts.pending {
		hosts[host] = true
	}
	return hosts
}

// model gives m, the globals part's with the Ingress islands', the
// islands' routes, statuses and attachedRoutes.
func (r *routeIslands) model(m *Model) {
	if !r.on {
		return
	}
	r.listed = true
	m.GatewayRoutes = r.hosts.list()
	m.GatewayAPI.Routes = r.statuses.list()
	if len(r.attached) == 0 {
		return
	}
	gateways := slices.Clone(m.GatewayAPI.Gateways)
	cloned := map[int]bool{}
	for _, at := range slices.SortedFunc(maps.Keys(r.attached), func(a, b listenerAt) int {
		return cmpInts(a.gateway, b.gateway, a.listener, b.listener)
	}) {
		if !cloned[at.gateway] {
			cloned[at.gateway] = true
			gateways[at.gateway].Listeners = slices.Clone(gateways[at.gateway].Listeners)
		}
		gateways[at.gateway].Listeners[at.listener].AttachedRoutes += r.attached[at]
	}
	m.GatewayAPI.Gateways = gateways
}

func cmpInts(a1, b1, a2, b2 int) int {
	if a1 != b1 {
		return a1 - b1
	}
	return a2 - b2
}

// sameGateways says whether b holds a's Gateways, or ones that differ
// only in what Build does not read: the resourceVersion, managedFields
// and the status but its addresses. So the status the agent writes on a
// Gateway (attachedRoutes, after a new route) does not build the Gateway
// part and every route island again.
func sameGateways(a, b List[*gatewayv1.Gateway]) bool {
	if samePointers(a, b) {
		return true
	}
	before, unique := indexNamed(a)
	if _, uniqueNow := indexNamed(b); a.Len() != b.Len() || !unique || !uniqueNow {
		return false
	}
	read := func(gw *gatewayv1.Gateway) gatewayv1.Gateway {
		c := *gw
		c.ResourceVersion, c.ManagedFields = "", nil
		c.Status = gatewayv1.GatewayStatus{Addresses: gw.Status.Addresses}
		return c
	}
	for gw := range b.All() {
		old := before[namespacedName{gw.Namespace, gw.Name}]
		if old == nil || old != gw && !reflect.DeepEqual(read(old), read(gw)) {
			return false
		}
	}
	return true
}

// updateRoutes builds again the route islands the changed HTTPRoutes
// touch and those of seeds (which read a changed object); the globals
// part with every route when the routes no longer fit islands, or the
// change touches a quarter of them (globals true).
func (x *Incremental) updateRoutes(seeds []namespacedName) (globals bool, err string) {
	r := &x.routes
	r.built = nil
	changes := r.changes
	whole := func() (bool, string) {
		x.drop(x.globals)
		return true, x.buildGlobals()
	}
	if len(r.index) != x.last.HTTPRoutes.Len() {
		return whole()
	}
	old := make(map[namespacedName]*gatewayv1.HTTPRoute, len(changes))
	var wildcards []string
	for _, c := range changes {
		if c.new != nil && withoutHostnames(c.new) {
			return whole()
		}
		seeds = append(seeds, c.key)
		old[c.key] = c.old
		for _, name := range routeNames(c.new) {
			r.link(name, c.key)
			if strings.HasPrefix(name, "*") {
				wildcards = append(wildcards, name)
			}
		}
	}
	seeds = append(seeds, r.coveredBy(wildcards)...)
	affected := r.closure(seeds, r.linksOf, func(key namespacedName) []string { return routeLinks(old[key]) })
	if len(affected) > max(64, len(r.index)/4) {
		return whole()
	}
	for _, key := range affected {
		if is := r.islandOf[key]; is != nil {
			x.drop(is)
		}
		for _, name := range routeNames(old[key]) {
			r.unlink(name, key)
		}
	}
	var present []namespacedName
	for _, c := range changes {
		// Its old names are gone; its new ones were linked above.
		for _, name := range routeNames(c.new) {
			r.link(name, c.key)
		}
	}
	for _, key := range affected {
		if r.index[key] != nil {
			present = append(present, key)
		}
	}
	for _, group := range r.islands(present, r.linksOf) {
		if err := x.buildRouteIsland(group); err != "" {
			return false, err
		}
	}
	return false, ""
}
