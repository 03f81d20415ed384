package model

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Incremental builds the model of each snapshot from the one before, at
// the cost of what changed: the result is always Build's.
//
// The Ingresses fall into islands: two Ingresses are in one island when
// they name a host in common (a rule's, spec.tls's, a server-alias, the
// www twin of a host, or the default server for a default backend or a
// rule without a host), so everything Ingress merging, "oldest wins" and
// the per-host settings compare stays inside an island. Each island is
// built alone (Build over its Ingresses, with every Service, Secret and
// ConfigMap), and a globals part (Build with no Ingresses: the default
// certificate, the TCP and UDP services, the Gateway API) beside them; the
// model is their union. A later snapshot rebuilds only the islands whose
// Ingresses changed, came or went, whose hosts those Ingresses name or
// named, or that read a Service, EndpointSlice, Secret or ConfigMap that
// changed (Builder.reads). A change of a Gateway API object, a Namespace or
// a Gateway flag builds the globals part alone (islands are built without
// them, and the Ingress processor reads none), but for HTTPRoutes, which
// are in islands of their own (routeIslands, incremental_routes.go) when
// they can be; a change of anything else
// (an IngressClass, the agent's ConfigMap, another flag) builds every
// island.
//
// Why islands rather than patching a host inside one Build: an island is
// an ordinary Build of a smaller snapshot, so all of Build's rules hold in
// it unchanged, and the one thing to prove is that islands do not see
// each other, which TestIncrementalEqualsBuild checks over random change
// sequences (and which union detects when it fails: a host two islands
// serve, or two contents for one backend, sends the sync to Build).
type Incremental struct {
	last    Snapshot
	ready   bool
	objects *objectIndex
	// ingresses, the EndpointSlices, Secrets and ConfigMaps of last by
	// namespace and name, to find what changed (the Services' is
	// objects.services). secrets and configMaps are the maps of objects
	// (the same by name), held once; ingresses, slices and
	// objects.services are nil while last's lists of them are ordered
	// (diffIngresses, diffSlices, diffServices): an Ingress is then found
	// by a binary search of last's (ingress), a Service by one of
	// objects.serviceList, last's (objectIndex.service).
	ingresses  map[namespacedName]*networkingv1.Ingress
	slices     map[namespacedName]*discoveryv1.EndpointSlice
	secrets    map[namespacedName]*corev1.Secret
	configMaps map[namespacedName]*corev1.ConfigMap

	// links are the Ingresses' islands (linkKeys); routes the
	// HTTPRoutes' (incremental_routes.go).
	links
	routes routeIslands
	// readers are the islands that read each object.
	readers readers
	globals *island
	// globalsModel is the globals part's model: the Gateway API's part
	// of the model comes from it whole.
	globalsModel Model
	// ordered says which lists of last are sorted by namespace and name,
	// each name once (the file source's are): the next snapshot's list
	// is then diffed by walking both side by side (diffOrdered).
	ordered struct{ ingresses, services, slices, secrets, configMaps bool }
	// expires is the earliest island expiry (Builder.expires), zero for none.
	expires time.Time
	sum     modelSum
	// servers are the Servers of the model the last Build returned;
	// changedFrom those of the one before, and changed the hosts whose
	// server may differ between the two, nil after a full build
	// (ChangedServers).
	servers, changedFrom List[*Server]
	changed              map[string]bool
	// gatewayRoutes are the GatewayRoutes of the model the last Build
	// returned; gatewayFrom those of the one before, and gatewayChanged
	// the hosts whose route may differ between the two, nil when the
	// Build cannot say (ChangedGatewayRoutes).
	gatewayRoutes, gatewayFrom List[*Route]
	gatewayChanged             map[string]bool
	// compared are deepEqual's copies, empty between its calls.
	compared [2]Snapshot
}

// ChangedServers says which servers of the model the last Build returned
// may differ from those of the model the Build before returned (from,
// its very Servers list): a host not in hosts has the very same
// *Server in both, or none in both ("" is the default server). ok is
// false after a full build. render.Cache then looks at those servers
// alone (render.Cache.ServersChanged).
func (x *Incremental) ChangedServers() (from List[*Server], hosts map[string]bool, ok bool) {
	return x.changedFrom, x.changed, x.changed != nil
}

// ChangedGatewayRoutes says which Gateway routes (Model.GatewayRoutes) of
// the model the last Build returned may differ from those of the model
// the Build before returned (from, its very GatewayRoutes list): a host
// not in hosts has the very same *Route in both, or none in both. ok is
// false when the Build cannot say: a full build, or one that built the
// globals part (and with it every HTTPRoute) again, or HTTPRoutes not in
// route islands. render.Cache then looks at those routes alone
// (render.Cache.GatewayRoutesChanged) instead of walking every one: at
// 50,000 HTTPRoutes the walk was most of a new route's render.
func (x *Incremental) ChangedGatewayRoutes() (from List[*Route], hosts map[string]bool, ok bool) {
	return x.gatewayFrom, x.gatewayChanged, x.gatewayChanged != nil
}

// PatchedBackends tells x that the fast path made to, the backends of
// the model it hands out next, from from, the backends of the model the
// last Build returned, with the backends of Services whose EndpointSlices
// changed resolved again (model.EndpointPatch.Apply): the sum holds to
// from then on. Its next Build builds every island that reads those
// slices again, which then puts back the very backends of to (dropSame):
// the list stays to, which the plan knows Lua holds, rather than a new
// list of equal backends that the plan would compare with every backend
// Lua holds. A from that is not the sum's list (a Build since, or a
// build whole) is left alone: the next Build is right either way.
func (x *Incremental) PatchedBackends(from, to List[Backend]) {
	list := x.sum.backends.list_
	if x.ready && list != nil && len(list.pending) == 0 && list.values.Same(from) && from.Len() == to.Len() {
		list.values = to
	}
}

// BuildPath says how Incremental.Build computed a model: the zero value
// is a full build.
type BuildPath struct {
	// Incremental says only the islands the changes touch were built;
	// else every one was, and Reason says why.
	Incremental bool
	Reason      string
	// Islands, Ingresses and HTTPRoutes count what was built; Globals
	// says the globals part was (incremental_routes.go: with the
	// HTTPRoutes not in islands, every one).
	Islands, Ingresses, HTTPRoutes int
	Globals                        bool
}

// island is a set of Ingresses built together, or the globals part. It
// keeps only the names of what it put into the sum (the values are the
// sum's), so that a model at 50,000 Ingresses is held once.
type island struct {
	// members are the Ingresses, or the HTTPRoutes, built together.
	members []namespacedName
	held    held
	// reads are the read hashes of what it read (readers).
	reads   []uint64
	expires time.Time
	// routeIsland: the members are HTTPRoutes (incremental_routes.go).
	routeIsland bool
}

