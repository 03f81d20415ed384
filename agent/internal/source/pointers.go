package source

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Much of what an EndpointSlice and an Ingress say is held through
// pointers: each endpoint's three conditions, each port's name, protocol
// and number, an Ingress's class name and each path's type, every one a
// small allocation of its own once decoded (4.8 MB at 50,000 Ingresses,
// each with a two-endpoint slice: kube's TestSourceHeap). They take few
// values, so SharePointers points the objects' fields at one copy of each value:
// the conditions at two bools, the rest at a table of values
// (sharedValues). Both sources call it on each object they keep (the kube
// source in its transform, the file source on its copy): a source's
// objects are never changed (whoever writes one writes a DeepCopy), so
// none writes through them.

// The conditions' values: a condition of a slice a source keeps points
// at one of these.
var conditionTrue, conditionFalse = true, false

// sharedBool is a pointer to p's value shared by every slice, nil for nil.
func sharedBool(p *bool) *bool {
	switch {
	case p == nil:
		return nil
	case *p:
		return &conditionTrue
	default:
		return &conditionFalse
	}
}

// maxSharedValues bounds each table of sharedValues: past it, a new value
// keeps its own pointer (the names of ports and classes are few, but
// tenants choose them).
const maxSharedValues = 1024

// sharedValues hands out one pointer per value, to a copy of its own:
// never a field of an object.
type sharedValues struct {
	mu      sync.Mutex
	strings map[string]*string
	numbers map[int32]*int32
}

// pointers is the table of SharePointers, for every source and
// goroutine.
var pointers sharedValues

// SharePointers points the fields of obj, an EndpointSlice or an Ingress,
// at shared values (another object is left alone); obj must be the
// caller's own, not yet handed out. It comes after ShareFewValued, which
// writes through those pointers.
func SharePointers(obj any) {
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		for i := range o.Endpoints {
			c := &o.Endpoints[i].Conditions
			c.Ready, c.Serving, c.Terminating = sharedBool(c.Ready), sharedBool(c.Serving), sharedBool(c.Terminating)
		}
		pointers.mu.Lock()
		defer pointers.mu.Unlock()
		for i := range o.Ports {
			p := &o.Ports[i]
			p.Name, p.AppProtocol = pointers.string(p.Name), pointers.string(p.AppProtocol)
			p.Protocol = (*corev1.Protocol)(pointers.string((*string)(p.Protocol)))
			p.Port = pointers.number(p.Port)
		}
	case *networkingv1.Ingress:
		pointers.mu.Lock()
		defer pointers.mu.Unlock()
		o.Spec.IngressClassName = pointers.string(o.Spec.IngressClassName)
		for i := range o.Spec.Rules {
			if http := o.Spec.Rules[i].HTTP; http != nil {
				for j := range http.Paths {
					p := &http.Paths[j]
					p.PathType = (*networkingv1.PathType)(pointers.string((*string)(p.PathType)))
				}
			}
		}
	}
}

// string is the shared pointer to *p's value, or p when the table is
// full; the caller holds mu.
func (t *sharedValues) string(p *string) *string { return shared(&t.strings, p) }

// number is string for a port number.
func (t *sharedValues) number(p *int32) *int32 { return shared(&t.numbers, p) }

// shared is the pointer table holds for *p's value, made (a copy of its
// own) when the table has room; p itself when it has none; nil for nil.
func shared[T comparable](table *map[T]*T, p *T) *T {
	if p == nil {
		return nil
	}
	if v, ok := (*table)[*p]; ok {
		return v
	}
	if len(*table) >= maxSharedValues {
		return p
	}
	if *table == nil {
		*table = map[T]*T{}
	}
	v := new(T)
	*v = *p
	(*table)[*p] = v
	return v
}
