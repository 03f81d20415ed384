// Package plan is the diff stage of the pipeline: model → plan → apply.
//
// It compares what nginx runs with what it should run and says what to do:
// reload when the structure changed, push only the backends whose endpoints
// differ from what Lua holds, remove the ones no longer referenced. Keeping
// the structure and the endpoints apart is what lets an endpoint change skip
// the render and the reload entirely.
package plan

import (
	"slices"

	"github.com/restysync/restysync/agent/internal/model"
)

// Plan is the work one sync has to do.
type Plan struct {
	// Reload is true when the rendered structure (hosts, paths, backend
	// names) differs from the one last applied.
	Reload bool
	// Upserts are backends Lua lacks or holds with other endpoints, sorted by Name.
	Upserts []model.Backend
	// Removes are backend names Lua holds that the next model no longer references, sorted.
	Removes []string
}

// Empty reports whether the plan has nothing to do.
func (p Plan) Empty() bool { return !p.Reload && len(p.Upserts) == 0 && len(p.Removes) == 0 }

// Compute diffs next against the applied structure and the backends Lua holds.
// applied is nil when no structure is known to be running (first sync).
func Compute(applied *model.Model, held map[string][]model.Endpoint, next model.Model) Plan {
	var p Plan
	p.Reload = applied == nil || !SameStructure(*applied, next)
	for _, b := range next.Backends {
		have, ok := held[b.Name]
		if !ok || !slices.Equal(have, b.Endpoints) {
			p.Upserts = append(p.Upserts, b)
		}
	}
	wanted := make(map[string]struct{}, len(next.Backends))
	for _, b := range next.Backends {
		wanted[b.Name] = struct{}{}
	}
	for name := range held {
		if _, ok := wanted[name]; !ok {
			p.Removes = append(p.Removes, name)
		}
	}
	slices.Sort(p.Removes)
	return p
}

// SameStructure reports whether a and b render the same nginx.conf: every
// field but the endpoints is equal.
func SameStructure(a, b model.Model) bool {
	return serversEqual(a.Servers, b.Servers) && serverEqual(a.Default, b.Default)
}

func serversEqual(a, b []model.Server) bool {
	return slices.EqualFunc(a, b, serverEqual)
}

func serverEqual(a, b model.Server) bool {
	return a.Host == b.Host && slices.Equal(a.Locations, b.Locations)
}
