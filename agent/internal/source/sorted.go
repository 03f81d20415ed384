package source

import (
	"cmp"
	"slices"
	"strings"
)

// Sorted lists: both sources hand out each kind's objects as one list
// sorted by namespace and name, each name once, and never change a list
// once a Snapshot handed it out. A change makes the next list from the
// one before (Patched), so a Snapshot after one change costs a copy of
// that kind's list (8 bytes an object) and not a listing of every cache;
// the lists of the kinds that did not change are the very ones handed out
// before. model.Incremental diffs two sorted lists by walking them side
// by side (a pointer comparison per object) instead of a map lookup per
// object.

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

// Patched returns a new list: list, which is sorted, with edits made; list
// itself is not changed (it may have been handed out). It sorts edits. It
// costs one copy of list, and a binary search for each edit: at 50,000
// objects 400 KB, whatever the number of edits. Removing an object list
// does not hold changes nothing. It returns false, and no list, when edits
// name one object twice. An empty result is nil, as a list built of no
// object is.
func Patched[T interface {
	comparable
	Named
}](list []T, edits []Edit[T]) ([]T, bool) {
	return PatchedIn(nil, list, edits)
}

// PatchedIn is Patched making the new list in room, an empty slice, when
// its capacity holds list and the objects edits add (a spare whose memory
// is in place already; the file source keeps one per kind that changes),
// else in a new array. room must not be in use: the list returned is.
func PatchedIn[T interface {
	comparable
	Named
}](room, list []T, edits []Edit[T]) ([]T, bool) {
	if len(edits) == 0 {
		return list, true
	}
	slices.SortFunc(edits, func(a, b Edit[T]) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for i := 1; i < len(edits); i++ {
		if edits[i].Namespace == edits[i-1].Namespace && edits[i].Name == edits[i-1].Name {
			return nil, false
		}
	}
	var zero T
	out := room[:0]
	if cap(room) < len(list)+len(edits) {
		out = make([]T, 0, len(list)+len(edits))
	}
	rest := list
	for _, e := range edits {
		at, found := FindNamed(rest, e.Namespace, e.Name)
		out = append(out, rest[:at]...)
		if found {
			at++
		}
		rest = rest[at:]
		if e.Obj != zero {
			out = append(out, e.Obj)
		}
	}
	out = append(out, rest...)
	if len(out) == 0 {
		return nil, true
	}
	return slices.Clip(out), true
}
