package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/render"
)

// PushMetrics is told about every POST to Lua.
type PushMetrics interface {
	// Pushed is called after every POST: kind is "backends",
	// "certificates" or "routes", bytes the size of the body sent.
	Pushed(kind string, bytes int, d time.Duration, err error)
}

// LuaState is the record of what Lua holds for one nginx boot, and the one
// way to change it: Execute runs a plan's steps, and each typed pusher
// updates its own record only once Lua took the update. A new nginx boot
// (a cold start lost every push) is met by Observe, which reads back what
// Lua holds, so the next plan pushes the rest again; an agent restart is
// met the same way, and pushes nothing Lua already has.
type LuaState struct {
	client  *LuaClient
	metrics PushMetrics

	boot string
	// backends are sorted by name, one per name: the record's own list
	// (a flat slice it changes in place as pushes land), half
	// the size of a map of them at 50,000 (plan.Held.Backends).
	backends []model.Backend
	certs    map[string]plan.HeldCertificate
	// routes is what Lua routes: after a plan that left the record
	// current, the very list of its Next (Adopt), which render made and
	// never changes, rather than a copy of every route; pushes made
	// since change it as render's lists change (RouteList.Upsert,
	// Remove), sharing the rest.
	routes render.RouteList
	// pushed are the routes of the last route push, counted in profiles
	// and savedRoutes but not yet put in routes: heldRoutes puts them in
	// when the record is read or pushed to again, unless Adopt came
	// first. A plan that leaves the record current is followed by Adopt,
	// which takes render's list, and the Upsert made at the push was
	// garbage at once (a chunk and the list of chunks: 10 KB a new
	// Ingress at 50,000).
	pushed []model.Route
	// profiles counts the locations of routes that jump to each profile
	// (RouteProfiles), kept with routes.
	profiles map[string]int
	// lastGood holds, for each certificate the model names that is
	// Invalid now, the content its name last had when valid (in a list
	// Held went through: plan.Held.LastGood): a valid one is its own last
	// good content, and a map of every one of them was 12 MB at 50,000.
	lastGood map[string]model.Certificate
	// pems are the contents of the certificates Lua holds, where the agent
	// knows them, for the saved state (statefile.go): an entry is the
	// content of certs' entry of its name (of its hash; its hosts are
	// certs'), and goes when that does.
	pems map[string]heldPEM
	// current says the records are what the last executed plan left, whole.
	current bool
	// unsaved says the records changed since the last Save; savedHash is
	// the config hash that Save wrote them for.
	unsaved   bool
	savedHash string
	// savedBackends, savedRoutes and savedCerts spread the names of the
	// backends, routes and certificates whose content the agent knows
	// over the saved state's chunks: each holds the keys of backends,
	// routes and pems, and the record tells them what came, changed and
	// went.
	savedBackends, savedRoutes, savedCerts savedItems
	// stateFolder is what the saved state's writes left on disk
	// (statefile.go); only the write that runs uses it.
	stateFolder stateFolder
	// certsChanged counts the changes of certs (a push, a read back, an
	// expiry learnt); heldFor and heldAt are the certificate list and the
	// count Held last went through: Held of the very same list with no
	// change since has nothing to do (a sync that changed no certificate,
	// at the cost of the change, not of every certificate). nearest is
	// NearestExpiry as of nearestAt changes.
	// Observe sets walkAll: the next Held walks every certificate.
	certsChanged, heldAt, nearestAt uint64
	heldFor                         model.List[model.Certificate]
	walkAll                         bool
	nearest                         time.Time
	// certBatchBytes bounds one certificate push (certificateBatchBytes;
	// tests make it small).
	certBatchBytes int
}

// heldPEM is the content the agent sent for one certificate: the very
// strings of the model's certificate (each held once, by the source, when
// the Secret's text is in the form the model serves), no hash or hosts
// (certs has them), which at 50,000 certificates kept the record 4 MB
// smaller.
type heldPEM struct {
	cert, key string
}

// NewLuaState returns an empty record for client; metrics may be nil.
func NewLuaState(client *LuaClient, metrics PushMetrics) *LuaState {
	if metrics == nil {
		metrics = noPushMetrics{}
	}
	return &LuaState{client: client, metrics: metrics, lastGood: map[string]model.Certificate{}, pems: map[string]heldPEM{},
		certs: map[string]plan.HeldCertificate{}, profiles: map[string]int{}, certBatchBytes: certificateBatchBytes}
}

type noPushMetrics struct{}

func (noPushMetrics) Pushed(string, int, time.Duration, error) {}

