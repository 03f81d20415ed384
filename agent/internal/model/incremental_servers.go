package model

import (
	"slices"
	"strings"
)

// editedList is sortedList's kind for a list handed out as a List
// (Model.Servers, Model.GatewayRoutes, GatewayAPI.Routes): the changes
// wait in pending, and list makes the next List from the last with them
// (Edited), sharing every chunk no change falls in. A change to one of
// 50,000 hosts (or routes) then costs a chunk and the list of chunks
// (~10 KB), where a new flat list cost 400 KB of pointers (copied, until
// session 45, into a spare made ready between syncs so that the copy did
// not fault memory in on the sync): the copies were the largest
// allocations of a change, and set how often the GC marked the whole
// heap.
type editedList[T any] struct {
	key     func(T) string
	values  List[T]
	pending map[string]*T // nil: deleted
}

func (l *editedList[T]) set(key string, v T) {
	if l.pending == nil {
		l.pending = map[string]*T{}
	}
	l.pending[key] = &v
}

func (l *editedList[T]) delete(key string) {
	if l.pending == nil {
		l.pending = map[string]*T{}
	}
	l.pending[key] = nil
}

func (l *editedList[T]) get(key string) (T, bool) {
	if v, ok := l.pending[key]; ok {
		if v == nil {
			var zero T
			return zero, false
		}
		return *v, true
	}
	return l.values.Find(func(v T) int { return strings.Compare(l.key(v), key) })
}

// list returns the values in key order; the zero List for none. The List
// is new whenever something changed (one handed out is never changed),
// and the very last one otherwise (List.Same).
func (l *editedList[T]) list() List[T] {
	if len(l.pending) > 0 {
		edits := make([]ListEdit[string, T], 0, len(l.pending))
		for k, v := range l.pending {
			e := ListEdit[string, T]{Key: k, Remove: v == nil}
			if v != nil {
				e.Value = *v
			}
			edits = append(edits, e)
		}
		slices.SortFunc(edits, func(a, b ListEdit[string, T]) int { return strings.Compare(a.Key, b.Key) })
		l.values = Edited(l.values, edits, func(v T, key string) int { return strings.Compare(l.key(v), key) })
		if l.values.Len() == 0 {
			l.values = List[T]{} // as ListOf(): Build's model of no servers
		}
		l.pending = nil
	}
	return l.values
}
