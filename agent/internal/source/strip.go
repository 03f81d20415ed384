package source

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LastAppliedAnnotation is written by `kubectl apply`: a full JSON copy of
// the object as last applied.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Strip drops from obj, in place, what restysync never reads, before a
// source keeps it: its managedFields and kubectl's last-applied-configuration
// annotation (together they often outweigh the rest of the object), an
// EndpointSlice's per-endpoint pod reference, node, zone, topology and
// hints, and all of a Namespace but its name and labels (what the Gateway
// API's selectors match). Both sources strip every object they keep, so
// the model sees the same objects from either; anything else is another
// type and is left alone. It is idempotent.
//
// Status is kept: the status writers compare an Ingress's and a Gateway's
// status with what they would write, and a Gateway's status.addresses is
// read by the model.
func Strip(obj any) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if _, ok := o.GetAnnotations()[LastAppliedAnnotation]; ok {
			annotations := maps.Clone(o.GetAnnotations())
			delete(annotations, LastAppliedAnnotation)
			if len(annotations) == 0 {
				annotations = nil
			}
			o.SetAnnotations(annotations)
		}
	}
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		for i := range o.Endpoints {
			e := &o.Endpoints[i]
			e.TargetRef, e.Hints, e.DeprecatedTopology, e.NodeName, e.Zone = nil, nil, nil, nil, nil
		}
	case *corev1.Namespace:
		o.Annotations, o.Spec, o.Status = nil, corev1.NamespaceSpec{}, corev1.NamespaceStatus{}
	}
}
