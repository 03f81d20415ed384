package status

// The Gateway API status: what model.Build found about our GatewayClasses,
// Gateways, their ListenerSets and the routes (model.GatewayAPIStatus), written by the leader
// on the Writer's goroutine, in the same passes as the Ingress status.
//
// Programmed is judged here, not in the model: the model says what would
// be programmed, and ServedGatewayAPI turns a Programmed=True into
// Programmed=False (Pending) until the syncer reports a sync that carried
// it confirmed by nginx (the config hash it runs and the routes push), at
// the object's current generation. The same function serves the writer and
// inspect, so both say the same thing.
//
// A write replaces the whole status of a GatewayClass, Gateway or
// ListenerSet (the class's controller owns it), but only our entries of an HTTPRoute's
// status.parents: those of other controllers stay as they are. Each
// condition keeps its lastTransitionTime while its status is unchanged,
// and an object is written only when what it holds differs from what is
// wanted.
//
// A pass visits every GatewayClass, Gateway and ListenerSet (a few), but
// only the routes whose wanted status came, changed or went since a pass
// last visited them (pending), so that a new route among 50,000 costs one
// route's check. Which changed is told by pointer: the model never changes
// a RouteStatus it handed out, and builds a new one whenever it builds the
// route again, which it does whenever the route's object changes (the
// source reports every change of it, its status included). So a status a
// user or another controller overwrote is visited, found to differ and
// written again at the sync that follows the overwrite; a route a pass
// failed to write stays pending, and a new term visits every route.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
	"unicode/utf8"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/model"
)

// GatewayAPIOptions configures the Gateway API status a Writer writes
// with its client (UpdateStatus on gatewayclasses/status, gateways/status,
// listenersets/status and the routes' status; Get on the objects after a
// conflict, or without a Lookup).
type GatewayAPIOptions struct {
	// ControllerName is the controllerName written into each of our
	// entries of an HTTPRoute's status.parents, and how our entries are
	// told from other controllers' (default model.GatewayControllerName).
	ControllerName string
	// Lookup returns the cached objects (default: nil, and each object is
	// read from the API server with a GET when what is wanted of it
	// changed). With a cache, a pass that changes nothing sends no request.
	Lookup GatewayAPILookup
	// Services, when set, has the Writer keep the Gateway Services of
	// the status given (gatewayservices.go), compared with these caches
	// (default: nil, none kept; Create, Update and Delete on services and
	// endpointslices).
	Services GatewayServiceLookup
}

// GatewayAPILookup returns cached Gateway API objects, nil for one that
// does not exist.
type GatewayAPILookup interface {
	GatewayClass(name string) *gatewayv1.GatewayClass
	Gateway(namespace, name string) *gatewayv1.Gateway
	HTTPRoute(namespace, name string) *gatewayv1.HTTPRoute
	GRPCRoute(namespace, name string) *gatewayv1.GRPCRoute
	TLSRoute(namespace, name string) *gatewayv1.TLSRoute
	ListenerSet(namespace, name string) *gatewayv1.ListenerSet
	BackendTLSPolicy(namespace, name string) *gatewayv1.BackendTLSPolicy
}

// Programmed condition of a Gateway or listener not yet confirmed served.
const (
	ReasonPending  = string(gatewayv1.GatewayReasonPending) // the same word for listeners
	pendingMessage = "waiting for nginx to confirm the config and routes that serve it"
)

// maxParents is the most entries an HTTPRoute's status.parents may hold
// (the CRD's maxItems).
const maxParents = 32

// maxMessage is the longest condition message the CRD accepts, in bytes.
const maxMessage = 32768

// ServedGatewayAPI returns wanted with each Gateway's and listener's
// Programmed=True kept only where applied (the status of the last sync
// nginx confirmed) had it True at the same generation of the Gateway;
// elsewhere it becomes Programmed=False, reason Pending. wanted is not
// changed.
func ServedGatewayAPI(wanted, applied model.GatewayAPIStatus) model.GatewayAPIStatus {
	confirmed := map[string]bool{} // programmedKey of each confirmed Gateway, ListenerSet and listener
	for kind, objects := range map[string][]model.GatewayStatus{"Gateway": applied.Gateways, "ListenerSet": applied.ListenerSets} {
		for _, g := range objects {
			if programmed(g.Conditions) {
				confirmed[programmedKey(kind, g, "")] = true
			}
			for _, l := range g.Listeners {
				if programmed(l.Conditions) {
					confirmed[programmedKey(kind, g, l.Name)] = true
				}
			}
		}
	}
	out := wanted
	out.Gateways = pendingUnlessConfirmed("Gateway", wanted.Gateways, confirmed)
	out.ListenerSets = pendingUnlessConfirmed("ListenerSet", wanted.ListenerSets, confirmed)
	return out
}