// held names what an island put into the sum, for modelSum.remove.
type held struct {
	hosts, backends, authFiles, passthrough, streamBackends, notServed []string
	certificates                                                       []heldCertificate
	problems                                                           []Problem
	// gatewayRoutes, routeStatuses and attached are a route island's
	// (routeIslands.add).
	gatewayRoutes, routeStatuses []string
	attached                     []heldAttached
}

type heldCertificate struct {
	name  string
	hosts []string
}

// firstBatch is how many Ingresses a full build puts in one part at most:
// islands that do not share a host are built together, a few at a time,
// since a Build of each alone costs its fixed part (a Builder, the
// processors, the global snippets) per island. The first change that
// touches a part builds it again as its islands (closure takes a part
// whole), so it stays below the limit at which a change is built whole.
const firstBatch = 32

// FullReason says why Build(s) will build everything ("" when it will
// build what changed, as far as can be told before the objects are
// compared): its first build, settings that may change every island, the
// clock going back. The syncer asks before a build, to make the garbage
// of a whole build cost less memory (Options.LeanFullSync).
func (x *Incremental) FullReason(s Snapshot) string {
	if !x.ready {
		return "first build"
	}
	if reason := x.changedSettings(x.last, s); reason != "" {
		return reason
	}
	if s.Now.Before(x.last.Now) {
		return "the clock went back"
	}
	if (s.SlicesOf == nil) != (x.last.SlicesOf == nil) {
		return "the source's index of EndpointSlices came or went"
	}
	return ""
}

// NewIncremental returns an Incremental whose first Build builds everything.
func NewIncremental() *Incremental { return &Incremental{} }

// Build returns Build(s) and how it was computed. s is only read, and its
// objects must not change after the call (the next Build compares them by
// identity, as the sources hand them out). The model's slices stay the
// Incremental's: they are never changed, and must not be by the caller.
// The fast path makes a backends list of its own from the model's
// (EndpointPatch.Apply), which the Incremental can be told to hold from
// then on (PatchedBackends).
func (x *Incremental) Build(s Snapshot) (Model, []Problem, BuildPath) {
	if reason := x.FullReason(s); reason != "" {
		return x.full(s, reason)
	}
	gatewayChanged := x.gatewayBaseChanged(x.last, s)
	// In islands, the HTTPRoutes' changes are found once, by diffList
	// (updateRoutes takes them).
	routesChanged := !x.routes.on && !samePointers(x.last.HTTPRoutes, s.HTTPRoutes)
	if x.routes.on {
		x.routes.changes, x.routes.ordered = diffList(x.routes.index, x.last.HTTPRoutes, s.HTTPRoutes, x.routes.ordered)
		routesChanged = len(x.routes.changes) > 0
	}
	servedOnly := gatewayChanged && !x.gatewayBaseChanged(x.last, withServedOf(s, x.last))
	var ingresses []objectChange[*networkingv1.Ingress]
	var services []objectChange[*Service]
	var endpointSlices []objectChange[*discoveryv1.EndpointSlice]
	var secrets []objectChange[*corev1.Secret]
	var configMaps []objectChange[*corev1.ConfigMap]
	ingresses = x.diffIngresses(s.Ingresses)
	services = x.diffServices(s.Services)
	endpointSlices = x.diffSlices(s.EndpointSlices)
	secrets, x.ordered.secrets = diffList(x.secrets, x.last.Secrets, s.Secrets, x.ordered.secrets)
	configMaps, x.ordered.configMaps = diffList(x.configMaps, x.last.ConfigMaps, s.ConfigMaps, x.ordered.configMaps)
	if x.ingresses != nil && len(x.ingresses) != s.Ingresses.Len() || x.objects.services != nil && len(x.objects.services) != s.Services.Len() || x.slices != nil && len(x.slices) != s.EndpointSlices.Len() ||
		len(x.secrets) != s.Secrets.Len() || len(x.configMaps) != s.ConfigMaps.Len() {
		return x.full(s, "two objects of one kind share a name")
	}
	// The Services of the changed slices: an old slice's is what the
	// snapshot it came from says (its source may have dropped its label),
	// a new one's what s says.
	sliceServices := x.sliceServices(s, endpointSlices)
	x.last = s
	x.objects.serviceList = s.Services
	if s.SlicesOf != nil {
		x.objects.slicesOf = s.SlicesOf
	} else {
		x.updateObjects(endpointSlices, sliceServices)
	}

	// The islands to build again: those of the changed Ingresses (found
	// by closure below), those that read a changed object, those whose
	// certificates expired since.
	dirty := map[*island]bool{}
	read := func(kind readKind, key namespacedName) {
		x.readers.of(readHash(x.readers.seed, kind, key), func(is *island) { dirty[is] = true })
	}
	for _, c := range services {
		read(readService, c.key)
	}
	for _, c := range sliceServices {
		for _, key := range []namespacedName{c.old, c.new} {
			if key.name != "" {
				read(readService, key)
			}
		}
	}
	for _, c := range secrets {
		read(readSecret, c.key)
	}
	for _, c := range configMaps {
		read(readConfigMap, c.key)
	}
	if !x.expires.IsZero() && s.Now.After(x.expires) {
		// Scan every island once; the next expiry is of those that stay.
		x.expires = time.Time{}
		all := slices.Concat(slices.Collect(maps.Values(x.islandOf)), slices.Collect(maps.Values(x.routes.islandOf)))
		for _, is := range append(all, x.globals) {
			switch {
			case is.expires.IsZero():
			case s.Now.After(is.expires):
				dirty[is] = true
			case x.expires.IsZero() || is.expires.Before(x.expires):
				x.expires = is.expires
			}
		}
	}
	if servedOnly && x.routes.on && !dirty[x.globals] && x.sameGlobals() {
		// The addresses the last build served are read only to keep
		// them: a Build that keeps them all is the last one.
		gatewayChanged = false
	}
	rebuildGlobals := dirty[x.globals] || gatewayChanged || routesChanged && !x.routes.on
	delete(dirty, x.globals)
	// The route islands to build again, by their HTTPRoutes.
	var routeSeeds []namespacedName
	for is := range dirty {
		if is.routeIsland {
			routeSeeds = append(routeSeeds, is.members...)
			delete(dirty, is)
		}
	}

	seeds := make([]namespacedName, 0, len(ingresses))
	for _, c := range ingresses {
		seeds = append(seeds, c.key)
		if c.new != nil {
			for _, k := range linkKeys(c.new) {
				x.link(k, c.key)
			}
		}
	}
	for is := range dirty {
		seeds = append(seeds, is.members...)
	}
	old := make(map[namespacedName]*networkingv1.Ingress, len(ingresses))
	for _, c := range ingresses {
		old[c.key] = c.old
	}
	affected := x.closure(seeds, func(key namespacedName) []string {
		if ing := x.ingress(key); ing != nil {
			return linkKeys(ing)
		}
		return nil
	}, func(key namespacedName) []string {
		if ing := old[key]; ing != nil {
			return linkKeys(ing)
		}
		return nil
	})
	if len(affected) > max(64, s.Ingresses.Len()/4) {
		return x.full(s, fmt.Sprintf("the change touches %d of %d Ingresses", len(affected), s.Ingresses.Len()))
	}
	// Every island an affected Ingress was in goes; its Ingresses are
	// all affected (closure), and so are its old links.
	for _, key := range affected {
		if is := x.islandOf[key]; is != nil {
			x.drop(is)
		}
		if ing := old[key]; ing != nil {
			for _, k := range linkKeys(ing) {
				x.unlink(k, key)
			}
		}
	}
	for _, c := range ingresses {
		if c.new == nil {
			delete(x.islandOf, c.key)
		} else if c.old != nil {
			// Its old links are gone; its new ones were linked above.
			for _, k := range linkKeys(c.new) {
				x.link(k, c.key)
			}
		}
	}
	path := BuildPath{Incremental: true}
	if rebuildGlobals {
		x.drop(x.globals)
		if err := x.buildGlobals(); err != "" {
			return x.full(s, err)
		}
		path.Globals = true
	} else if x.routes.on && (routesChanged || len(routeSeeds) > 0) {
		var err string
		if path.Globals, err = x.updateRoutes(routeSeeds); err != "" {
			return x.full(s, err)
		}
		if !path.Globals {
			for _, is := range x.routes.built {
				path.Islands++
				path.HTTPRoutes += len(is.members)
			}
		}
	}
	if path.Globals {
		path.Islands += 1 + len(x.routes.built)
		path.HTTPRoutes = s.HTTPRoutes.Len()
	}
	var present []namespacedName
	for _, key := range affected {
		if x.ingress(key) != nil {
			present = append(present, key)
		}
	}
	for _, group := range x.islands(present, x.ingressLinks) {
		if err := x.buildIsland(group); err != "" {
			return x.full(s, err)
		}
		path.Islands++
		path.Ingresses += len(group)
	}
	changed := x.sum.changedServers()
	m, problems := x.sum.model(x.globalsModel)
	changedRoutes := x.routes.changedHosts()
	x.routes.model(&m)
	x.changedFrom, x.changed, x.servers = x.servers, changed, m.Servers
	x.gatewayFrom, x.gatewayChanged, x.gatewayRoutes = x.gatewayRoutes, changedRoutes, m.GatewayRoutes
	return m, problems, path
}

