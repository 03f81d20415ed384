package model

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestIncrementalIngressIndex: Incremental holds no index of the
// Ingresses by name while their lists come ordered (an Ingress is found
// by a binary search of the last snapshot's), makes one when a list comes
// out of order, finds a name twice there, and drops it once they are
// ordered again; Build's model at each step, incremental where it was.
func TestIncrementalIngressIndex(t *testing.T) {
	s := benchSnapshot(5) // app-0 … app-4: ordered
	inc := NewIncremental()
	step := func(what string, wantIndex, wantIncremental bool) {
		t.Helper()
		path := checkIncremental(t, inc, s, what)
		if (inc.ingresses != nil) != wantIndex || path.Incremental != wantIncremental {
			t.Errorf("%s: index of %d Ingresses (nil %v), path %+v; want an index %v, incremental %v",
				what, len(inc.ingresses), inc.ingresses == nil, path, wantIndex, wantIncremental)
		}
	}
	changed := func(ing *networkingv1.Ingress) *networkingv1.Ingress {
		c := ing.DeepCopy()
		c.Spec.Rules[0].HTTP.Paths[0].Path = "/changed"
		return c
	}
	step("first", false, false)
	s.Ingresses = withAt(s.Ingresses, 1, changed(s.Ingresses.At(1)))
	step("an Ingress changed, in order", false, true)
	s.Ingresses = ListOf(slices.Delete(s.Ingresses.Slice(), 2, 3)...)
	step("an Ingress went, in order", false, true)
	reversed := s.Ingresses.Slice()
	slices.Reverse(reversed)
	reversed[0] = changed(reversed[0])
	s.Ingresses = ListOf(reversed...)
	step("an Ingress changed, out of order", true, true)
	ordered := s.Ingresses.Slice()
	slices.Reverse(ordered)
	s.Ingresses = ListOf(append(s.Ingresses.Slice(), changed(s.Ingresses.At(2)))...)
	step("a name twice, out of order", true, false)
	s.Ingresses = ListOf(ordered...)
	step("in order again", false, false) // after a build whole
	s.Ingresses = ListOf(append(s.Ingresses.Slice(), benchSnapshot(7).Ingresses.At(6))...)
	step("an Ingress came, in order", false, true)
}

// The sum holds a host for one island at most: a second island that
// serves it is refused (Incremental then builds whole), also after the
// first island's host went and came back, and once the island that held
// it is removed another may take it. (The sum keeps no count per host:
// its servers list says which are held.)
func TestModelSumServesAHostOnce(t *testing.T) {
	u := newModelSum()
	a := &Model{Servers: ListOf(&Server{Host: "a.test", Locations: []Location{{Path: "/"}}})}
	b := &Model{Servers: ListOf(&Server{Host: "a.test", Locations: []Location{{Path: "/b"}}})}
	held, err := u.add(a, nil)
	if err != "" {
		t.Fatalf("first island: %s", err)
	}
	if _, err := u.add(b, nil); err != `host "a.test" is served by two islands` {
		t.Errorf("second island of a.test: error %q", err)
	}
	u = newModelSum()
	held, _ = u.add(a, nil)
	u.model(Model{}) // the host merged into the list
	if _, err := u.add(b, nil); err == "" {
		t.Errorf("second island of a.test, the first one's in the list: no error")
	}
	u = newModelSum()
	held, _ = u.add(a, nil)
	u.model(Model{})
	u.remove(held)
	if _, err := u.add(b, nil); err != "" {
		t.Errorf("a.test after its island went: %s", err)
	}
	if m, _ := u.model(Model{}); m.Servers.Len() != 1 || m.Servers.At(0).Locations[0].Path != "/b" {
		t.Errorf("the model serves %v, want a.test's /b", m.Servers)
	}
}

// After a full build Incremental holds copies of its islands
// (compact): every Ingress's island and every reader of an object is
// one of them, and later changes (a Service, an Ingress that went) build
// their part alone, equal to Build.
func TestIncrementalAfterCompact(t *testing.T) {
	s := benchSnapshot(100) // 4 parts of up to 32 Ingresses
	inc := NewIncremental()
	checkIncremental(t, inc, s, "first")
	islands := map[*island]bool{}
	for _, is := range inc.islandOf {
		islands[is] = true
	}
	if len(islands) != 4 {
		t.Fatalf("%d islands, want 4", len(islands))
	}
	for h, first := range inc.readers.one {
		for _, is := range append([]*island{first}, inc.readers.more[h]...) {
			if is != inc.globals && !islands[is] && !is.routeIsland {
				t.Fatalf("the reader of %x is an island no Ingress is in", h)
			}
		}
	}
	for _, is := range inc.islandOf {
		if is.held.hosts == nil || len(is.reads) == 0 {
			t.Fatalf("an island holds no hosts or reads: %+v", is)
		}
	}
	s.Services = ListOf(s.Services.Slice()...)
	svc := s.Services.At(50).DeepCopy()
	svc.Ports[0].Port = 81
	s.Services = withAt(s.Services, 50, svc)
	path := checkIncremental(t, inc, s, "a Service changed")
	if !path.Incremental || path.Ingresses > firstBatch {
		t.Errorf("a Service changed: path %+v, want its Ingress's part alone", path)
	}
	s.Ingresses = ListOf(slices.Delete(s.Ingresses.Slice(), 10, 11)...)
	path = checkIncremental(t, inc, s, "an Ingress went")
	if !path.Incremental || path.Ingresses > firstBatch {
		t.Errorf("an Ingress went: path %+v, want its part alone", path)
	}
}

