package render

// Cache is Build with a memory of the last render, for the syncer: from
// one sync to the next its models differ by a few hosts, and
// model.Incremental hands each server it did not build again out as it was
// (the same Locations array). So the cache keeps, per host, the profiles,
// body sizes and route locations it made (the route locations are the very
// slices Lua's record holds once pushed; views, the bulk of a render, are
// not kept), and makes them again only for a server that is not the one it
// made them from; and it hands back the
// last nginx.conf when nothing nginx.conf holds changed: no changed host
// adds to it beyond its profiles and body size, the profile set and the
// router's body size are the same, and so are the settings, the kept
// profiles and the model's parts other than its servers. A new Ingress
// whose settings have a profile then costs its own host, not every host.
// Gateway routes are followed the same way, route by route (they add to
// nginx.conf only a location per set of retry codes), so a new HTTPRoute
// costs its own routes; when the model says which of them changed
// (GatewayRoutesChanged), the others are not looked at either. The
// routes are handed out as a RouteList made from the last one: only the
// hosts whose route may have changed are made again (ChangedRoutes names
// them). When the model says which of
// its servers changed (ServersChanged, from model.Incremental), the
// others are not even looked at: a new Ingress at 50,000 costs its host,
// not a walk of 50,000 servers. Without that hint, servers made from the
// last model's (model.Edited: they share its chunks) are compared chunk
// by chunk (model.CompareLists), skipping the chunks both hold.
//
// Why not make render itself incremental: Build stays the one definition
// of the output, and the cache is checked against it (TestCacheEqualsBuild,
// step by step over random change sequences); anything the cache cannot
// decide cheaply (an error, two body sizes of one value, a server block of
// client certificates, which names other hosts) renders the conf whole.

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// Cache renders like Build, reusing what the last model's unchanged
// servers gave. The zero Cache is not ready: use NewCache. It is not safe
// for concurrent use.
type Cache struct {
	settings Settings
	ready    bool // settings, base and the maps belong to one Settings
	// base is the conf view of a model without servers: what a host
	// adds to it is compared against it (hostConf).
	base confView
	// settingsView is the conf view the settings alone decide
	// (settingsConfView), which hostConf adds a host's model to.
	settingsView confView
	// gen numbers the renders; an entry of the current render has it.
	gen   uint64
	hosts map[string]*hostEntry
	def   *hostEntry
	// order are the entries of the last render's servers, in its order:
	// a model's servers come sorted by host, so a render finds each
	// server's entry by walking them beside its servers (lastOrder), not
	// by a lookup in hosts per server.
	order []*hostEntry
	// profiles and sizes count the hosts' locations by profile and body
	// size (each location's own or the ConfigMap's).
	profiles map[string]*profileCount
	sizes    map[string]int
	// router is the router's body size the entries' route locations were
	// made with.
	router string
	// gateway are the last model's Gateway routes: a route the model
	// hands out again (the same pointer) is in the last list as it was
	// (metric labels and all).
	gateway model.List[*model.Route]
	// lastServers are the servers of the last model rendered, and next
	// the model's hint for the next render (ServersChanged).
	lastServers model.List[*model.Server]
	next        serverHint
	// lastSorted says the last model's servers were sorted by host,
	// each once (a walk saw them so, or they were made from such).
	lastSorted bool
	// nextGateway is the model's hint of its changed Gateway routes for
	// the next render (GatewayRoutesChanged).
	nextGateway gatewayHint
	// claims are the entries of this render that name each alias and www
	// name, in no order: the first of them in the model's order that
	// routes routes the name, unless a server has it as its host.
	claims map[string][]*hostEntry
	// last is the config of the last render, lastKeep the profiles it
	// kept and lastRest its model without servers (restOf).
	last     Config
	lastKeep []Profile
	lastRest model.Model
	// stats are the last render's, for the sync log (Stats).
	stats CacheStats
	// lastRoutes are the routes the last Build returned (listed: one did,
	// since the last reset); changed are the hosts whose route may differ
	// between changedFrom (the routes of the Build before) and lastRoutes,
	// nil when any may (ChangedRoutes).
	lastRoutes, changedFrom RouteList
	listed                  bool
	changed                 map[string]bool
}

// ChangedRoutes says which routes of the last Build may differ from those
// of the Build before it (from, the very list that Build returned): a
// host not in hosts has the same route in both, or none in both. ok is
// false when the cache cannot say (the first render, new settings, an
// error, the router's body size changed). Plan compares only those hosts
// when Lua holds from (plan.Next.ChangedRoutes).
func (c *Cache) ChangedRoutes() (from RouteList, hosts map[string]bool, ok bool) {
	return c.changedFrom, c.changed, c.changed != nil
}