// Boot is the nginx boot the record belongs to ("" before the first).
func (l *LuaState) Boot() string { return l.boot }

// Observe reads back everything Lua holds when status is of a boot the
// record does not belong to, and says whether it did.
func (l *LuaState) Observe(ctx context.Context, status luaapi.Status) (newBoot bool, err error) {
	if status.BootID == l.boot {
		return false, nil
	}
	backends, err := l.client.Backends(ctx)
	if err != nil {
		return false, err
	}
	certs, err := l.client.Certificates(ctx)
	if err != nil {
		return false, err
	}
	routes, err := l.client.Routes(ctx)
	if err != nil {
		return false, err
	}
	held := make(map[string]plan.HeldCertificate, len(certs))
	for _, c := range certs {
		held[c.Name] = plan.HeldCertificate{Hosts: c.Hosts, Hash: c.Hash}
	}
	// The content the agent knows of what was read back: the certificates
	// of the same hash (Held learns the others' when the model names them).
	l.savedCerts.reset()
	for name := range l.pems {
		if h, ok := held[name]; ok && h.Hash == l.certs[name].Hash {
			l.savedCerts.changed(name, true)
		} else {
			delete(l.pems, name)
		}
	}
	l.boot, l.backends, l.certs, l.current, l.unsaved = status.BootID, sortedBackends(backends), held, false, true
	l.walkAll = true
	l.routes, l.pushed = render.NewRouteList(slices.Collect(maps.Values(routes))), nil
	l.certsChanged++
	l.profiles = map[string]int{}
	l.savedBackends.reset()
	l.savedRoutes.reset()
	for name := range backends {
		l.savedBackends.changed(name, true)
	}
	for host, r := range routes {
		l.countProfiles(r, 1)
		l.savedRoutes.changed(host, true)
	}
	return true, nil
}

// Held is the record for plan.Compute, with configHash as what nginx
// runs. certs are the next model's certificates: an Invalid one keeps
// the content its name had, valid, in the list Held went through before
// (lastGood), and names no longer there are forgotten. After the first,
// and until Lua is read back again (Observe), only the certificates of
// the chunks certs does not share with the list Held last went through
// are looked at (model.CompareLists): the others taught the record what
// they could then, and only Observe (which makes the next Held walk
// every one) brings the record content to learn of them again.
func (l *LuaState) Held(configHash string, certs model.List[model.Certificate]) plan.Held {
	held := plan.Held{ConfigHash: configHash, Backends: l.backends, Certificates: l.certs, Routes: l.heldRoutes(),
		LastGood: l.lastGood, Current: l.current}
	if certs.Same(l.heldFor) && l.heldAt == l.certsChanged {
		return held
	}
	if l.heldFor.Len() > 0 && !l.walkAll {
		model.CompareLists(l.heldFor, certs, byCertName, func(was, c model.Certificate, inWas, inCerts bool) {
			if inCerts {
				l.learn(c)
				l.keepLastGood(c, was, inWas)
			} else {
				delete(l.lastGood, was.Name)
			}
		})
		l.heldFor, l.heldAt = certs, l.certsChanged
		return held
	}
	named := make(map[string]bool, certs.Len())
	for c := range certs.All() {
		named[c.Name] = true
		l.learn(c)
		var was model.Certificate
		inWas := false
		if c.Invalid != "" {
			was, inWas = l.heldFor.Find(func(w model.Certificate) int { return strings.Compare(w.Name, c.Name) })
		}
		l.keepLastGood(c, was, inWas)
	}
	for name := range l.lastGood {
		if !named[name] {
			delete(l.lastGood, name)
		}
	}
	for name := range l.pems {
		if _, ok := l.certs[name]; !ok {
			delete(l.pems, name)
			l.savedCerts.remove(name)
		}
	}
	l.heldFor, l.heldAt, l.walkAll = certs, l.certsChanged, false
	return held
}

// keepLastGood records the last good content of the name of c, a
// certificate of the next model, when c is Invalid: was, the one of that
// name in the list Held went through before (inWas), when it was valid;
// else the one recorded before stays. A valid c is its own.
func (l *LuaState) keepLastGood(c, was model.Certificate, inWas bool) {
	switch {
	case c.Invalid == "":
		delete(l.lastGood, c.Name)
	case inWas && was.Invalid == "":
		l.lastGood[c.Name] = was
	}
}