// pendingUnlessConfirmed returns a copy of objects (Gateways, or
// ListenerSets: kind) whose Programmed=True conditions not in confirmed
// are Pending.
func pendingUnlessConfirmed(kind string, objects []model.GatewayStatus, confirmed map[string]bool) []model.GatewayStatus {
	out := slices.Clone(objects)
	for i := range out {
		g := &out[i]
		g.Conditions = pendingUnless(g.Conditions, confirmed[programmedKey(kind, *g, "")])
		g.Listeners = slices.Clone(g.Listeners)
		for j := range g.Listeners {
			l := &g.Listeners[j]
			l.Conditions = pendingUnless(l.Conditions, confirmed[programmedKey(kind, *g, l.Name)])
		}
	}
	return out
}

// programmedKey names the Programmed condition of a Gateway's or
// ListenerSet's (kind) status g (listener "") or of one of its listeners,
// at g's generation.
func programmedKey(kind string, g model.GatewayStatus, listener string) string {
	return fmt.Sprintf("%s %s/%s@%d/%s", kind, g.Namespace, g.Name, g.Generation, listener)
}

func programmed(conds []model.Condition) bool {
	for _, c := range conds {
		if c.Type == string(gatewayv1.GatewayConditionProgrammed) {
			return c.Status
		}
	}
	return false
}

// pendingUnless returns conds with a Programmed=True made Pending unless
// confirmed (a copy when it changes one).
func pendingUnless(conds []model.Condition, confirmed bool) []model.Condition {
	if confirmed || !programmed(conds) {
		return conds
	}
	conds = slices.Clone(conds)
	for i := range conds {
		if conds[i].Type == string(gatewayv1.GatewayConditionProgrammed) {
			conds[i] = model.Condition{Type: conds[i].Type, Status: false, Reason: ReasonPending, Message: pendingMessage}
		}
	}
	return conds
}

// objectKey names one Gateway API object.
type objectKey struct {
	Kind, Namespace, Name string
}

func (k objectKey) String() string {
	if k.Namespace == "" {
		return k.Kind + " " + k.Name
	}
	return k.Kind + " " + k.Namespace + "/" + k.Name
}

// gatewayWriter is the Gateway API part of a Writer.
type gatewayWriter struct {
	client     kubeclient.Interface
	controller string
	lookup     GatewayAPILookup
	timeout    time.Duration
	now        func() time.Time
	// services keeps the Gateway Services; nil: none kept.
	services *gatewayServices

	// Guarded by the Writer's mu.
	wanted model.GatewayAPIStatus // from the last update, Programmed judged
	// wantedRoutes are the routes of wanted by key (nil until the first
	// update); routesSorted says wanted.Routes is sorted by key, each
	// once (diffRoutes).
	wantedRoutes map[objectKey]*model.RouteStatus
	routesSorted bool
	// knownRoutes are the routes ever given parents of ours, which may
	// still carry them: a route that leaves wanted loses its entries.
	knownRoutes map[objectKey]bool
	// pending are the routes the next pass visits (see the package doc);
	// allRoutes has it visit every known route.
	pending   map[objectKey]bool
	allRoutes bool

	// Owned by the loop goroutine: what each object was last given or
	// seen with in this term (term: its context), as another leader may
	// have written since the last: the routes' (syncedByRoute) in
	// routesWritten, the others' in written.
	written       map[objectKey]gatewayRecord
	routesWritten map[objectKey]gatewayRecord
	term          context.Context
}

// gatewayRecord is what was wanted of an object when it was last written
// or seen in place (the model's entry; nil for a route cleared).
type gatewayRecord struct {
	want any
	// replaced is the resourceVersion our write replaced: while a cache
	// still shows it, the cache is behind, not the status wrong.
	replaced string
}