// CacheStats say what the last Build of a Cache made again.
type CacheStats struct {
	// Hosts are the servers whose views and routes were made again (the
	// default server counts as one); all of them when Whole.
	Hosts int
	// ConfReused says nginx.conf is the last render's, not rendered again.
	ConfReused bool
	// GatewayRoutes are the Gateway routes checked (and labelled) again:
	// those the model did not hand out as they were.
	GatewayRoutes int
	// Whole says the cache rendered by Build (first render, an error, or
	// an output it cannot decide).
	Whole bool
	// Walked says every server of the model was looked at: no hint of
	// the model's servers changed since the last render (ServersChanged).
	Walked bool
	// GatewayWalked says every Gateway route of the model was looked at:
	// no hint of the model's routes changed since the last render
	// (GatewayRoutesChanged), or the render made every route.
	GatewayWalked bool
}

// Stats returns what the last Build made again.
func (c *Cache) Stats() CacheStats { return c.stats }

type profileCount struct {
	body string
	n    int
}

// hostEntry is what one server gave. It holds the model's server itself,
// not a copy (a model never changes a server it handed out): at 50,000
// hosts a copy in each entry was 8 MB.
//
// The body sizes of its locations, which the cache counts, are read from
// the server when counted (bodySizes), not kept: at 50,000 hosts a list
// per entry was 0.8 MB, and the bools side by side keep an entry in the
// 80-byte size class (it was 112).
type hostEntry struct {
	server *model.Server
	gen    uint64
	// profiles are the distinct profiles of its locations.
	profiles  []Profile
	locations []model.RouteLocation
	isDefault bool
	https     bool // the route's HTTPS (the default server's is true)
	// conf says it adds to nginx.conf more than its profiles and sizes,
	// once confKnown (entryConf works it out when first asked).
	conf, confKnown bool
}

// lastOrder walks the entries of the last render, sorted by host, beside
// the servers of this one, sorted too.
type lastOrder struct {
	entries []*hostEntry
	next    int
}

// find returns the entry of host among the entries, nil when it has none
// (host is new, or the entries are not sorted: the caller looks it up).
// Each call must name a host after the one before.
func (w *lastOrder) find(host string) *hostEntry {
	for w.next < len(w.entries) && w.entries[w.next].server.Host < host {
		w.next++
	}
	if w.next < len(w.entries) && w.entries[w.next].server.Host == host {
		return w.entries[w.next]
	}
	return nil
}

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{} }

// sameServer says whether srv is the server e was made from: the same
// Locations array (a model never changes a server it handed out) and the
// same other fields.
func (e *hostEntry) sameServer(srv *model.Server) bool {
	a := e.server
	if a.Host != srv.Host || a.HTTPS != srv.HTTPS || a.WWWRedirect != srv.WWWRedirect || a.ClientTLSSettings() != srv.ClientTLSSettings() ||
		len(a.Locations) != len(srv.Locations) || !slices.Equal(a.Aliases, srv.Aliases) {
		return false
	}
	return len(a.Locations) == 0 || &a.Locations[0] == &srv.Locations[0]
}

// restOf is m without what the cache follows host by host and route by
// route, and without what render does not read.
func restOf(m model.Model) model.Model {
	m.Servers, m.Backends, m.Certificates, m.AuthFiles, m.NotServed = model.List[*model.Server]{}, model.List[model.Backend]{}, model.List[model.Certificate]{}, nil, nil
	m.GatewayRoutes, m.GatewayAPI = model.List[*model.Route]{}, model.GatewayAPIStatus{}
	return m
}

// Build is render.Build of m, s and keep, with the routes as a list.
func (c *Cache) Build(m model.Model, s Settings, keep ...Profile) (Config, RouteList, error) {
	cfg, routes, ok, err := c.build(m, s, keep)
	if err != nil || !ok {
		// What the cache does not decide, Build does (and says which
		// error); the next render starts whole.
		*c = Cache{stats: CacheStats{Hosts: 1 + m.Servers.Len(), Whole: true}}
		cfg, all, err := Build(m, s, keep...)
		if err != nil {
			return Config{}, RouteList{}, err
		}
		return cfg, NewRouteList(all), nil
	}
	c.lastRoutes, c.listed, c.lastServers = routes, true, m.Servers
	return cfg, routes, nil
}

// serverHint is what ServersChanged says.
type serverHint struct {
	from  model.List[*model.Server]
	hosts map[string]bool
	ok    bool
}

