package model

import (
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// The fast path of an endpoint change: when nothing but EndpointSlices
// changed since a model was built, only the backends of the Services whose
// slices changed are resolved again (ResolveBackend), and the next model's
// backends are the built model's with those put in (EndpointPatch.Apply:
// Edited, a chunk per changed Service; names and order stay). A Service's
// backends are found by a binary search of the backends, which are sorted
// by name (ServiceBackends): no index of every backend made anew after
// each build, which at 50,000 backends cost the first endpoint change
// after it 4.6 MB and about 10 ms (up to 50 under a GC). The result is the
// model a full build of the new snapshot would give.

// ServiceBackends returns the positions in backends (sorted by Name, as
// Model.Backends is) of the backends of the Service namespace/name: those
// named "namespace/name:port", and their variants ("…@…"), all of which
// begin with "namespace/name:" and so sort together. It costs a binary
// search and the Service's own backends.
func ServiceBackends(backends List[Backend], namespace, name string) []int {
	prefix := namespace + "/" + name + ":"
	first, _ := backends.Search(func(b Backend) int { return strings.Compare(b.Name, prefix) })
	var out []int
	for i := first; i < backends.Len(); i++ {
		b := backends.At(i)
		if !strings.HasPrefix(b.Name, prefix) {
			break
		}
		if ns, svc, _ := BackendService(b.Name); ns == namespace && svc == name {
			out = append(out, i)
		}
	}
	return out
}

// EndpointPatch is the backends of Services whose endpoints changed,
// resolved again.
type EndpointPatch struct {
	backends []Backend
	// Problems are those of the slices read (an endpoint address refused).
	Problems []Problem
}

// AddService resolves again the backends at positions of backends, those
// of one Service, from that Service (nil: it is gone) and its
// EndpointSlices, exactly as Build does. Each keeps its Policy: the
// annotations that set it did not change.
func (p *EndpointPatch) AddService(backends List[Backend], positions []int, svc *Service, slices []*discoveryv1.EndpointSlice, targets Targets) {
	for _, i := range positions {
		held := backends.At(i)
		b, problems := ResolveBackend(held.Name, svc, slices, targets)
		p.Problems = append(p.Problems, problems...)
		b.Policy = held.Policy
		p.backends = append(p.backends, b)
	}
}

// Backends returns the backends resolved again, in the order added.
func (p EndpointPatch) Backends() []Backend { return p.backends }

// Apply returns backends with the patch made, a new List made from it
// (Edited): backends, which others hold (the model State handed out, the
// stage's record of what the last plan pushed), is not changed, and the
// new list shares every chunk but those of the changed Services (at
// 50,000 backends, a chunk of 256 and the list of chunks: some 18 KB,
// where a copy of every backend was 2.4 MB).
func (p EndpointPatch) Apply(backends List[Backend]) List[Backend] {
	if len(p.backends) == 0 {
		return backends
	}
	edits := make([]ListEdit[string, Backend], 0, len(p.backends))
	for _, b := range p.backends {
		edits = append(edits, ListEdit[string, Backend]{Key: b.Name, Value: b})
	}
	byKey := func(a, b ListEdit[string, Backend]) int { return strings.Compare(a.Key, b.Key) }
	slices.SortStableFunc(edits, byKey)
	edits = slices.CompactFunc(edits, func(a, b ListEdit[string, Backend]) bool { return a.Key == b.Key })
	return Edited(backends, edits, func(b Backend, name string) int { return strings.Compare(b.Name, name) })
}

// MergeProblems returns held with the problems of the patch it lacks, in a
// new slice when there are any: held may have been handed out.
func (p EndpointPatch) MergeProblems(held []Problem) []Problem {
	var added []Problem
	for _, problem := range p.Problems {
		if !slices.Contains(held, problem) && !slices.Contains(added, problem) {
			added = append(added, problem)
		}
	}
	if len(added) == 0 {
		return held
	}
	return append(slices.Clone(held), added...)
}
