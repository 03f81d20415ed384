// Package source is the first stage of the pipeline (source → model → render → plan → apply): it
// holds the Kubernetes objects restysync serves and says when they changed.
//
// Two implementations share the Source interface: kube (client-go informers)
// and file (a watched folder of manifests). Only this package tree knows where
// objects come from; the syncer sees a Snapshot and a change callback.
package source

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// Kind says which kind of object changed, so the syncer can take the fast
// path when only endpoints moved.
type Kind string

const (
	KindIngress       Kind = "Ingress"
	KindIngressClass  Kind = "IngressClass"
	KindService       Kind = "Service"
	KindEndpointSlice Kind = "EndpointSlice"
	KindSecret        Kind = "Secret"
	KindConfigMap     Kind = "ConfigMap"
	// The Gateway API's kinds, and the Namespaces whose labels its
	// allowedRoutes selectors match.
	KindGatewayClass     Kind = "GatewayClass"
	KindGateway          Kind = "Gateway"
	KindHTTPRoute        Kind = "HTTPRoute"
	KindGRPCRoute        Kind = "GRPCRoute"
	KindTLSRoute         Kind = "TLSRoute"
	KindListenerSet      Kind = "ListenerSet"
	KindReferenceGrant   Kind = "ReferenceGrant"
	KindBackendTLSPolicy Kind = "BackendTLSPolicy"
	KindNamespace        Kind = "Namespace"
	// KindUnknown is used when a change cannot be attributed (a file that failed to decode).
	KindUnknown Kind = "Unknown"
)

// Change is one change to a source's cache: the kind of object and, when
// the source knows it, which object, so that the sync log line can name
// what changed.
type Change struct {
	Kind Kind
	// Namespace and Name of the object; Name is "" when the source cannot
	// say (only the problems of the files changed).
	Namespace, Name string
	// Last says no change follows at once: the source reported a batch
	// whole, after its snapshot holds all of it (the file source after a
	// publish), so the syncer need not wait for more (Syncer's
	// quietPeriod). A source whose changes trickle in (informers) leaves
	// it false.
	Last bool
}

// String is "Kind namespace/name", "Kind name" for an object of no
// namespace, or the Kind alone when the object is not known.
func (c Change) String() string {
	switch {
	case c.Name == "":
		return string(c.Kind)
	case c.Namespace == "":
		return string(c.Kind) + " " + c.Name
	}
	return string(c.Kind) + " " + c.Namespace + "/" + c.Name
}

// Source holds a cache of objects and reports changes.
type Source interface {
	// Start fills the cache and begins watching. It returns once the first
	// full listing is in the cache (every informer synced, every file read),
	// or with an error if that cannot happen. Watching goes on until ctx is
	// done. changed is called after every change to the cache, once per
	// object; it must not block and it may be called from several
	// goroutines.
	Start(ctx context.Context, changed func(Change)) error
	// Snapshot returns the objects now in the cache (read-only, never to be
	// mutated) and the problems the source itself found, such as files that
	// failed to decode. The class settings of model.Snapshot are left empty.
	Snapshot() (model.Snapshot, []model.Problem)
}

// ServiceKey names a Service.
type ServiceKey struct{ Namespace, Name string }

// EndpointIndex is implemented by sources that know which Services'
// EndpointSlices changed, so that the syncer can refresh only the backends
// of those Services when nothing but endpoints moved (the fast path),
// instead of building the whole model again.
type EndpointIndex interface {
	// TakeChangedServices returns the Services whose EndpointSlices changed
	// since the last call, and forgets them. A slice is recorded before the
	// changed callback for it is called.
	TakeChangedServices() []ServiceKey
	// ServiceEndpoints returns the Service (nil if there is none) and its
	// EndpointSlices, read-only.
	ServiceEndpoints(namespace, name string) (*model.Service, []*discoveryv1.EndpointSlice)
}
