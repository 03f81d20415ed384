package model

import (
	"iter"
	"slices"
	"sort"
)

// List is a list kept in chunks that no one changes once the list is
// handed out: the next list is made from the last (Edited), sharing every
// chunk its edits do not fall in. A change to one of 50,000 objects then
// costs one chunk and the index of chunks, not a copy of the whole list
// (400 KB of pointers): at that size the copies were most of what a
// change allocated, and so set how often the GC ran (a mark of the whole
// heap every ~170 changes). Two lists of which one was made from the
// other are compared chunk by chunk (CompareLists), skipping the chunks
// both hold.
//
// The chunks are grouped in parts, which are shared the same way: an edit
// copies the list of parts, the part it falls in (its list of chunks) and
// the chunk. With one flat list of chunks, that list was most of an
// edit at 50,000 items (196 chunks of 256: 6 KB, and a chunk of 2 to 4 KB;
// four lists edited a new Ingress, 40 KB of its 134); parts of 32 chunks of
// 128 items cost some 3 KB an edit at that size.
//
// Lists of objects are sorted (by namespace and name, Servers by host);
// List itself only keeps the order it is given. The zero List is empty.
type List[T any] struct {
	parts []listPart[T] // not empty
}

// listPart is a run of chunks of a List; end is the number of items in
// the list's parts up to and including this one.
type listPart[T any] struct {
	chunks []listPiece[T] // not empty
	end    int
}

// listPiece is a chunk of a list's items; end is the number of items in
// its part's chunks up to and including this one.
type listPiece[T any] struct {
	items []T // not empty
	end   int
}

// listChunk is the size a chunk is cut to; a chunk that grows past twice
// that is cut again, and one that shrinks below half of it joins the
// chunk before it when both fit in twice that. Parts are cut and joined
// the same way by their number of chunks (partChunks).
const (
	listChunk  = 128
	partChunks = 32
)

// ListOf returns the list of items, in their order. It holds items itself,
// not a copy: the caller must not change them after.
func ListOf[T any](items ...T) List[T] {
	chunks := appendListChunk(nil, items)
	setChunkEnds(chunks)
	return List[T]{parts: setPartEnds(appendListPart(nil, chunks))}
}

// Len is the number of items.
func (l List[T]) Len() int {
	if len(l.parts) == 0 {
		return 0
	}
	return l.parts[len(l.parts)-1].end
}

// At returns item i (0 ≤ i < Len).
func (l List[T]) At(i int) T {
	p := sort.Search(len(l.parts), func(p int) bool { return l.parts[p].end > i })
	if p > 0 {
		i -= l.parts[p-1].end
	}
	chunks := l.parts[p].chunks
	c := sort.Search(len(chunks), func(c int) bool { return chunks[c].end > i })
	if c > 0 {
		i -= chunks[c-1].end
	}
	return chunks[c].items[i]
}

// All yields the items in order.
func (l List[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, part := range l.parts {
			for _, chunk := range part.chunks {
				for _, v := range chunk.items {
					if !yield(v) {
						return
					}
				}
			}
		}
	}
}

// eachChunk yields the chunks of items, in order.
func (l List[T]) eachChunk() iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for _, part := range l.parts {
			for _, chunk := range part.chunks {
				if !yield(chunk.items) {
					return
				}
			}
		}
	}
}

// Slice returns the items in order, in a new slice; nil for none.
func (l List[T]) Slice() []T {
	if l.Len() == 0 {
		return nil
	}
	out := make([]T, 0, l.Len())
	for chunk := range l.eachChunk() {
		out = append(out, chunk...)
	}
	return out
}

// Search returns where the item cmp finds (cmp(v) < 0 for the items
// before it, > 0 for those after) is in l, which is sorted as cmp says,
// or would be, and whether it is there.
func (l List[T]) Search(cmp func(T) int) (int, bool) {
	p := sort.Search(len(l.parts), func(p int) bool {
		chunks := l.parts[p].chunks
		last := chunks[len(chunks)-1].items
		return cmp(last[len(last)-1]) >= 0
	})
	if p == len(l.parts) {
		return l.Len(), false
	}
	chunks := l.parts[p].chunks
	c := sort.Search(len(chunks), func(c int) bool {
		items := chunks[c].items
		return cmp(items[len(items)-1]) >= 0
	})
	j, found := slices.BinarySearchFunc(chunks[c].items, 0, func(v T, _ int) int { return cmp(v) })
	if c > 0 {
		j += chunks[c-1].end
	}
	if p > 0 {
		j += l.parts[p-1].end
	}
	return j, found
}

// Find returns the item cmp finds (as Search), and whether l has one.
func (l List[T]) Find(cmp func(T) int) (T, bool) {
	i, found := l.Search(cmp)
	if !found {
		var zero T
		return zero, false
	}
	return l.At(i), true
}

