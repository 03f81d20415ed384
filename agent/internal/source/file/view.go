package file

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// view is what Snapshot serves. It is never changed after publish, so
// readers need the lock only to fetch the pointer. Its lists are sorted
// by namespace and name (source.SortedList), one per kind, and a publish
// that patches the view makes new lists of the kinds it changes only,
// each from the last (source.Patched, as the kube source does): a
// model.List that shares every chunk of the last no edit falls in, so a
// new Ingress beside 50,000 costs a chunk, not a copy of the list (400
// KB). An object is found by binary search in its kind's list (lookup),
// not in a map beside them: a map of 150,000 keys held 19 MB at 50,000
// Ingresses.
type view struct {
	ingresses      model.List[*networkingv1.Ingress]
	ingressClasses model.List[*networkingv1.IngressClass]
	services       model.List[*model.Service]
	endpointSlices model.List[*discoveryv1.EndpointSlice]
	secrets        model.List[*corev1.Secret]
	configMaps     model.List[*corev1.ConfigMap]
	// The Gateway API's kinds, and Namespaces for its selectors.
	gatewayClasses     model.List[*gatewayv1.GatewayClass]
	gateways           model.List[*gatewayv1.Gateway]
	httpRoutes         model.List[*gatewayv1.HTTPRoute]
	grpcRoutes         model.List[*gatewayv1.GRPCRoute]
	tlsRoutes          model.List[*gatewayv1.TLSRoute]
	referenceGrants    model.List[*gatewayv1.ReferenceGrant]
	listenerSets       model.List[*gatewayv1.ListenerSet]
	backendTLSPolicies model.List[*gatewayv1.BackendTLSPolicy]
	namespaces         model.List[*corev1.Namespace]
	problems           []model.Problem
	// duplicated are the keys more than one document defines (nil when
	// none), which patchView leaves to buildView.
	duplicated map[objectKey]bool
	// slicesOf are the EndpointSlices of each Service (label
	// kubernetes.io/service-name), for the fast path (endpoints.go) and
	// Snapshot's SlicesOf: those of endpointSlices, no other.
	slicesOf source.SliceIndex
	// sliceServices name the Service of each EndpointSlice of
	// endpointSlices whose label compact dropped (document.service):
	// Snapshot's SliceServices.
	sliceServices source.SliceServices
}

// serviceOf is the Service an EndpointSlice v serves belongs to: by its
// label, or, without labels, by sliceServices; always of the slice's
// namespace.
func (v *view) serviceOf(slice *discoveryv1.EndpointSlice) source.ServiceKey {
	if slice.Labels != nil {
		return source.ServiceKey{Namespace: slice.Namespace, Name: slice.Labels[discoveryv1.LabelServiceName]}
	}
	return source.ServiceKey{Namespace: slice.Namespace, Name: v.sliceServices.Of(slice)}
}

// kindOrder is the order in which changed kinds are reported.
var kindOrder = []source.Kind{
	source.KindIngressClass, source.KindIngress, source.KindService,
	source.KindEndpointSlice, source.KindSecret, source.KindConfigMap,
	source.KindNamespace, source.KindGatewayClass, source.KindGateway, source.KindHTTPRoute, source.KindGRPCRoute, source.KindTLSRoute, source.KindReferenceGrant,
	source.KindListenerSet,
	source.KindBackendTLSPolicy,
}

// publish builds a view of the files read and serves it. It returns the
// objects that changed, by kind in kindOrder and then by key, and whether
// the problems changed; it records the Services whose EndpointSlices
// changed for TakeChangedServices before it returns.
func (s *Source) publish() (changed []source.Change, problemsChanged bool) {
	pending, all := s.pending, s.pendingAll
	s.pending, s.pendingAll = nil, false
	if !all {
		if changed, ok := s.patchView(pending); ok {
			return changed, false
		}
	}
	next := s.buildView()
	s.mu.Lock()
	prev := s.view
	s.view = next
	s.mu.Unlock()

	for _, key := range changedBetween(prev, next) {
		if key.kind == source.KindEndpointSlice {
			s.noteSlice(prev, prev.lookup(key))
			s.noteSlice(next, next.lookup(key))
		}
		changed = append(changed, source.Change{Kind: key.kind, Namespace: key.namespace, Name: key.name})
	}

	// New problems are not logged here: the syncer reports every problem,
	// from any stage, in one place.
	return changed, !slices.Equal(prev.problems, next.problems)
}

