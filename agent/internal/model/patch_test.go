package model

import (
	"reflect"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// The fast path gives the model a full build of the new snapshot gives,
// and leaves the model it patched a copy of unchanged.
func TestEndpointPatchMatchesBuild(t *testing.T) {
	before := richSnapshot()
	old, _ := Build(before)
	kept, _ := Build(before)

	after := richSnapshot()
	for i, s := range after.EndpointSlices {
		switch s.Namespace + "/" + s.Name {
		case "default/web-def":
			after.EndpointSlices[i] = endpointSlice("default", "web-def", "web", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.0.0.7"))
		case "default/api-2":
			after.EndpointSlices[i] = endpointSlice("default", "api-2", "api", discoveryv1.AddressTypeIPv6, ports(slicePort("grpc", 9001), slicePort("", 8081)), ready("2001:db8::9"))
		}
	}
	want, _ := Build(after)
	if reflect.DeepEqual(want.Backends, old.Backends) {
		t.Fatal("the new endpoints build the same backends: the test proves nothing")
	}

	index := IndexBackends(old.Backends)
	var patch EndpointPatch
	for _, svc := range []serviceName{{"default", "web"}, {"default", "api"}, {"other", "absent"}} {
		patch.AddService(old.Backends, index.Positions(svc.namespace, svc.name),
			findService(after, svc.namespace, svc.name), findSlices(after, svc.namespace, svc.name), after.Targets)
	}
	next := old
	next.Backends = slices.Clone(old.Backends)
	patch.ApplyTo(next.Backends)
	if !reflect.DeepEqual(next, want) {
		t.Errorf("patched model differs from a full build:\n%+v\nwant\n%+v", next.Backends, want.Backends)
	}
	if !reflect.DeepEqual(old, kept) {
		t.Error("the model the patch was applied to a copy of changed")
	}
	for _, b := range patch.Backends() {
		if namespace, _, _ := BackendService(b.Name); namespace != "default" {
			t.Errorf("patch resolved %s, of no changed Service", b.Name)
		}
	}
}

// MergeProblems adds only the problems held lacks, once each, and never
// writes into held's array (it may have been handed out).
func TestMergeProblems(t *testing.T) {
	refused := Problem{Kind: "EndpointSlice", Namespace: "default", Name: "web-1", Reason: "address refused"}
	other := Problem{Kind: "Ingress", Namespace: "default", Name: "web", Reason: "bad path"}
	held := make([]Problem, 1, 4)
	held[0] = other
	if got := (EndpointPatch{Problems: []Problem{other}}).MergeProblems(held); !slices.Equal(got, held) {
		t.Errorf("nothing new: %v, want %v", got, held)
	}
	got := (EndpointPatch{Problems: []Problem{refused, other, refused}}).MergeProblems(held)
	if !slices.Equal(got, []Problem{other, refused}) {
		t.Errorf("merged %v, want [other refused]", got)
	}
	if spare := held[:2][1]; spare != (Problem{}) {
		t.Errorf("MergeProblems wrote %v into held's array", spare)
	}
}