// Same says whether l and o are the same list, not empty: one made from
// the other with no edit, or both the one handed out.
func (l List[T]) Same(o List[T]) bool {
	return len(l.parts) == len(o.parts) && len(l.parts) > 0 && &l.parts[0] == &o.parts[0]
}

// Shares says whether l and o hold a chunk in common: one was made from
// the other (Edited), or both from one list, and some chunk no edit fell
// in is in both. A diff of the two (CompareLists) then skips it.
func (l List[T]) Shares(o List[T]) bool {
	if len(l.parts) == 0 || len(o.parts) == 0 {
		return false
	}
	firsts := make(map[*T]bool)
	for chunk := range l.eachChunk() {
		firsts[&chunk[0]] = true
	}
	for chunk := range o.eachChunk() {
		if firsts[&chunk[0]] {
			return true
		}
	}
	return false
}

// ListEdit is one edit Edited makes: Value takes the place of the item of
// Key (or is added), or, with Remove, the item of Key is removed.
type ListEdit[K, T any] struct {
	Key    K
	Value  T
	Remove bool
}

// Edited returns l with edits made; l is not changed, and the result
// shares every part and chunk of l no edit falls in. l is sorted as cmp
// orders an item against a key, and edits are sorted by key, one per key
// (the caller sorts them). Removing a key l does not hold changes
// nothing. An empty result is the zero List, as ListOf() is.
func Edited[K, T any](l List[T], edits []ListEdit[K, T], cmp func(T, K) int) List[T] {
	if len(edits) == 0 {
		return l
	}
	parts := make([]listPart[T], 0, len(l.parts)+1)
	next := 0 // the first edit not made yet
	for i, part := range l.parts {
		end := next
		// An edit falls in this part when its key is before the next
		// part's first item (the last part takes the rest).
		for end < len(edits) && (i == len(l.parts)-1 || cmp(l.parts[i+1].chunks[0].items[0], edits[end].Key) > 0) {
			end++
		}
		if end == next {
			parts = append(parts, part)
			continue
		}
		parts = appendListPart(parts, editedChunks(part.chunks, edits[next:end], cmp))
		next = end
	}
	if len(l.parts) == 0 {
		parts = appendListPart(parts, editedChunks(nil, edits, cmp))
	}
	if len(parts) == 0 {
		return List[T]{}
	}
	return List[T]{parts: setPartEnds(parts)}
}

// editedChunks returns new chunks of a part: chunks with edits (sorted by
// key, all of them before the next part's first item) made, sharing every
// chunk no edit falls in.
func editedChunks[K, T any](chunks []listPiece[T], edits []ListEdit[K, T], cmp func(T, K) int) []listPiece[T] {
	out := make([]listPiece[T], 0, len(chunks)+1)
	next := 0
	for i, chunk := range chunks {
		end := next
		// As Edited's parts: the last chunk takes the rest.
		for end < len(edits) && (i == len(chunks)-1 || cmp(chunks[i+1].items[0], edits[end].Key) > 0) {
			end++
		}
		if end == next {
			out = append(out, chunk)
			continue
		}
		out = appendListChunk(out, mergeEdits(chunk.items, edits[next:end], cmp))
		next = end
	}
	if len(chunks) == 0 {
		out = appendListChunk(out, mergeEdits(nil, edits, cmp))
	}
	setChunkEnds(out)
	return out
}

// mergeEdits returns a new chunk: chunk with edits (sorted by key, as
// chunk is) made.
func mergeEdits[K, T any](chunk []T, edits []ListEdit[K, T], cmp func(T, K) int) []T {
	out := make([]T, 0, len(chunk)+len(edits))
	i := 0
	for _, e := range edits {
		for i < len(chunk) && cmp(chunk[i], e.Key) < 0 {
			out = append(out, chunk[i])
			i++
		}
		if i < len(chunk) && cmp(chunk[i], e.Key) == 0 {
			i++
		}
		if !e.Remove {
			out = append(out, e.Value)
		}
	}
	return append(out, chunk[i:]...)
}

// appendListChunk appends items as chunks: not at all when empty, cut
// into pieces of listChunk when more than twice that, joined to the last
// of chunks when both are small enough. The caller sets the ends
// (setChunkEnds).
func appendListChunk[T any](chunks []listPiece[T], items []T) []listPiece[T] {
	switch {
	case len(items) == 0:
		return chunks
	case len(items) > 2*listChunk:
		for len(items) > 0 {
			n := min(listChunk, len(items))
			chunks = append(chunks, listPiece[T]{items: slices.Clip(items[:n])})
			items = items[n:]
		}
		return chunks
	case len(items) < listChunk/2 && len(chunks) > 0 && len(chunks[len(chunks)-1].items)+len(items) <= 2*listChunk:
		last := &chunks[len(chunks)-1]
		last.items = append(slices.Clip(last.items), items...) // a new array: last may be shared
		return chunks
	}
	return append(chunks, listPiece[T]{items: slices.Clip(items)})
}