// full builds every island of s.
func (x *Incremental) full(s Snapshot, reason string) (Model, []Problem, BuildPath) {
	*x = Incremental{last: s, objects: newObjectIndex(s)}
	x.secrets, x.configMaps = x.objects.secrets, x.objects.configMaps
	x.ordered.ingresses, x.ordered.services, x.ordered.slices = isOrdered(s.Ingresses), x.objects.services == nil, isOrdered(s.EndpointSlices)
	unique := true // each Ingress's name once (ordered lists are)
	if !x.ordered.ingresses {
		x.ingresses, unique = indexNamed(s.Ingresses)
	}
	if !x.ordered.slices {
		x.slices, _ = indexNamed(s.EndpointSlices)
	}
	x.ordered.secrets, x.ordered.configMaps = isOrdered(s.Secrets), isOrdered(s.ConfigMaps)
	path := BuildPath{Reason: reason}
	if !unique {
		// Two Ingresses of one name: Build serves both, which islands
		// keyed by name cannot.
		m, problems := Build(s)
		path.Reason += "; two Ingresses share a name, built whole"
		return m, problems, path
	}
	x.links = newLinks(s.Ingresses.Len())
	x.readers = newReaders()
	x.sum = newModelSum()
	keys := make([]namespacedName, 0, s.Ingresses.Len())
	for ing := range s.Ingresses.All() {
		key := namespacedName{ing.Namespace, ing.Name}
		keys = append(keys, key)
		for _, k := range linkKeys(ing) {
			x.link(k, key)
		}
	}
	fail := func(err string) (Model, []Problem, BuildPath) {
		m, problems := Build(s)
		path.Reason += "; " + err + ", built whole"
		*x = Incremental{}
		return m, problems, path
	}
	if err := x.buildGlobals(); err != "" {
		return fail(err)
	}
	for _, group := range batches(x.islands(keys, x.ingressLinks), firstBatch) {
		if err := x.buildIsland(group); err != "" {
			return fail(err)
		}
		path.Islands++
		path.Ingresses += len(group)
	}
	x.ready = true
	m, problems := x.sum.model(x.globalsModel)
	x.compact(&m)
	x.routes.model(&m)
	x.servers, x.gatewayRoutes = m.Servers, m.GatewayRoutes
	return m, problems, path
}

// diffSlices is diffList for the EndpointSlices, whose index by name
// only the diff reads: while the lists are ordered (the file source's)
// the walk needs none and x.slices is nil (at 50,000 slices it held
// 3.7 MB); it is made from last when a list is not.
func (x *Incremental) diffSlices(next List[*discoveryv1.EndpointSlice]) []objectChange[*discoveryv1.EndpointSlice] {
	return diffKeptIndex(x.last.EndpointSlices, next, &x.slices, &x.ordered.slices)
}

// diffServices is diffList for the Services, whose index by name
// (objects.services, which the builds read) is nil while the lists are
// ordered, as diffSlices; objects.serviceList is set to next's with
// last.
func (x *Incremental) diffServices(next List[*Service]) []objectChange[*Service] {
	return diffKeptIndex(x.last.Services, next, &x.objects.services, &x.ordered.services)
}

// diffIngresses is diffList for the Ingresses, whose index by name
// (x.ingresses) is nil while the lists are ordered, as diffSlices.
func (x *Incremental) diffIngresses(next List[*networkingv1.Ingress]) []objectChange[*networkingv1.Ingress] {
	return diffKeptIndex(x.last.Ingresses, next, &x.ingresses, &x.ordered.ingresses)
}

// diffKeptIndex diffs next against last by walking both while they are
// ordered (*ordered), else through *index, which it makes from last when
// the walk cannot go on and drops again once next is ordered.
func diffKeptIndex[T namedObject](last, next List[T], index *map[namespacedName]T, ordered *bool) []objectChange[T] {
	if *ordered {
		if changes, ok := diffOrdered(last, next); ok {
			return changes
		}
		*index, _ = indexNamed(last)
	}
	changes := diffNamed(*index, next)
	if *ordered = isOrdered(next); *ordered {
		*index = nil
	}
	return changes
}

