package model

import "slices"

// compact moves what a full build keeps of its islands, the backends'
// endpoint lists and the servers' locations into new allocations, once
// every island is built.
//
// Why: a full build at 50,000 Ingresses builds some 1,600 parts, and each
// part allocates its few lasting objects (its island, the lists of what
// it read and holds, its backends' endpoints, its servers' locations)
// among the scratch of its Builder and processors, much of it of the same
// size classes: once the scratch is collected, the lasting objects keep
// spans of mostly free room in use. A heap dump at 50,000
// (TestHeapAtScale -heap.dump) found 7.3 MB of free room in the islands'
// 352-byte class (84 % full), 6.3 MB in the 48-byte class of the
// endpoint lists (62 %), 2.1 MB in the 1,408-byte class of the read lists
// (52 %), and, with a Location at 144 bytes, 6.3 MB in the locations'
// class (54 %). A copy made after the build fills the free room of a few
// spans, one span after the other, and the spans the originals kept go
// empty. It costs a copy of each island, backend and location on a full
// build only (which built them all); an incremental build's islands are
// a few.
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
	x.readers.replace(moved)
	// m.Backends is the sum's list (modelSum.model), handed out to no one
	// yet: the clones, written into its chunks, are the sum's too, equal
	// to what it held.
	for chunk := range m.Backends.eachChunk() {
		for i := range chunk {
			chunk[i].Endpoints = slices.Clone(chunk[i].Endpoints)
		}
	}
	// m.Servers are the sum's, handed out to no one yet: their locations
	// (144 bytes each, the size class of much of the build's scratch)
	// move the same way. The default server's stay: m.Default is a copy
	// that shares them.
	for srv := range m.Servers.All() {
		srv.Locations = slices.Clone(srv.Locations)
	}
}