// learn records what c, a certificate of the next model, tells, when it
// is valid: the expiry and content of what Lua holds under its name when
// that is c's content.
func (l *LuaState) learn(c model.Certificate) {
	if c.Invalid != "" {
		return
	}
	h, ok := l.certs[c.Name]
	_, known := l.pems[c.Name]
	if !ok || !h.NotAfter.IsZero() && known || h.Hash != c.Hash() {
		return
	}
	// Read back after a restart, a held certificate has no expiry
	// until the model names the same content.
	if h.NotAfter.IsZero() {
		h.NotAfter = c.NotAfter
		l.certs[c.Name] = h
		l.certsChanged++
	}
	// Likewise its content, for the saved state (again after a read
	// back: the content kept from before is of the same hash).
	l.holdPEM(c.Name, heldPEM{cert: c.CertPEM, key: c.KeyPEM})
	l.unsaved = true
}

// byCertName orders certificates by name, as the model's list is.
func byCertName(a, b model.Certificate) int { return strings.Compare(a.Name, b.Name) }

// NearestExpiry is when the first leaf of the certificates Lua holds
// expires, of those whose content the agent knows (zero: none). It walks
// the certificates only when they changed since it last did.
func (l *LuaState) NearestExpiry() time.Time {
	if l.nearestAt == l.certsChanged && l.nearestAt != 0 {
		return l.nearest
	}
	var nearest time.Time
	for _, c := range l.certs {
		if !c.NotAfter.IsZero() && (nearest.IsZero() || c.NotAfter.Before(nearest)) {
			nearest = c.NotAfter
		}
	}
	l.nearest, l.nearestAt = nearest, l.certsChanged
	return nearest
}

// RouteProfiles returns the profiles the routes Lua holds jump to.
func (l *LuaState) RouteProfiles() map[string]bool {
	out := make(map[string]bool, len(l.profiles))
	for name := range l.profiles {
		out[name] = true
	}
	return out
}

// holdRoutes records that Lua holds routes (distinct hosts); the list
// takes them when it is next read (pushed).
func (l *LuaState) holdRoutes(routes []model.Route) {
	held := l.heldRoutes()
	for _, r := range routes {
		old, found := held.Get(r.Host)
		l.countProfiles(old, -1)
		l.countProfiles(r, 1)
		l.savedRoutes.changed(r.Host, !found)
	}
	l.pushed = routes
}

// heldRoutes returns the routes Lua holds, with those of the last push
// put in (pushed).
func (l *LuaState) heldRoutes() render.RouteList {
	if l.pushed != nil {
		l.routes, l.pushed = l.routes.Upsert(l.pushed), nil
	}
	return l.routes
}

// dropRoutes records that Lua holds no route for hosts (distinct).
func (l *LuaState) dropRoutes(hosts []string) {
	held := l.heldRoutes()
	for _, host := range hosts {
		old, _ := held.Get(host)
		l.countProfiles(old, -1)
		l.savedRoutes.remove(host)
	}
	l.routes = held.Remove(hosts)
}

// Adopt records routes, the Next.Routes of the plan Execute just ran,
// as what Lua routes, when that plan left the record current: the record
// then holds routes equal to them host by host (the plan pushed every
// route that differed and removed the rest), so it may hold render's list
// itself and let its own copies go. The next plan's diff then skips every
// chunk render's next list shares with it. Render never changes a list it
// handed out (RouteList), so nothing changes the record behind its back.
func (l *LuaState) Adopt(routes render.RouteList) {
	if l.current {
		l.routes, l.pushed = routes, nil
	}
}

// holdBackends records that Lua holds backends (distinct names): each
// replaces the one of its name in place, and the new ones are merged in,
// in one pass from the end.
func (l *LuaState) holdBackends(backends []model.Backend) {
	var added []model.Backend
	for _, b := range backends {
		if i, ok := l.backendIndex(b.Name); ok {
			l.backends[i] = b
			l.savedBackends.changed(b.Name, false)
			continue
		}
		added = append(added, b)
		l.savedBackends.changed(b.Name, true)
	}
	if len(added) == 0 {
		return
	}
	slices.SortFunc(added, func(a, b model.Backend) int { return strings.Compare(a.Name, b.Name) })
	n := len(l.backends)
	l.backends = slices.Grow(l.backends, len(added))[:n+len(added)]
	i, j := n-1, len(added)-1
	for k := len(l.backends) - 1; j >= 0; k-- {
		if i >= 0 && l.backends[i].Name > added[j].Name {
			l.backends[k] = l.backends[i]
			i--
		} else {
			l.backends[k] = added[j]
			j--
		}
	}
}

// backendIndex finds the backend of name in l.backends.
func (l *LuaState) backendIndex(name string) (int, bool) {
	return slices.BinarySearchFunc(l.backends, name, func(b model.Backend, name string) int { return strings.Compare(b.Name, name) })
}