// ServersChanged tells the next Build which servers of its model may
// differ from those of the model before (from, its very Servers list;
// model.Incremental.ChangedServers): a host not in hosts has the very
// same server in both, or none in both, and the model's servers are
// sorted by host, each once; nil hosts say nothing (the model cannot
// say). When from is the model the cache rendered last, that Build
// looks at the servers of hosts alone, not at every one; else (or
// without a call) it compares the servers with the last model's by
// model.CompareLists when the one list was made from the other (they
// share chunks), and walks them all when not.
func (c *Cache) ServersChanged(from model.List[*model.Server], hosts map[string]bool) {
	c.next = serverHint{from: from, hosts: hosts, ok: hosts != nil}
}

// gatewayHint is what GatewayRoutesChanged says.
type gatewayHint struct {
	from  model.List[*model.Route]
	hosts map[string]bool
	ok    bool
}

// GatewayRoutesChanged tells the next Build which Gateway routes of its
// model may differ from those of the model before (from, its very
// GatewayRoutes list; model.Incremental.ChangedGatewayRoutes): a host
// not in hosts has the very same *Route in both, or none in both, and
// the model's Gateway routes are sorted by host, each once; nil hosts
// say nothing. When from is the Gateway routes the cache rendered last,
// that Build looks at the routes of hosts alone (found by binary search),
// not at every one; else (or without a call) it walks them all.
func (c *Cache) GatewayRoutesChanged(from model.List[*model.Route], hosts map[string]bool) {
	c.nextGateway = gatewayHint{from: from, hosts: hosts, ok: hosts != nil}
}

// compareHosts orders servers by host.
func compareHosts(a, b *model.Server) int { return strings.Compare(a.Host, b.Host) }

// reset forgets every host, for new settings.
func (c *Cache) reset(s Settings) error {
	*c = Cache{settings: s, hosts: map[string]*hostEntry{}, profiles: map[string]*profileCount{}, sizes: map[string]int{},
		claims: map[string][]*hostEntry{}}
	def, err := newServerView(model.Server{})
	if err != nil {
		return err
	}
	def.HTTPS = true
	if c.settingsView, err = settingsConfView(s); err != nil {
		return err
	}
	c.base = c.settingsView
	if err := c.base.addModel(model.Model{}, s, []serverView{def}, newProfiler(), nil); err != nil {
		return err
	}
	c.ready = true
	return nil
}

