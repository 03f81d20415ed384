package model

import (
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestListEditedEqualsASortedSlice makes random edits to a list of ints,
// and to a plain sorted slice beside it: the list holds the same items,
// At, Search and Find agree, the list edited from shares the chunks no
// edit fell in, and CompareLists reports exactly the keys that differ.
func TestListEditedEqualsASortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	byKey := func(v, key int) int { return cmp.Compare(v, key) }
	for round := range 200 {
		n := rng.IntN(3000)
		if round%8 == 0 { // parts: more than 2*partChunks chunks
			n = 2*listChunk*partChunks + rng.IntN(20000)
		}
		want := make([]int, 0, n)
		for i := range n {
			want = append(want, 2*i)
		}
		l := ListOf(slices.Clone(want)...)
		for step := range 5 {
			var edits []ListEdit[int, int]
			next := map[int]bool{}
			for _, v := range want {
				next[v] = true
			}
			keys := map[int]bool{}
			for range rng.IntN(40) + 1 {
				keys[rng.IntN(2*n+10)] = true
			}
			if rng.IntN(10) == 0 { // a large edit: many chunks
				for k := range 2000 {
					keys[k*3] = true
				}
			}
			// A run of keys all added or all removed: parts grow past
			// 2*partChunks chunks (cut) or shrink (joined).
			span, removeSpan := listChunk*partChunks+rng.IntN(3000), rng.IntN(2) == 0
			runFrom := rng.IntN(2*n + 10)
			if rng.IntN(4) == 0 {
				for k := runFrom; k < runFrom+span; k++ {
					keys[k] = true
				}
			}
			for _, k := range slices.Sorted(func(yield func(int) bool) {
				for k := range keys {
					if !yield(k) {
						return
					}
				}
			}) {
				remove := rng.IntN(2) == 0
				if k >= runFrom && k < runFrom+span {
					remove = removeSpan
				}
				edits = append(edits, ListEdit[int, int]{Key: k, Value: k, Remove: remove})
				if remove {
					delete(next, k)
				} else {
					next[k] = true
				}
			}
			before := l
			l = Edited(l, edits, byKey)
			prev := want
			want = slices.Sorted(func(yield func(int) bool) {
				for k := range next {
					if !yield(k) {
						return
					}
				}
			})
			if got := slices.Collect(l.All()); !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("round %d step %d: list %v, want %v", round, step, got, want)
			}
			if l.Len() != len(want) || !slices.Equal(l.Slice(), want) {
				t.Fatalf("round %d step %d: Len %d, Slice differs; want %d", round, step, l.Len(), len(want))
			}
			for i, v := range want {
				if l.At(i) != v {
					t.Fatalf("At(%d) = %d, want %d", i, l.At(i), v)
				}
			}
			for _, k := range []int{-1, 0, 1, 7, n, 2*n + 11} {
				i, found := l.Search(func(v int) int { return cmp.Compare(v, k) })
				wi, wfound := slices.BinarySearch(want, k)
				if i != wi || found != wfound {
					t.Fatalf("Search(%d) = %d, %v; want %d, %v", k, i, found, wi, wfound)
				}
			}
			for chunk := range l.eachChunk() {
				if len(chunk) == 0 || len(chunk) > 2*listChunk {
					t.Fatalf("a chunk of %d items", len(chunk))
				}
			}
			for _, part := range l.parts {
				if len(part.chunks) == 0 || len(part.chunks) > 2*partChunks {
					t.Fatalf("a part of %d chunks", len(part.chunks))
				}
			}
			// CompareLists: every key that differs, and only those.
			var diff []int
			CompareLists(before, l, cmp.Compare[int], func(x, y int, inA, inB bool) {
				switch {
				case inA && inB && x != y:
					t.Fatalf("%d and %d compared as one key", x, y)
				case inA && !inB:
					diff = append(diff, x)
				case inB && !inA:
					diff = append(diff, y)
				}
			})
			var wantDiff []int
			old := map[int]bool{}
			for _, v := range prev {
				old[v] = true
			}
			for k := range keys {
				if old[k] != next[k] {
					wantDiff = append(wantDiff, k)
				}
			}
			slices.Sort(wantDiff)
			if !slices.Equal(diff, wantDiff) && len(diff)+len(wantDiff) > 0 {
				t.Fatalf("round %d step %d: CompareLists found %v, want %v", round, step, diff, wantDiff)
			}
		}
	}
}

