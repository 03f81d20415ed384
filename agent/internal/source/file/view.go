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
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// view is what Snapshot serves. It is built whole and never changed after
// publish, so readers need the lock only to fetch the pointer.
type view struct {
	objects        map[objectKey]runtime.Object
	ingresses      []*networkingv1.Ingress
	ingressClasses []*networkingv1.IngressClass
	services       []*corev1.Service
	endpointSlices []*discoveryv1.EndpointSlice
	secrets        []*corev1.Secret
	configMaps     []*corev1.ConfigMap
	// The Gateway API's kinds, and Namespaces for its selectors.
	gatewayClasses     []*gatewayv1.GatewayClass
	gateways           []*gatewayv1.Gateway
	httpRoutes         []*gatewayv1.HTTPRoute
	grpcRoutes         []*gatewayv1.GRPCRoute
	tlsRoutes          []*gatewayv1.TLSRoute
	referenceGrants    []*gatewayv1.ReferenceGrant
	listenerSets       []*gatewayv1.ListenerSet
	backendTLSPolicies []*gatewayv1.BackendTLSPolicy
	namespaces         []*corev1.Namespace
	problems           []model.Problem
	// slicesOf are the EndpointSlices of each Service (label
	// kubernetes.io/service-name), for the fast path (endpoints.go).
	slicesOf map[source.ServiceKey][]*discoveryv1.EndpointSlice
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

	var keys []objectKey
	for key, obj := range next.objects {
		if prev.objects[key] != obj {
			keys = append(keys, key)
		}
	}
	for key := range prev.objects {
		if _, ok := next.objects[key]; !ok {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, compareKeys)
	for _, key := range keys {
		if key.kind == source.KindEndpointSlice {
			s.noteSlice(prev.objects[key])
			s.noteSlice(next.objects[key])
		}
		changed = append(changed, source.Change{Kind: key.kind, Namespace: key.namespace, Name: key.name})
	}

	// New problems are not logged here: the syncer reports every problem,
	// from any stage, in one place.
	return changed, !slices.Equal(prev.problems, next.problems)
}

// patchView serves the view with the objects the pending files changed
// put in place, when that is all that changed: each file defines the same
// objects in the same documents as before, each the one served (no
// duplicate wins instead), with the same problems, and no EndpointSlice
// moved to another Service. Then an edit costs what it changes: at 50,000
// Ingresses buildView takes over a second for one EndpointSlice. It
// returns the objects that changed, ordered as publish orders them, and
// false when the view must be built whole.
func (s *Source) patchView(pending map[string]*fileState) ([]source.Change, bool) {
	prev := s.view
	var olds, news []document
	for path, old := range pending {
		cur := s.files[path]
		if old == nil || cur == nil || len(old.docs) != len(cur.docs) || !reflect.DeepEqual(old.problems, cur.problems) {
			return nil, false
		}
		for i, n := range cur.docs {
			o := old.docs[i]
			if o.key != n.key || o.index != n.index || prev.objects[o.key] != o.obj {
				return nil, false
			}
			if n.obj == o.obj {
				continue
			}
			if slice, ok := o.obj.(*discoveryv1.EndpointSlice); ok && serviceOf(slice) != serviceOf(n.obj.(*discoveryv1.EndpointSlice)) {
				return nil, false
			}
			olds, news = append(olds, o), append(news, n)
		}
	}
	next := *prev
	next.objects = maps.Clone(prev.objects) // ServiceEndpoints reads the old one
	cloned, slicesCloned := map[string]bool{}, false
	for i, n := range news {
		next.objects[n.key] = n.obj
		if !next.replace(n.obj, cloned) {
			return nil, false
		}
		if slice, ok := n.obj.(*discoveryv1.EndpointSlice); ok {
			if !slicesCloned {
				slicesCloned = true
				next.slicesOf = maps.Clone(prev.slicesOf)
			}
			key := serviceOf(slice)
			list := slices.Clone(next.slicesOf[key])
			list[slices.Index(list, olds[i].obj.(*discoveryv1.EndpointSlice))] = slice
			next.slicesOf[key] = list
		}
	}
	s.mu.Lock()
	s.view = &next
	s.mu.Unlock()

	order := make([]int, len(news))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return compareKeys(news[a].key, news[b].key) })
	changed := make([]source.Change, 0, len(news))
	for _, i := range order {
		key := news[i].key
		if key.kind == source.KindEndpointSlice {
			s.noteSlice(olds[i].obj)
			s.noteSlice(news[i].obj)
		}
		changed = append(changed, source.Change{Kind: key.kind, Namespace: key.namespace, Name: key.name})
	}
	return changed, true
}