// build renders m; ok false says Build must (the cache cannot say the
// output is Build's).
func (c *Cache) build(m model.Model, s Settings, keep []Profile) (Config, RouteList, bool, error) {
	if err := checkSettings(s); err != nil {
		return Config{}, RouteList{}, false, err
	}
	if !c.ready || !reflect.DeepEqual(c.settings, s) {
		if err := c.reset(s); err != nil {
			return Config{}, RouteList{}, false, err
		}
	}
	c.gen++
	c.stats = CacheStats{}
	// The hosts whose route may change: those of each server made again
	// or gone, old and new, with their aliases and www names (who claims
	// an alias changes only with a server that names it), and those of
	// the Gateway routes that came, went or changed; nil (any) after a
	// reset.
	hinted := map[string]bool{}
	if !c.listed {
		hinted = nil
	}
	hint := func(e *hostEntry) {
		if hinted == nil {
			return
		}
		if e.isDefault {
			hinted[DefaultRoute] = true
			return
		}
		hinted[e.server.Host] = true
		for _, alias := range e.server.Aliases {
			hinted[alias] = true
		}
		if e.server.WWWRedirect != "" {
			hinted[e.server.WWWRedirect] = true
		}
	}
	h := DefaultHTTP()
	if s.HTTP != nil {
		h = *s.HTTP
	}
	global := h.ClientMaxBodySize
	profiles := newProfiler()
	// confChanged says a changed host adds to nginx.conf. With no last
	// config the conf is rendered anyway, so no host is asked (entryConf
	// costs a conf view per host: most of a first render).
	confChanged := c.last.Hash == ""
	setChanged := false // the profile set changed
	// made are the entries made in this render, with their views: an
	// entry keeps no view (views are the largest part of a render, and
	// the conf is rendered from views made again: a reload anyway).
	var changed []*hostEntry
	made := map[*hostEntry]serverView{}
	update := func(old *hostEntry, srv *model.Server, isDefault bool) (*hostEntry, error) {
		if old != nil && old.sameServer(srv) {
			old.gen = c.gen
			return old, nil
		}
		e, view, err := c.newEntry(srv, isDefault, s, profiles)
		if err != nil {
			return nil, err
		}
		made[e] = view
		hint(e)
		c.claim(e, 1)
		if old != nil {
			hint(old)
			c.claim(old, -1)
			setChanged = c.count(old, -1, global) || setChanged
			confChanged = confChanged || c.entryConf(old, nil)
		}
		setChanged = c.count(e, 1, global) || setChanged
		confChanged = confChanged || c.entryConf(e, &view)
		changed = append(changed, e)
		return e, nil
	}
	var err error
	def := m.Default // the entry keeps it: a copy, not m
	if c.def, err = update(c.def, &def, true); err != nil {
		return Config{}, RouteList{}, false, fmt.Errorf("default server: %w", err)
	}
	drop := func(e *hostEntry) {
		hint(e)
		c.claim(e, -1)
		setChanged = c.count(e, -1, global) || setChanged
		confChanged = confChanged || c.entryConf(e, nil)
		delete(c.hosts, e.server.Host)
	}
	next := c.next
	c.next = serverHint{}
	nextGateway := c.nextGateway
	c.nextGateway = gatewayHint{}
	// entries are m.Servers' entries, in order: made by the walk below,
	// or when asked for (entriesOf) after a render that followed the
	// model's hint.
	var entries []*hostEntry
	entriesOf := func() []*hostEntry {
		if entries == nil && m.Servers.Len() > 0 {
			entries = make([]*hostEntry, 0, m.Servers.Len())
			for srv := range m.Servers.All() {
				entries = append(entries, c.hosts[srv.Host])
			}
		}
		return entries
	}
	sorted := true
	switch {
	case next.ok && c.listed && next.from.Same(c.lastServers):
		// Only the hinted hosts' servers may differ from the last
		// model's: each is found by its host (the model's servers are
		// sorted by host, each once), the others are not looked at.
		for host := range next.hosts {
			if host == "" {
				continue // the default server, compared above
			}
			old := c.hosts[host]
			srv, found := m.Servers.Find(func(srv *model.Server) int { return strings.Compare(srv.Host, host) })
			if !found {
				if old != nil {
					drop(old)
				}
				continue
			}
			e, err := update(old, srv, false)
			if err != nil {
				return Config{}, RouteList{}, false, err
			}
			c.hosts[host] = e
		}
		c.order = nil // the next walk finds each entry in hosts
	case c.listed && c.lastSorted && c.lastServers.Shares(m.Servers):
		// m's servers were made from the last model's (model.Edited,
		// which keeps them sorted, each host once): only the chunks
		// the two do not share may differ, and CompareLists looks at
		// those alone. Each host it meets is after the one before, or
		// the lists were not made so: Build then says what is wrong.
		var err error
		ordered, prev := true, ""
		model.CompareLists(c.lastServers, m.Servers, compareHosts, func(x, y *model.Server, inA, inB bool) {
			host := ""
			if inB {
				host = y.Host
			} else {
				host = x.Host
			}
			if err != nil || !ordered {
				return
			}
			if prev != "" && host <= prev {
				ordered = false
				return
			}
			prev = host
			old := c.hosts[host]
			if !inB {
				if old != nil {
					drop(old)
				}
				return
			}
			var e *hostEntry
			if e, err = update(old, y, false); err == nil {
				c.hosts[host] = e
			}
		})
		if err != nil {
			return Config{}, RouteList{}, false, err
		}
		if !ordered {
			return Config{}, RouteList{}, false, nil
		}
		c.order = nil // the next walk finds each entry in hosts
	default:
		c.stats.Walked = true
		entries = make([]*hostEntry, 0, m.Servers.Len())
		walk := lastOrder{entries: c.order}
		var before *model.Server
		for srv := range m.Servers.All() {
			i := len(entries)
			var old *hostEntry
			if i > 0 && before.Host >= srv.Host {
				walk.entries = nil // not sorted: by the map from here on
				sorted = false
			}
			if old = walk.find(srv.Host); old == nil {
				old = c.hosts[srv.Host]
			}
			if old != nil && old.gen == c.gen {
				return Config{}, RouteList{}, false, fmt.Errorf("server %q: host appears twice", srv.Host)
			}
			e, err := update(old, srv, false)
			if err != nil {
				return Config{}, RouteList{}, false, err
			}
			if e != old {
				c.hosts[srv.Host] = e
			}
			entries = append(entries, e)
			before = srv
		}
		if len(c.hosts) > m.Servers.Len() {
			for _, e := range c.hosts {
				if e.gen != c.gen {
					drop(e)
				}
			}
		}
		c.order = entries
	}
	c.lastSorted = sorted
	if setChanged && c.profileClash() {
		return Config{}, RouteList{}, false, nil
	}
	router, ok := c.routerBodySize(global)
	if !ok {
		router = routerBodySize(m, global)
	}
	routerBytes, _ := sizeBytes(router)
	remade := len(changed)
	// all are the entries of the default server and m.Servers, made
	// only for a render that needs every one.
	all := func() []*hostEntry { return append([]*hostEntry{c.def}, entriesOf()...) }
	viewOf := func(e *hostEntry) (serverView, error) {
		if v, ok := made[e]; ok {
			return v, nil
		}
		v, err := e.newView(s)
		if err != nil {
			return serverView{}, err
		}
		made[e] = v
		return v, nil
	}
	if router != c.router {
		c.router = router
		changed = all()
		hinted = nil
	}
	for _, e := range changed {
		view, err := viewOf(e)
		if err != nil {
			return Config{}, RouteList{}, false, err
		}
		if err := e.routeLocations(view, s, profiles, global, routerBytes); err != nil {
			return Config{}, RouteList{}, false, err
		}
	}
	routes, retries, ok, err := c.routes(m, entriesOf, hinted, sorted, nextGateway)
	if err != nil || !ok {
		return Config{}, RouteList{}, false, err
	}
	c.changedFrom, c.changed = c.lastRoutes, hinted
	c.stats.Hosts = remade
	rest := restOf(m)
	if c.last.Hash != "" && !confChanged && !retries && !setChanged && router == c.lastRouter() && len(c.last.view.ClientTLSServers) == 0 &&
		slices.Equal(keep, c.lastKeep) && reflect.DeepEqual(rest, c.lastRest) {
		c.stats.ConfReused = true
		return c.last, routes, true, nil
	}
	views := make([]serverView, 0, 1+m.Servers.Len())
	for _, e := range all() {
		view, err := viewOf(e)
		if err != nil {
			return Config{}, RouteList{}, false, err
		}
		views = append(views, view)
	}
	cfg, err := renderConf(m, s, views, newProfiler(), keep)
	if err != nil {
		return Config{}, RouteList{}, false, err
	}
	c.last, c.lastKeep, c.lastRest = cfg, slices.Clone(keep), rest
	return cfg, routes, true, nil
}

