package file

import (
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// The file source implements source.EndpointIndex, as the kube source
// does: a save that changes nothing but EndpointSlices takes the syncer's
// fast path (path=fast), a push of the changed backends and no reload.

var _ source.EndpointIndex = (*Source)(nil)

// noteSlice records the Service of obj when it is an EndpointSlice (of
// the view v) that names one; the caller holds no lock.
func (s *Source) noteSlice(v *view, obj any) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	key := v.serviceOf(slice)
	if key.Name == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changedServices == nil {
		s.changedServices = map[source.ServiceKey]struct{}{}
	}
	s.changedServices[key] = struct{}{}
}

// TakeChangedServices returns the Services whose EndpointSlices changed
// since the last call, and forgets them.
func (s *Source) TakeChangedServices() []source.ServiceKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]source.ServiceKey, 0, len(s.changedServices))
	for k := range s.changedServices {
		out = append(out, k)
	}
	s.changedServices = nil // clear would keep the room of the start's 50,000
	return out
}

// ServiceEndpoints returns the Service namespace/name of the files (nil if
// none) and its EndpointSlices, read-only.
func (s *Source) ServiceEndpoints(namespace, name string) (*model.Service, []*discoveryv1.EndpointSlice) {
	s.mu.RLock()
	v := s.view
	s.mu.RUnlock()
	svc, _ := v.lookup(objectKey{kind: source.KindService, namespace: namespace, name: name}).(*model.Service)
	return svc, v.slicesOf.Get(source.ServiceKey{Namespace: namespace, Name: name})
}
