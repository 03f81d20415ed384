package kube

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// A change costs what it changes: each kind a Snapshot serves is a
// sortedView, a list sorted by namespace and name that the informer's
// handler keeps up to date (put, remove) rather than a listing of the
// informer's cache per Snapshot, which at 50,000 Ingresses cost 9 MB and
// a class decision per Ingress for each new one. The view holds what the
// handler was told, in the order it was told, so a Snapshot holds every
// object whose change was reported before it (a change is recorded before
// it is reported), and a relist that replaces the cache (the informer
// tells of each object that came, changed or went) leaves the view a
// fresh start would build. Lists are made as the file source makes its
// own (source.Patched): the list a Snapshot handed out is never changed;
// the next one is made from it with the changes since (sharing every
// chunk of it no change falls in: model.List), by the first Snapshot that
// asks for it; a kind that did not change hands out the very list it
// handed out before.

// sortedView is one kind's objects, for Snapshot.
type sortedView[T interface {
	comparable
	source.Named
}] struct {
	// keep says whether an object is served; one it does not keep is
	// removed (nil: every object).
	keep func(T) bool
	// observe is told of each object a new list puts in (or, zero,
	// takes out), by the objects call that makes the list, with the
	// view's lock held (nil: no one).
	observe func(key types.NamespacedName, obj T)

	mu sync.Mutex
	// list is the list handed out last, or to be: never changed.
	list model.List[T]
	// pending are the changes since list was made, by name: an object
	// put, or zero when removed.
	pending map[types.NamespacedName]T
}

// viewUpdater is the handler's side of a sortedView of any type.
type viewUpdater interface {
	// put records obj, added or changed.
	put(obj any)
	// remove records that obj (or a tombstone of it) went.
	remove(obj any)
}

var _ viewUpdater = (*sortedView[*model.Service])(nil)

func (v *sortedView[T]) put(obj any) {
	o, ok := obj.(T)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	if v.keep != nil && !v.keep(o) {
		var zero T
		v.set(key, zero)
		return
	}
	v.set(key, o)
}

func (v *sortedView[T]) remove(obj any) {
	var key types.NamespacedName
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		// The key is the cache's; Obj is the last state it knew, or nil.
		ns, name, err := cache.SplitMetaNamespaceKey(tombstone.Key)
		if err != nil {
			return
		}
		key = types.NamespacedName{Namespace: ns, Name: name}
	} else if m, ok := obj.(source.Named); ok {
		key = types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
	} else {
		return
	}
	var zero T
	v.set(key, zero)
}

func (v *sortedView[T]) set(key types.NamespacedName, obj T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pending == nil {
		v.pending = map[types.NamespacedName]T{}
	}
	v.pending[key] = obj
}

// objects returns the kind's objects, sorted by namespace and name; the
// list is shared and must not be changed.
func (v *sortedView[T]) objects() model.List[T] {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.pending) == 0 {
		return v.list
	}
	edits := make([]source.Edit[T], 0, len(v.pending))
	for key, obj := range v.pending {
		edits = append(edits, source.Edit[T]{Namespace: key.Namespace, Name: key.Name, Obj: obj})
		if v.observe != nil {
			v.observe(key, obj)
		}
	}
	// One edit per name: Patched cannot refuse them.
	v.list, _ = source.Patched(v.list, edits)
	v.pending = nil
	return v.list
}

// The view is also the cache of its viewInformer (viewinformer.go): what
// the handler last put in it, pending changes included.

// get returns the object key, as last put, and whether the view holds it.
func (v *sortedView[T]) get(key types.NamespacedName) (T, bool) {
	var zero T
	v.mu.Lock()
	defer v.mu.Unlock()
	if obj, ok := v.pending[key]; ok {
		return obj, obj != zero
	}
	return source.FindNamedIn(v.list, key.Namespace, key.Name)
}

// lookup is get by namespace and name, nil (zero) when the view does not
// hold it.
func (v *sortedView[T]) lookup(namespace, name string) T {
	obj, _ := v.get(types.NamespacedName{Namespace: namespace, Name: name})
	return obj
}

// each calls f with each object the view holds, in no order.
func (v *sortedView[T]) each(f func(T)) {
	var zero T
	v.mu.Lock()
	defer v.mu.Unlock()
	for obj := range v.list.All() {
		if _, changed := v.pending[types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}]; !changed {
			f(obj)
		}
	}
	for _, obj := range v.pending {
		if obj != zero {
			f(obj)
		}
	}
}

// holdsAny says whether the view may hold an object: false when it
// surely holds none.
func (v *sortedView[T]) holdsAny() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.list.Len() > 0 || len(v.pending) > 0
}

// ListKeys returns the keys ("namespace/name") of the objects the view
// holds.
func (v *sortedView[T]) ListKeys() []string {
	var keys []string
	v.each(func(obj T) {
		keys = append(keys, cache.ObjectName{Namespace: obj.GetNamespace(), Name: obj.GetName()}.String())
	})
	return keys
}
