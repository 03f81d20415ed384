package kube

import (
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/restysync/restysync/agent/internal/source"
)

// Of an EndpointSlice's labels only kubernetes.io/service-name is read,
// but for the status writer's Gateway Services' slices: a map of labels
// is some 300 bytes, 15 MB at 50,000 slices. As the file source does for
// a slice whose only label that is, the slice informer's transform
// (transformSlice) takes the labels of every other slice away
// (dropSliceLabels) and keeps its Service's name beside it, in
// sliceServices, which the handler (noteSlice) and each Snapshot
// (model.Snapshot.SliceServices) read.
//
// sliceServices is edited in place between Snapshots and handed out
// (Done) by each Snapshot that follows a change, the next edits starting
// from a copy (source.SliceServicesEdit copies a shard at its first
// change): a Snapshot's is never changed. A slice's name is set by the
// transform, before the slice reaches the cache, the handler or a view,
// and taken out by the handler once the view no longer holds the slice
// (forgetSlice), under viewMu: every Snapshot's slices have their names.
//
// The transform also hands back the cached slice when the one listed
// again is the same version (same resourceVersion: a relist), so that a
// relist neither keeps two copies of each slice nor names a slice the
// view does not hold. It reads the informer's cache under the informer's
// queue lock: client-go (v0.37, RealFIFO and DeltaFIFO alike) takes the
// cache's lock under the queue's, never the other way round.

// transformSlice is trim for EndpointSlices, with their labels dropped as
// above; another object is trimmed.
func (s *Source) transformSlice(obj any) (any, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return trim(obj)
	}
	if cached := s.cachedSlice(slice); cached != nil {
		return cached, nil
	}
	// The labels go before trim would intern them.
	source.Strip(slice)
	service, dropped := dropSliceLabels(slice)
	trimObject(slice)
	if dropped {
		s.sliceServicesMu.Lock()
		defer s.sliceServicesMu.Unlock()
		s.sliceServicesEdit().Set(slice, service)
	}
	return slice, nil
}

// cachedSlice is the cached slice of slice's name when it is the same
// version, else nil.
func (s *Source) cachedSlice(slice *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if slice.ResourceVersion == "" {
		return nil
	}
	cached := s.sliceView.lookup(slice.Namespace, slice.Name)
	if cached == nil || cached.ResourceVersion != slice.ResourceVersion {
		return nil
	}
	return cached
}

// sliceServicesEdit is the edit under way; the caller holds
// sliceServicesMu.
func (s *Source) sliceServicesEdit() *source.SliceServicesEdit {
	if s.sliceServices == nil {
		s.sliceServices = source.NewSliceServicesEdit(s.sliceServicesDone)
	}
	return s.sliceServices
}

// sliceService is the name of the Service slice belongs to: its label, or
// what the transform kept when it dropped the labels; "" for none.
func (s *Source) sliceService(slice *discoveryv1.EndpointSlice) string {
	if slice.Labels != nil {
		return slice.Labels[discoveryv1.LabelServiceName]
	}
	s.sliceServicesMu.Lock()
	defer s.sliceServicesMu.Unlock()
	if s.sliceServices != nil {
		return s.sliceServices.Of(slice)
	}
	return s.sliceServicesDone.Of(slice)
}

// forgetSlice takes out the name of a slice the view no longer holds
// (obj, or a tombstone's object); the caller (handler) holds viewMu.
func (s *Source) forgetSlice(obj any) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || slice.Labels != nil {
		return
	}
	s.sliceServicesMu.Lock()
	defer s.sliceServicesMu.Unlock()
	s.sliceServicesEdit().Set(slice, "")
}

// takeSliceServices returns the names of the slices as they are: the
// caller holds viewMu and has just taken sliceView's list.
func (s *Source) takeSliceServices() source.SliceServices {
	s.sliceServicesMu.Lock()
	defer s.sliceServicesMu.Unlock()
	if s.sliceServices != nil {
		s.sliceServicesDone, s.sliceServices = s.sliceServices.Done(), nil
	}
	return s.sliceServicesDone
}
