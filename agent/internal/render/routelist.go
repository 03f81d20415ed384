package render

import (
	"iter"
	"slices"
	"sort"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// RouteList is the routes Lua should hold, one per host, sorted by host.
//
// It is kept in chunks of routes that no one changes once the list is
// handed out: the next list is made from the last (with), sharing every
// chunk its changes do not touch. A render that changed a few hosts at
// 50,000 then hands plan and apply a list that cost those hosts' chunks
// and one slice header per chunk, not a copy of every route (3.6 MB a
// sync), and plan finds a changed host's route without a walk. The
// order is the hosts', not the model's: Lua holds routes by host, and so
// does every reader.
//
// The zero RouteList is empty.
type RouteList struct {
	// chunks are not empty, each sorted by host, each chunk's hosts
	// before the next one's.
	chunks [][]model.Route
	n      int
}

// routeChunk is the size a chunk is cut to; one that grows past twice
// that is cut again, and one that shrinks below half of it joins the
// chunk before it when both fit in twice that.
const routeChunk = 128

// NewRouteList returns the list of routes, whose hosts are distinct (render
// refuses a host twice).
func NewRouteList(routes []model.Route) RouteList {
	sorted := slices.Clone(routes)
	slices.SortFunc(sorted, func(a, b model.Route) int { return strings.Compare(a.Host, b.Host) })
	var l RouteList
	l.chunks = appendChunk(nil, sorted)
	l.n = len(sorted)
	return l
}

// Len is the number of routes.
func (l RouteList) Len() int { return l.n }

// All yields the routes in host order.
func (l RouteList) All() iter.Seq[model.Route] {
	return func(yield func(model.Route) bool) {
		for _, chunk := range l.chunks {
			for _, r := range chunk {
				if !yield(r) {
					return
				}
			}
		}
	}
}

// Slice returns the routes in host order, in a new slice.
func (l RouteList) Slice() []model.Route {
	out := make([]model.Route, 0, l.n)
	for _, chunk := range l.chunks {
		out = append(out, chunk...)
	}
	return out
}

// Get returns the route of host.
func (l RouteList) Get(host string) (model.Route, bool) {
	i := l.chunkOf(host)
	if i < 0 {
		return model.Route{}, false
	}
	chunk := l.chunks[i]
	j, ok := slices.BinarySearchFunc(chunk, host, func(r model.Route, host string) int { return strings.Compare(r.Host, host) })
	if !ok {
		return model.Route{}, false
	}
	return chunk[j], true
}

// chunkOf is the index of the chunk host belongs in: the last whose
// first host is not after it; -1 for none.
func (l RouteList) chunkOf(host string) int {
	return sort.Search(len(l.chunks), func(i int) bool { return l.chunks[i][0].Host > host }) - 1
}

// Same says whether l and o are the same list, not empty: one made from
// the other with no change, or both from one render. Lists are never
// changed, so the same list holds the same routes.
func (l RouteList) Same(o RouteList) bool {
	return len(l.chunks) == len(o.chunks) && len(l.chunks) > 0 && &l.chunks[0] == &o.chunks[0]
}

// routeChange is one host's route in the next list, or none (!ok).
type routeChange struct {
	host  string
	route model.Route
	ok    bool
}

// with returns l with changes, which are sorted by host, one per host;
// l is not changed, and the result shares the chunks no change falls in.
func (l RouteList) with(changes []routeChange) RouteList {
	if len(changes) == 0 {
		return l
	}
	out := RouteList{chunks: make([][]model.Route, 0, len(l.chunks)+1), n: l.n}
	if len(l.chunks) == 0 {
		out.chunks = appendChunk(out.chunks, merge(nil, changes, &out.n))
		return out
	}
	next := 0 // the first change not merged yet
	for i, chunk := range l.chunks {
		end := next
		for end < len(changes) && (i == len(l.chunks)-1 || changes[end].host < l.chunks[i+1][0].Host) {
			end++
		}
		if end == next {
			out.chunks = append(out.chunks, chunk)
			continue
		}
		out.chunks = appendChunk(out.chunks, merge(chunk, changes[next:end], &out.n))
		next = end
	}
	return out
}

// merge returns a new chunk: chunk with changes (sorted by host), and
// counts the routes it adds and drops in n.
func merge(chunk []model.Route, changes []routeChange, n *int) []model.Route {
	out := make([]model.Route, 0, len(chunk)+len(changes))
	i := 0
	for _, c := range changes {
		for i < len(chunk) && chunk[i].Host < c.host {
			out = append(out, chunk[i])
			i++
		}
		if i < len(chunk) && chunk[i].Host == c.host {
			i++
			*n--
		}
		if c.ok {
			out = append(out, c.route)
			*n++
		}
	}
	return append(out, chunk[i:]...)
}

// appendChunk appends chunk to chunks: not at all when empty, cut into
// pieces of routeChunk when larger than twice that, joined to the last
// of chunks when both are small enough.
func appendChunk(chunks [][]model.Route, chunk []model.Route) [][]model.Route {
	switch {
	case len(chunk) == 0:
		return chunks
	case len(chunk) > 2*routeChunk:
		for len(chunk) > 0 {
			n := min(routeChunk, len(chunk))
			chunks = append(chunks, slices.Clip(chunk[:n]))
			chunk = chunk[n:]
		}
		return chunks
	case len(chunk) < routeChunk/2 && len(chunks) > 0 && len(chunks[len(chunks)-1])+len(chunk) <= 2*routeChunk:
		last := chunks[len(chunks)-1]
		chunks[len(chunks)-1] = append(slices.Clip(last), chunk...) // a new array: last may be shared
		return chunks
	}
	return append(chunks, slices.Clip(chunk))
}

// Upsert returns l with routes in place of the routes of their hosts (or
// added, for a host l has none for); l is not changed, and the result
// shares the chunks no route falls in. routes have distinct hosts; apply
// records what Lua holds this way after a push of a plan's upserts, which
// come in host order (any other order is sorted first, in a copy).
func (l RouteList) Upsert(routes []model.Route) RouteList {
	byHost := func(a, b model.Route) int { return strings.Compare(a.Host, b.Host) }
	if !slices.IsSortedFunc(routes, byHost) {
		routes = slices.Clone(routes)
		slices.SortFunc(routes, byHost)
	}
	if l.n == 0 { // the first push after a start: no list of changes
		return RouteList{chunks: appendChunk(nil, slices.Clone(routes)), n: len(routes)}
	}
	changes := make([]routeChange, len(routes))
	for i, r := range routes {
		changes[i] = routeChange{host: r.Host, route: r, ok: true}
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
		changes[i] = routeChange{host: host}
	}
	return l.with(changes)
}

// CompareRoutes calls f for each host of a or b, in host order, with its
// route in each (nil where it has none), but for the hosts of chunks a and
// b share: lists are never changed, so a chunk of both holds the same
// routes in both. Two lists of which one was made from the other (with,
// Upsert, Remove) share every chunk no change fell in, so plan's diff of
// what Lua holds against the next routes costs the chunks that differ, not
// a walk of every host.
func CompareRoutes(a, b RouteList, f func(a, b *model.Route)) {
	ci, cj := 0, 0 // the chunks of a and b
	i, j := 0, 0   // the next route in each
	for ci < len(a.chunks) || cj < len(b.chunks) {
		if ci < len(a.chunks) && cj < len(b.chunks) && i == 0 && j == 0 && sameChunk(a.chunks[ci], b.chunks[cj]) {
			ci, cj = ci+1, cj+1
			continue
		}
		var ra, rb *model.Route
		if ci < len(a.chunks) {
			ra = &a.chunks[ci][i]
		}
		if cj < len(b.chunks) {
			rb = &b.chunks[cj][j]
		}
		switch {
		case rb == nil || ra != nil && ra.Host < rb.Host:
			f(ra, nil)
			ci, i = after(a.chunks, ci, i)
		case ra == nil || rb.Host < ra.Host:
			f(nil, rb)
			cj, j = after(b.chunks, cj, j)
		default:
			f(ra, rb)
			ci, i = after(a.chunks, ci, i)
			cj, j = after(b.chunks, cj, j)
		}
	}
}

// sameChunk says whether a and b are the very same chunk.
func sameChunk(a, b []model.Route) bool {
	return len(a) == len(b) && &a[0] == &b[0]
}

// after returns the position after route i of chunk c.
func after(chunks [][]model.Route, c, i int) (int, int) {
	if i+1 < len(chunks[c]) {
		return c, i + 1
	}
	return c + 1, 0
}
