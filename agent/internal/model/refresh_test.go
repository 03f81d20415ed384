package model

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ResolveBackend gives every backend of a built Model the same endpoints
// Build gave it, from nothing but its Service and slices.
func TestResolveBackendMatchesBuild(t *testing.T) {
	snap := richSnapshot()
	m, _ := Build(snap)
	if len(m.Backends) == 0 {
		t.Fatal("richSnapshot has no backends")
	}
	for _, want := range m.Backends {
		namespace, service, ok := BackendService(want.Name)
		if !ok {
			t.Fatalf("BackendService(%q) failed", want.Name)
		}
		var svc = findService(snap, namespace, service)
		var slices = findSlices(snap, namespace, service)
		got, _ := ResolveBackend(want.Name, svc, slices, Targets{Local: true})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", want.Name, got, want)
		}
	}
}

func findService(s Snapshot, namespace, name string) *corev1.Service {
	for _, svc := range s.Services {
		if svc.Namespace == namespace && svc.Name == name {
			return svc
		}
	}
	return nil
}

func findSlices(s Snapshot, namespace, service string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, slice := range s.EndpointSlices {
		if slice.Namespace == namespace && slice.Labels[discoveryv1.LabelServiceName] == service {
			out = append(out, slice)
		}
	}
	return out
}