func newGatewayWriter(client kubeclient.Interface, opts *GatewayAPIOptions, timeout time.Duration) *gatewayWriter {
	g := &gatewayWriter{
		client:        client,
		controller:    cmp.Or(opts.ControllerName, model.GatewayControllerName),
		lookup:        opts.Lookup,
		timeout:       timeout,
		now:           time.Now,
		knownRoutes:   map[objectKey]bool{},
		pending:       map[objectKey]bool{},
		written:       map[objectKey]gatewayRecord{},
		routesWritten: map[objectKey]gatewayRecord{},
		// wantedRoutes stays nil until the first update
	}
	if opts.Services != nil {
		g.services = &gatewayServices{lookup: opts.Services, known: map[types.UID]bool{}, clashes: map[objectKey]bool{}}
	}
	return g
}

// UpdateGatewayAPI records the Gateway API status of the last sync
// (wanted: its model's) and of the last sync nginx confirmed (applied). It
// never blocks: the leader writes on its own goroutine, and calls in quick
// succession are merged. It does nothing on a Writer without
// Options.GatewayAPI.
func (w *Writer) UpdateGatewayAPI(wanted, applied model.GatewayAPIStatus) {
	if w.gateway == nil {
		return
	}
	served := ServedGatewayAPI(wanted, applied)
	w.mu.Lock()
	w.gateway.diffRoutes(served.Routes)
	w.gateway.wanted = served
	if w.gateway.services != nil {
		w.gateway.services.noteWanted(served.Services)
	}
	w.mu.Unlock()
	w.notify()
}

// diffRoutes brings wantedRoutes to routes, the next wanted ones, and
// marks pending those that came, changed (another pointer) or went. When
// both lists are sorted by key (the model's are) they are compared side
// by side (model.CompareLists), skipping the chunks both hold: a model
// one route apart from the last shares all but a chunk of its list, so a
// new route costs that chunk, not a look at each of 50,000 routes; else
// they are compared by key. The caller holds the Writer's mu.
func (g *gatewayWriter) diffRoutes(routes model.List[*model.RouteStatus]) {
	set := func(r *model.RouteStatus) {
		key := routeKey(r.Kind, r.Namespace, r.Name)
		g.wantedRoutes[key], g.knownRoutes[key], g.pending[key] = r, true, true
	}
	gone := func(r *model.RouteStatus) {
		key := routeKey(r.Kind, r.Namespace, r.Name)
		delete(g.wantedRoutes, key)
		g.pending[key] = true
	}
	if g.wantedRoutes != nil && g.routesSorted {
		if walkRoutes(g.wanted.Routes, routes, set, gone) {
			return
		}
		// Not sorted: nothing was changed yet (walkRoutes checks first).
	}
	if g.wantedRoutes == nil {
		g.wantedRoutes = make(map[objectKey]*model.RouteStatus, routes.Len())
	}
	g.routesSorted = sortedRoutes(routes)
	present := make(map[objectKey]bool, routes.Len())
	for r := range routes.All() {
		key := routeKey(r.Kind, r.Namespace, r.Name)
		present[key] = true
		if g.wantedRoutes[key] != r {
			set(r)
		}
	}
	for key, r := range g.wantedRoutes {
		if !present[key] {
			gone(r)
		}
	}
}

// walkRoutes calls set for each route of next not in last (by pointer)
// and gone for each route of last whose key left, comparing both lists
// side by side (model.CompareLists: the chunks both hold are skipped);
// last must be sorted by compareRouteStatus, each key once. It says
// false, having called neither, when next is not.
func walkRoutes(last, next model.List[*model.RouteStatus], set, gone func(*model.RouteStatus)) bool {
	if !sortedRoutes(next) {
		return false
	}
	model.CompareLists(last, next, compareRouteStatus, func(a, b *model.RouteStatus, inLast, inNext bool) {
		switch {
		case !inNext:
			gone(a)
		case !inLast || a != b:
			set(b)
		}
	})
	return true
}

// sortedRoutes says whether routes are sorted by compareRouteStatus,
// each key once (the model's are: it sorts them).
func sortedRoutes(routes model.List[*model.RouteStatus]) bool {
	var last *model.RouteStatus
	for r := range routes.All() {
		if last != nil && compareRouteStatus(last, r) >= 0 {
			return false
		}
		last = r
	}
	return true
}

