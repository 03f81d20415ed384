package model

import (
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// ResolveBackend gives every backend of a built Model the same endpoints
// Build gave it, from nothing but its Service and slices.
func TestResolveBackendMatchesBuild(t *testing.T) {
	snap := richSnapshot()
	m, _ := Build(snap)
	if m.Backends.Len() == 0 {
		t.Fatal("richSnapshot has no backends")
	}
	for _, want := range m.Backends.Slice() {
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

// The same of slices held without their label (the file source's): the
// slices of the Service ResolveBackend is given are that Service's.
func TestResolveBackendMatchesBuildWithoutLabels(t *testing.T) {
	snap := newUnlabelled().snapshot(richSnapshot())
	m, _ := Build(snap)
	withEndpoints := 0
	for _, want := range m.Backends.Slice() {
		namespace, service, _ := BackendService(want.Name)
		var slices []*discoveryv1.EndpointSlice
		for slice := range snap.EndpointSlices.All() {
			if slice.Namespace == namespace && snap.ServiceOfSlice(slice) == service {
				slices = append(slices, slice)
			}
		}
		got, _ := ResolveBackend(want.Name, findService(snap, namespace, service), slices, Targets{Local: true})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", want.Name, got, want)
		}
		if len(want.Endpoints) > 0 {
			withEndpoints++
		}
	}
	if withEndpoints == 0 {
		t.Error("no backend with endpoints: the slices are not read")
	}
}

func findService(s Snapshot, namespace, name string) *Service {
	for svc := range s.Services.All() {
		if svc.Namespace == namespace && svc.Name == name {
			return svc
		}
	}
	return nil
}

func findSlices(s Snapshot, namespace, service string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for slice := range s.EndpointSlices.All() {
		if slice.Namespace == namespace && slice.Labels[discoveryv1.LabelServiceName] == service {
			out = append(out, slice)
		}
	}
	return out
}
