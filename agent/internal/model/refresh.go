package model

import (
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// BackendService returns the namespace and Service a Backend name
// ("namespace/service:port") refers to.
func BackendService(name string) (namespace, service string, ok bool) {
	namespace, rest, ok := strings.Cut(baseBackendName(name), "/")
	if !ok {
		return "", "", false
	}
	service, _, ok = strings.Cut(rest, ":")
	return namespace, service, ok
}

// ResolveBackend computes the endpoints of the backend called name from its
// Service (nil if it is gone) and that Service's EndpointSlices, exactly as
// Build does. It is the fast path for a change of endpoints only: the rest
// of the Model stays as it is. The problems are those of the slices read.
// targets are the Snapshot's (Snapshot.Targets).
func ResolveBackend(name string, svc *Service, slices []*discoveryv1.EndpointSlice, targets Targets) (Backend, []Problem) {
	namespace, rest, _ := strings.Cut(baseBackendName(name), "/")
	service, written, _ := strings.Cut(rest, ":")
	port := networkingv1.ServiceBackendPort{Name: written}
	if n, err := strconv.Atoi(written); err == nil {
		port = networkingv1.ServiceBackendPort{Number: int32(n)}
	}
	// The slices are the Service's, whether they keep their label or not.
	s := Snapshot{EndpointSlices: ListOf(slices...), Targets: targets,
		SliceServices: func(*discoveryv1.EndpointSlice) string { return service }}
	if svc != nil {
		s.Services = ListOf(svc)
	}
	b := newBuilder(s)
	r := b.resolve(backendRef{namespace: namespace, service: service, port: port, name: name,
		serviceUpstream: strings.Contains(name, serviceUpstreamMark)})
	return r.backend, b.sortedProblems()
}