// lastRouter is the router's body size of the last config.
func (c *Cache) lastRouter() string {
	if c.last.view == nil {
		return ""
	}
	return c.last.view.RouterBodySize
}

// newView makes srv's view, as serverViews and addModSecurity do.
func newView(srv model.Server, isDefault bool, s Settings) (serverView, error) {
	view, err := newServerView(srv)
	if err != nil {
		if isDefault {
			return serverView{}, err
		}
		return serverView{}, fmt.Errorf("server %q: %w", srv.Host, err)
	}
	if isDefault {
		view.HTTPS = true
	}
	views := []serverView{view}
	if err := addModSecurity(views, s); err != nil {
		return serverView{}, err
	}
	return views[0], nil
}

// newView makes e's view again.
func (e *hostEntry) newView(s Settings) (serverView, error) {
	return newView(*e.server, e.isDefault, s)
}

// newEntry makes the entry of srv and its view: its profiles,
// as newProfiles and routerBodySize see them.
func (c *Cache) newEntry(srv *model.Server, isDefault bool, s Settings, profiles profiler) (*hostEntry, serverView, error) {
	if !isDefault {
		for _, name := range append([]string{srv.Host}, srv.Aliases...) {
			if _, err := serverName(name); err != nil {
				return nil, serverView{}, fmt.Errorf("server %q: %w", srv.Host, err)
			}
		}
	}
	view, err := newView(*srv, isDefault, s)
	if err != nil {
		return nil, serverView{}, err
	}
	e := &hostEntry{server: srv, isDefault: isDefault, gen: c.gen, https: view.HTTPS}
	seen := map[string]bool{}
	for _, lv := range view.Locations {
		name, body, err := profiles.of(lv)
		if err != nil {
			return nil, serverView{}, err
		}
		if name != "" && !seen[name] {
			seen[name] = true
			e.profiles = append(e.profiles, Profile{Name: name, Body: body})
		}
	}
	return e, view, nil
}

// entryConf says whether e adds to nginx.conf (hostConf), working it out
// the first time it is asked, from view when given (e's own), else from a
// view made again. The default server is in restOf: a change of it
// renders the conf.
func (c *Cache) entryConf(e *hostEntry, view *serverView) bool {
	if !e.confKnown {
		e.confKnown = true
		if !e.isDefault {
			if view == nil {
				v, err := e.newView(c.settings)
				if err != nil {
					e.conf = true
					return true
				}
				view = &v
			}
			e.conf = c.hostConf(*e.server, *view, c.settings)
		}
	}
	return e.conf
}

// hostConf says whether srv adds to nginx.conf more than its profiles
// and body sizes: whether a model of srv alone renders a conf view other
// than one of no server, profiles and body size aside. An error says yes:
// the whole render then reports it.
func (c *Cache) hostConf(srv model.Server, view serverView, s Settings) bool {
	got := c.settingsView
	if err := got.addModel(model.Model{Servers: model.ListOf(&srv)}, s, []serverView{view}, newProfiler(), nil); err != nil {
		return true
	}
	got.Profiles, got.Mirror, got.Dollar, got.RouterBodySize = c.base.Profiles, c.base.Mirror, c.base.Dollar, c.base.RouterBodySize
	got.ErrorBackend, got.TLSUpstreams = c.base.ErrorBackend, c.base.TLSUpstreams
	return !reflect.DeepEqual(&got, &c.base) || hasTLSUpstream(srv) // pointers: no copy of either view
}