// TestListEditedSharesUntouchedChunks: one edit in a list of 50,000 makes
// a list that shares every chunk but one with it, and the two compare in
// a walk of that one chunk.
func TestListEditedSharesUntouchedChunks(t *testing.T) {
	items := make([]int, 50000)
	for i := range items {
		items[i] = 2 * i
	}
	l := ListOf(items...)
	next := Edited(l, []ListEdit[int, int]{{Key: 5001, Value: 5001}}, func(v, k int) int { return cmp.Compare(v, k) })
	if next.Len() != 50001 || l.Len() != 50000 || l.At(2501) != 5002 || next.At(2501) != 5001 {
		t.Fatalf("Len %d / %d, At(2501) %d / %d", next.Len(), l.Len(), next.At(2501), l.At(2501))
	}
	shared := 0
	for a := range next.eachChunk() {
		for b := range l.eachChunk() {
			if sameListChunk(a, b) {
				shared++
			}
		}
	}
	if shared != chunkCount(l)-1 {
		t.Fatalf("the edited list shares %d of %d chunks, want all but one", shared, chunkCount(l))
	}
	sharedParts := 0
	for _, a := range next.parts {
		for _, b := range l.parts {
			if sameListPart(a, b) {
				sharedParts++
			}
		}
	}
	if sharedParts != len(l.parts)-1 {
		t.Fatalf("the edited list shares %d of %d parts, want all but one", sharedParts, len(l.parts))
	}
	calls := 0
	CompareLists(l, next, cmp.Compare[int], func(int, int, bool, bool) { calls++ })
	if calls > 2*listChunk+1 {
		t.Fatalf("CompareLists walked %d items for one edit", calls)
	}
	if !l.Same(l) || l.Same(next) || (List[int]{}).Same(List[int]{}) {
		t.Fatal("Same")
	}
	if got := Edited(l, nil, func(v, k int) int { return cmp.Compare(v, k) }); !got.Same(l) {
		t.Fatal("no edit made a new list")
	}
	if allocs := testing.AllocsPerRun(10, func() {
		Edited(l, []ListEdit[int, int]{{Key: 5001, Value: 5001}}, func(v, k int) int { return cmp.Compare(v, k) })
	}); allocs > 4 {
		t.Fatalf("an edit allocated %.0f times", allocs)
	}
}

// Shares says whether two lists hold a chunk in common (one made from the
// other by an edit in one chunk does, two lists made apart do not), and a
// list is written to JSON as the array of its items.
func TestListSharesAndJSON(t *testing.T) {
	items := make([]int, 3000)
	for i := range items {
		items[i] = 2 * i
	}
	l := ListOf(items...)
	next := Edited(l, []ListEdit[int, int]{{Key: 1, Value: 1}}, func(v, k int) int { return cmp.Compare(v, k) })
	if !l.Shares(next) || !next.Shares(l) {
		t.Error("an edited list shares no chunk with its source")
	}
	if l.Shares(ListOf(slices.Clone(items)...)) || l.Shares(List[int]{}) || (List[int]{}).Shares(List[int]{}) {
		t.Error("lists made apart share a chunk")
	}
	for _, c := range []struct {
		l    List[int]
		want string
	}{{List[int]{}, "null"}, {ListOf(1, 2), "[1,2]"}} {
		if got, err := json.Marshal(c.l); err != nil || string(got) != c.want {
			t.Errorf("JSON of %v: %s, %v; want %s", c.l.Slice(), got, err, c.want)
		}
	}
}

// CompareLists orders the two items it meets once, not once per side: a
// diff of two lists that share no chunk (after a full render, plan's walk
// of every route) costs a cmp an item met, which is most of its time.
func TestCompareListsComparesOnceAnItem(t *testing.T) {
	items := make([]int, 3000)
	for i := range items {
		items[i] = 2 * i
	}
	a, b := ListOf(items...), ListOf(append(slices.Clone(items[1:]), 7000)...)
	compares, calls := 0, 0
	CompareLists(a, b, func(x, y int) int { compares++; return cmp.Compare(x, y) }, func(int, int, bool, bool) { calls++ })
	if calls != 3001 || compares > calls {
		t.Fatalf("%d items met with %d compares, want 3001 with at most as many", calls, compares)
	}
}

// chunkCount is the number of chunks of l.
func chunkCount[T any](l List[T]) int {
	n := 0
	for range l.eachChunk() {
		n++
	}
	return n
}
