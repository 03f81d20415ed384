package model

import (
	"slices"
	"testing"
)

// readers hold an object's first island inline and the others beside
// it; removing the inline one moves another in its place, and an object
// without readers holds no entry.
func TestReaders(t *testing.T) {
	r := newReaders()
	a, b, c := &island{}, &island{}, &island{}
	of := func(h uint64) []*island {
		var out []*island
		r.of(h, func(is *island) { out = append(out, is) })
		return out
	}
	r.add(1, a)
	r.add(1, a)
	r.add(2, b)
	if got := of(1); !slices.Equal(got, []*island{a}) || len(r.more) != 0 {
		t.Fatalf("one reader of 1: %v, more %v", got, r.more)
	}
	r.add(1, b)
	r.add(1, c)
	r.add(1, b)
	if got := of(1); len(got) != 3 || !slices.Contains(got, a) || !slices.Contains(got, b) || !slices.Contains(got, c) {
		t.Fatalf("three readers of 1: %v", got)
	}
	r.remove(1, a) // the inline one
	if got := of(1); len(got) != 2 || !slices.Contains(got, b) || !slices.Contains(got, c) {
		t.Fatalf("after a went: %v", got)
	}
	r.remove(1, c)
	if got := of(1); !slices.Equal(got, []*island{b}) || len(r.more) != 0 {
		t.Fatalf("after c went: %v, more %v", got, r.more)
	}
	r.remove(1, b)
	r.remove(2, a) // not a reader: nothing
	if got := of(1); len(got) != 0 || len(r.one) != 1 || !slices.Equal(of(2), []*island{b}) {
		t.Fatalf("after b went: readers of 1 %v, one %v", got, r.one)
	}
}

// After a full build at 100 Ingresses, each with its own Service, every
// object read has one island inline and none beside it; a read hash that
// two objects share (as two colliding hashes would) builds the islands
// of both when one changes, and the model is Build's.
func TestIncrementalReadersShareAHash(t *testing.T) {
	s := benchSnapshot(100)
	inc := NewIncremental()
	checkIncremental(t, inc, s, "first")
	if len(inc.readers.more) != 0 || len(inc.readers.one) < 100 {
		t.Fatalf("readers: %d inline, %d lists beside; want 100 or more inline, no lists", len(inc.readers.one), len(inc.readers.more))
	}
	// app-70's island reads app-20's hash too.
	h := readHash(inc.readers.seed, readService, namespacedName{"default", "app-20"})
	other, own := inc.islandOf[namespacedName{"default", "app-70"}], inc.islandOf[namespacedName{"default", "app-20"}]
	if other == own {
		t.Fatal("app-20 and app-70 are in one part")
	}
	want := len(other.members) + len(own.members)
	other.reads = append(other.reads, h)
	inc.readers.add(h, other)
	s.Services = ListOf(s.Services.Slice()...)
	svc := s.Services.At(20).DeepCopy()
	svc.Ports[0].Port = 81
	s.Services = withAt(s.Services, 20, svc)
	path := checkIncremental(t, inc, s, "app-20's Service changed")
	if !path.Incremental || path.Ingresses != want {
		t.Errorf("app-20's Service changed: path %+v, want the %d Ingresses of the two parts that read its hash", path, want)
	}
	if len(inc.readers.more) != 0 {
		t.Errorf("after the two parts were built again: %d lists beside", len(inc.readers.more))
	}
}

// After a full build at 100 Ingresses, each with a host of its own, each
// link key has its Ingress inline and none beside it; an Ingress linked
// under another's key hash too (as two colliding hashes would link it)
// joins that one's island when either changes, and the model is Build's.
func TestIncrementalLinksShareAHash(t *testing.T) {
	s := benchSnapshot(100)
	inc := NewIncremental()
	checkIncremental(t, inc, s, "first")
	if len(inc.linked.more) != 0 || len(inc.linked.one) != 100 {
		t.Fatalf("links: %d inline, %d lists beside; want 100 inline, no lists", len(inc.linked.one), len(inc.linked.more))
	}
	a, b := namespacedName{"default", "app-20"}, namespacedName{"default", "app-70"}
	own, other := inc.islandOf[a], inc.islandOf[b]
	if other == own {
		t.Fatal("app-20 and app-70 are in one part")
	}
	want := len(other.members) + len(own.members)
	inc.link("app-20.example.com", b)
	ing := s.Ingresses.At(20).DeepCopy()
	ing.Spec.Rules[0].HTTP.Paths[0].Path = "/changed"
	s.Ingresses = withAt(s.Ingresses, 20, ing)
	path := checkIncremental(t, inc, s, "app-20 changed")
	if !path.Incremental || path.Ingresses != want {
		t.Errorf("app-20 changed: path %+v, want the %d Ingresses of the two parts linked", path, want)
	}
	if inc.islandOf[a] != inc.islandOf[b] {
		t.Errorf("app-20 and app-70, linked, are in two islands")
	}
}
