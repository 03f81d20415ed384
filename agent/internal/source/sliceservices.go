package source

import (
	"hash/maphash"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// DropServiceLabel returns the name of the Service slice belongs to (its
// kubernetes.io/service-name label) and takes slice's labels away when
// that label is the only one, for a source that then keeps the name
// beside the slice (SliceServices, model.Snapshot.SliceServices): a map
// of one label is some 300 bytes, 15 MB at 50,000 slices, where an entry
// of SliceServices is about 35. dropped says it did. A slice with other
// labels keeps them all, so that what reads them (the Gateway Services'
// slices, selected by label) still can. slice must be the caller's own,
// not yet handed out.
func DropServiceLabel(slice *discoveryv1.EndpointSlice) (service string, dropped bool) {
	service = slice.Labels[discoveryv1.LabelServiceName]
	if service == "" || len(slice.Labels) != 1 {
		return service, false
	}
	slice.Labels = nil
	return service, true
}

// SliceServices names the Service of each EndpointSlice a view serves
// whose labels were dropped (DropServiceLabel): model.Snapshot's
// SliceServices. As SliceIndex, it is never changed once served, and it
// spreads its slices over SliceShards maps (by a hash of the slice's
// address), so that the next view's copies only the table of shards and
// the shards it changes (SliceServicesEdit). The zero value is empty.
type SliceServices struct {
	shards *[SliceShards]map[*discoveryv1.EndpointSlice]string
}

var sliceServicesSeed = maphash.MakeSeed()

func sliceShardOf(slice *discoveryv1.EndpointSlice) int {
	return int(maphash.Comparable(sliceServicesSeed, slice) % SliceShards)
}

// Of returns the name of the Service of slice, "" if x holds none.
func (x SliceServices) Of(slice *discoveryv1.EndpointSlice) string {
	if x.shards == nil {
		return ""
	}
	return x.shards[sliceShardOf(slice)][slice]
}

// Len is how many slices x names a Service of.
func (x SliceServices) Len() int {
	n := 0
	if x.shards != nil {
		for _, shard := range x.shards {
			n += len(shard)
		}
	}
	return n
}

// SliceServicesEdit makes the next SliceServices from one a view serves,
// as SliceIndexEdit does: it copies the table of shards once, and each
// shard the first time it changes it.
type SliceServicesEdit struct {
	next  SliceServices
	owned [SliceShards]bool
}

// NewSliceServicesEdit starts the next SliceServices from from.
func NewSliceServicesEdit(from SliceServices) *SliceServicesEdit {
	e := &SliceServicesEdit{next: SliceServices{shards: new([SliceShards]map[*discoveryv1.EndpointSlice]string)}}
	if from.shards != nil {
		*e.next.shards = *from.shards
	}
	return e
}

// Set makes service the Service of slice; "" takes slice out.
func (e *SliceServicesEdit) Set(slice *discoveryv1.EndpointSlice, service string) {
	i := sliceShardOf(slice)
	shard := e.next.shards[i]
	if service == "" && shard[slice] == "" {
		return
	}
	if !e.owned[i] || shard == nil {
		e.owned[i] = true
		copied := make(map[*discoveryv1.EndpointSlice]string, len(shard)+1)
		for k, v := range shard {
			copied[k] = v
		}
		shard = copied
		e.next.shards[i] = shard
	}
	if service == "" {
		delete(shard, slice)
	} else {
		shard[slice] = service
	}
	if len(shard) == 0 {
		e.next.shards[i] = nil
	}
}

// Of returns the name of the Service of slice as edited so far.
func (e *SliceServicesEdit) Of(slice *discoveryv1.EndpointSlice) string { return e.next.Of(slice) }

// Done returns the edited SliceServices.
func (e *SliceServicesEdit) Done() SliceServices {
	for _, shard := range e.next.shards {
		if shard != nil {
			return e.next
		}
	}
	return SliceServices{}
}
