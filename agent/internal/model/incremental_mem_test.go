package model

import (
	"slices"
	"testing"

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
	s.Ingresses = slices.Clone(s.Ingresses)
	s.Ingresses[1] = changed(s.Ingresses[1])
	step("an Ingress changed, in order", false, true)
	s.Ingresses = slices.Delete(slices.Clone(s.Ingresses), 2, 3)
	step("an Ingress went, in order", false, true)
	s.Ingresses = slices.Clone(s.Ingresses)
	slices.Reverse(s.Ingresses)
	s.Ingresses[0] = changed(s.Ingresses[0])
	step("an Ingress changed, out of order", true, true)
	ordered := slices.Clone(s.Ingresses)
	slices.Reverse(ordered)
	s.Ingresses = append(slices.Clone(s.Ingresses), changed(s.Ingresses[2]))
	step("a name twice, out of order", true, false)
	s.Ingresses = ordered
	step("in order again", false, false) // after a build whole
	s.Ingresses = append(slices.Clone(s.Ingresses), benchSnapshot(7).Ingresses[6])
	step("an Ingress came, in order", false, true)
}

// The sum holds a host for one island at most: a second island that
// serves it is refused (Incremental then builds whole), also after the
// first island's host went and came back, and once the island that held
// it is removed another may take it. (The sum keeps no count per host:
// its servers list says which are held.)
func TestModelSumServesAHostOnce(t *testing.T) {
	u := newModelSum()
	a := &Model{Servers: []*Server{{Host: "a.test", Locations: []Location{{Path: "/"}}}}}
	b := &Model{Servers: []*Server{{Host: "a.test", Locations: []Location{{Path: "/b"}}}}}
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
	if m, _ := u.model(Model{}); len(m.Servers) != 1 || m.Servers[0].Locations[0].Path != "/b" {
		t.Errorf("the model serves %v, want a.test's /b", m.Servers)
	}
}
