package model

import (
	"iter"
	"slices"
	"sort"
)

// List is a list kept in chunks that no one changes once the list is
// handed out: the next list is made from the last (Edited), sharing every
// chunk its edits do not fall in. A change to one of 50,000 objects then
// costs one chunk and the list of chunks (some 10 KB), not a copy of the
// whole list (400 KB of pointers): at that size the copies were most of
// what a change allocated, and so set how often the GC ran (a mark of the
// whole heap every ~170 changes). Two lists of which one was made from the
// other are compared chunk by chunk (CompareLists), skipping the chunks
// both hold.
//
// Lists of objects are sorted (by namespace and name, Servers by host);
// List itself only keeps the order it is given. The zero List is empty.
type List[T any] struct {
	// chunks are not empty; ends[i] is the number of items in
	// chunks[:i+1].
	chunks [][]T
	ends   []int
}

// listChunk is the size a chunk is cut to; a chunk that grows past twice
// that is cut again, and one that shrinks below half of it joins the
// chunk before it when both fit in twice that.
const listChunk = 256

// ListOf returns the list of items, in their order. It holds items itself,
// not a copy: the caller must not change them after.
func ListOf[T any](items ...T) List[T] {
	var l List[T]
	l.chunks = appendListChunk(nil, items)
	l.ends = ends(l.chunks)
	return l
}

// Len is the number of items.
func (l List[T]) Len() int {
	if len(l.ends) == 0 {
		return 0
	}
	return l.ends[len(l.ends)-1]
}

// At returns item i (0 ≤ i < Len).
func (l List[T]) At(i int) T {
	c := sort.SearchInts(l.ends, i+1)
	if c > 0 {
		i -= l.ends[c-1]
	}
	return l.chunks[c][i]
}

