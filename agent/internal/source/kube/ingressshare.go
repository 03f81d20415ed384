package kube

import (
	"maps"
	"reflect"

	networkingv1 "k8s.io/api/networking/v1"
)

// The status writer's own writes come back as Ingress updates, one per
// Ingress, which change the status alone: each a whole new object in the
// cache while the model still holds the one before (RSS 435–545 MB after
// the writes at 50,000 Ingresses). transformIngress makes the new object
// share with the cached one of the same uid what the update did not
// change: the spec (same generation, equal) and the labels and
// annotations (equal). Both are the cache's objects, never changed. The
// same version listed again (a relist) is the cached object itself. It
// reads the informer's cache under the informer's queue lock, as
// transformSlice does (slicelabels.go).
//
// The status writer gives every Ingress it serves the same status
// addresses, a list of its own in each Ingress once decoded (80 bytes
// with one IP, 4 MB at 50,000): transformIngress makes an Ingress whose
// list is equal to that of the Ingress transformed before share it
// (shareStatus). The status writer reads that list, and writes a copy.

// transformIngress is trim for Ingresses, sharing what is unchanged with
// the cached Ingress; another object is trimmed.
func (s *Source) transformIngress(obj any) (any, error) {
	obj, err := trim(obj)
	ing, ok := obj.(*networkingv1.Ingress)
	if err != nil || !ok {
		return obj, err
	}
	s.shareStatus(ing)
	cached := s.ingressView.lookup(ing.Namespace, ing.Name)
	if cached == nil || cached.UID != ing.UID {
		return ing, nil
	}
	if ing.ResourceVersion != "" && cached.ResourceVersion == ing.ResourceVersion {
		return cached, nil
	}
	if cached.Generation == ing.Generation && reflect.DeepEqual(cached.Spec, ing.Spec) {
		ing.Spec = cached.Spec
	}
	if ing.Labels != nil && maps.Equal(cached.Labels, ing.Labels) {
		ing.Labels = cached.Labels
	}
	if ing.Annotations != nil && maps.Equal(cached.Annotations, ing.Annotations) {
		ing.Annotations = cached.Annotations
	}
	return ing, nil
}

// shareStatus gives ing the status addresses of the Ingress before it
// when they are equal, else keeps ing's for the next; ing must be the
// caller's own, not yet handed out.
func (s *Source) shareStatus(ing *networkingv1.Ingress) {
	addrs := ing.Status.LoadBalancer.Ingress
	if len(addrs) == 0 {
		return
	}
	s.ingressStatusMu.Lock()
	defer s.ingressStatusMu.Unlock()
	if reflect.DeepEqual(addrs, s.ingressStatus) {
		ing.Status.LoadBalancer.Ingress = s.ingressStatus
		return
	}
	s.ingressStatus = addrs
}
