package model

import (
	"reflect"
	"slices"
	"strings"
)

// editedList is a list sorted by key handed out as a List
// (Model.Servers, Model.GatewayRoutes, GatewayAPI.Routes): the changes
// wait in pendingEdits, as sortedList's, and list makes the next List from the last with them
// (Edited), sharing every chunk no change falls in. A change to one of
// 50,000 hosts (or routes) then costs a chunk and the list of chunks
// (~10 KB), where a new flat list cost 400 KB of pointers (copied, until
// session 45, into a spare made ready between syncs so that the copy did
// not fault memory in on the sync): the copies were the largest
// allocations of a change, and set how often the GC marked the whole
// heap.
type editedList[T any] struct {
	pendingEdits[T]
	values List[T]
	// dropSame is sortedList's: the counted Model.Backends, whose
	// Services' islands are built again after the fast path edited the
	// list (Incremental.PatchedBackends), hand out the very list again;
	// Model.Certificates keep the chunks of the certificates an island
	// built again puts back as they were (newCertList).
	dropSame bool
}

func newEditedList[T any](key func(T) string) editedList[T] {
	return editedList[T]{pendingEdits: pendingEdits[T]{key: key}}
}

// newCertList is the sum's Model.Certificates: each island built again
// sets every certificate of its Secrets (modelSum.updateCertificate), so
// those that come back as they were are dropped (dropSame), and the next
// list shares every chunk no changed certificate falls in.
func newCertList() editedList[Certificate] {
	l := newEditedList(func(c Certificate) string { return c.Name })
	l.dropSame = true
	return l
}

func (l *editedList[T]) get(key string) (T, bool) {
	if v, held, changed := l.pendingGet(key); changed {
		return v, held
	}
	return l.held(key)
}

// held is the value of key in the last list, before pending changes.
func (l *editedList[T]) held(key string) (T, bool) {
	return l.values.Find(func(v T) int { return l.cmp(v, key) })
}

// list returns the values in key order; the zero List for none. The List
// is new whenever something changed (one handed out is never changed),
// and the very last one otherwise (List.Same).
func (l *editedList[T]) list() List[T] {
	if l.dropSame {
		l.dropIfSame(l.held)
	}
	if len(l.pending) > 0 {
		l.values = Edited(l.values, l.take(), l.cmp)
		if l.values.Len() == 0 {
			l.values = List[T]{} // as ListOf(): Build's model of no servers
		}
	}
	return l.values
}

// pendingEdits are the changes to a list sorted by key (editedList,
// sortedList) that wait until its next list is made: they come a few at
// a time (an island's values), and the next list is made with all of
// them in one pass, as sorted edits (take).
type pendingEdits[T any] struct {
	key func(T) string
	// compare, when set, orders a value against a key as comparing key(v)
	// would, without making key(v): Edited compares at each chunk's
	// start and through the chunk it edits, and routeStatusKey makes a
	// string (some 450 a new HTTPRoute at 50,000).
	compare func(T, string) int
	pending map[string]*T // nil: deleted
}

func (p *pendingEdits[T]) set(key string, v T) {
	if p.pending == nil {
		p.pending = map[string]*T{}
	}
	p.pending[key] = &v
}

func (p *pendingEdits[T]) delete(key string) {
	if p.pending == nil {
		p.pending = map[string]*T{}
	}
	p.pending[key] = nil
}

// pendingGet returns the value a pending change gives key, and whether
// key then has one (held); changed says a change of key is pending (else
// the list says).
func (p *pendingEdits[T]) pendingGet(key string) (v T, held, changed bool) {
	pv, changed := p.pending[key]
	if !changed || pv == nil {
		return v, false, changed
	}
	return *pv, true, true
}

// cmp orders a value against a key.
func (p *pendingEdits[T]) cmp(v T, key string) int {
	if p.compare != nil {
		return p.compare(v, key)
	}
	return strings.Compare(p.key(v), key)
}

// dropIfSame drops each pending change that puts back the value held
// (reflect.DeepEqual, as counted.add compares), or deletes a key not
// held: it changes nothing (dropSame). When none is left the list stays
// the very last one (List.Same); otherwise only the chunks of the changes
// left are made again (an island built again puts back the certificates
// of its other Secrets, which stay in their chunks).
func (p *pendingEdits[T]) dropIfSame(held func(key string) (T, bool)) {
	for k, v := range p.pending {
		have, found := held(k)
		if found == (v != nil) && (!found || reflect.DeepEqual(have, *v)) {
			delete(p.pending, k)
		}
	}
	if len(p.pending) == 0 {
		p.pending = nil
	}
}

// take returns the pending changes as edits sorted by key, and drops
// them.
func (p *pendingEdits[T]) take() []ListEdit[string, T] {
	edits := make([]ListEdit[string, T], 0, len(p.pending))
	for k, v := range p.pending {
		e := ListEdit[string, T]{Key: k, Remove: v == nil}
		if v != nil {
			e.Value = *v
		}
		edits = append(edits, e)
	}
	slices.SortFunc(edits, func(a, b ListEdit[string, T]) int { return strings.Compare(a.Key, b.Key) })
	p.pending = nil
	return edits
}
