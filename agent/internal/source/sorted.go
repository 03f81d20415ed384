package source

import (
	"cmp"
	"slices"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// Sorted lists: both sources hand out each kind's objects as one
// model.List sorted by namespace and name, each name once, and never
// change a list once a Snapshot handed it out. A change makes the next
// list from the one before (Patched), sharing every chunk of it no edit
// falls in, so a Snapshot after one change costs a chunk and the list of
// chunks of that kind (some 10 KB at 50,000 objects, where a copy of the
// list was 400 KB) and not a listing of every cache; the lists of the
// kinds that did not change are the very ones handed out before.
// model.Incremental diffs two such lists by walking them side by side,
// skipping the chunks both share (model.CompareLists).

// Named is an object of a sorted list.
type Named interface {
	GetNamespace() string
	GetName() string
}

// CompareNamed orders o against the object namespace/name, as sorted
// lists are ordered: by namespace, then name.
func CompareNamed(o Named, namespace, name string) int {
	return cmp.Or(strings.Compare(o.GetNamespace(), namespace), strings.Compare(o.GetName(), name))
}

// SortNamed sorts list by namespace and name.
func SortNamed[T Named](list []T) {
	slices.SortFunc(list, func(a, b T) int { return CompareNamed(a, b.GetNamespace(), b.GetName()) })
}

// FindNamed returns where namespace/name is in the sorted list, or would
// be, and whether it is there.
func FindNamed[T Named](list []T, namespace, name string) (int, bool) {
	return slices.BinarySearchFunc(list, namespace, func(o T, namespace string) int { return CompareNamed(o, namespace, name) })
}

// Edit is one change Patched makes to a sorted list: Obj takes the place
// of the object Namespace/Name (or is added), and a zero Obj removes it.
type Edit[T Named] struct {
	Namespace, Name string
	Obj             T
}

// Patched returns list, which is sorted, with edits made (model.Edited):
// list itself is not changed (it may have been handed out), and the
// result shares every chunk of list no edit falls in, so a change to one
// of 50,000 objects costs one chunk and the list of chunks (some 10 KB),
// not a copy of the list (400 KB). It sorts edits. Removing an object
// list does not hold changes nothing. It returns false, and no list, when
// edits name one object twice.
func Patched[T interface {
	comparable
	Named
}](list model.List[T], edits []Edit[T]) (model.List[T], bool) {
	if len(edits) == 0 {
		return list, true
	}
	slices.SortFunc(edits, compareEdits[T])
	var zero T
	listEdits := make([]model.ListEdit[Edit[T], T], len(edits))
	for i, e := range edits {
		if i > 0 && compareEdits(edits[i-1], e) == 0 {
			return model.List[T]{}, false
		}
		listEdits[i] = model.ListEdit[Edit[T], T]{Key: e, Value: e.Obj, Remove: e.Obj == zero}
	}
	return model.Edited(list, listEdits, func(o T, e Edit[T]) int { return CompareNamed(o, e.Namespace, e.Name) }), true
}

// compareEdits orders edits by namespace and name.
func compareEdits[T Named](a, b Edit[T]) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// FindNamedIn returns the object namespace/name of the sorted list, and
// whether it holds one.
func FindNamedIn[T Named](list model.List[T], namespace, name string) (T, bool) {
	return list.Find(func(o T) int { return CompareNamed(o, namespace, name) })
}

// SortedList returns the objects, sorted by namespace and name (in place),
// as a list.
func SortedList[T Named](objects []T) model.List[T] {
	SortNamed(objects)
	return model.ListOf(objects...)
}