// ingress is the Ingress of last named key, nil for none: by x.ingresses,
// or while that is nil (last's Ingresses are ordered) by a binary search
// of last's (List.Find). At 50,000 Ingresses the index was 3 MB, for a
// lookup per Ingress a change builds.
func (x *Incremental) ingress(key namespacedName) *networkingv1.Ingress {
	if x.ingresses != nil || !x.ordered.ingresses {
		return x.ingresses[key]
	}
	ing, _ := findNamed(x.last.Ingresses, key)
	return ing
}

// ingressLinks are the link keys of the Ingress key names now.
func (x *Incremental) ingressLinks(key namespacedName) []string { return linkKeys(x.ingress(key)) }

// links finds islands: which objects (Ingresses, or HTTPRoutes) name each
// link key, and the island each object is in.
//
// linked holds the objects by the hash of the link key (linkHash), the
// first inline (hashIndex): at 50,000 Ingresses, each with a host of its
// own, a map[string][]namespacedName held 50,000 lists of one name
// (1.5 MB) beside its keys. Two keys whose hashes collide (with a random
// seed, about one chance in 10^10 at 50,000 keys) link their objects,
// which only makes an island larger, as two hosts of one link key do.
type links struct {
	seed     maphash.Seed
	linked   hashIndex[namespacedName]
	islandOf map[namespacedName]*island
}

func newLinks(n int) links {
	return links{seed: maphash.MakeSeed(), linked: newHashIndex[namespacedName](n), islandOf: make(map[namespacedName]*island, n)}
}

// linkHash is the hash under which objects are linked by k.
func (x *links) linkHash(k string) uint64 { return maphash.String(x.seed, k) }

// closure returns the seeds and every object linked to them, through the
// link keys of now and of before (old: of the changed objects), with the
// whole island of each.
func (x *links) closure(seeds []namespacedName, now, old func(namespacedName) []string) []namespacedName {
	seen := make(map[namespacedName]bool, len(seeds))
	seenKey := map[string]bool{}
	queue := slices.Clone(seeds)
	var out []namespacedName
	for len(queue) > 0 {
		key := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, key)
		for _, k := range append(now(key), old(key)...) {
			if !seenKey[k] {
				seenKey[k] = true
				x.linked.of(x.linkHash(k), func(other namespacedName) { queue = append(queue, other) })
			}
		}
		if is := x.islandOf[key]; is != nil {
			queue = append(queue, is.members...)
		}
	}
	return out
}

// islands splits keys, all of them present (keysOf gives their link
// keys), into the groups their links make among them.
func (x *links) islands(keys []namespacedName, keysOf func(namespacedName) []string) [][]namespacedName {
	parent := make(map[namespacedName]namespacedName, len(keys))
	var find func(namespacedName) namespacedName
	find = func(k namespacedName) namespacedName {
		p := parent[k]
		if p == k {
			return k
		}
		root := find(p)
		parent[k] = root
		return root
	}
	for _, k := range keys {
		parent[k] = k
	}
	for _, k := range keys {
		for _, link := range keysOf(k) {
			x.linked.of(x.linkHash(link), func(other namespacedName) {
				if _, ok := parent[other]; ok {
					parent[find(other)] = find(k)
				}
			})
		}
	}
	groups := map[namespacedName][]namespacedName{}
	var roots []namespacedName
	for _, k := range keys {
		root := find(k)
		if groups[root] == nil {
			roots = append(roots, root)
		}
		groups[root] = append(groups[root], k)
	}
	out := make([][]namespacedName, 0, len(roots))
	for _, root := range roots {
		out = append(out, groups[root])
	}
	return out
}

// batches joins consecutive islands into groups of up to size Ingresses
// (an island larger than size is a group of its own).
func batches(islands [][]namespacedName, size int) [][]namespacedName {
	var out [][]namespacedName
	for _, is := range islands {
		if n := len(out); n > 0 && len(out[n-1])+len(is) <= size {
			out[n-1] = append(out[n-1], is...)
			continue
		}
		out = append(out, slices.Clip(is))
	}
	return out
}

// buildGlobals builds the globals part and the route islands beside it
// (incremental_routes.go), x.globals dropped.
func (x *Incremental) buildGlobals() string {
	x.routes.dropAll(x)
	x.routes = newRouteIslands(x.last)
	s := x.last
	s.Ingresses = List[*networkingv1.Ingress]{}
	if x.routes.on {
		s.HTTPRoutes = List[*gatewayv1.HTTPRoute]{}
	}
	var m Model
	var problems []Problem
	x.globals, m, problems = x.buildPart(s, nil, false)
	x.globalsModel = m
	var err string
	if x.globals.held, err = x.sum.add(&m, problems); err != "" {
		return err
	}
	if !x.routes.on {
		return ""
	}
	if err := x.routes.setBase(&m); err != "" {
		return err
	}
	keys := slices.Collect(maps.Keys(x.routes.index))
	slices.SortFunc(keys, func(a, b namespacedName) int {
		return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
	})
	for _, group := range batches(x.routes.islands(keys, x.routes.linksOf), firstBatch) {
		if err := x.buildRouteIsland(group); err != "" {
			return err
		}
	}
	return ""
}

func (x *Incremental) buildIsland(keys []namespacedName) string {
	s := x.last
	ingresses := make([]*networkingv1.Ingress, len(keys))
	for i, k := range keys {
		ingresses[i] = x.ingress(k)
	}
	s.Ingresses = ListOf(ingresses...)
	// The Gateway API is the globals part's.
	s = withoutGatewayAPI(s)
	is, m, problems := x.buildPart(s, keys, true)
	if len(m.Listeners) > 0 || m.GatewayRoutes.Len() > 0 || len(m.BackendTLS) > 0 || !reflect.DeepEqual(m.GatewayAPI, GatewayAPIStatus{}) ||
		len(m.Stream.Services) > 0 || len(m.Stream.Gateways) > 0 {
		return "an island of Ingresses built a part of the globals"
	}
	for _, k := range keys {
		x.islandOf[k] = is
	}
	var err string
	is.held, err = x.sum.add(&m, problems)
	return err
}

// buildPart builds s and returns the part with the model and problems it
// built, for the caller to take into the sum.
func (x *Incremental) buildPart(s Snapshot, keys []namespacedName, islandOnly bool) (*island, Model, []Problem) {
	b := newBuilderOf(s, x.objects)
	b.reads = &readSet{seed: x.readers.seed}
	b.islandOnly = islandOnly
	m, problems := b.build(newIngressProcessor(s), newGatewayProcessor(s))
	is := &island{members: keys, reads: b.reads.hashes(), expires: b.expires}
	for _, h := range is.reads {
		x.readers.add(h, is)
	}
	if !is.expires.IsZero() && (x.expires.IsZero() || is.expires.Before(x.expires)) {
		x.expires = is.expires
	}
	return is, m, problems
}

