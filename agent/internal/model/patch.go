package model

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The fast path of an endpoint change: when nothing but EndpointSlices
// changed since a model was built, only the backends of the Services whose
// slices changed are resolved again (ResolveBackend), and written into the
// built model's backends at their positions; names and order stay. A
// Service's backends are found by a binary search of the backends, which
// are sorted by name (ServiceBackends): no index of every backend made
// anew after each build, which at 50,000 backends cost the first endpoint
// change after it 4.6 MB and about 10 ms (up to 50 under a GC). The result
// is the model a full build of the new snapshot would give.

// ServiceBackends returns the positions in backends (sorted by Name, as
// Model.Backends is) of the backends of the Service namespace/name: those
// named "namespace/name:port", and their variants ("…@…"), all of which
// begin with "namespace/name:" and so sort together. It costs a binary
// search and the Service's own backends.
func ServiceBackends(backends []Backend, namespace, name string) []int {
	prefix := namespace + "/" + name + ":"
	first, _ := slices.BinarySearchFunc(backends, prefix, func(b Backend, prefix string) int { return strings.Compare(b.Name, prefix) })
	var out []int
	for i := first; i < len(backends) && strings.HasPrefix(backends[i].Name, prefix); i++ {
		if ns, svc, _ := BackendService(backends[i].Name); ns == namespace && svc == name {
			out = append(out, i)
		}
	}
	return out
}

// EndpointPatch is the backends of Services whose endpoints changed,
// resolved again, each with its position in Model.Backends.
type EndpointPatch struct {
	positions []int
	backends  []Backend
	// Problems are those of the slices read (an endpoint address refused).
	Problems []Problem
}

// AddService resolves again the backends at positions of backends, those
// of one Service, from that Service (nil: it is gone) and its
// EndpointSlices, exactly as Build does. Each keeps its Policy: the
// annotations that set it did not change.
func (p *EndpointPatch) AddService(backends []Backend, positions []int, svc *corev1.Service, slices []*discoveryv1.EndpointSlice, targets Targets) {
	for _, i := range positions {
		b, problems := ResolveBackend(backends[i].Name, svc, slices, targets)
		p.Problems = append(p.Problems, problems...)
		b.Policy = backends[i].Policy
		p.positions = append(p.positions, i)
		p.backends = append(p.backends, b)
	}
}

// Backends returns the backends resolved again, in the order added.
func (p EndpointPatch) Backends() []Backend { return p.backends }

// ApplyTo writes the patch into backends, in place. The backends are
// changed in place, not in a copy: copying 10,000 of them (2.5 MB) on
// every endpoint change made the garbage collector's assists cost 20–65 ms
// a sync. A caller that handed the slice out copies it first.
func (p EndpointPatch) ApplyTo(backends []Backend) {
	for n, i := range p.positions {
		backends[i] = p.backends[n]
	}
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
