package render

import (
	"iter"
	"slices"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// RouteList is the routes Lua should hold, one per host, sorted by host.
//
// It is a model.List of routes kept in host order: the next list is made
// from the last (model.Edited), sharing every chunk its changes do not
// touch, and two lists are diffed chunk by chunk (model.CompareLists). A
// render that changed a few hosts at 50,000 then hands plan and apply a
// list that cost those hosts' chunks and the list of chunks, not a copy
// of every route (3.6 MB a sync), and plan finds a changed host's route
// without a walk.
//
// It is a type of its own over the model.List, not a model.List passed
// around bare, because the order is what makes it work: every edit,
// lookup and diff orders routes by host, and Lua holds routes by host, as
// does every reader. Here is the one place that order is said; a reader
// (plan, apply, the admin report) cannot hand it a list in another order,
// nor look a host up in another.
//
// The list holds pointers to routes, which no one changes once listed,
// not the routes themselves: a route is 64 bytes, and a change copies the
// chunk it falls in (256 to 512 items) twice a sync, for render's next
// list and for apply's record of what it pushed. At 50,000 Ingresses a
// new one allocated 184 KB with a list of routes, 138 KB with a list of
// pointers (156 KB with the chunks of 128 routes RouteList kept before).
// Routes listed together (NewRouteList, Upsert) share one array, which
// lives while any of them is listed: a list made from render's last full
// build keeps that build's routes (64 bytes a host, as the chunks of
// routes did) until the next full build makes them all again.
//
// The zero RouteList is empty.
type RouteList struct {
	list model.List[*model.Route]
}

// routeChange is one host's route in the next list (Key the host, Value
// its route), or none (Remove).
type routeChange = model.ListEdit[string, *model.Route]

// byHost orders a route against a host: the order of a RouteList.
func byHost(r *model.Route, host string) int { return strings.Compare(r.Host, host) }

// routesByHost orders two routes by host.
func routesByHost(a, b model.Route) int { return strings.Compare(a.Host, b.Host) }

// pointers returns a pointer to each of routes, in order.
func pointers(routes []model.Route) []*model.Route {
	out := make([]*model.Route, len(routes))
	for i := range routes {
		out[i] = &routes[i]
	}
	return out
}

// NewRouteList returns the list of routes, whose hosts are distinct (render
// refuses a host twice).
func NewRouteList(routes []model.Route) RouteList {
	sorted := slices.Clone(routes)
	slices.SortFunc(sorted, routesByHost)
	return RouteList{model.ListOf(pointers(sorted)...)}
}

// Len is the number of routes.
func (l RouteList) Len() int { return l.list.Len() }

// All yields the routes in host order.
func (l RouteList) All() iter.Seq[model.Route] {
	return func(yield func(model.Route) bool) {
		for r := range l.list.All() {
			if !yield(*r) {
				return
			}
		}
	}
}

// Slice returns the routes in host order, in a new slice; nil for none.
func (l RouteList) Slice() []model.Route {
	if l.Len() == 0 {
		return nil
	}
	out := make([]model.Route, 0, l.Len())
	for r := range l.list.All() {
		out = append(out, *r)
	}
	return out
}

// Get returns the route of host.
func (l RouteList) Get(host string) (model.Route, bool) {
	r := l.get(host)
	if r == nil {
		return model.Route{}, false
	}
	return *r, true
}

// get returns the route of host as the list holds it; nil for none.
func (l RouteList) get(host string) *model.Route {
	r, _ := l.list.Find(func(r *model.Route) int { return byHost(r, host) })
	return r
}

// Same says whether l and o are the same list, not empty: one made from
// the other with no change, or both from one render. Lists are never
// changed, so the same list holds the same routes.
func (l RouteList) Same(o RouteList) bool { return l.list.Same(o.list) }

// with returns l with changes, which are sorted by host, one per host;
// l is not changed, and the result shares the chunks no change falls in.
func (l RouteList) with(changes []routeChange) RouteList {
	return RouteList{model.Edited(l.list, changes, byHost)}
}

// Upsert returns l with routes in place of the routes of their hosts (or
// added, for a host l has none for); l is not changed, and the result
// shares the chunks no route falls in. routes have distinct hosts; apply
// records what Lua holds this way after a push of a plan's upserts, which
// come in host order. The list holds a copy of routes.
func (l RouteList) Upsert(routes []model.Route) RouteList {
	routes = slices.Clone(routes)
	slices.SortFunc(routes, routesByHost)
	if l.Len() == 0 { // the first push after a start: no list of changes
		return RouteList{model.ListOf(pointers(routes)...)}
	}
	changes := make([]routeChange, len(routes))
	for i := range routes {
		changes[i] = routeChange{Key: routes[i].Host, Value: &routes[i]}
	}
	return l.with(changes)
}

// Remove returns l without the routes of hosts, which are distinct; l is
// not changed, as Upsert.
func (l RouteList) Remove(hosts []string) RouteList {
	if !slices.IsSorted(hosts) {
		hosts = slices.Sorted(slices.Values(hosts))
	}
	changes := make([]routeChange, len(hosts))
	for i, host := range hosts {
		changes[i] = routeChange{Key: host, Remove: true}
	}
	return l.with(changes)
}

// CompareRoutes calls f for each host of a or b, in host order, with its
// route in each (nil where it has none), but for the hosts of chunks a and
// b share (model.CompareLists). Two lists of which one was made from the
// other (with, Upsert, Remove) share every chunk no change fell in, so
// plan's diff of what Lua holds against the next routes costs the chunks
// that differ, not a walk of every host. f must not change the routes.
func CompareRoutes(a, b RouteList, f func(a, b *model.Route)) {
	model.CompareLists(a.list, b.list, func(x, y *model.Route) int { return strings.Compare(x.Host, y.Host) }, func(x, y *model.Route, _, _ bool) { f(x, y) })
}