// TestIncrementalServiceIndex: the builds find a Service by a binary
// search of the snapshot's Services while their list comes ordered (no
// index by name), by an index made when a list comes out of order, and
// again by the search once ordered; Build's model at each step,
// incremental where it was, with a changed, a new and a deleted Service
// each building again the Ingress that reads it.
func TestIncrementalServiceIndex(t *testing.T) {
	s := benchSnapshot(5) // app-0 … app-4: ordered
	inc := NewIncremental()
	step := func(what string, wantIndex bool) {
		t.Helper()
		path := checkIncremental(t, inc, s, what)
		if (inc.objects.services != nil) != wantIndex || !path.Incremental || path.Ingresses != 1 {
			t.Errorf("%s: index of %d Services (nil %v), path %+v; want an index %v, one Ingress built",
				what, len(inc.objects.services), inc.objects.services == nil, path, wantIndex)
		}
	}
	changed := func(svc *Service) *Service {
		c := svc.DeepCopy()
		c.Ports[0].Port = 81
		return c
	}
	checkIncremental(t, inc, s, "first")
	if inc.objects.services != nil {
		t.Fatalf("first: an index of %d Services, want none", len(inc.objects.services))
	}
	s.Services = withAt(s.Services, 0, changed(s.Services.At(0)))
	checkIncremental(t, inc, s, "a Service changed (the first part built again as its islands)")
	s.Services = withAt(s.Services, 1, changed(s.Services.At(1)))
	step("a Service changed, in order", false)
	gone := s.Services.At(2)
	s.Services = ListOf(slices.Delete(s.Services.Slice(), 2, 3)...)
	step("a Service went, in order", false)
	s.Services = ListOf(slices.Insert(s.Services.Slice(), 2, gone)...)
	step("a Service came, in order", false)
	s.Services = reversed(s.Services)
	s.Services = withAt(s.Services, 0, changed(s.Services.At(0)))
	step("a Service changed, out of order", true)
	s.Services = reversed(s.Services)
	s.Services = withAt(s.Services, 3, changed(s.Services.At(3)))
	step("a Service changed, in order again", false)
}

// TestIncrementalSlicesOf: with the source's index of EndpointSlices by
// Service (Snapshot.SlicesOf) neither Build nor Incremental makes one of
// its own, a slice's change is built incrementally from the next
// snapshot's index, and an index that comes or goes builds whole.
func TestIncrementalSlicesOf(t *testing.T) {
	withIndex := func(s Snapshot) Snapshot {
		index := map[namespacedName][]*discoveryv1.EndpointSlice{}
		for slice := range s.EndpointSlices.All() {
			key := namespacedName{slice.Namespace, s.ServiceOfSlice(slice)}
			index[key] = append(index[key], slice)
		}
		s.SlicesOf = func(namespace, service string) []*discoveryv1.EndpointSlice {
			return index[namespacedName{namespace, service}]
		}
		return s
	}
	s := benchSnapshot(5)
	if s.EndpointSlices.Len() == 0 {
		t.Fatal("benchSnapshot has no EndpointSlices")
	}
	inc := NewIncremental()
	step := func(what string, s Snapshot, wantMap, wantIncremental bool) {
		t.Helper()
		path := checkIncremental(t, inc, s, what)
		if (inc.objects.slices != nil) != wantMap || path.Incremental != wantIncremental {
			t.Errorf("%s: a map of %d Services' slices (nil %v), path %+v; want a map %v, incremental %v",
				what, len(inc.objects.slices), inc.objects.slices == nil, path, wantMap, wantIncremental)
		}
	}
	step("first", withIndex(s), false, false)
	if x := newObjectIndex(withIndex(s)); x.slices != nil {
		t.Errorf("Build's index holds a map of %d Services' slices, want none", len(x.slices))
	}
	changed := s.EndpointSlices.At(1).DeepCopy()
	changed.Endpoints[0].Addresses = []string{"10.9.9.9"}
	s.EndpointSlices = withAt(s.EndpointSlices, 1, changed)
	step("a slice changed", withIndex(s), false, true)
	s.EndpointSlices = ListOf(slices.Delete(s.EndpointSlices.Slice(), 2, 3)...)
	step("a slice went", withIndex(s), false, true)
	step("the index went", s, true, false)
	step("the index came", withIndex(s), false, false)
}