// holdPEM records the content of the certificate name Lua holds, whose
// hash is the one certs holds for name.
func (l *LuaState) holdPEM(name string, pem heldPEM) {
	_, held := l.pems[name]
	l.pems[name] = pem
	l.savedCerts.changed(name, !held)
}

// dropBackends records that Lua holds no backends of names.
func (l *LuaState) dropBackends(names []string) {
	gone := make(map[string]bool, len(names))
	for _, name := range names {
		if _, ok := l.backendIndex(name); ok {
			gone[name] = true
			l.savedBackends.remove(name)
		}
	}
	if len(gone) == 0 {
		return
	}
	l.backends = slices.DeleteFunc(l.backends, func(b model.Backend) bool { return gone[b.Name] })
}

// sortedBackends returns the backends of held (read back from Lua) sorted
// by name.
func sortedBackends(held map[string]model.Backend) []model.Backend {
	out := slices.Collect(maps.Values(held))
	slices.SortFunc(out, func(a, b model.Backend) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// countProfiles adds r's locations to the profile counts (by = 1), or
// takes them away (-1): a sync asks which profiles Lua's routes jump to
// (Stage.Keep), and a walk of every route at 50,000 hosts is most of a
// sync that changed one.
func (l *LuaState) countProfiles(r model.Route, by int) {
	for _, loc := range r.Locations {
		if loc.Profile == "" {
			continue
		}
		if l.profiles[loc.Profile] += by; l.profiles[loc.Profile] == 0 {
			delete(l.profiles, loc.Profile)
		}
	}
}

// Stale marks the record as not what the last plan left (a sync that
// changed its model but did not run its plan), so that the next plan
// compares everything.
func (l *LuaState) Stale() { l.current = false }

// Outcome is what Execute did.
type Outcome struct {
	Reloaded, Pushed           bool
	Upserts, Removes           int
	CertUpserts, CertRemoves   int
	RouteUpserts, RouteRemoves int
	Bytes                      int
	Push                       time.Duration // time spent pushing to Lua
}

// Reloader makes nginx run cfg (Nginx.ApplyConfig, or a test's).
type Reloader func(ctx context.Context, cfg render.Config) error

// drainGrace is how long routes pushed after a reload wait: nginx's old
// workers finish the requests they hold on keep-alive connections, and a
// route that jumps to a profile or a Gateway backend TLS location the
// reload brought (plan holds such routes back until it) would meet a
// worker of the old config that lacks it. New workers serve the routes as they were
// meanwhile.
const drainGrace = 500 * time.Millisecond

// waitDrain waits drainGrace, or until ctx is done.
func waitDrain(ctx context.Context) {
	t := time.NewTimer(drainGrace)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Execute runs the steps of p in order, reload for its Reload step;
// routes pushed after a reload wait drainGrace first. Lua refusing
// certificates does not stop the steps after it: the error is returned
// at the end, and the next sync tries again. Any other failure
// stops the plan at that step and is returned.
func (l *LuaState) Execute(ctx context.Context, p plan.Plan, reload Reloader) (Outcome, error) {
	var out Outcome
	var certErr error
	l.current = false
	reloaded := false
	for _, step := range p.Steps {
		var err error
		if step.Kind == plan.PushRoutes && reloaded {
			reloaded = false
			waitDrain(ctx)
		}
		switch step.Kind {
		case plan.PushCertificates:
			certErr = l.pushCertificates(ctx, step.Certificates, &out)
		case plan.PushBackends:
			err = l.pushBackends(ctx, luaapi.BackendUpdate{Upserts: payloads(step.Backends)}, &out)
			if err == nil {
				l.holdBackends(step.Backends)
				out.Upserts += len(step.Backends)
			}
		case plan.PushRoutes:
			err = l.pushRoutes(ctx, luaapi.RouteUpdate{Upserts: luaapi.RoutePayloads(step.Routes)}, &out)
			if err == nil {
				l.holdRoutes(step.Routes)
				out.RouteUpserts += len(step.Routes)
			}
		case plan.Reload:
			err = reload(ctx, step.Config)
			out.Reloaded = err == nil
			reloaded = out.Reloaded
		case plan.RemoveBackends:
			err = l.pushBackends(ctx, luaapi.BackendUpdate{Removes: step.Names}, &out)
			if err == nil {
				l.dropBackends(step.Names)
				out.Removes += len(step.Names)
			}
		case plan.RemoveRoutes:
			err = l.pushRoutes(ctx, luaapi.RouteUpdate{Removes: step.Names}, &out)
			if err == nil {
				l.dropRoutes(step.Names)
				out.RouteRemoves += len(step.Names)
			}
		default:
			err = fmt.Errorf("plan step %s: not known to apply", step.Kind)
		}
		if err != nil {
			return out, err
		}
	}
	l.current = certErr == nil && !p.Partial
	return out, certErr
}

// pushCertificates sends cp in batches (certificateBatches), each
// recorded as soon as Lua took it. A batch Lua refuses (400: input the
// agent's checks let through) costs only its own certificates: the others
// are still sent, and the first refusal is returned. Any other failure
// (no answer in time, nginx down) stops the push there; what landed
// stays recorded, and the next sync sends the rest.
func (l *LuaState) pushCertificates(ctx context.Context, cp plan.CertificatePlan, out *Outcome) error {
	batches := certificateBatches(cp, l.certs, l.certBatchBytes)
	var refused error
	for i, b := range batches {
		err := l.pushCertificateBatch(ctx, b, out)
		if err == nil {
			continue
		}
		if len(batches) > 1 {
			err = fmt.Errorf("certificate batch %d of %d (%d upserts, %d removes): %w", i+1, len(batches), len(b.upserts), len(b.removes), err)
		}
		if !errors.Is(err, ErrRefused) {
			return err
		}
		if refused == nil {
			refused = err
		}
	}
	return refused
}

// pushCertificateBatch sends one batch and records it once Lua took it.
func (l *LuaState) pushCertificateBatch(ctx context.Context, b certBatch, out *Outcome) error {
	update := luaapi.CertificateUpdate{Upserts: make([]luaapi.CertificatePayload, len(b.upserts)), Removes: b.removes}
	for i, c := range b.upserts {
		update.Upserts[i] = certificatePayload(c)
	}
	if err := l.post(ctx, "certificates", update, out); err != nil {
		return err
	}
	for _, c := range b.upserts {
		l.certs[c.Name] = plan.HeldCertificate{Hosts: c.Hosts, Hash: c.Hash(), NotAfter: c.NotAfter}
		l.holdPEM(c.Name, heldPEM{cert: c.CertPEM, key: c.KeyPEM})
	}
	for _, name := range b.removes {
		delete(l.certs, name)
		delete(l.pems, name)
		l.savedCerts.remove(name)
	}
	l.certsChanged++
	out.CertUpserts += len(b.upserts)
	out.CertRemoves += len(b.removes)
	return nil
}

func (l *LuaState) pushBackends(ctx context.Context, update luaapi.BackendUpdate, out *Outcome) error {
	return l.post(ctx, "backends", update, out)
}

func (l *LuaState) pushRoutes(ctx context.Context, update luaapi.RouteUpdate, out *Outcome) error {
	return l.post(ctx, "routes", update, out)
}

// post sends one update and tells the metrics.
func (l *LuaState) post(ctx context.Context, kind string, update any, out *Outcome) error {
	start := time.Now()
	n, err := l.client.post(ctx, kind, update)
	d := time.Since(start)
	l.metrics.Pushed(kind, n, d, err)
	out.Push += d
	out.Bytes += n
	if err != nil {
		return err
	}
	out.Pushed = true
	l.unsaved = true
	return nil
}

func certificatePayload(c model.Certificate) luaapi.CertificatePayload {
	return luaapi.CertificatePayload{Name: c.Name, Hosts: c.Hosts, Cert: c.CertPEM, Key: c.KeyPEM}
}

func payloads(backends []model.Backend) []luaapi.BackendPayload {
	out := make([]luaapi.BackendPayload, len(backends))
	for i, b := range backends {
		out[i] = luaapi.NewBackendPayload(b)
	}
	return out
}

// ApplyConfig writes cfg as nginx.conf and reloads nginx (Reload). When
// nginx rejects it, or it cannot be signalled, the previous file is put
// back, so that a later cold start never meets a config nginx refused. A
// reload not confirmed yet (ErrNotConfirmed) leaves the new file for
// nginx to load.
func (n *Nginx) ApplyConfig(ctx context.Context, cfg render.Config) error {
	previous, err := n.ReadConfig()
	if err != nil {
		return err
	}
	if err := n.WriteConfig(cfg.Bytes); err != nil {
		return err
	}
	err = n.Reload(ctx, cfg.Hash)
	if err == nil || errors.Is(err, ErrNotConfirmed) {
		return err
	}
	if previous != nil {
		if rerr := n.WriteConfig(previous); rerr != nil {
			return fmt.Errorf("reloading nginx: %w; restoring previous nginx.conf: %v", err, rerr)
		}
	}
	return fmt.Errorf("reloading nginx: %w", err)
}
