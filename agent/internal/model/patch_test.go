package model

import (
	"reflect"
	"slices"
	"strings"
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
	for i, s := range after.EndpointSlices.Slice() {
		switch s.Namespace + "/" + s.Name {
		case "default/web-def":
			after.EndpointSlices = withAt(after.EndpointSlices, i, endpointSlice("default", "web-def", "web", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.0.0.7")))
		case "default/api-2":
			after.EndpointSlices = withAt(after.EndpointSlices, i, endpointSlice("default", "api-2", "api", discoveryv1.AddressTypeIPv6, ports(slicePort("grpc", 9001), slicePort("", 8081)), ready("2001:db8::9")))
		}
	}
	want, _ := Build(after)
	if reflect.DeepEqual(want.Backends, old.Backends) {
		t.Fatal("the new endpoints build the same backends: the test proves nothing")
	}

	var patch EndpointPatch
	for _, svc := range []struct{ namespace, name string }{{"default", "web"}, {"default", "api"}, {"other", "absent"}} {
		patch.AddService(old.Backends, ServiceBackends(old.Backends, svc.namespace, svc.name),
			findService(after, svc.namespace, svc.name), findSlices(after, svc.namespace, svc.name), after.Targets)
	}
	next := old
	next.Backends = patch.Apply(old.Backends)
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

// ServiceBackends finds exactly the backends whose names BackendService
// gives the Service, by a binary search of the sorted backends: those of a
// Service whose name another's begins with, of the same name in another
// namespace, and variants, are told apart.
func TestServiceBackends(t *testing.T) {
	names := []string{
		"a/web:80", "a/web:80@a/canary", "a/web:http", "a/web-2:80", "a/web.x:80", "a/we:80", "a/weba:80",
		"a/web2:80@a/other", "ab/web:80", "a/b/web:80", "b/web:80", "a/web:8080", "a/web:80@b/x",
	}
	var backends []Backend
	for _, n := range names {
		backends = append(backends, Backend{Name: n})
	}
	slices.SortFunc(backends, func(a, b Backend) int { return strings.Compare(a.Name, b.Name) })
	services := [][2]string{{"a", "web"}, {"a", "we"}, {"a", "web-2"}, {"a", "weba"}, {"ab", "web"}, {"a", "b"}, {"a/b", "web"},
		{"b", "web"}, {"a", "web2"}, {"c", "web"}, {"a", ""}, {"", "web"}}
	for _, svc := range services {
		var want []int
		for i, b := range backends {
			if ns, name, _ := BackendService(b.Name); ns == svc[0] && name == svc[1] {
				want = append(want, i)
			}
		}
		if got := ServiceBackends(ListOf(backends...), svc[0], svc[1]); !slices.Equal(got, want) {
			t.Errorf("ServiceBackends(%s/%s) = %v, want %v", svc[0], svc[1], got, want)
		}
	}
	if got := ServiceBackends(List[Backend]{}, "a", "web"); got != nil {
		t.Errorf("no backends: %v", got)
	}
}