// hasTLSUpstream says whether a location of srv goes to its backend
// over TLS (tlsUpstreams claims a name for it).
func hasTLSUpstream(srv model.Server) bool {
	for _, loc := range srv.Locations {
		if loc.Protocol == model.ProtocolHTTPS || loc.Protocol == model.ProtocolGRPCS {
			return true
		}
	}
	return false
}

// count adds e's profiles and sizes to the counts (by = 1) or takes them
// away (-1); it says whether a profile came or went. global is the body
// size of a location without one of its own (the settings', the same
// for every call between two resets).
func (c *Cache) count(e *hostEntry, by int, global string) bool {
	changed := false
	for _, p := range e.profiles {
		pc := c.profiles[p.Name]
		if pc == nil {
			pc = &profileCount{body: p.Body}
			c.profiles[p.Name] = pc
		}
		if pc.n == 0 || pc.n+by == 0 {
			changed = true
		}
		pc.n += by
		if pc.n == 0 {
			delete(c.profiles, p.Name)
		}
	}
	for _, loc := range e.server.Locations {
		// The body size of each location of its server: its own, or
		// global (the ConfigMap's; a new one resets the cache).
		size := orDefault(loc.ProxySettings().BodySize, global)
		c.sizes[size] += by
		if c.sizes[size] == 0 {
			delete(c.sizes, size)
		}
	}
	return changed
}

// profileClash says whether two hosts' profiles have one name and two
// bodies (profiler's names refuse it; Build says which).
func (c *Cache) profileClash() bool {
	for _, e := range c.hosts {
		for _, p := range e.profiles {
			if c.profiles[p.Name].body != p.Body {
				return true
			}
		}
	}
	for _, p := range c.def.profiles {
		if c.profiles[p.Name].body != p.Body {
			return true
		}
	}
	return false
}

// routerBodySize is routerBodySize of the counted sizes; not ok when two
// texts of the largest size are counted (routerBodySize takes the first
// in the model's order).
func (c *Cache) routerBodySize(global string) (string, bool) {
	largest, text, tie := int64(-1), global, false
	for size := range c.sizes {
		n, ok := sizeBytes(size)
		if !ok {
			continue
		}
		if n == 0 {
			return "0", true
		}
		switch {
		case n > largest:
			largest, text, tie = n, size, false
		case n == largest:
			tie = true
		}
	}
	return text, !tie
}

// routeLocations makes e's route locations, as routesOf does.
func (e *hostEntry) routeLocations(view serverView, s Settings, profiles profiler, global string, router int64) error {
	if len(view.Locations) == 0 {
		e.locations = nil
		return nil
	}
	host := view.Host
	if e.isDefault {
		host = DefaultRoute
	}
	locations := make([]model.RouteLocation, len(view.Locations))
	for j, lv := range view.Locations {
		var err error
		if locations[j], err = routeLocation(profiles, lv, global, router); err != nil {
			return fmt.Errorf("server %q: %w", view.Host, err)
		}
		if s.RequestMetrics != nil {
			locations[j] = withMetric(locations[j], metricLabels(lv.source.Ingress, lv.source.Backend, lv.source.Path, host))
		}
	}
	e.locations = locations
	return nil
}

// routes are routesOf's routes, as a list: the last list with the
// routes of the hinted hosts made again, and of the Gateway routes that
// came, went or changed (gatewayRoutes says what the bools say); every
// route made again when any may have changed (hinted nil), or when the
// servers are not sorted by host (the order decides which server routes
// an alias two name). hinted gains the hosts of those Gateway routes.
func (c *Cache) routes(m model.Model, entries func() []*hostEntry, hinted map[string]bool, sorted bool, gatewayHint gatewayHint) (RouteList, bool, bool, error) {
	if hinted == nil || !sorted {
		return c.allRoutes(m, entries(), hinted)
	}
	changes := make([]routeChange, 0, len(hinted))
	for host := range hinted {
		route, ok, err := c.ingressRoute(host)
		if err != nil {
			return RouteList{}, false, false, err
		}
		change := routeChange{Key: host, Remove: !ok}
		if ok {
			made := route
			change.Value = &made
		}
		changes = append(changes, change)
	}
	var gateway []routeChange
	var retries bool
	var err error
	ok := true
	if gatewayHint.ok && gatewayHint.from.Same(c.gateway) {
		gateway, retries, err = c.hintedGatewayRoutes(m, gatewayHint.hosts, hinted)
	} else {
		gateway, retries, ok, err = c.gatewayRoutes(m, hinted, false)
	}
	if err != nil || !ok {
		return RouteList{}, false, false, err
	}
	changes = append(changes, gateway...)
	slices.SortFunc(changes, func(a, b routeChange) int { return strings.Compare(a.Key, b.Key) })
	return c.lastRoutes.with(changes), retries, true, nil
}