// patchView serves the view with the objects the pending files changed,
// added or removed put in place, when nothing else changed: each file has
// the same problems as before, each object it changes or removes is the
// one served and has no duplicate (so no other document wins instead),
// each object it adds is defined nowhere else, a changed EndpointSlice
// stays with its Service and an added one is its Service's first. Then an
// edit or a new file costs what it changes: at 50,000 Ingresses buildView
// takes over a second. It returns the objects that changed, ordered as
// publish orders them, and false when the view must be built whole.
func (s *Source) patchView(pending map[string]*fileState) ([]source.Change, bool) {
	prev := s.view
	var edits []edit
	defined := map[objectKey]bool{} // the keys the pending files define now
	for path, old := range pending {
		var oldDocs, curDocs []document
		var oldProblems, curProblems []problem
		if old != nil {
			oldDocs, oldProblems = old.docs, old.problems
		}
		if cur := s.files[path]; cur != nil {
			curDocs, curProblems = cur.docs, cur.problems
		}
		if len(oldProblems)+len(curProblems) > 0 && !reflect.DeepEqual(oldProblems, curProblems) {
			return nil, false
		}
		before := make(map[objectKey]document, len(oldDocs))
		for _, o := range oldDocs {
			if prev.lookup(o.key()) != o.obj { // a duplicate that lost
				return nil, false
			}
			before[o.key()] = o
		}
		for _, n := range curDocs {
			if defined[n.key()] {
				return nil, false
			}
			defined[n.key()] = true
			o, kept := before[n.key()]
			switch {
			case !kept:
				if prev.lookup(n.key()) != nil { // defined elsewhere
					return nil, false
				}
				edits = append(edits, edit{key: n.key(), new: n.obj, newService: n.service})
			case o.index != n.index && prev.duplicated[n.key()]: // a duplicate's problem names the index
				return nil, false
			case o.obj != n.obj:
				edits = append(edits, edit{key: n.key(), old: o.obj, new: n.obj, newService: n.service})
			}
		}
		for _, o := range oldDocs {
			if !defined[o.key()] {
				if prev.duplicated[o.key()] {
					return nil, false
				}
				edits = append(edits, edit{key: o.key(), old: o.obj})
			}
		}
	}
	if len(edits) > maxPatchEdits {
		return nil, false
	}

	next := *prev
	if !next.patch(edits) {
		return nil, false
	}
	var slicesOf *source.SliceIndexEdit
	var sliceServices *source.SliceServicesEdit
	for _, e := range edits {
		oldSlice, _ := e.old.(*discoveryv1.EndpointSlice)
		newSlice, _ := e.new.(*discoveryv1.EndpointSlice)
		if oldSlice == nil && newSlice == nil {
			continue
		}
		if slicesOf == nil {
			slicesOf = source.NewSliceIndexEdit(prev.slicesOf)
			sliceServices = source.NewSliceServicesEdit(prev.sliceServices)
		}
		var oldKey, newKey source.ServiceKey
		if oldSlice != nil {
			oldKey = prev.serviceOf(oldSlice)
			sliceServices.Set(oldSlice, "")
		}
		if newSlice != nil {
			newKey = document{obj: newSlice, service: e.newService}.sliceService()
			sliceServices.Set(newSlice, e.newService)
		}
		if !patchSlicesOf(slicesOf, oldSlice, newSlice, oldKey, newKey) {
			return nil, false
		}
	}
	if slicesOf != nil {
		next.slicesOf, next.sliceServices = slicesOf.Done(), sliceServices.Done()
	}
	s.mu.Lock()
	s.view = &next
	s.mu.Unlock()

	slices.SortFunc(edits, func(a, b edit) int { return compareKeys(a.key, b.key) })
	changed := make([]source.Change, 0, len(edits))
	for _, e := range edits {
		if e.key.kind == source.KindEndpointSlice {
			s.noteSlice(prev, e.old)
			s.noteSlice(&next, e.new)
		}
		changed = append(changed, source.Change{Kind: e.key.kind, Namespace: e.key.namespace, Name: e.key.name})
	}
	return changed, true
}