// drop takes is out of the model.
func (x *Incremental) drop(is *island) {
	x.sum.remove(is.held)
	if is.routeIsland {
		x.routes.remove(is.held)
	}
	for _, h := range is.reads {
		x.readers.remove(h, is)
	}
	for _, k := range is.members {
		if x.islandOf[k] == is {
			delete(x.islandOf, k)
		}
		if x.routes.islandOf[k] == is {
			delete(x.routes.islandOf, k)
		}
	}
}

func (x *links) link(k string, key namespacedName) { x.linked.add(x.linkHash(k), key) }

func (x *links) unlink(k string, key namespacedName) { x.linked.remove(x.linkHash(k), key) }

// sliceServiceChange is the Service an EndpointSlice that changed
// belonged to (old) and belongs to (new); a zero name for none.
type sliceServiceChange struct{ old, new namespacedName }

// sliceServices returns the Services of the changed EndpointSlices, by
// change: the old slice's as x.last, the snapshot it is of, says, the new
// one's as s says. Called before s becomes x.last.
func (x *Incremental) sliceServices(s Snapshot, endpointSlices []objectChange[*discoveryv1.EndpointSlice]) []sliceServiceChange {
	out := make([]sliceServiceChange, len(endpointSlices))
	for i, c := range endpointSlices {
		if c.old != nil {
			out[i].old, _ = sliceService(x.last, c.old)
		}
		if c.new != nil {
			out[i].new, _ = sliceService(s, c.new)
		}
	}
	return out
}

// updateObjects takes the changed EndpointSlices into the index the
// builds read, when the snapshot brings none (SlicesOf) (its Services, Secrets and ConfigMaps are x's, which
// diffNamed brought up to date); services are their Services, by change
// (sliceServices).
func (x *Incremental) updateObjects(endpointSlices []objectChange[*discoveryv1.EndpointSlice], services []sliceServiceChange) {
	for i, c := range endpointSlices {
		if key := services[i].old; c.old != nil && key.name != "" {
			list := slices.DeleteFunc(slices.Clone(x.objects.slices[key]), func(s *discoveryv1.EndpointSlice) bool { return s == c.old })
			setOrDelete(x.objects.slices, key, list)
		}
		if key := services[i].new; c.new != nil && key.name != "" {
			x.objects.slices[key] = append(slices.Clip(x.objects.slices[key]), c.new)
		}
	}
}

func setOrDelete[V any](m map[namespacedName]V, key namespacedName, v V) {
	if reflect.ValueOf(&v).Elem().IsZero() {
		delete(m, key)
		return
	}
	m[key] = v
}

