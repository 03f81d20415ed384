package model

import (
	"hash/maphash"
	"slices"
)

// readers are the islands that read each object (Builder.reads), by the
// object's read hash (readHash): an Incremental builds again the islands
// that read an object that changed.
//
// Why a hash, and one island inline (hashIndex): at 50,000 Ingresses,
// each with its Service, a map[readKey][]*island held 50,000 keys of 40
// bytes, each with a list of one island (some 5 MB), and each island's
// reads listed the keys again (40 bytes each, 2 MB). A 64-bit hash is 8
// bytes, and an object most often has one reader. Two objects whose
// hashes collide (with a random seed, about one chance in 10^10 at
// 50,000 objects) share their readers: a change of either builds the
// islands of both again, which is more work, never a different model (an
// island built again is an ordinary Build of its Ingresses).
type readers struct {
	seed maphash.Seed
	hashIndex[*island]
}

func newReaders() readers {
	return readers{seed: maphash.MakeSeed(), hashIndex: newHashIndex[*island](0)}
}

// readHash is the hash under which an object read is noted.
func readHash(seed maphash.Seed, kind readKind, key namespacedName) uint64 {
	return maphash.Comparable(seed, readKey{kind, key})
}

// replace puts the islands of moved in the place of their keys
// (compact).
func (r *readers) replace(moved map[*island]*island) {
	for h, is := range r.one {
		if c := moved[is]; c != nil {
			r.one[h] = c
		}
	}
	for _, list := range r.more {
		for i, is := range list {
			if c := moved[is]; c != nil {
				list[i] = c
			}
		}
	}
}

// hashIndex holds values by a 64-bit hash, each once: the first value of
// a hash inline (one), the others in a list beside it (more), since most
// hashes have one value and a list of one costs its header and an
// allocation.
type hashIndex[V comparable] struct {
	one  map[uint64]V
	more map[uint64][]V
}

func newHashIndex[V comparable](n int) hashIndex[V] {
	return hashIndex[V]{one: make(map[uint64]V, n), more: map[uint64][]V{}}
}

// add puts v under h, once.
func (x *hashIndex[V]) add(h uint64, v V) {
	first, ok := x.one[h]
	switch {
	case !ok:
		x.one[h] = v
	case first != v && !slices.Contains(x.more[h], v):
		x.more[h] = append(x.more[h], v)
	}
}

// remove takes v out from under h.
func (x *hashIndex[V]) remove(h uint64, v V) {
	first, ok := x.one[h]
	if !ok {
		return
	}
	more := x.more[h]
	if first == v {
		if len(more) == 0 {
			delete(x.one, h)
			return
		}
		x.one[h] = more[len(more)-1]
		more = more[:len(more)-1]
	} else if i := slices.Index(more, v); i >= 0 {
		more[i] = more[len(more)-1]
		more = more[:len(more)-1]
	}
	if len(more) == 0 {
		delete(x.more, h)
	} else {
		x.more[h] = more
	}
}

// of calls f with each value under h.
func (x *hashIndex[V]) of(h uint64, f func(V)) {
	if v, ok := x.one[h]; ok {
		f(v)
		for _, v := range x.more[h] {
			f(v)
		}
	}
}

// readKind and readKey name an object a build read (Builder.reads).
//
// readService stands for a Service and its EndpointSlices both: a build
// reads a Service's slices after the Service, so one key for the two
// halves the keys held (at 50,000 Ingresses, each with its Service: some
// 6 MB of islands' reads and readers), and an island that read only the
// Service (service-upstream, ExternalName) is built again when its
// slices change too, which costs that island.
type readKind uint8

const (
	readService readKind = iota // a Service and its EndpointSlices
	readSecret
	readConfigMap
)

type readKey struct {
	kind readKind
	key  namespacedName
}

// readSet is what one build read, by read hash (readHash); nil reads
// nothing down (Build).
type readSet struct {
	seed maphash.Seed
	m    map[uint64]struct{}
}

func (r *readSet) add(kind readKind, key namespacedName) {
	if r == nil {
		return
	}
	if r.m == nil {
		r.m = map[uint64]struct{}{}
	}
	r.m[readHash(r.seed, kind, key)] = struct{}{}
}

func (r *readSet) hashes() []uint64 {
	out := make([]uint64, 0, len(r.m))
	for h := range r.m {
		out = append(out, h)
	}
	return out
}
