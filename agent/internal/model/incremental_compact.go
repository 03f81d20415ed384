package model

import "slices"

// compact moves what a full build keeps of its islands, and the
// backends' endpoint lists, into new allocations, once every island is
// built.
//
// Why: a full build at 50,000 Ingresses builds some 1,600 parts, and
// each part allocates its few lasting objects (its island, the lists of
// what it read and holds, its backends' endpoints) among the scratch of
// its Builder and processors, which are of the same sizes: once the
// scratch is collected, each lasting object keeps a span of mostly free
// room in use (heap dump at 50,000, TestHeapAtScale -heap.dump: the
// islands' 352-byte class 84 % free room, the 48-byte class of the
// endpoint lists 62 %, the 1,408-byte class of the read lists 52 %). A
// copy made after the build fills the free room of a few spans, one span
// after the other, and the spans the originals kept empty. It costs a
// copy of each island and backend, on a full build only (which built
// them all); an incremental build's islands are a few.
func (x *Incremental) compact(m *Model) {
	moved := make(map[*island]*island, len(x.islandOf)/firstBatch+1)
	for key, is := range x.islandOf {
		c := moved[is]
		if c == nil {
			c = &island{}
			*c = *is
			c.members = slices.Clone(is.members)
			c.reads = slices.Clone(is.reads)
			c.held.hosts = slices.Clone(is.held.hosts)
			c.held.backends = slices.Clone(is.held.backends)
			moved[is] = c
		}
		x.islandOf[key] = c
	}
	for _, list := range x.readers {
		for i, is := range list {
			if c := moved[is]; c != nil {
				list[i] = c
			}
		}
	}
	// m.Backends is the sum's list (modelSum.model): the clones are the
	// sum's too, equal to what it held.
	for i := range m.Backends {
		m.Backends[i].Endpoints = slices.Clone(m.Backends[i].Endpoints)
	}
}
