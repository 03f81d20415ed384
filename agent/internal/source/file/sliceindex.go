package file

import (
	"hash/maphash"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/restysync/restysync/agent/internal/source"
)

// sliceIndex holds the EndpointSlices of each Service (view.slicesOf) in
// sliceShards maps, by a hash of the Service's key, and is never changed
// once a view serves it: a publish that changes one Service's slices
// copies the table of shards and the one shard that Service is in
// (sliceIndexEdit), and shares the others with the view before. Cloning
// one map of every Service per publish cost 4 MB and most of a publish at
// 50,000 Services; a shard of 50,000 holds about 200. The zero value is
// empty.
type sliceIndex struct {
	shards *[sliceShards]map[source.ServiceKey][]*discoveryv1.EndpointSlice
	// services counts the Services with slices: 0 leaves shards nil, as a
	// view built whole with no EndpointSlice does.
	services int
}

// sliceShards is how many maps a sliceIndex spreads its Services over.
const sliceShards = 256

var sliceSeed = maphash.MakeSeed()

func shardOf(key source.ServiceKey) int {
	return int(maphash.Comparable(sliceSeed, key) % sliceShards)
}

// get returns the slices of the Service key, read-only.
func (x sliceIndex) get(key source.ServiceKey) []*discoveryv1.EndpointSlice {
	if x.shards == nil {
		return nil
	}
	return x.shards[shardOf(key)][key]
}

// sliceIndexEdit makes the next sliceIndex from one a view serves: it
// copies the table of shards once, and each shard the first time it
// changes one of its Services, and changes only those copies.
type sliceIndexEdit struct {
	next  sliceIndex
	owned [sliceShards]bool
}

func newSliceIndexEdit(from sliceIndex) *sliceIndexEdit {
	e := &sliceIndexEdit{next: sliceIndex{services: from.services}}
	e.next.shards = new([sliceShards]map[source.ServiceKey][]*discoveryv1.EndpointSlice)
	if from.shards != nil {
		*e.next.shards = *from.shards
	}
	return e
}

func (e *sliceIndexEdit) get(key source.ServiceKey) []*discoveryv1.EndpointSlice {
	return e.next.get(key)
}

// set makes list the slices of key; an empty list removes key.
func (e *sliceIndexEdit) set(key source.ServiceKey, list []*discoveryv1.EndpointSlice) {
	i := shardOf(key)
	shard := e.next.shards[i]
	if !e.owned[i] || shard == nil {
		e.owned[i] = true
		copied := make(map[source.ServiceKey][]*discoveryv1.EndpointSlice, len(shard)+1)
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

// done returns the edited index.
func (e *sliceIndexEdit) done() sliceIndex {
	if e.next.services == 0 {
		return sliceIndex{}
	}
	return e.next
}