// compareRouteStatus orders route statuses as the model sorts them.
func compareRouteStatus(a, b *model.RouteStatus) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
}

// syncedByRoute are the kinds syncRoute writes.
var syncedByRoute = map[string]bool{"HTTPRoute": true, "GRPCRoute": true, "TLSRoute": true, "BackendTLSPolicy": true}

// records are the records of key's kind: routesWritten or written.
func (g *gatewayWriter) records(key objectKey) map[objectKey]gatewayRecord {
	if syncedByRoute[key.Kind] {
		return g.routesWritten
	}
	return g.written
}

// routeKey is the key of a route of kind (model.RouteStatus.Kind:
// HTTPRoute, GRPCRoute or TLSRoute).
func routeKey(kind, namespace, name string) objectKey {
	if kind == "" {
		kind = "HTTPRoute"
	}
	return objectKey{Kind: kind, Namespace: namespace, Name: name}
}

// pass writes the status of every GatewayClass, Gateway and ListenerSet
// wanted, and of the pending routes: ours, or our parents taken out of
// those that left wanted (every known route in a new term).
func (g *gatewayWriter) pass(ctx context.Context, w *Writer) error {
	w.mu.Lock()
	if g.term != ctx {
		g.term, g.written, g.routesWritten = ctx, map[objectKey]gatewayRecord{}, map[objectKey]gatewayRecord{}
		g.allRoutes = true
	}
	wanted := g.wanted
	visit := g.pending
	if g.allRoutes {
		visit = maps.Clone(g.knownRoutes)
	}
	g.pending, g.allRoutes = map[objectKey]bool{}, false
	routes := make([]objectKey, 0, len(visit))
	for key := range visit {
		routes = append(routes, key)
	}
	slices.SortFunc(routes, func(a, b objectKey) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	wants := make([]*model.RouteStatus, len(routes))
	for i, key := range routes {
		wants[i] = g.wantedRoutes[key]
	}
	w.mu.Unlock()

	var errs []error
	wrote := 0
	visited := make(map[objectKey]bool, len(wanted.Classes)+len(wanted.Gateways))
	note := func(key objectKey, ok bool, err error) {
		visited[key] = true
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		if ok {
			wrote++
		}
	}
	for _, c := range wanted.Classes {
		key := objectKey{Kind: "GatewayClass", Name: c.Name}
		ok, err := g.syncClass(ctx, key, c)
		note(key, ok, err)
	}
	for _, gw := range wanted.Gateways {
		key := objectKey{Kind: "Gateway", Namespace: gw.Namespace, Name: gw.Name}
		ok, err := g.syncGateway(ctx, key, gw)
		note(key, ok, err)
	}
	for _, s := range wanted.ListenerSets {
		key := objectKey{Kind: "ListenerSet", Namespace: s.Namespace, Name: s.Name}
		ok, err := g.syncListenerSet(ctx, key, s)
		note(key, ok, err)
	}
	if g.services != nil {
		g.syncServices(ctx, w, wanted.Services, note)
	}
	var failed []objectKey
	for i, key := range routes {
		ok, err := g.syncRoute(ctx, key, wants[i])
		note(key, ok, err)
		if err != nil {
			failed = append(failed, key)
			continue
		}
		if wants[i] != nil {
			continue
		}
		// Our parents are out of a route that left wanted.
		delete(g.routesWritten, key)
		w.mu.Lock()
		if g.wantedRoutes[key] == nil { // not wanted again meanwhile
			delete(g.knownRoutes, key)
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	for _, key := range failed {
		g.pending[key] = true
	}
	w.mu.Unlock()
	// Forget the objects that left: one that comes back is read again.
	for key := range g.written {
		if !visited[key] {
			delete(g.written, key)
		}
	}
	if wrote > 0 {
		w.logger.Info("wrote Gateway API status", "objects", wrote)
	}
	return errors.Join(errs...)
}

// statusSync is what syncObject needs of one kind of object.
type statusSync[T metav1.Object] struct {
	// get returns the object from the cache, or from the API server when
	// fresh or without a cache; its zero (nil) when it does not exist.
	get func(ctx context.Context, fresh bool) (T, error)
	// build returns a copy of obj holding the status wanted, and whether
	// that status differs from obj's.
	build  func(obj T) (next T, differs bool)
	update func(ctx context.Context, next T) error
}

// syncObject brings one object's status to want (the model's entry) and
// reports whether it wrote. Without a cache, an object whose wanted status
// has not changed since it was last written or seen in place is not read
// again.
func syncObject[T metav1.Object](ctx context.Context, g *gatewayWriter, key objectKey, want any, s statusSync[T]) (bool, error) {
	records := g.records(key)
	prev, known := records[key]
	known = known && reflect.DeepEqual(prev.want, want)
	if known && g.lookup == nil {
		return false, nil
	}
	obj, err := s.get(ctx, false)
	if err != nil || isNil(obj) {
		return false, err // a missing object has no status to write
	}
	if known && prev.replaced != "" && obj.GetResourceVersion() == prev.replaced {
		return false, nil // the cache has not seen our write yet
	}
	replaced := ""
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if isNil(obj) {
			return nil
		}
		next, differs := s.build(obj)
		if !differs {
			return nil
		}
		rctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		err := s.update(rctx, next)
		switch {
		case err == nil:
			replaced = obj.GetResourceVersion()
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			fresh, gerr := s.get(ctx, true)
			if gerr != nil {
				return gerr
			}
			obj = fresh
		}
		return err
	})
	if err != nil {
		return false, err
	}
	records[key] = gatewayRecord{want: want, replaced: replaced}
	return replaced != "", nil
}

func isNil[T metav1.Object](obj T) bool {
	return reflect.ValueOf(obj).IsNil()
}

// getter returns a statusSync.get for one object: from lookup unless
// fresh, else with get from the API server.
func getter[T metav1.Object](g *gatewayWriter, cached func() T, get func(ctx context.Context) (T, error)) func(context.Context, bool) (T, error) {
	return func(ctx context.Context, fresh bool) (T, error) {
		var zero T
		if g.lookup != nil && !fresh {
			return cached(), nil
		}
		rctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		obj, err := get(rctx)
		if apierrors.IsNotFound(err) {
			return zero, nil
		}
		if err != nil {
			return zero, fmt.Errorf("reading: %w", err)
		}
		return obj, nil
	}
}

var updateOptions = metav1.UpdateOptions{FieldManager: FieldManager}

func (g *gatewayWriter) syncClass(ctx context.Context, key objectKey, want model.GatewayClassStatus) (bool, error) {
	return syncObject(ctx, g, key, want, wholeStatus(g, g.client.GatewayClasses(), key.Name,
		func() *gatewayv1.GatewayClass { return g.lookup.GatewayClass(key.Name) },
		func(obj *gatewayv1.GatewayClass) (*gatewayv1.GatewayClass, bool) {
			next := obj.DeepCopy()
			next.Status.Conditions = g.conditions(want.Conditions, obj.Generation, obj.Status.Conditions)
			next.Status.SupportedFeatures = supportedFeatures(want.SupportedFeatures)
			return next, !apiequality.Semantic.DeepEqual(obj.Status, next.Status)
		}))
}

func (g *gatewayWriter) syncGateway(ctx context.Context, key objectKey, want model.GatewayStatus) (bool, error) {
	return syncObject(ctx, g, key, want, wholeStatus(g, g.client.Gateways(key.Namespace), key.Name,
		func() *gatewayv1.Gateway { return g.lookup.Gateway(key.Namespace, key.Name) },
		func(obj *gatewayv1.Gateway) (*gatewayv1.Gateway, bool) {
			next := obj.DeepCopy()
			next.Status.Addresses = gatewayAddresses(want.Addresses)
			next.Status.Conditions = g.conditions(want.Conditions, obj.Generation, obj.Status.Conditions)
			next.Status.Listeners = listenerStatuses(g, want.Listeners, obj.Generation, obj.Status.Listeners)
			next.Status.AttachedListenerSets = want.AttachedListenerSets
			return next, !apiequality.Semantic.DeepEqual(obj.Status, next.Status)
		}))
}

// syncListenerSet writes a ListenerSet's status whole, as syncGateway a
// Gateway's: the parent Gateway's controller owns it.
func (g *gatewayWriter) syncListenerSet(ctx context.Context, key objectKey, want model.GatewayStatus) (bool, error) {
	return syncObject(ctx, g, key, want, wholeStatus(g, g.client.ListenerSets(key.Namespace), key.Name,
		func() *gatewayv1.ListenerSet { return g.lookup.ListenerSet(key.Namespace, key.Name) },
		func(obj *gatewayv1.ListenerSet) (*gatewayv1.ListenerSet, bool) {
			next := obj.DeepCopy()
			next.Status.Conditions = g.conditions(want.Conditions, obj.Generation, obj.Status.Conditions)
			next.Status.Listeners = listenerStatuses(g, want.Listeners, obj.Generation, obj.Status.Listeners)
			return next, !apiequality.Semantic.DeepEqual(obj.Status, next.Status)
		}))
}

// wholeStatus is the statusSync of an object whose status is ours whole
// (a GatewayClass, Gateway or ListenerSet) named name, read through cached
// (the Lookup) or api, built by build and written with api's UpdateStatus.
func wholeStatus[T interface {
	metav1.Object
	runtime.Object
}, L runtime.Object](g *gatewayWriter, api kubeclient.StatusResource[T, L], name string,
	cached func() T, build func(T) (T, bool)) statusSync[T] {
	return statusSync[T]{
		get: getter(g, cached, func(ctx context.Context) (T, error) {
			return api.Get(ctx, name, metav1.GetOptions{})
		}),
		build: build,
		update: func(ctx context.Context, next T) error {
			_, err := api.UpdateStatus(ctx, next, updateOptions)
			return err
		},
	}
}

// listenerStatuses returns the API status of the listeners of a Gateway
// (gatewayv1.ListenerStatus) or a ListenerSet (gatewayv1.ListenerEntryStatus,
// the same fields), each condition keeping its time from the listener of
// the same name in held.
func listenerStatuses[T gatewayv1.ListenerStatus | gatewayv1.ListenerEntryStatus](g *gatewayWriter, want []model.ListenerStatus, generation int64, held []T) []T {
	var out []T
	for _, l := range want {
		var conditions []metav1.Condition
		for _, h := range held {
			if h := gatewayv1.ListenerStatus(h); string(h.Name) == l.Name {
				conditions = h.Conditions
			}
		}
		out = append(out, T(gatewayv1.ListenerStatus{
			Name:           gatewayv1.SectionName(l.Name),
			SupportedKinds: routeKinds(l.SupportedKinds),
			AttachedRoutes: l.AttachedRoutes,
			Conditions:     g.conditions(l.Conditions, generation, conditions),
		}))
	}
	return out
}

// syncRoute sets our entries of the route's status.parents to want's, or
// removes them when want is nil; other controllers' entries stay as they
// are, in their order, before ours.
func (g *gatewayWriter) syncRoute(ctx context.Context, key objectKey, want *model.RouteStatus) (bool, error) {
	switch key.Kind {
	case "GRPCRoute":
		return syncRouteOf(ctx, g, key, want, g.client.GRPCRoutes(key.Namespace),
			func() *gatewayv1.GRPCRoute { return g.lookup.GRPCRoute(key.Namespace, key.Name) },
			(*gatewayv1.GRPCRoute).DeepCopy, func(r *gatewayv1.GRPCRoute) *gatewayv1.RouteStatus { return &r.Status.RouteStatus })
	case "TLSRoute":
		return syncRouteOf(ctx, g, key, want, g.client.TLSRoutes(key.Namespace),
			func() *gatewayv1.TLSRoute { return g.lookup.TLSRoute(key.Namespace, key.Name) },
			(*gatewayv1.TLSRoute).DeepCopy, func(r *gatewayv1.TLSRoute) *gatewayv1.RouteStatus { return &r.Status.RouteStatus })
	case "BackendTLSPolicy":
		return g.syncBackendTLSPolicy(ctx, key, want)
	}
	return syncRouteOf(ctx, g, key, want, g.client.HTTPRoutes(key.Namespace),
		func() *gatewayv1.HTTPRoute { return g.lookup.HTTPRoute(key.Namespace, key.Name) },
		(*gatewayv1.HTTPRoute).DeepCopy, func(r *gatewayv1.HTTPRoute) *gatewayv1.RouteStatus { return &r.Status.RouteStatus })
}

// syncRouteOf is syncRoute for one kind of route: cached reads it from
// the Lookup, status points into its status.
func syncRouteOf[T interface {
	metav1.Object
	runtime.Object
}, L runtime.Object](ctx context.Context, g *gatewayWriter, key objectKey, want *model.RouteStatus,
	api kubeclient.StatusResource[T, L], cached func() T, deepCopy func(T) T, status func(T) *gatewayv1.RouteStatus) (bool, error) {
	var wantEntry any // compared with the last written: the value, not the pointer
	if want != nil {
		wantEntry = *want
	}
	return syncObject(ctx, g, key, wantEntry, statusSync[T]{
		get: getter(g, cached, func(ctx context.Context) (T, error) {
			return api.Get(ctx, key.Name, metav1.GetOptions{})
		}),
		build: func(obj T) (T, bool) {
			next := deepCopy(obj)
			status(next).Parents = g.routeParents(obj.GetNamespace(), obj.GetGeneration(), status(obj).Parents, want)
			return next, !apiequality.Semantic.DeepEqual(status(obj), status(next))
		},
		update: func(ctx context.Context, next T) error {
			_, err := api.UpdateStatus(ctx, next, updateOptions)
			return err
		},
	})
}

// syncBackendTLSPolicy is syncRoute for a BackendTLSPolicy (the model
// gives its ancestors as a route's parents): our entries of
// status.ancestors, one per Gateway, on the backendtlspolicies resource.
func (g *gatewayWriter) syncBackendTLSPolicy(ctx context.Context, key objectKey, want *model.RouteStatus) (bool, error) {
	var wantEntry any // compared with the last written: the value, not the pointer
	if want != nil {
		wantEntry = *want
	}
	api := g.client.BackendTLSPolicies(key.Namespace)
	return syncObject(ctx, g, key, wantEntry, statusSync[*gatewayv1.BackendTLSPolicy]{
		get: getter(g, func() *gatewayv1.BackendTLSPolicy { return g.lookup.BackendTLSPolicy(key.Namespace, key.Name) },
			func(ctx context.Context) (*gatewayv1.BackendTLSPolicy, error) {
				return api.Get(ctx, key.Name, metav1.GetOptions{})
			}),
		build: func(obj *gatewayv1.BackendTLSPolicy) (*gatewayv1.BackendTLSPolicy, bool) {
			next := obj.DeepCopy()
			current := make([]gatewayv1.RouteParentStatus, len(obj.Status.Ancestors))
			for i, a := range obj.Status.Ancestors {
				current[i] = gatewayv1.RouteParentStatus{ParentRef: a.AncestorRef, ControllerName: a.ControllerName, Conditions: a.Conditions}
			}
			parents := g.routeParents(obj.Namespace, obj.Generation, current, want)
			next.Status.Ancestors = make([]gatewayv1.PolicyAncestorStatus, 0, len(parents))
			for _, p := range parents[:min(len(parents), maxPolicyAncestors)] {
				next.Status.Ancestors = append(next.Status.Ancestors, gatewayv1.PolicyAncestorStatus{AncestorRef: p.ParentRef, ControllerName: p.ControllerName, Conditions: p.Conditions})
			}
			return next, !apiequality.Semantic.DeepEqual(obj.Status, next.Status)
		},
		update: func(ctx context.Context, next *gatewayv1.BackendTLSPolicy) error {
			_, err := api.UpdateStatus(ctx, next, updateOptions)
			return err
		},
	})
}

// maxPolicyAncestors is the most entries a policy's status.ancestors may
// hold (the CRD's maxItems).
const maxPolicyAncestors = 16

// routeParents returns the status.parents route should hold: the entries
// of other controllers as they are, then ours from want (none when nil),
// as many as fit.
func (g *gatewayWriter) routeParents(namespace string, generation int64, current []gatewayv1.RouteParentStatus, want *model.RouteStatus) []gatewayv1.RouteParentStatus {
	var parents, ours []gatewayv1.RouteParentStatus
	for _, p := range current {
		if string(p.ControllerName) == g.controller {
			ours = append(ours, p)
		} else {
			parents = append(parents, p)
		}
	}
	if want == nil {
		return parents
	}
	for _, p := range want.Parents {
		if len(parents) >= maxParents {
			break
		}
		ref := parentRef(p)
		var held []metav1.Condition
		if i := slices.IndexFunc(ours, func(s gatewayv1.RouteParentStatus) bool { return sameParent(s.ParentRef, ref, namespace) }); i >= 0 {
			held = ours[i].Conditions
		}
		parents = append(parents, gatewayv1.RouteParentStatus{
			ParentRef:      ref,
			ControllerName: gatewayv1.GatewayController(g.controller),
			Conditions:     g.conditions(p.Conditions, generation, held),
		})
	}
	return parents
}

// parentRef is the status parentRef of p: a Gateway or a ListenerSet,
// with the namespace filled in, and sectionName and port as written.
func parentRef(p model.RouteParentStatus) gatewayv1.ParentReference {
	group := gatewayv1.Group(gatewayv1.GroupName)
	kind := gatewayv1.Kind(cmp.Or(p.Kind, "Gateway"))
	namespace := gatewayv1.Namespace(p.Namespace)
	ref := gatewayv1.ParentReference{Group: &group, Kind: &kind, Namespace: &namespace, Name: gatewayv1.ObjectName(p.Name)}
	if p.SectionName != "" {
		section := gatewayv1.SectionName(p.SectionName)
		ref.SectionName = &section
	}
	if p.Port != 0 {
		port := gatewayv1.PortNumber(p.Port)
		ref.Port = &port
	}
	return ref
}

// sameParent reports whether a and b name the same parent of a route in
// namespace, with the API's defaults filled in.
func sameParent(a, b gatewayv1.ParentReference, namespace string) bool {
	norm := func(r gatewayv1.ParentReference) [6]string {
		port := ""
		if r.Port != nil {
			port = fmt.Sprint(*r.Port)
		}
		return [6]string{
			string(deref(r.Group, gatewayv1.GroupName)), string(deref(r.Kind, "Gateway")),
			string(deref(r.Namespace, gatewayv1.Namespace(namespace))), string(r.Name),
			string(deref(r.SectionName, "")), port,
		}
	}
	return norm(a) == norm(b)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// conditions returns the API conditions of want at generation, each
// keeping the lastTransitionTime of the one of its type in held while its
// status is the same.
func (g *gatewayWriter) conditions(want []model.Condition, generation int64, held []metav1.Condition) []metav1.Condition {
	now := metav1.NewTime(g.now()).Rfc3339Copy()
	out := make([]metav1.Condition, 0, len(want))
	for _, c := range want {
		status := metav1.ConditionFalse
		if c.Status {
			status = metav1.ConditionTrue
		}
		since := now
		if old := meta.FindStatusCondition(held, c.Type); old != nil && old.Status == status {
			since = old.LastTransitionTime
		}
		out = append(out, metav1.Condition{
			Type:               c.Type,
			Status:             status,
			ObservedGeneration: generation,
			LastTransitionTime: since,
			Reason:             c.Reason,
			Message:            truncateMessage(c.Message),
		})
	}
	return out
}

// truncateMessage cuts a message to what the API accepts, on a rune
// boundary.
func truncateMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	s = s[:maxMessage]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// supportedFeatures returns names sorted and without duplicates, as the
// GatewayClass's status.supportedFeatures must be.
func supportedFeatures(names []string) []gatewayv1.SupportedFeature {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	var out []gatewayv1.SupportedFeature
	for _, n := range names {
		if n != "" {
			out = append(out, gatewayv1.SupportedFeature{Name: gatewayv1.FeatureName(n)})
		}
	}
	return out
}

func gatewayAddresses(addrs []string) []gatewayv1.GatewayStatusAddress {
	var out []gatewayv1.GatewayStatusAddress
	for _, a := range addrs {
		typ := gatewayv1.IPAddressType
		out = append(out, gatewayv1.GatewayStatusAddress{Type: &typ, Value: a})
	}
	return out
}

func routeKinds(kinds []string) []gatewayv1.RouteGroupKind {
	out := []gatewayv1.RouteGroupKind{} // the field is required, empty when none is supported
	for _, k := range kinds {
		group := gatewayv1.Group(gatewayv1.GroupName)
		out = append(out, gatewayv1.RouteGroupKind{Group: &group, Kind: gatewayv1.Kind(k)})
	}
	return out
}
