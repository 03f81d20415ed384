package source

import (
	"hash/maphash"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// SliceIndex holds the EndpointSlices of each Service (the file source's
// view.slicesOf, the kube source's index for the fast path) in
// SliceShards maps, by a hash of the Service's key, and is never changed
// once it is served: a publish that changes one Service's slices
// copies the table of shards and the one shard that Service is in
// (SliceIndexEdit), and shares the others with the index before. Cloning
// one map of every Service per publish cost 4 MB and most of a publish at
// 50,000 Services; a shard of 50,000 holds about 200. The zero value is
// empty.
type SliceIndex struct {
	shards *[SliceShards]map[ServiceKey][]*discoveryv1.EndpointSlice
	// services counts the Services with slices: 0 leaves shards nil, as a
	// view built whole with no EndpointSlice does.
	services int
}

// SliceShards is how many maps a SliceIndex spreads its Services over.
const SliceShards = 256

var sliceSeed = maphash.MakeSeed()

func shardOf(key ServiceKey) int {
	return int(maphash.Comparable(sliceSeed, key) % SliceShards)
}

// Get returns the slices of the Service key, read-only.
func (x SliceIndex) Get(key ServiceKey) []*discoveryv1.EndpointSlice {
	if x.shards == nil {
		return nil
	}
	return x.shards[shardOf(key)][key]
}

// Of returns the slices of the Service namespace/name, read-only: Get as
// model.Snapshot.SlicesOf asks it.
func (x SliceIndex) Of(namespace, name string) []*discoveryv1.EndpointSlice {
	return x.Get(ServiceKey{Namespace: namespace, Name: name})
}

// Shard returns the i-th shard of x (for tests: which shards two indexes
// share), read-only.
func (x SliceIndex) Shard(i int) map[ServiceKey][]*discoveryv1.EndpointSlice {
	if x.shards == nil {
		return nil
	}
	return x.shards[i]
}

// SliceIndexEdit makes the next SliceIndex from one a view serves: it
// copies the table of shards once, and each shard the first time it
// changes one of its Services, and changes only those copies. An edit
// that is never done is an index of its own, changed in place (the kube
// source's, under its lock): each shard is copied once, at its first
// change. Set replaces a Service's list: a list Get returned is never
// changed.
type SliceIndexEdit struct {
	next  SliceIndex
	owned [SliceShards]bool
}

// NewSliceIndexEdit starts the next index from from.
func NewSliceIndexEdit(from SliceIndex) *SliceIndexEdit {
	e := &SliceIndexEdit{next: SliceIndex{services: from.services}}
	e.next.shards = new([SliceShards]map[ServiceKey][]*discoveryv1.EndpointSlice)
	if from.shards != nil {
		*e.next.shards = *from.shards
	}
	return e
}

// Get returns the slices of the Service key, read-only.
func (e *SliceIndexEdit) Get(key ServiceKey) []*discoveryv1.EndpointSlice {
	return e.next.Get(key)
}

// Set makes list the slices of key; an empty list removes key.
func (e *SliceIndexEdit) Set(key ServiceKey, list []*discoveryv1.EndpointSlice) {
	i := shardOf(key)
	shard := e.next.shards[i]
	if !e.owned[i] || shard == nil {
		e.owned[i] = true
		copied := make(map[ServiceKey][]*discoveryv1.EndpointSlice, len(shard)+1)
		for k, v := range shard {
			copied[k] = v
		}
		shard = copied
		e.next.shards[i] = shard
	}
	_, had := shard[key]
	switch {
	case len(list) == 0 && had:
		delete(shard, key)
		e.next.services--
	case len(list) > 0:
		if !had {
			e.next.services++
		}
		shard[key] = list
	}
	if len(shard) == 0 {
		e.next.shards[i] = nil // as a view built whole leaves it
	}
}

// Done returns the edited index.
func (e *SliceIndexEdit) Done() SliceIndex {
	if e.next.services == 0 {
		return SliceIndex{}
	}
	return e.next
}