// allRoutes are routes' routes, every one made again as routesOf makes
// them.
func (c *Cache) allRoutes(m model.Model, entries []*hostEntry, hinted map[string]bool) (RouteList, bool, bool, error) {
	routes := make([]model.Route, 0, 1+m.Servers.Len()+m.GatewayRoutes.Len())
	claimed := map[string]bool{} // the aliases and www names routed
	taken := func(name string) bool {
		return claimed[name] || c.hosts[name] != nil
	}
	add := func(e *hostEntry, srv *model.Server, isDefault bool) error {
		if len(e.locations) == 0 {
			return nil
		}
		host := srv.Host
		if isDefault {
			host = DefaultRoute
		}
		routes = append(routes, model.Route{Host: host, HTTPS: e.https, Locations: e.locations})
		for _, alias := range srv.Aliases {
			if taken(alias) {
				continue
			}
			route, err := e.aliasRoute(alias)
			if err != nil {
				return err
			}
			claimed[alias] = true
			routes = append(routes, route)
		}
		if from := srv.WWWRedirect; from != "" && !isDefault && !taken(from) {
			route, err := e.wwwRoute(from)
			if err != nil {
				return err
			}
			claimed[from] = true
			routes = append(routes, route)
		}
		return nil
	}
	if err := add(c.def, &m.Default, true); err != nil {
		return RouteList{}, false, false, err
	}
	i := 0
	for srv := range m.Servers.All() {
		if err := add(entries[i], srv, false); err != nil {
			return RouteList{}, false, false, err
		}
		i++
	}
	gateway, retries, ok, err := c.gatewayRoutes(m, hinted, true)
	if err != nil || !ok {
		return RouteList{}, false, false, err
	}
	for _, g := range gateway {
		routes = append(routes, *g.Value)
	}
	return NewRouteList(routes), retries, true, nil
}

// aliasRoute is the route of alias, a name of e's server.
func (e *hostEntry) aliasRoute(alias string) (model.Route, error) {
	if _, err := serverName(alias); err != nil {
		return model.Route{}, fmt.Errorf("server %q: alias: %w", e.server.Host, err)
	}
	return model.Route{Host: alias, HTTPS: e.https, Locations: e.locations}, nil
}

// wwwRoute is the route of from, the www twin of e's server's host.
func (e *hostEntry) wwwRoute(from string) (model.Route, error) {
	return wwwRedirectRoute(from, serverView{Host: e.server.Host, HTTPS: e.https}, e.locations[0].Backend)
}

// ingressRoute is the route allRoutes makes of host, or none: the
// default server's, a server's own, or that of the first entry in the
// model's order (the default server, then the servers by host) that has
// locations and names host as an alias or, the default aside, as its www
// twin (an alias before the www twin in one server).
func (c *Cache) ingressRoute(host string) (model.Route, bool, error) {
	if host == DefaultRoute {
		return c.def.ownRoute(DefaultRoute)
	}
	if e := c.hosts[host]; e != nil {
		return e.ownRoute(host)
	}
	var by *hostEntry
	alias := false
	for _, e := range c.claims[host] {
		if len(e.locations) == 0 {
			continue
		}
		isAlias := slices.Contains(e.server.Aliases, host)
		if !isAlias && (e.isDefault || e.server.WWWRedirect != host) {
			continue
		}
		if by == nil || e.before(by) {
			by, alias = e, isAlias
		}
	}
	if by == nil {
		return model.Route{}, false, nil
	}
	route, err := by.wwwRoute(host)
	if alias {
		route, err = by.aliasRoute(host)
	}
	return route, err == nil, err
}

// ownRoute is the route of e's server under host, none when it has no
// location.
func (e *hostEntry) ownRoute(host string) (model.Route, bool, error) {
	if len(e.locations) == 0 {
		return model.Route{}, false, nil
	}
	return model.Route{Host: host, HTTPS: e.https, Locations: e.locations}, true, nil
}

// before says whether e comes before o in the model's order.
func (e *hostEntry) before(o *hostEntry) bool {
	if e.isDefault != o.isDefault {
		return e.isDefault
	}
	return e.server.Host < o.server.Host
}

