package kube

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// The Ingresses, Services and EndpointSlices are most of the objects the
// source holds (150,000 at 50,000 Ingresses), and each is already in its
// sortedView. A client-go shared informer would hold each once more in
// its own cache: a "namespace/name" key string and a map slot per object
// (9.7 MB at 50,000 Ingresses), beside a notification ring per handler
// that grows to the first listing and never shrinks (3.5 MB). A
// viewInformer is a reflector and a queue (client-go's controller) whose
// cache is the view itself: the handler is called as each change is
// popped (no ring), an update from the object the view holds, and it
// keeps the view (handler.view). The other kinds are few and keep
// client-go's shared informers.

// informer is what the source asks of a kind's informer: a client-go
// SharedIndexInformer, or a viewInformer.
type informer interface {
	RunWithContext(ctx context.Context)
	HasSynced() bool
	SetTransform(cache.TransformFunc) error
	SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error
}

// addHandler gives i its handler h, and returns what says h has been
// told of the first listing.
func addHandler(i informer, h cache.ResourceEventHandler) (cache.InformerSynced, error) {
	switch i := i.(type) {
	case cache.SharedInformer:
		reg, err := i.AddEventHandler(h)
		if err != nil {
			return nil, err
		}
		return reg.HasSynced, nil
	case interface {
		setHandler(cache.ResourceEventHandler) error
		HasSynced() bool
	}:
		return i.HasSynced, i.setHandler(h)
	}
	return nil, errors.New("kube source: an informer of no known kind")
}

// cachedKeys are the keys ("namespace/name") an informer holds.
func cachedKeys(i informer) []string {
	switch i := i.(type) {
	case cache.SharedInformer:
		return i.GetStore().ListKeys()
	case interface{ ListKeys() []string }:
		return i.ListKeys()
	}
	return nil
}

// viewInformer reads one kind into view, which is its cache: its handler
// (setHandler) must put each object it is told of in view, or take it
// out, as handler does.
type viewInformer[T interface {
	comparable
	source.Named
}] struct {
	listWatch cache.ListerWatcher
	example   runtime.Object
	resync    time.Duration
	view      *sortedView[T]

	transform  cache.TransformFunc
	onError    cache.WatchErrorHandlerWithContext
	handler    cache.ResourceEventHandler
	controller atomic.Pointer[cache.Controller]
}

var _ informer = (*viewInformer[*model.Service])(nil)

func newViewInformer[T interface {
	comparable
	source.Named
}](lw cache.ListerWatcher, example runtime.Object, resync time.Duration, view *sortedView[T]) *viewInformer[T] {
	return &viewInformer[T]{listWatch: lw, example: example, resync: resync, view: view}
}

// ListKeys lists the keys of the view's objects.
func (i *viewInformer[T]) ListKeys() []string { return i.view.ListKeys() }

func (i *viewInformer[T]) SetTransform(f cache.TransformFunc) error {
	i.transform = f
	return nil
}

func (i *viewInformer[T]) SetWatchErrorHandlerWithContext(f cache.WatchErrorHandlerWithContext) error {
	i.onError = f
	return nil
}

// setHandler sets the handler (addHandler); a viewInformer has one.
func (i *viewInformer[T]) setHandler(h cache.ResourceEventHandler) error {
	if i.handler != nil {
		return errors.New("kube source: a view's informer has one handler")
	}
	i.handler = h
	return nil
}

// HasSynced says whether the first listing has been handed to the
// handler.
func (i *viewInformer[T]) HasSynced() bool {
	c := i.controller.Load()
	return c != nil && (*c).HasSynced()
}

// RunWithContext lists and watches until ctx is done. The queue is
// client-go's RealFIFO as its informers make it by default (v0.37): a
// listing is one change that holds every object (ReplacedAll), which the
// handler is told of object by object (replaced); a queue that took the
// listing a change per object kept their array (7 MB at 50,000).
func (i *viewInformer[T]) RunWithContext(ctx context.Context) {
	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		KeyFunction:           namedKey,
		Transformer:           i.transform,
		AtomicEvents:          true,
		UnlockWhileProcessing: true,
	})
	c := cache.New(&cache.Config{
		Queue:                        fifo,
		ListerWatcher:                i.listWatch,
		ObjectType:                   i.example,
		FullResyncPeriod:             i.resync,
		WatchErrorHandlerWithContext: i.onError,
		Process:                      i.process,
	})
	i.controller.Store(&c)
	c.RunWithContext(ctx)
}

// namedKey is the key ("namespace/name") of obj, an object as listed or
// as transformed (a Service's model.Service, which is no metav1.Object).
func namedKey(obj any) (string, error) {
	if o, ok := obj.(source.Named); ok {
		return cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}.String(), nil
	}
	return cache.MetaNamespaceKeyFunc(obj)
}

// process hands each change to the handler, as client-go's informers do:
// an object the view holds is an update (from the object it holds), else
// an add; the handler puts it in the view, or takes it out. A resync
// (SyncAll) is not handed on: it would replay each object as an update
// from itself, which the handler drops.
func (i *viewInformer[T]) process(obj any, isInInitialList bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return errors.New("kube source: a change that is not Deltas")
	}
	for _, d := range deltas {
		switch d.Type {
		case cache.ReplacedAll:
			info, ok := d.Object.(cache.ReplacedAllInfo)
			if !ok {
				return fmt.Errorf("kube source: a listing of %T", d.Object)
			}
			i.replaced(info.Objects, isInInitialList)
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			i.put(d.Object, isInInitialList)
		case cache.Deleted:
			i.handler.OnDelete(d.Object)
		}
	}
	return nil
}

// put hands obj, added or changed, to the handler.
func (i *viewInformer[T]) put(obj any, isInInitialList bool) {
	o, ok := obj.(T)
	if !ok {
		return
	}
	if old, held := i.view.get(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}); held {
		i.handler.OnUpdate(old, obj)
	} else {
		i.handler.OnAdd(obj, isInInitialList)
	}
}

// replaced hands a listing to the handler, as client-go's informers do:
// first each object the view holds that the listing does not, deleted
// (a tombstone with the object the view held), then each listed object.
func (i *viewInformer[T]) replaced(objects []any, isInInitialList bool) {
	var gone []cache.DeletedFinalStateUnknown
	if i.view.holdsAny() {
		listed := make(map[types.NamespacedName]bool, len(objects))
		for _, obj := range objects {
			if o, ok := obj.(T); ok {
				listed[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = true
			}
		}
		i.view.each(func(o T) {
			if !listed[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] {
				key := cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}.String()
				gone = append(gone, cache.DeletedFinalStateUnknown{Key: key, Obj: o})
			}
		})
	}
	for _, tombstone := range gone {
		i.handler.OnDelete(tombstone)
	}
	for _, obj := range objects {
		i.put(obj, isInInitialList)
	}
}