// All yields the items in order.
func (l List[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, chunk := range l.chunks {
			for _, v := range chunk {
				if !yield(v) {
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
	for _, chunk := range l.chunks {
		out = append(out, chunk...)
	}
	return out
}

// Search returns where the item cmp finds (cmp(v) < 0 for the items
// before it, > 0 for those after) is in l, which is sorted as cmp says,
// or would be, and whether it is there.
func (l List[T]) Search(cmp func(T) int) (int, bool) {
	c := sort.Search(len(l.chunks), func(c int) bool {
		chunk := l.chunks[c]
		return cmp(chunk[len(chunk)-1]) >= 0
	})
	if c == len(l.chunks) {
		return l.Len(), false
	}
	j, found := slices.BinarySearchFunc(l.chunks[c], 0, func(v T, _ int) int { return cmp(v) })
	if c > 0 {
		j += l.ends[c-1]
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
	return len(l.chunks) == len(o.chunks) && len(l.chunks) > 0 && &l.chunks[0] == &o.chunks[0]
}

// Shares says whether l and o hold a chunk in common: one was made from
// the other (Edited), or both from one list, and some chunk no edit fell
// in is in both. A diff of the two (CompareLists) then skips it.
func (l List[T]) Shares(o List[T]) bool {
	if len(l.chunks) == 0 || len(o.chunks) == 0 {
		return false
	}
	firsts := make(map[*T]bool, len(l.chunks))
	for _, chunk := range l.chunks {
		firsts[&chunk[0]] = true
	}
	for _, chunk := range o.chunks {
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
// shares every chunk of l no edit falls in. l is sorted as cmp orders an
// item against a key, and edits are sorted by key, one per key (the
// caller sorts them). Removing a key l does not hold changes nothing. An
// empty result is the zero List, as ListOf() is.
func Edited[K, T any](l List[T], edits []ListEdit[K, T], cmp func(T, K) int) List[T] {
	if len(edits) == 0 {
		return l
	}
	out := List[T]{chunks: make([][]T, 0, len(l.chunks)+1)}
	next := 0 // the first edit not made yet
	for i, chunk := range l.chunks {
		end := next
		// An edit falls in this chunk when its key is before the next
		// chunk's first item (the last chunk takes the rest).
		for end < len(edits) && (i == len(l.chunks)-1 || cmp(l.chunks[i+1][0], edits[end].Key) > 0) {
			end++
		}
		if end == next {
			out.chunks = append(out.chunks, chunk)
			continue
		}
		out.chunks = appendListChunk(out.chunks, mergeEdits(chunk, edits[next:end], cmp))
		next = end
	}
	if len(l.chunks) == 0 {
		out.chunks = appendListChunk(out.chunks, mergeEdits(nil, edits, cmp))
	}
	if len(out.chunks) == 0 {
		return List[T]{}
	}
	out.ends = ends(out.chunks)
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

// appendListChunk appends chunk to chunks: not at all when empty, cut into
// pieces of listChunk when larger than twice that, joined to the last of
// chunks when both are small enough.
func appendListChunk[T any](chunks [][]T, chunk []T) [][]T {
	switch {
	case len(chunk) == 0:
		return chunks
	case len(chunk) > 2*listChunk:
		for len(chunk) > 0 {
			n := min(listChunk, len(chunk))
			chunks = append(chunks, slices.Clip(chunk[:n]))
			chunk = chunk[n:]
		}
		return chunks
	case len(chunk) < listChunk/2 && len(chunks) > 0 && len(chunks[len(chunks)-1])+len(chunk) <= 2*listChunk:
		last := chunks[len(chunks)-1]
		chunks[len(chunks)-1] = append(slices.Clip(last), chunk...) // a new array: last may be shared
		return chunks
	}
	return append(chunks, slices.Clip(chunk))
}

// ends returns the running counts of chunks' items.
func ends[T any](chunks [][]T) []int {
	if len(chunks) == 0 {
		return nil
	}
	out := make([]int, len(chunks))
	n := 0
	for i, chunk := range chunks {
		n += len(chunk)
		out[i] = n
	}
	return out
}

// sameListChunk says whether a and b are the very same chunk.
func sameListChunk[T any](a, b []T) bool {
	return len(a) == len(b) && &a[0] == &b[0]
}

// CompareLists calls f for each key of a or b, in order, with its item in
// each and whether each has one, but for the items of chunks a and b
// share: lists are never changed, so a chunk of both holds the same items
// in both. Two lists of which one was made from the other (Edited) share
// every chunk no edit fell in, so a diff of the two costs the chunks that
// differ, not a walk of every item. a and b are sorted as cmp orders two
// items.
func CompareLists[T any](a, b List[T], cmp func(x, y T) int, f func(x, y T, inA, inB bool)) {
	ci, cj := 0, 0 // the chunks of a and b
	i, j := 0, 0   // the next item in each
	var zero T
	for ci < len(a.chunks) || cj < len(b.chunks) {
		if ci < len(a.chunks) && cj < len(b.chunks) && i == 0 && j == 0 && sameListChunk(a.chunks[ci], b.chunks[cj]) {
			ci, cj = ci+1, cj+1
			continue
		}
		var c int // a's next item against b's: cmp once an item met
		switch {
		case cj == len(b.chunks):
			c = -1
		case ci == len(a.chunks):
			c = 1
		default:
			c = cmp(a.chunks[ci][i], b.chunks[cj][j])
		}
		switch {
		case c < 0:
			f(a.chunks[ci][i], zero, true, false)
			ci, i = nextInChunks(a.chunks, ci, i)
		case c > 0:
			f(zero, b.chunks[cj][j], false, true)
			cj, j = nextInChunks(b.chunks, cj, j)
		default:
			f(a.chunks[ci][i], b.chunks[cj][j], true, true)
			ci, i = nextInChunks(a.chunks, ci, i)
			cj, j = nextInChunks(b.chunks, cj, j)
		}
	}
}

// nextInChunks returns the position after item i of chunk c.
func nextInChunks[T any](chunks [][]T, c, i int) (int, int) {
	if i+1 < len(chunks[c]) {
		return c, i + 1
	}
	return c + 1, 0
}