// claim adds e to the claims of its aliases and www twin (by = 1), or
// takes it away (-1).
func (c *Cache) claim(e *hostEntry, by int) {
	names := e.server.Aliases
	if e.server.WWWRedirect != "" {
		names = append(slices.Clip(names), e.server.WWWRedirect)
	}
	for _, name := range names {
		list := c.claims[name]
		if by > 0 {
			if !slices.Contains(list, e) {
				c.claims[name] = append(list, e)
			}
			continue
		}
		if i := slices.Index(list, e); i >= 0 {
			list = slices.Delete(slices.Clone(list), i, i+1)
			if len(list) == 0 {
				delete(c.claims, name)
				continue
			}
			c.claims[name] = list
		}
	}
}

// gatewayRoutes are the changes of m's Gateway routes to the last list,
// as gatewayRoutes and gatewayMetricLabels make them: a route the last
// model had (the same pointer: a model never changes a route it handed
// out) is in the last list as it was then, and a change only when all
// (then taken from that list); only the others are checked and
// labelled, and a route the last model had and m has not is a change to
// none. It says whether a route with retry codes came, went or changed
// (each set of codes is a location of nginx.conf), and not ok when the
// routes are not sorted by host, each once (Build then says which
// appears twice). An Ingress's route cannot take a Gateway route's host:
// those are DNS names, and a Gateway route's host has a space
// (FrontKey).
func (c *Cache) gatewayRoutes(m model.Model, hinted map[string]bool, all bool) ([]routeChange, bool, bool, error) {
	c.stats.GatewayWalked = true
	var changes []routeChange
	last := c.gateway
	retries, j := false, 0
	gone := func(r *model.Route) {
		retries = retries || hasRetries(*r)
		hintHost(hinted, r.Host)
		if !all {
			changes = append(changes, routeChange{Key: r.Host, Remove: true})
		}
	}
	var before *model.Route
	for r := range m.GatewayRoutes.All() {
		if before != nil && before.Host >= r.Host {
			return nil, false, false, nil
		}
		before = r
		for j < last.Len() && last.At(j).Host < r.Host {
			gone(last.At(j))
			j++
		}
		if j < last.Len() && last.At(j).Host == r.Host {
			j++
			if last.At(j-1) == r {
				if all {
					out := c.lastRoutes.get(r.Host)
					if out == nil {
						return nil, false, false, nil
					}
					changes = append(changes, routeChange{Key: r.Host, Value: out})
				}
				continue
			}
			retries = retries || hasRetries(*last.At(j - 1))
		}
		change, err := c.gatewayRouteMade(r)
		if err != nil {
			return nil, false, false, err
		}
		hintHost(hinted, r.Host)
		retries = retries || hasRetries(*r)
		changes = append(changes, change)
	}
	for ; j < last.Len(); j++ {
		gone(last.At(j))
	}
	c.gateway = m.GatewayRoutes
	return changes, retries, true, nil
}

// hintedGatewayRoutes are gatewayRoutes' changes (all false) when the
// model said which of its Gateway routes may differ from the last
// model's (c.gateway): only those hosts are looked up, in both lists
// (each sorted by host, each host once), and a route the same in both is
// no change.
func (c *Cache) hintedGatewayRoutes(m model.Model, hosts, hinted map[string]bool) ([]routeChange, bool, error) {
	var changes []routeChange
	retries := false
	for host := range hosts {
		last, next := findRoute(c.gateway, host), findRoute(m.GatewayRoutes, host)
		if last == next {
			continue
		}
		hintHost(hinted, host)
		if last != nil {
			retries = retries || hasRetries(*last)
		}
		if next == nil {
			changes = append(changes, routeChange{Key: host, Remove: true})
			continue
		}
		change, err := c.gatewayRouteMade(next)
		if err != nil {
			return nil, false, err
		}
		retries = retries || hasRetries(*next)
		changes = append(changes, change)
	}
	c.gateway = m.GatewayRoutes
	return changes, retries, nil
}

// gatewayRouteMade is the change to r, a Gateway route new or changed
// since the last render: checked, and labelled when requests are counted.
func (c *Cache) gatewayRouteMade(r *model.Route) (routeChange, error) {
	if err := checkGatewayRoute(*r); err != nil {
		return routeChange{}, err
	}
	out := *r
	if c.settings.RequestMetrics != nil {
		out = gatewayRouteLabels(out)
	}
	c.stats.GatewayRoutes++
	return routeChange{Key: r.Host, Value: &out}, nil
}

// findRoute is the route of host in routes, sorted by host; nil for none.
func findRoute(routes model.List[*model.Route], host string) *model.Route {
	r, _ := routes.Find(func(r *model.Route) int { return strings.Compare(r.Host, host) })
	return r
}

// hintHost adds host to hinted, when not nil (nil: any host may change).
func hintHost(hinted map[string]bool, host string) {
	if hinted != nil {
		hinted[host] = true
	}
}