// appendListPart appends chunks (their ends set) as parts, as
// appendListChunk appends items as chunks; a part cut or joined gets new
// chunks of its own, its ends set again.
func appendListPart[T any](parts []listPart[T], chunks []listPiece[T]) []listPart[T] {
	switch {
	case len(chunks) == 0:
		return parts
	case len(chunks) > 2*partChunks:
		for len(chunks) > 0 {
			n := min(partChunks, len(chunks))
			piece := slices.Clone(chunks[:n])
			setChunkEnds(piece)
			parts = append(parts, listPart[T]{chunks: piece})
			chunks = chunks[n:]
		}
		return parts
	case len(chunks) < partChunks/2 && len(parts) > 0 && len(parts[len(parts)-1].chunks)+len(chunks) <= 2*partChunks:
		last := &parts[len(parts)-1]
		last.chunks = append(slices.Clip(last.chunks), chunks...) // a new array: last may be shared
		setChunkEnds(last.chunks)
		return parts
	}
	return append(parts, listPart[T]{chunks: slices.Clip(chunks)})
}

// setChunkEnds sets the running counts of chunks' items.
func setChunkEnds[T any](chunks []listPiece[T]) {
	n := 0
	for i := range chunks {
		n += len(chunks[i].items)
		chunks[i].end = n
	}
}

// setPartEnds sets the running counts of parts' items, and returns parts.
func setPartEnds[T any](parts []listPart[T]) []listPart[T] {
	n := 0
	for i := range parts {
		n += parts[i].chunks[len(parts[i].chunks)-1].end
		parts[i].end = n
	}
	return parts
}

// sameListChunk says whether a and b are the very same chunk.
func sameListChunk[T any](a, b []T) bool {
	return len(a) == len(b) && &a[0] == &b[0]
}

// sameListPart says whether a and b are the very same part.
func sameListPart[T any](a, b listPart[T]) bool {
	return len(a.chunks) == len(b.chunks) && &a.chunks[0] == &b.chunks[0]
}

// CompareLists calls f for each key of a or b, in order, with its item in
// each and whether each has one, but for the items of parts and chunks a
// and b share: lists are never changed, so a chunk of both holds the same
// items in both. Two lists of which one was made from the other (Edited)
// share every part and chunk no edit fell in, so a diff of the two costs
// the chunks that differ, not a walk of every item. a and b are sorted as
// cmp orders two items.
func CompareLists[T any](a, b List[T], cmp func(x, y T) int, f func(x, y T, inA, inB bool)) {
	x, y := listCursor[T]{parts: a.parts}, listCursor[T]{parts: b.parts}
	var zero T
	for !x.done() || !y.done() {
		if !x.done() && !y.done() && x.i == 0 && y.i == 0 {
			if x.c == 0 && y.c == 0 && sameListPart(x.parts[x.p], y.parts[y.p]) {
				x.skipPart()
				y.skipPart()
				continue
			}
			if sameListChunk(x.chunk(), y.chunk()) {
				x.skipChunk()
				y.skipChunk()
				continue
			}
		}
		var c int // a's next item against b's: cmp once an item met
		switch {
		case y.done():
			c = -1
		case x.done():
			c = 1
		default:
			c = cmp(x.item(), y.item())
		}
		switch {
		case c < 0:
			f(x.item(), zero, true, false)
			x.next()
		case c > 0:
			f(zero, y.item(), false, true)
			y.next()
		default:
			f(x.item(), y.item(), true, true)
			x.next()
			y.next()
		}
	}
}

// listCursor is a place in a list's parts: item i of chunk c of part p.
type listCursor[T any] struct {
	parts   []listPart[T]
	p, c, i int
}

func (k *listCursor[T]) done() bool { return k.p == len(k.parts) }
func (k *listCursor[T]) chunk() []T { return k.parts[k.p].chunks[k.c].items }
func (k *listCursor[T]) item() T    { return k.chunk()[k.i] }

// next moves past the item.
func (k *listCursor[T]) next() {
	if k.i++; k.i == len(k.chunk()) {
		k.skipChunk()
	}
}

// skipChunk moves to the next chunk's first item.
func (k *listCursor[T]) skipChunk() {
	k.i = 0
	if k.c++; k.c == len(k.parts[k.p].chunks) {
		k.skipPart()
	}
}

// skipPart moves to the next part's first item.
func (k *listCursor[T]) skipPart() {
	k.p, k.c, k.i = k.p+1, 0, 0
}
