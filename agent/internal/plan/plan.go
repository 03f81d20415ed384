// Package plan is the diff stage of the pipeline: model → plan → apply.
//
// It compares what nginx runs with what it should run and says what to do:
// reload when the structure changed, push only the backends whose endpoints
// differ from what Lua holds, remove the ones no longer referenced. Keeping
// the structure and the endpoints apart is what lets an endpoint change skip
// the render and the reload entirely. Certificates are kept apart the same
// way: Lua serves them by SNI, so they never need a reload either; and so
// are the hosts Lua routes (model.RoutedInLua), whose paths are pushed as
// routes, so that a new plain Ingress is not a reload.
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
	// Upserts are backends Lua lacks or holds with other endpoints or
	// another Policy, sorted by Name.
	Upserts []model.Backend
	// Removes are backend names Lua holds that the next model no longer references, sorted.
	Removes []string
}

// Empty reports whether the plan has nothing to do.
func (p Plan) Empty() bool { return !p.Reload && len(p.Upserts) == 0 && len(p.Removes) == 0 }

// Compute diffs next against the applied structure and the backends Lua holds.
// applied is nil when no structure is known to be running (first sync).
func Compute(applied *model.Model, held map[string]model.Backend, next model.Model) Plan {
	var p Plan
	p.Reload = applied == nil || !SameStructure(*applied, next)
	found := 0
	for _, b := range next.Backends {
		have, ok := held[b.Name]
		if ok {
			found++
		}
		if !ok || !sameEndpoints(have.Endpoints, b.Endpoints) || have.Policy != b.Policy {
			p.Upserts = append(p.Upserts, b)
		}
	}
	// Names are unique in both: when Lua holds exactly the backends found
	// above, it holds none to remove, and the set is not built (the common
	// case of an endpoint change at 10,000 backends).
	if found == len(held) {
		return p
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

// sameEndpoints is slices.Equal with a shortcut for the same slice, which
// an endpoint change leaves in every backend it did not touch.
func sameEndpoints(a, b []model.Endpoint) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true
	}
	return slices.Equal(a, b)
}

// SameStructure reports whether a and b render the same nginx.conf: every
// field but the endpoints, the certificates and the servers Lua routes is
// equal. Which hosts listen for HTTPS (Server.HTTPS) is structure; which
// certificate a host gets is not.
func SameStructure(a, b model.Model) bool {
	// RoutesInLua depends on the default server alone.
	return serverEqual(a.Default, b.Default) && serversEqual(a.Servers, b.Servers, a.RoutesInLua())
}

// serversEqual compares the servers a and b render, server by server
// (skipping the ones Lua routes when routing), or not at all when they are
// the same slice: the fast path keeps the servers of the last build, so an
// endpoint change at 10,000 hosts costs no structure compare.
func serversEqual(a, b []model.Server, routing bool) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true
	}
	i, j := 0, 0
	for {
		for routing && i < len(a) && a[i].RoutedInLua() {
			i++
		}
		for routing && j < len(b) && b[j].RoutedInLua() {
			j++
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		if !serverEqual(a[i], b[j]) {
			return false
		}
		i, j = i+1, j+1
	}
}

func serverEqual(a, b model.Server) bool {
	return a.Host == b.Host && a.HTTPS == b.HTTPS && slices.Equal(a.Aliases, b.Aliases) && slices.Equal(a.Locations, b.Locations)
}

// HeldCertificate is what Lua reports holding for one certificate name.
type HeldCertificate struct {
	// Hosts it is served for, sorted.
	Hosts []string
	// Hash of its content, as model.Certificate.Hash computes it.
	Hash string
}

// CertificatePlan is the certificate work of one sync.
type CertificatePlan struct {
	// Upserts are certificates Lua lacks or holds with other content or
	// hosts, sorted by Name; none is Invalid.
	Upserts []model.Certificate
	// Removes are names Lua holds that are no longer wanted, sorted.
	Removes []string
	// Kept are names whose Secret is invalid now and that keep serving the
	// last good content, sorted.
	Kept []string
}

// Empty reports whether the plan has nothing to push.
func (p CertificatePlan) Empty() bool { return len(p.Upserts) == 0 && len(p.Removes) == 0 }

// Certificates diffs next against the certificates Lua holds, comparing
// content hashes and hosts, so that only changed certificates are sent.
// An Invalid certificate keeps its last good content: lastGood[name] with
// the new hosts when the caller has it; else what Lua holds, when it holds
// that name for the same hosts (after an agent restart the content is not
// known, and Lua cannot move hosts without it). Otherwise it is removed and
// its hosts get the default certificate.
func Certificates(held map[string]HeldCertificate, lastGood map[string]model.Certificate, next []model.Certificate) CertificatePlan {
	var p CertificatePlan
	wanted := make(map[string]struct{}, len(next))
	for _, c := range next {
		if c.Invalid != "" {
			good, ok := lastGood[c.Name]
			h, isHeld := held[c.Name]
			switch {
			case ok && good.Invalid == "":
				good.Hosts = c.Hosts
				c = good
			case isHeld && slices.Equal(h.Hosts, c.Hosts):
				wanted[c.Name] = struct{}{}
				p.Kept = append(p.Kept, c.Name)
				continue
			default:
				continue
			}
			p.Kept = append(p.Kept, c.Name)
		}
		wanted[c.Name] = struct{}{}
		if h, ok := held[c.Name]; !ok || h.Hash != c.Hash() || !slices.Equal(h.Hosts, c.Hosts) {
			p.Upserts = append(p.Upserts, c)
		}
	}
	p.Removes = unwanted(held, wanted)
	return p
}

// unwanted returns the keys of held that wanted lacks, sorted: what Lua
// holds and the next state drops.
func unwanted[T any](held map[string]T, wanted map[string]struct{}) []string {
	var out []string
	for name := range held {
		if _, ok := wanted[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// RoutePlan is the route work of one sync: the hosts Lua routes
// (model.RoutedInLua) whose locations changed.
type RoutePlan struct {
	// Upserts are routes Lua lacks or holds with other locations, in Host order.
	Upserts []model.Route
	// Removes are hosts Lua routes that next does not, sorted.
	Removes []string
}

// Empty reports whether the plan has nothing to push.
func (p RoutePlan) Empty() bool { return len(p.Upserts) == 0 && len(p.Removes) == 0 }

// Routes diffs next against the routes Lua holds, by host.
func Routes(held map[string]model.Route, next []model.Route) RoutePlan {
	var p RoutePlan
	wanted := make(map[string]struct{}, len(next))
	for _, r := range next {
		wanted[r.Host] = struct{}{}
		if have, ok := held[r.Host]; !ok || have.HTTPS != r.HTTPS || !slices.Equal(have.Locations, r.Locations) {
			p.Upserts = append(p.Upserts, r)
		}
	}
	p.Removes = unwanted(held, wanted)
	return p
}