// compareKeys orders keys as publish reports them: by kind in kindOrder,
// then by namespace and name.
func compareKeys(a, b objectKey) int {
	return cmp.Or(cmp.Compare(slices.Index(kindOrder, a.kind), slices.Index(kindOrder, b.kind)),
		strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
}

// replace puts obj in place of the object of the same namespace and name
// in the list of its type (sorted by sortObjects), on a copy of the list
// the first time (cloned records it), and says whether a list took it: a
// type not listed here (add's list, which it must follow) makes publish
// build the view whole.
func (v *view) replace(obj runtime.Object, cloned map[string]bool) bool {
	return replaceIn(&v.ingresses, obj, cloned) || replaceIn(&v.ingressClasses, obj, cloned) || replaceIn(&v.services, obj, cloned) ||
		replaceIn(&v.endpointSlices, obj, cloned) || replaceIn(&v.secrets, obj, cloned) || replaceIn(&v.configMaps, obj, cloned) ||
		replaceIn(&v.namespaces, obj, cloned) || replaceIn(&v.gatewayClasses, obj, cloned) || replaceIn(&v.gateways, obj, cloned) ||
		replaceIn(&v.httpRoutes, obj, cloned) || replaceIn(&v.grpcRoutes, obj, cloned) || replaceIn(&v.tlsRoutes, obj, cloned) ||
		replaceIn(&v.referenceGrants, obj, cloned) || replaceIn(&v.listenerSets, obj, cloned) || replaceIn(&v.backendTLSPolicies, obj, cloned)
}

// replaceIn puts obj in place of the element of *list with its namespace
// and name if it is a T, and says whether it was; *list is copied first
// unless cloned says it was (by its type's name).
func replaceIn[T interface {
	runtime.Object
	namedObject
}](list *[]T, obj runtime.Object, cloned map[string]bool) bool {
	o, ok := obj.(T)
	if !ok {
		return false
	}
	if name := fmt.Sprintf("%T", o); !cloned[name] {
		cloned[name] = true
		*list = slices.Clone(*list)
	}
	i, found := slices.BinarySearchFunc(*list, o, func(a, b T) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
	if found {
		(*list)[i] = o
	}
	return found
}

// buildView merges the files in path order. When two documents define the
// same object, the first one wins and the other is a problem.
func (s *Source) buildView() *view {
	v := &view{objects: map[objectKey]runtime.Object{}}
	definedAt := map[objectKey]string{}
	var problems []problem
	for _, path := range slices.Sorted(maps.Keys(s.files)) {
		file := s.files[path]
		problems = append(problems, file.problems...)
		for _, doc := range file.docs {
			if first, dup := definedAt[doc.key]; dup {
				problems = append(problems, problem{path: path, index: doc.index,
					reason: fmt.Sprintf("%s is also defined in %s, which is used; document left out", doc.key, first)})
				continue
			}
			definedAt[doc.key] = location(path, doc.index)
			v.objects[doc.key] = doc.obj
			v.add(doc.obj)
		}
	}
	problems = append(problems, s.dirProblem...)
	if s.folderErr != nil {
		problems = append(problems, problem{path: s.dir,
			reason: fmt.Sprintf("%v; the objects last read from it are kept until it can be read again", s.folderErr)})
	}

	sortObjects(v.ingresses)
	sortObjects(v.ingressClasses)
	sortObjects(v.services)
	sortObjects(v.endpointSlices)
	sortObjects(v.secrets)
	sortObjects(v.configMaps)
	sortObjects(v.namespaces)
	sortObjects(v.gatewayClasses)
	sortObjects(v.gateways)
	sortObjects(v.httpRoutes)
	sortObjects(v.grpcRoutes)
	sortObjects(v.tlsRoutes)
	sortObjects(v.referenceGrants)
	sortObjects(v.listenerSets)
	sortObjects(v.backendTLSPolicies)
	slices.SortFunc(problems, func(a, b problem) int {
		return cmp.Or(strings.Compare(a.path, b.path), cmp.Compare(a.index, b.index), strings.Compare(a.reason, b.reason))
	})
	v.problems = make([]model.Problem, 0, len(problems))
	for _, p := range problems {
		v.problems = append(v.problems, model.Problem{Kind: "File", Name: location(p.path, p.index), Reason: p.reason})
	}
	return v
}

// add appends obj to the list of its type (the first of the lists that
// takes it: the one of its type). replace has the same lists.
func (v *view) add(obj runtime.Object) {
	if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
		if v.slicesOf == nil {
			v.slicesOf = map[source.ServiceKey][]*discoveryv1.EndpointSlice{}
		}
		key := serviceOf(slice)
		v.slicesOf[key] = append(v.slicesOf[key], slice)
	}
	_ = appendOf(&v.ingresses, obj) || appendOf(&v.ingressClasses, obj) || appendOf(&v.services, obj) ||
		appendOf(&v.endpointSlices, obj) || appendOf(&v.secrets, obj) || appendOf(&v.configMaps, obj) ||
		appendOf(&v.namespaces, obj) || appendOf(&v.gatewayClasses, obj) || appendOf(&v.gateways, obj) ||
		appendOf(&v.httpRoutes, obj) || appendOf(&v.grpcRoutes, obj) || appendOf(&v.tlsRoutes, obj) || appendOf(&v.referenceGrants, obj) ||
		appendOf(&v.listenerSets, obj) || appendOf(&v.backendTLSPolicies, obj)
}

// appendOf appends obj to list if it is a T, and says whether it was.
func appendOf[T runtime.Object](list *[]T, obj runtime.Object) bool {
	o, ok := obj.(T)
	if ok {
		*list = append(*list, o)
	}
	return ok
}

// location names a document as "path#N", or the whole file as "path".
func location(path string, index int) string {
	if index == 0 {
		return path
	}
	return path + "#" + strconv.Itoa(index)
}

type namedObject interface {
	GetNamespace() string
	GetName() string
}

func sortObjects[T namedObject](objs []T) {
	slices.SortFunc(objs, func(a, b T) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
}