// maxPatchEdits bounds the objects patchView puts in place: past this
// many, publish builds the view whole (buildView).
const maxPatchEdits = 1000

// edit is one object patchView changes: old nil adds it, new nil removes it.
type edit struct {
	key      objectKey
	old, new source.Named
	// newService is new's document's service (an EndpointSlice's whose
	// label compact dropped).
	newService string
}

// patchSlicesOf puts newSlice, of the Service newKey, in place of
// oldSlice, of oldKey, in its Service's list of index (one of them may be
// nil), on a copy of the list, and says whether it could: a slice moving
// to another Service, or added beside others (where buildView's path
// order would place it), makes publish build whole.
func patchSlicesOf(index *source.SliceIndexEdit, oldSlice, newSlice *discoveryv1.EndpointSlice, oldKey, newKey source.ServiceKey) bool {
	switch {
	case newSlice == nil:
		index.Set(oldKey, slices.DeleteFunc(slices.Clone(index.Get(oldKey)), func(s *discoveryv1.EndpointSlice) bool { return s == oldSlice }))
	case oldSlice == nil:
		if len(index.Get(newKey)) > 0 {
			return false
		}
		index.Set(newKey, []*discoveryv1.EndpointSlice{newSlice})
	default:
		if oldKey != newKey {
			return false
		}
		list := slices.Clone(index.Get(newKey))
		list[slices.Index(list, oldSlice)] = newSlice
		index.Set(newKey, list)
	}
	return true
}

