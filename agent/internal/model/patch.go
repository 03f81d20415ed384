package model

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The fast path of an endpoint change: when nothing but EndpointSlices
// changed since a model was built, only the backends of the Services whose
// slices changed are resolved again (ResolveBackend), and written into the
// built model's backends at their positions; names and order stay, so the
// BackendIndex of the model lasts until the next full build. The result is
// the model a full build of the new snapshot would give.

// BackendIndex maps each Service to the positions of its backends in
// Model.Backends.
type BackendIndex map[serviceName][]int

type serviceName struct{ namespace, name string }

// IndexBackends returns the positions of the backends of each Service.
func IndexBackends(backends []Backend) BackendIndex {
	out := make(BackendIndex, len(backends))
	for i, b := range backends {
		namespace, service, _ := BackendService(b.Name)
		k := serviceName{namespace, service}
		out[k] = append(out[k], i)
	}
	return out
}

// Positions returns the positions of the backends of the Service
// namespace/name (none: the model has none).
func (ix BackendIndex) Positions(namespace, name string) []int {
	return ix[serviceName{namespace, name}]
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
