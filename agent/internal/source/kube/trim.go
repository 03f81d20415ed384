package kube

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// The API server's objects carry what a file's YAML seldom does: a uid,
// owner references and annotations on every EndpointSlice, a Service's
// clusterIPs, ipFamilies, ipFamilyPolicy, sessionAffinity and traffic
// policies. At 50,000 Ingresses (each with a Service and a slice) the
// informers' caches are most of the agent's heap, so trim drops, in the
// transform, what no stage reads of an EndpointSlice, and interns the
// keys of every object's labels and annotations (the same few keys on
// every object: one copy each). A Service is cached as what the stages
// read of it (transformService: model.ServiceOf).
//
// What is read of them (grep the model, status, events and source
// packages): of an EndpointSlice its namespace, name, labels
// (kubernetes.io/service-name), addressType, endpoints and ports;
// resourceVersion of every object (the handler drops resync replays by
// it). The status writer's Gateway Services and their slices (labelled
// app.kubernetes.io/managed-by, or controlled by a Gateway:
// model.GatewayManaged) are kept whole: it updates them from the cached
// object, and deletes them by uid. (The status publisher's Service has an
// informer of its own.)
// TestTrimKeepsWhatIsRead builds a model from trimmed and untrimmed
// API-server-shaped objects and compares.

// trim is strip, then trimObject.
func trim(obj any) (any, error) {
	obj, err := strip(obj)
	if err != nil {
		return obj, err
	}
	trimObject(obj)
	return obj, nil
}

// trimObject trims obj in place, as the package's trim says, interns
// its namespace and the strings the file source shares too
// (source.ShareFewValued: port names and protocols, address types,
// classes, path types), and points its few-valued pointers at shared
// values (source.SharePointers).
func trimObject(obj any) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetNamespace(intern(o.GetNamespace()))
		internMap(o.GetLabels())
		internMap(o.GetAnnotations())
	}
	source.ShareFewValued(obj, intern)
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		if model.GatewayManaged(&o.ObjectMeta) {
			return
		}
		trimMeta(&o.ObjectMeta)
		// endpoints.kubernetes.io/last-change-trigger-time and the like.
		o.Annotations = nil
	}
	source.SharePointers(obj)
}

// transformService is trim for Services: the cache holds what the stages
// read of a Service (model.ServiceOf: 112 bytes where the whole object's
// type is 592, some 25 MB at 50,000 Services), and the whole object only
// of the status writer's Gateway Services (model.GatewayManaged).
func transformService(obj any) (any, error) {
	obj, err := trim(obj)
	svc, ok := obj.(*corev1.Service)
	if err != nil || !ok {
		return obj, err
	}
	return model.ServiceOf(svc), nil
}

// trimMeta drops what is not read of the metadata of an EndpointSlice the
// status writer does not manage.
func trimMeta(m *metav1.ObjectMeta) {
	m.UID, m.OwnerReferences, m.GenerateName, m.Finalizers = "", nil, "", nil
}

// intern is the interned copy of s ("" is left alone). unique's table
// holds a string only while an object does, so it cannot grow without
// end.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internMap replaces m's keys, in place, by their interned copies: a map
// assignment to a key it holds stores the key given too. The values are
// left alone: most are an object's own (an app's name), and interning a
// value no other object has costs more than it saves.
func internMap(m map[string]string) {
	for k, v := range m {
		m[intern(k)] = v
	}
}

// dropSliceLabels takes away the labels of an EndpointSlice the status
// writer does not manage (model.GatewayManaged), nothing but its Service's name
// being read of them, and returns that name; dropped says it did. slice
// must be the caller's own, not yet handed out.
func dropSliceLabels(slice *discoveryv1.EndpointSlice) (service string, dropped bool) {
	if slice.Labels == nil || model.GatewayManaged(&slice.ObjectMeta) {
		return "", false
	}
	service = slice.Labels[discoveryv1.LabelServiceName]
	slice.Labels = nil
	return service, true
}