// compareKeys orders keys as publish reports them: by kind in kindOrder,
// then by namespace and name.
func compareKeys(a, b objectKey) int {
	return cmp.Or(cmp.Compare(slices.Index(kindOrder, a.kind), slices.Index(kindOrder, b.kind)),
		strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
}

// patch makes the edits in new lists of their kinds, made from the last
// (source.Patched: they share every chunk no edit falls in; the lists of
// other kinds are the view before's), and says whether it could: an
// object of a type view has no list of, or one named by two edits, makes
// publish build the view whole.
func (v *view) patch(edits []edit) bool {
	byKind := map[source.Kind][]edit{}
	for _, e := range edits {
		byKind[e.key.kind] = append(byKind[e.key.kind], e)
	}
	for kind, kindEdits := range byKind {
		list, ok := kindLists[kind]
		if !ok || !list.patch(v, kindEdits) {
			return false
		}
	}
	return true
}

// buildView merges the files in path order. When two documents define the
// same object, the first one wins and the other is a problem.
func (s *Source) buildView() *view {
	v := &view{}
	slicesOf := source.NewSliceIndexEdit(source.SliceIndex{})
	sliceServices := source.NewSliceServicesEdit(source.SliceServices{})
	definedAt := map[objectKey]string{}
	objects := map[source.Kind][]source.Named{}
	var problems []problem
	for _, path := range slices.Sorted(maps.Keys(s.files)) {
		file := s.files[path]
		problems = append(problems, file.problems...)
		for _, doc := range file.docs {
			if first, dup := definedAt[doc.key()]; dup {
				if v.duplicated == nil {
					v.duplicated = map[objectKey]bool{}
				}
				v.duplicated[doc.key()] = true
				problems = append(problems, problem{path: path, index: doc.index,
					reason: fmt.Sprintf("%s is also defined in %s, which is used; document left out", doc.key(), first)})
				continue
			}
			definedAt[doc.key()] = location(path, doc.index)
			if kind, ok := kindOfType[reflect.TypeOf(doc.obj)]; ok {
				objects[kind] = append(objects[kind], doc.obj)
			}
			if slice, ok := doc.obj.(*discoveryv1.EndpointSlice); ok {
				key := doc.sliceService()
				slicesOf.Set(key, append(slicesOf.Get(key), slice))
				sliceServices.Set(slice, doc.service)
			}
		}
	}
	v.slicesOf, v.sliceServices = slicesOf.Done(), sliceServices.Done()
	problems = append(problems, s.dirProblem...)
	if s.folderErr != nil {
		problems = append(problems, problem{path: s.dir,
			reason: fmt.Sprintf("%v; the objects last read from it are kept until it can be read again", s.folderErr)})
	}

	for kind, objs := range objects {
		kindLists[kind].set(v, objs)
	}
	slices.SortFunc(problems, func(a, b problem) int {
		return cmp.Or(strings.Compare(a.path, b.path), cmp.Compare(a.index, b.index), strings.Compare(a.reason, b.reason))
	})
	v.problems = make([]model.Problem, 0, len(problems))
	for _, p := range problems {
		v.problems = append(v.problems, model.Problem{Kind: "File", Name: location(p.path, p.index), Reason: p.reason})
	}
	return v
}

// location names a document as "path#N", or the whole file as "path".
func location(path string, index int) string {
	if index == 0 {
		return path
	}
	return path + "#" + strconv.Itoa(index)
}

// changedBetween returns the keys of the objects next serves and prev
// does not, or serves another object of, or the other way round, in
// publish's order (compareKeys).
func changedBetween(prev, next *view) []objectKey {
	var keys []objectKey
	for _, kind := range kindOrder {
		keys = append(keys, kindLists[kind].changed(prev, next)...)
	}
	return keys
}

// lookup returns the object of key that v serves, nil if none.
func (v *view) lookup(key objectKey) source.Named {
	return kindLists[key.kind].find(v, key.namespace, key.name)
}

// kindList is one of view's lists, by kind (kindLists).
type kindList interface {
	// objectType is the type of the list's objects.
	objectType() reflect.Type
	// find returns the object namespace/name of the list, nil if none.
	find(v *view, namespace, name string) source.Named
	// changed returns the keys of the objects next's list holds and
	// prev's does not, or holds another object of, or the other way
	// round, sorted by namespace and name.
	changed(prev, next *view) []objectKey
	// patch makes edits, all of the list's kind, in a new list made
	// from v's (source.Patched), and says whether it could.
	patch(v *view, edits []edit) bool
	// set makes objs, all of the list's kind, v's list, sorted by
	// namespace and name (buildView).
	set(v *view, objs []source.Named)
}

// listOf is the kindList of the objects of type T, the list of
// returns: a patch makes the next list from the one before
// (source.Patched), sharing every chunk no edit falls in, and changed
// skips the chunks the two views share (model.CompareLists).
type listOf[T interface {
	comparable
	source.Named
}] struct {
	kind source.Kind
	of   func(*view) *model.List[T]
}

func (l listOf[T]) objectType() reflect.Type { return reflect.TypeFor[T]() }

func (l listOf[T]) find(v *view, namespace, name string) source.Named {
	o, found := source.FindNamedIn(*l.of(v), namespace, name)
	if !found {
		return nil
	}
	return o
}

func (l listOf[T]) set(v *view, objs []source.Named) {
	list := make([]T, len(objs))
	for i, o := range objs {
		list[i] = o.(T)
	}
	*l.of(v) = source.SortedList(list)
}

func (l listOf[T]) patch(v *view, edits []edit) bool {
	typed := make([]source.Edit[T], 0, len(edits))
	for _, e := range edits {
		var obj T
		if e.new != nil {
			o, ok := e.new.(T)
			if !ok {
				return false
			}
			obj = o
		}
		typed = append(typed, source.Edit[T]{Namespace: e.key.namespace, Name: e.key.name, Obj: obj})
	}
	list, ok := source.Patched(*l.of(v), typed)
	if ok {
		*l.of(v) = list
	}
	return ok
}

func (l listOf[T]) changed(prev, next *view) []objectKey {
	var keys []objectKey
	model.CompareLists(*l.of(prev), *l.of(next), func(a, b T) int { return source.CompareNamed(a, b.GetNamespace(), b.GetName()) },
		func(a, b T, inPrev, inNext bool) {
			o := b
			if !inNext {
				o = a
			} else if inPrev && a == b {
				return
			}
			keys = append(keys, objectKey{kind: l.kind, namespace: o.GetNamespace(), name: o.GetName()})
		})
	return keys
}

// kindLists are view's lists by kind; patch and add name the same lists.
var kindLists = map[source.Kind]kindList{
	source.KindIngressClass:     listOf[*networkingv1.IngressClass]{source.KindIngressClass, func(v *view) *model.List[*networkingv1.IngressClass] { return &v.ingressClasses }},
	source.KindIngress:          listOf[*networkingv1.Ingress]{source.KindIngress, func(v *view) *model.List[*networkingv1.Ingress] { return &v.ingresses }},
	source.KindService:          listOf[*model.Service]{source.KindService, func(v *view) *model.List[*model.Service] { return &v.services }},
	source.KindEndpointSlice:    listOf[*discoveryv1.EndpointSlice]{source.KindEndpointSlice, func(v *view) *model.List[*discoveryv1.EndpointSlice] { return &v.endpointSlices }},
	source.KindSecret:           listOf[*corev1.Secret]{source.KindSecret, func(v *view) *model.List[*corev1.Secret] { return &v.secrets }},
	source.KindConfigMap:        listOf[*corev1.ConfigMap]{source.KindConfigMap, func(v *view) *model.List[*corev1.ConfigMap] { return &v.configMaps }},
	source.KindNamespace:        listOf[*corev1.Namespace]{source.KindNamespace, func(v *view) *model.List[*corev1.Namespace] { return &v.namespaces }},
	source.KindGatewayClass:     listOf[*gatewayv1.GatewayClass]{source.KindGatewayClass, func(v *view) *model.List[*gatewayv1.GatewayClass] { return &v.gatewayClasses }},
	source.KindGateway:          listOf[*gatewayv1.Gateway]{source.KindGateway, func(v *view) *model.List[*gatewayv1.Gateway] { return &v.gateways }},
	source.KindHTTPRoute:        listOf[*gatewayv1.HTTPRoute]{source.KindHTTPRoute, func(v *view) *model.List[*gatewayv1.HTTPRoute] { return &v.httpRoutes }},
	source.KindGRPCRoute:        listOf[*gatewayv1.GRPCRoute]{source.KindGRPCRoute, func(v *view) *model.List[*gatewayv1.GRPCRoute] { return &v.grpcRoutes }},
	source.KindTLSRoute:         listOf[*gatewayv1.TLSRoute]{source.KindTLSRoute, func(v *view) *model.List[*gatewayv1.TLSRoute] { return &v.tlsRoutes }},
	source.KindReferenceGrant:   listOf[*gatewayv1.ReferenceGrant]{source.KindReferenceGrant, func(v *view) *model.List[*gatewayv1.ReferenceGrant] { return &v.referenceGrants }},
	source.KindListenerSet:      listOf[*gatewayv1.ListenerSet]{source.KindListenerSet, func(v *view) *model.List[*gatewayv1.ListenerSet] { return &v.listenerSets }},
	source.KindBackendTLSPolicy: listOf[*gatewayv1.BackendTLSPolicy]{source.KindBackendTLSPolicy, func(v *view) *model.List[*gatewayv1.BackendTLSPolicy] { return &v.backendTLSPolicies }},
}

// kindOfType is the kind of each type of kindLists.
var kindOfType = func() map[reflect.Type]source.Kind {
	kinds := make(map[reflect.Type]source.Kind, len(kindLists))
	for kind, list := range kindLists {
		kinds[list.objectType()] = kind
	}
	return kinds
}()