// linkKeys are the names that put ing in one island with the Ingresses
// that share one: for each host of its rules ("" for a rule without one,
// and for a default backend: the default server), of its spec.tls and its
// server-aliases, the host in lower case without its leading "www."s
// (linkKey). Two hosts that are equal, equal but for case, or one the www
// twin of the other (from-to-www-redirect) have one key; hosts the rules
// keep apart may share one too ("www.www.a" and "a"), which only makes an
// island larger.
//
// Why one key per host, not the host, its lower case and its twin: at
// 50,000 Ingresses the links held a key and a list for each, some 4 MB
// more.
func linkKeys(ing *networkingv1.Ingress) []string {
	var keys []string
	if ing.Spec.DefaultBackend != nil {
		keys = append(keys, "")
	}
	for _, r := range ing.Spec.Rules {
		keys = append(keys, linkKey(r.Host))
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			keys = append(keys, linkKey(h))
		}
	}
	for key, value := range ing.Annotations {
		if strings.HasSuffix(key, serverAliasKey) {
			for _, alias := range strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
				keys = append(keys, linkKey(alias))
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// linkKey is host in lower case without its leading "www."s: every name
// the host, its lower case and its www twin (with "www." added or taken
// off) give the same key.
func linkKey(host string) string {
	key := strings.ToLower(host)
	for {
		rest, ok := strings.CutPrefix(key, "www.")
		if !ok {
			return key
		}
		key = rest
	}
}

// changedSettings says what of s, other than its Ingresses, Services,
// EndpointSlices, Secrets, ConfigMaps, clock and its Gateway API part
// (gatewayBaseChanged, and the HTTPRoutes), differs from last: any of it may change every
// island. "" when nothing does.
func (x *Incremental) changedSettings(last, s Snapshot) string {
	switch {
	case !samePointers(last.IngressClasses, s.IngressClasses):
		return "an IngressClass changed"
	case last.ConfigMap != s.ConfigMap || last.TCPServices != s.TCPServices || last.UDPServices != s.UDPServices:
		return "the agent's ConfigMap changed"
	}
	if !x.deepEqual(settingsOf(last), settingsOf(s)) {
		return "the settings changed"
	}
	return ""
}

// deepEqual is reflect.DeepEqual(a, b), comparing copies in x's own
// compared: DeepEqual of two Snapshot values boxes each, a heap copy of
// 1.4 KB, and a sync compares settings three or four times
// (changedSettings, gatewayBaseChanged). The copies are cleared after.
func (x *Incremental) deepEqual(a, b Snapshot) bool {
	x.compared[0], x.compared[1] = a, b
	equal := reflect.DeepEqual(&x.compared[0], &x.compared[1])
	x.compared = [2]Snapshot{}
	return equal
}

// gatewayBaseChanged says whether a Gateway API object other than an
// HTTPRoute, a Namespace or a Gateway setting differs from last. Only the
// globals part and the route islands read them (Ingress islands are built
// without), so such a change builds those alone again; a change of
// HTTPRoutes alone builds the route islands it touches
// (incremental_routes.go), or the globals part when they are not in
// islands.
func (x *Incremental) gatewayBaseChanged(last, s Snapshot) bool {
	return !samePointers(last.GatewayClasses, s.GatewayClasses) || !sameGateways(last.Gateways, s.Gateways) ||
		!samePointers(last.GRPCRoutes, s.GRPCRoutes) ||
		!samePointers(last.TLSRoutes, s.TLSRoutes) || !samePointers(last.ReferenceGrants, s.ReferenceGrants) ||
		!samePointers(last.ListenerSets, s.ListenerSets) || !samePointers(last.BackendTLSPolicies, s.BackendTLSPolicies) ||
		!samePointers(last.Namespaces, s.Namespaces) || !x.deepEqual(gatewaySettingsOf(last), gatewaySettingsOf(s))
}

// withServedOf is s with the GatewayAddressesServed of other.
func withServedOf(s, other Snapshot) Snapshot {
	s.GatewayAddressesServed = other.GatewayAddressesServed
	return s
}

// sameGlobals says whether the globals part of x.last, built beside route
// islands (without Ingresses and HTTPRoutes), is the one x holds, with
// the same problems. It builds the globals part without taking it in:
// a Gateway and its listeners cost little without their routes.
func (x *Incremental) sameGlobals() bool {
	s := x.last
	s.Ingresses, s.HTTPRoutes = List[*networkingv1.Ingress]{}, List[*gatewayv1.HTTPRoute]{}
	m, problems := newBuilderOf(s, x.objects).build(newIngressProcessor(s), newGatewayProcessor(s))
	return reflect.DeepEqual(m, x.globalsModel) && slices.Equal(problems, x.globals.held.problems)
}

// withoutGatewayAPI is s without its Gateway API part.
func withoutGatewayAPI(s Snapshot) Snapshot {
	s.GatewayClasses, s.Gateways, s.HTTPRoutes, s.GRPCRoutes, s.TLSRoutes, s.ReferenceGrants, s.ListenerSets, s.Namespaces =
		List[*gatewayv1.GatewayClass]{}, List[*gatewayv1.Gateway]{}, List[*gatewayv1.HTTPRoute]{}, List[*gatewayv1.GRPCRoute]{}, List[*gatewayv1.TLSRoute]{}, List[*gatewayv1.ReferenceGrant]{}, List[*gatewayv1.ListenerSet]{}, List[*corev1.Namespace]{}
	s.BackendTLSPolicies = List[*gatewayv1.BackendTLSPolicy]{}
	s.GatewayController, s.GatewayAddresses, s.GatewayAddressesServed, s.GatewayKindsNotServed = "", nil, nil, nil
	return s
}

// gatewaySettingsOf is the settings of s only the Gateway API reads.
func gatewaySettingsOf(s Snapshot) Snapshot {
	return Snapshot{GatewayController: s.GatewayController, GatewayAddresses: s.GatewayAddresses,
		GatewayAddressesServed: s.GatewayAddressesServed, GatewayKindsNotServed: s.GatewayKindsNotServed}
}

// settingsOf is s without the objects changedSettings and
// gatewayBaseChanged compare themselves.
func settingsOf(s Snapshot) Snapshot {
	s = withoutGatewayAPI(s)
	s.Ingresses = List[*networkingv1.Ingress]{}
	s.IngressClasses, s.Services, s.EndpointSlices, s.Secrets, s.ConfigMaps = List[*networkingv1.IngressClass]{}, List[*Service]{}, List[*discoveryv1.EndpointSlice]{}, List[*corev1.Secret]{}, List[*corev1.ConfigMap]{}
	s.SliceServices = nil // answers for the slices, compared by themselves
	s.SlicesOf = nil      // as SliceServices; FullReason compares whether it is set
	s.ConfigMap, s.TCPServices, s.UDPServices = nil, nil, nil
	s.Now = time.Time{}
	return s
}

// samePointers says whether a and b hold the same objects, in any order:
// at once when they are the same list (a source hands a list it did not
// change again).
func samePointers[T comparable](a, b List[T]) bool {
	if a.Len() != b.Len() {
		return false
	}
	if a.Len() == 0 || a.Same(b) {
		return true
	}
	count := make(map[T]int, a.Len())
	for v := range a.All() {
		count[v]++
	}
	for v := range b.All() {
		if count[v] == 0 {
			return false
		}
		count[v]--
	}
	return true
}

type namedObject interface {
	comparable
	GetNamespace() string
	GetName() string
}

// objectChange is an object that came (old nil), went (new nil) or changed.
type objectChange[T any] struct {
	key      namespacedName
	old, new T
}

func indexNamed[T namedObject](list List[T]) (map[namespacedName]T, bool) {
	index := make(map[namespacedName]T, list.Len())
	for obj := range list.All() {
		index[namespacedName{obj.GetNamespace(), obj.GetName()}] = obj
	}
	return index, len(index) == list.Len()
}

// findNamed returns the object key names in list, sorted by namespace and
// name, and whether it holds one.
func findNamed[T namedObject](list List[T], key namespacedName) (T, bool) {
	return list.Find(func(obj T) int {
		return cmp.Or(strings.Compare(obj.GetNamespace(), key.namespace), strings.Compare(obj.GetName(), key.name))
	})
}

// diffList brings index, the objects of last by name, to next and returns
// what changed, and whether next is ordered (isOrdered). When last is
// ordered (lastOrdered), the two lists are walked side by side
// (diffOrdered); else, or when next is not ordered, by index (diffNamed).
// The caller checks that index ends as long as next (no two objects of
// one name).
//
// Why a walk: at 50,000 Ingresses a map lookup per object of each kind
// is most of a sync that changed one, while the walk skips the chunks
// both lists share (CompareLists): the sources make each list from the
// last (Edited), so the walk costs the chunks a change fell in.
func diffList[T namedObject](index map[namespacedName]T, last, next List[T], lastOrdered bool) ([]objectChange[T], bool) {
	if lastOrdered {
		if changes, ok := diffOrdered(last, next); ok {
			var zero T
			for _, c := range changes {
				if c.new == zero {
					delete(index, c.key)
				} else {
					index[c.key] = c.new
				}
			}
			return changes, true
		}
	}
	return diffNamed(index, next), isOrdered(next)
}

// compareNamed orders objects by namespace, then name.
func compareNamed[T namedObject](a, b T) int {
	return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
}

// isOrdered says whether list is sorted by namespace and name, each name
// once.
func isOrdered[T namedObject](list List[T]) bool {
	var prev T
	first := true
	for obj := range list.All() {
		if !first && compareNamed(prev, obj) >= 0 {
			return false
		}
		prev, first = obj, false
	}
	return true
}

// diffOrdered returns what changed from last to next, both sorted by
// namespace and name with each name once (last must be; next is checked:
// false when it is not), by identity as diffNamed. The walk skips the
// chunks both lists share (CompareLists), and checks the order of the
// objects it reads: those of the chunks a list made from last (Edited)
// does not share with it, which hold the objects that changed, and every
// object of a list made whole (ListOf), which shares no chunk. A shared
// chunk is as ordered as it was in last. next the very list last is (a
// source hands a list it did not change again) is no change without a
// walk, which is what the walk would find.
func diffOrdered[T namedObject](last, next List[T]) ([]objectChange[T], bool) {
	var changes []objectChange[T]
	var prev T
	first, ordered := true, true
	key := func(obj T) namespacedName { return namespacedName{obj.GetNamespace(), obj.GetName()} }
	CompareLists(last, next, compareNamed[T], func(old, obj T, inLast, inNext bool) {
		if !ordered {
			return
		}
		// Two sorted lists merge into one sorted walk: a key not after
		// the one before is a list out of order.
		at := obj
		if !inNext {
			at = old
		}
		if !first && compareNamed(prev, at) >= 0 {
			ordered = false
			return
		}
		prev, first = at, false
		switch {
		case !inNext: // went
			changes = append(changes, objectChange[T]{key: key(old), old: old})
		case !inLast: // came
			changes = append(changes, objectChange[T]{key: key(obj), new: obj})
		case old != obj:
			changes = append(changes, objectChange[T]{key: key(obj), old: old, new: obj})
		}
	})
	if !ordered {
		return nil, false
	}
	return changes, true
}

// diffNamed brings index to next and returns what changed, by identity:
// the sources hand out an object once and never change it. The caller
// checks that index ends as long as next (no two objects of one name).
func diffNamed[T namedObject](index map[namespacedName]T, next List[T]) []objectChange[T] {
	var changes []objectChange[T]
	var zero T
	found := 0
	for obj := range next.All() {
		key := namespacedName{obj.GetNamespace(), obj.GetName()}
		old, ok := index[key]
		if ok {
			found++
		}
		if old != obj {
			changes = append(changes, objectChange[T]{key: key, old: old, new: obj})
		}
	}
	if found < len(index) {
		present := make(map[namespacedName]bool, next.Len())
		for obj := range next.All() {
			present[namespacedName{obj.GetNamespace(), obj.GetName()}] = true
		}
		for key, old := range index {
			if !present[key] {
				changes = append(changes, objectChange[T]{key: key, old: old, new: zero})
			}
		}
	}
	for _, c := range changes {
		if c.new == zero {
			delete(index, c.key)
		} else {
			index[c.key] = c.new
		}
	}
	return changes
}

// modelSum is the union of the islands' models and problems, each value
// counted by how many islands hold it.
//
// A host is served by one island at most (add refuses a second), so the
// servers list says which hosts are held: no count per host (at 50,000
// hosts a map of counts was 1.7 MB). The default server (host "") is
// apart, def: Model.Servers is the list without it, handed out as it is.
type modelSum struct {
	servers editedList[*Server]
	// def is the default server an island serves, nil for none;
	// defChanged says it changed since the last model.
	def          *Server
	defChanged   bool
	backends     counted[Backend, *editedList[Backend]]
	authFiles    flatCounted[AuthFile]
	passthrough  flatCounted[PassthroughHost]
	streamBacks  flatCounted[StreamBackend]
	notServed    flatCounted[NotServed]
	certificates flatCounted[Certificate] // without Hosts
	// certHosts are the hosts of each certificate, sorted, a host once
	// for each island that gives it the certificate: a list, not a map
	// of counts, which at 50,000 certificates of a host each was 11 MB.
	certHosts   map[string][]string
	certList    editedList[Certificate]
	problems    map[Problem]int
	problemList []Problem
	problemsOK  bool
}

func newModelSum() modelSum {
	return modelSum{
		servers:      newEditedList(func(s *Server) string { return s.Host }),
		backends:     newCountedList(func(b Backend) string { return b.Name }),
		authFiles:    newCounted(func(f AuthFile) string { return f.Name }),
		passthrough:  newCounted(func(p PassthroughHost) string { return p.Host }),
		streamBacks:  newCounted(func(b StreamBackend) string { return b.Name }),
		notServed:    newCounted(func(n NotServed) string { return n.Ingress }),
		certificates: newCounted(func(c Certificate) string { return c.Name }),
		certList:     newCertList(),
		certHosts:    map[string][]string{},
		problems:     map[Problem]int{},
	}
}

// add takes m and problems in and names what it took; it says why it
// cannot: m serves what another island serves differently.
func (u *modelSum) add(m *Model, problems []Problem) (held, string) {
	var h held
	for srv := range u.serversOf(m) {
		if _, held := u.server(srv.Host); held {
			return h, fmt.Sprintf("%s is served by two islands", describeHost(srv.Host))
		}
		u.setServer(srv.Host, srv)
		h.hosts = append(h.hosts, srv.Host)
	}
	for b := range m.Backends.All() {
		if !u.backends.add(b.Name, b) {
			return h, fmt.Sprintf("backend %s differs between islands", b.Name)
		}
		h.backends = append(h.backends, b.Name)
	}
	for _, f := range m.AuthFiles {
		if !u.authFiles.add(f.Name, f) {
			return h, fmt.Sprintf("file %s differs between islands", f.Name)
		}
		h.authFiles = append(h.authFiles, f.Name)
	}
	for _, p := range m.Stream.Passthrough {
		if !u.passthrough.add(p.Host, p) {
			return h, fmt.Sprintf("passthrough %s differs between islands", p.Host)
		}
		h.passthrough = append(h.passthrough, p.Host)
	}
	for _, b := range m.Stream.Backends {
		if !u.streamBacks.add(b.Name, b) {
			return h, fmt.Sprintf("stream backend %s differs between islands", b.Name)
		}
		h.streamBackends = append(h.streamBackends, b.Name)
	}
	for _, n := range m.NotServed {
		if !u.notServed.add(n.Ingress, n) {
			return h, fmt.Sprintf("Ingress %s is not served twice", n.Ingress)
		}
		h.notServed = append(h.notServed, n.Ingress)
	}
	for c := range m.Certificates.All() {
		hosts := c.Hosts
		c.Hosts = nil
		if !u.certificates.add(c.Name, c) {
			return h, fmt.Sprintf("certificate %s differs between islands", c.Name)
		}
		for _, host := range hosts {
			sorted := u.certHosts[c.Name]
			i, _ := slices.BinarySearch(sorted, host)
			u.certHosts[c.Name] = slices.Insert(sorted, i, host)
		}
		u.updateCertificate(c.Name)
		h.certificates = append(h.certificates, heldCertificate{c.Name, hosts})
	}
	for _, p := range problems {
		u.problems[p]++
		u.problemsOK = false
	}
	h.problems = problems
	return h, ""
}

// remove takes out what add took in.
func (u *modelSum) remove(h held) {
	for _, host := range h.hosts {
		u.setServer(host, nil)
	}
	u.backends.removeAll(h.backends)
	u.authFiles.removeAll(h.authFiles)
	u.passthrough.removeAll(h.passthrough)
	u.streamBacks.removeAll(h.streamBackends)
	u.notServed.removeAll(h.notServed)
	for _, c := range h.certificates {
		u.certificates.remove(c.name)
		for _, host := range c.hosts {
			sorted := u.certHosts[c.name]
			if i, found := slices.BinarySearch(sorted, host); found {
				u.certHosts[c.name] = slices.Delete(sorted, i, i+1)
			}
		}
		u.updateCertificate(c.name)
	}
	for _, p := range h.problems {
		if u.problems[p]--; u.problems[p] == 0 {
			delete(u.problems, p)
		}
		u.problemsOK = false
	}
}

// serversOf yields m's servers and its default server, when it serves.
func (u *modelSum) serversOf(m *Model) iter.Seq[*Server] {
	return func(yield func(*Server) bool) {
		for srv := range m.Servers.All() {
			if !yield(srv) {
				return
			}
		}
		if len(m.Default.Locations) > 0 {
			yield(&m.Default)
		}
	}
}

// server returns the server of host ("": the default server) the sum
// holds.
func (u *modelSum) server(host string) (*Server, bool) {
	if host == "" {
		return u.def, u.def != nil
	}
	return u.servers.get(host)
}

// setServer makes srv the server of host; nil removes it.
func (u *modelSum) setServer(host string, srv *Server) {
	switch {
	case host == "":
		u.def, u.defChanged = srv, true
	case srv == nil:
		u.servers.delete(host)
	default:
		u.servers.set(host, srv)
	}
}

func (u *modelSum) updateCertificate(name string) {
	c, ok := u.certificates.get(name)
	if !ok {
		delete(u.certHosts, name)
		u.certList.delete(name)
		return
	}
	if hosts := u.certHosts[name]; len(hosts) > 0 {
		c.Hosts = slices.Clone(hosts)
	}
	u.certList.set(name, c)
}

// changedServers are the hosts whose server changed since the last
// model (call it before model).
func (u *modelSum) changedServers() map[string]bool {
	hosts := make(map[string]bool, len(u.servers.pending)+1)
	for host := range u.servers.pending {
		hosts[host] = true
	}
	if u.defChanged {
		hosts[""] = true
	}
	return hosts
}

// model is the union, with the Gateway API's part from globals.
func (u *modelSum) model(globals Model) (Model, []Problem) {
	var m Model
	if u.def != nil {
		m.Default = *u.def
	}
	u.defChanged = false
	m.Servers = u.servers.list()
	m.Backends = u.backends.list_.list()
	m.Certificates = u.certList.list()
	m.AuthFiles = u.authFiles.list_.list()
	m.Stream = Stream{Passthrough: u.passthrough.list_.list(), Services: globals.Stream.Services,
		Backends: u.streamBacks.list_.list(), Gateways: globals.Stream.Gateways}
	m.Listeners, m.GatewayAPI, m.GatewayRoutes, m.BackendTLS = globals.Listeners, globals.GatewayAPI, globals.GatewayRoutes, globals.BackendTLS
	m.NotServed = u.notServed.list_.list()
	if !u.problemsOK {
		u.problemList = nil
		for p := range u.problems {
			u.problemList = append(u.problemList, p)
		}
		slices.SortFunc(u.problemList, func(x, y Problem) int {
			return cmp.Or(strings.Compare(x.Kind, y.Kind), strings.Compare(x.Namespace, y.Namespace),
				strings.Compare(x.Name, y.Name), strings.Compare(x.Reason, y.Reason), strings.Compare(x.Missing, y.Missing),
				compareBool(x.Refused, y.Refused))
		})
		u.problemsOK = true
	}
	return m, slices.Clone(u.problemList)
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// counted holds values by key with how many islands hold each; the value
// of a key is the same in each. L is the list that holds them, which the
// model hands out: an editedList (a List, Model.Backends) or a sortedList
// (a flat slice, flatCounted); both with dropSame.
type counted[T any, L keyedList[T]] struct {
	count map[string]int
	list_ L
}

// keyedList is what counted needs of its list.
type keyedList[T any] interface {
	get(key string) (T, bool)
	set(key string, v T)
	delete(key string)
}

// flatCounted is a counted list handed out flat.
type flatCounted[T any] = counted[T, *sortedList[T]]

func newCounted[T any](key func(T) string) flatCounted[T] {
	list := newSortedList(key)
	list.dropSame = true
	return flatCounted[T]{count: map[string]int{}, list_: &list}
}

// newCountedList is newCounted for a list handed out as a List.
func newCountedList[T any](key func(T) string) counted[T, *editedList[T]] {
	list := newEditedList(key)
	list.dropSame = true
	return counted[T, *editedList[T]]{count: map[string]int{}, list_: &list}
}

// add counts v under key and says whether it is the value key holds.
func (c *counted[T, L]) add(key string, v T) bool {
	if c.count[key] > 0 {
		held, _ := c.list_.get(key)
		if !reflect.DeepEqual(held, v) {
			return false
		}
	} else {
		c.list_.set(key, v)
	}
	c.count[key]++
	return true
}

func (c *counted[T, L]) remove(key string) {
	if c.count[key]--; c.count[key] <= 0 {
		delete(c.count, key)
		c.list_.delete(key)
	}
}

func (c *counted[T, L]) removeAll(keys []string) {
	for _, key := range keys {
		c.remove(key)
	}
}

func (c *counted[T, L]) get(key string) (T, bool) { return c.list_.get(key) }

// sortedList is editedList's kind for a list handed out flat (the
// counted lists: Model.AuthFiles, Stream's, …): the changes wait in
// pending until list merges them in, in one pass, into a new slice.
type sortedList[T any] struct {
	pendingEdits[T]
	values []T
	// dropSame says a change that puts back a value equal to the one
	// held (reflect.DeepEqual, as counted.add compares) changes nothing:
	// an island built again for a Service whose endpoints the fast path
	// already patched into the list removes and adds its backend, and a
	// new list of 50,000 backends for it would cost a copy here and a
	// compare of each with what Lua holds in the plan.
	dropSame bool
}

func newSortedList[T any](key func(T) string) sortedList[T] {
	return sortedList[T]{pendingEdits: pendingEdits[T]{key: key}}
}

func (l *sortedList[T]) find(key string) (int, bool) {
	return slices.BinarySearchFunc(l.values, key, l.cmp)
}

func (l *sortedList[T]) get(key string) (T, bool) {
	if v, held, changed := l.pendingGet(key); changed {
		return v, held
	}
	return l.held(key)
}

// held is the value of key in the last list, before pending changes.
func (l *sortedList[T]) held(key string) (T, bool) {
	if i, ok := l.find(key); ok {
		return l.values[i], true
	}
	var zero T
	return zero, false
}

// list returns the values in key order; nil for none. The slice is new
// whenever something changed, so that one handed out stays as it was.
func (l *sortedList[T]) list() []T {
	if l.dropSame {
		l.dropIfSame(l.held)
	}
	if len(l.pending) > 0 {
		edits := l.take()
		values := make([]T, 0, len(l.values)+len(edits))
		i := 0
		for _, e := range edits {
			j, found := slices.BinarySearchFunc(l.values[i:], e.Key, l.cmp)
			values = append(values, l.values[i:i+j]...)
			i += j
			if found {
				i++ // replaced or deleted
			}
			if !e.Remove {
				values = append(values, e.Value)
			}
		}
		l.values = append(values, l.values[i:]...)
	}
	if len(l.values) == 0 {
		return nil
	}
	return l.values
}
