// Package plan is the diff stage of the pipeline (source → model → render → plan → apply).
//
// It compares what nginx runs and Lua holds (Held, as apply recorded it)
// with what they should (Next) and returns the work as data: one ordered
// list of steps. Keeping the structure and the endpoints apart is what lets
// an endpoint change skip the render and the reload entirely: the reload
// step exists only when the rendered nginx.conf differs from the one nginx
// runs (by hash), and only the backends, certificates and routes that
// differ from what Lua holds are sent. The order is part of the plan, not
// of the code that runs it: certificates and backends before the reload,
// so that new servers find them; routes before it, so that a host leaving
// nginx.conf keeps being served; removes after it, so that nothing nginx
// still runs loses what it points at.
package plan

import (
	"slices"
	"strings"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// Held is what nginx runs and Lua holds, as apply recorded it.
type Held struct {
	// ConfigHash is the hash of the nginx.conf nginx runs, and Config
	// that config when the agent knows it (it had nginx confirm it; the
	// zero Config when not): its profiles, and what a reload changes.
	ConfigHash string
	Config     render.Config
	// Backends, Certificates and Routes are what Lua holds, by name (a
	// route's name is its host). Backends are sorted by name, one per
	// name (apply's record, which no model shares: the syncer's fast path
	// writes into the model's list in place); Routes may share chunks with
	// render's lists (RouteList: never changed once made), so that a diff
	// against the next routes skips those (render.CompareRoutes).
	Backends     []model.Backend
	Certificates map[string]HeldCertificate
	Routes       render.RouteList
	// LastGood is the last valid content of each certificate Next names
	// Invalid (a valid one is its own): what keeps serving when its
	// Secret turns bad.
	LastGood map[string]model.Certificate
	// Current says the records are exactly what the previous plan left:
	// nothing was re-read, lost or left undone since. Only then may
	// Next.EndpointsOnly narrow the diff.
	Current bool
}

// Next is what nginx should run and Lua hold.
type Next struct {
	// Config is the rendered nginx.conf.
	Config render.Config
	// Backends, sorted by name; Certificates; Routes of the hosts Lua
	// routes (render.Cache.Build).
	Backends     model.List[model.Backend]
	Certificates model.List[model.Certificate]
	Routes       render.RouteList
	// EndpointsOnly says that nothing but the endpoints of ChangedBackends
	// differs from the Next of the previous plan: the syncer's fast path,
	// after an EndpointSlice change. With Held.Current only those backends
	// are compared, which keeps an endpoint change at 10,000 backends
	// O(changed).
	EndpointsOnly   bool
	ChangedBackends []model.Backend
	// BackendsFrom and CertificatesFrom are the lists of the previous
	// plan's Next when it left Lua holding them (the zero List when not
	// known): with Held.Current only what differs from them is compared
	// (model.CompareLists: the chunks the next list does not share with
	// them), which keeps a new Service or a new TLS Ingress at 50,000 from
	// a walk of every backend or certificate (a certificate compared is
	// hashed). The very list compares none.
	BackendsFrom     model.List[model.Backend]
	CertificatesFrom model.List[model.Certificate]
	// ChangedRoutes, when not nil, are the hosts whose route may differ
	// from the previous plan's Next.Routes (render.Cache.ChangedRoutes):
	// with Held.Current only they are looked up and compared, which keeps
	// a new Ingress at 50,000 routes from a walk of every route.
	ChangedRoutes map[string]bool
	// FullPush sends every backend whenever any differs, as the classic
	// controller does: the benchmark's baseline, nothing else.
	FullPush bool
	// HoldReload says the reload must not run (nginx rejected Config
	// before, or has yet to confirm it): the plan ends before its Reload
	// step, with what must still run, and is Partial.
	HoldReload bool
}

// StepKind says what a Step does.
type StepKind int

// The kinds of step, in the order a plan runs them.
const (
	// PushCertificates sends certificate upserts and removes in one request.
	PushCertificates StepKind = iota
	// PushBackends sends backend upserts.
	PushBackends
	// PushRoutes sends route upserts.
	PushRoutes
	// Reload makes nginx run Step.Config.
	Reload
	// RemoveBackends removes the backends Step.Names.
	RemoveBackends
	// RemoveRoutes removes the routes of the hosts Step.Names.
	RemoveRoutes
)

func (k StepKind) String() string {
	switch k {
	case PushCertificates:
		return "push-certificates"
	case PushBackends:
		return "push-backends"
	case PushRoutes:
		return "push-routes"
	case Reload:
		return "reload"
	case RemoveBackends:
		return "remove-backends"
	case RemoveRoutes:
		return "remove-routes"
	}
	return "unknown"
}

// Step is one piece of work; the field its Kind names is set.
type Step struct {
	Kind         StepKind
	Certificates CertificatePlan
	Backends     []model.Backend
	Routes       []model.Route
	Config       render.Config
	Names        []string
	// Reasons say why a Reload runs (render.Changes between the config
	// nginx runs and Config); nil when the config nginx runs is not known.
	Reasons []string
}

// Plan is the work of one sync: its steps, in the order they must run.
type Plan struct {
	Steps []Step
	// Partial says the steps after some point were left out
	// (Next.HoldReload): the records will not be whole after it runs.
	Partial bool
	// ComparedBackends is how many backends the plan compared with what
	// Lua holds: the changed ones on the fast path, those of the chunks
	// the list does not share with the last plan's (Next.BackendsFrom; none
	// for the very list), else every one.
	ComparedBackends int
}

// Empty reports whether the plan has nothing to do.
func (p Plan) Empty() bool { return len(p.Steps) == 0 }

// Step returns the step of kind k, if the plan has one.
func (p Plan) Step(k StepKind) (Step, bool) {
	for _, s := range p.Steps {
		if s.Kind == k {
			return s, true
		}
	}
	return Step{}, false
}

// Compute returns the steps that take held to next.
func Compute(held Held, next Next) Plan {
	narrow := next.EndpointsOnly && held.Current
	var p Plan
	if !narrow {
		var from model.List[model.Certificate]
		if held.Current {
			from = next.CertificatesFrom
		}
		if cp := Certificates(held.Certificates, held.LastGood, from, next.Certificates); !cp.Empty() {
			p.Steps = append(p.Steps, Step{Kind: PushCertificates, Certificates: cp})
		}
	}
	var upserts []model.Backend
	var removes []string
	switch {
	case narrow:
		upserts = changed(held.Backends, next.ChangedBackends)
		p.ComparedBackends = len(next.ChangedBackends)
	case held.Current && next.BackendsFrom.Len() > 0:
		upserts, removes, p.ComparedBackends = changedBackends(held.Backends, next.BackendsFrom, next.Backends)
	default:
		upserts, removes = Backends(held.Backends, next.Backends)
		p.ComparedBackends = next.Backends.Len()
	}
	if next.FullPush && (len(upserts) > 0 || len(removes) > 0) {
		upserts = next.Backends.Slice()
	}
	if len(upserts) > 0 {
		p.Steps = append(p.Steps, Step{Kind: PushBackends, Backends: upserts})
	}
	var routes RoutePlan
	switch {
	case narrow:
	case next.ChangedRoutes != nil && held.Current:
		routes = changedRoutes(held.Routes, next.Routes, next.ChangedRoutes)
	default:
		routes = Routes(held.Routes, next.Routes)
	}
	reload := next.Config.Hash != held.ConfigHash
	before, after := routes.Upserts, []model.Route(nil)
	if reload {
		// A route that jumps to a profile nginx does not run yet waits
		// for the reload that brings it.
		before, after = splitByProfiles(routes.Upserts, held.Config)
	}
	if len(before) > 0 {
		p.Steps = append(p.Steps, Step{Kind: PushRoutes, Routes: before})
	}
	if reload && next.HoldReload {
		p.Partial = true
		return p
	}
	if reload {
		step := Step{Kind: Reload, Config: next.Config}
		if held.Config.Hash == held.ConfigHash && held.ConfigHash != "" {
			step.Reasons = render.Changes(held.Config, next.Config)
		}
		p.Steps = append(p.Steps, step)
	}
	if len(after) > 0 {
		p.Steps = append(p.Steps, Step{Kind: PushRoutes, Routes: after})
	}
	if len(removes) > 0 {
		p.Steps = append(p.Steps, Step{Kind: RemoveBackends, Names: removes})
	}
	if len(routes.Removes) > 0 {
		p.Steps = append(p.Steps, Step{Kind: RemoveRoutes, Names: routes.Removes})
	}
	return p
}

// splitByProfiles returns the routes whose every profile (and backend
// TLS location) is in running, and the others, each in the order given.
func splitByProfiles(routes []model.Route, running render.Config) (ready, waiting []model.Route) {
	have := make(map[string]bool, len(running.Profiles)+len(running.BackendTLS))
	for _, p := range running.Profiles {
		have[p.Name] = true
	}
	for _, name := range running.BackendTLS {
		have[name] = true
	}
	for _, r := range routes {
		ok := true
		for _, l := range r.Locations {
			if l.Profile != "" && !have[l.Profile] || !backendTLSRunning(l.Rule, have) {
				ok = false
				break
			}
		}
		if ok {
			ready = append(ready, r)
		} else {
			waiting = append(waiting, r)
		}
	}
	return ready, waiting
}

// backendTLSRunning says whether every backend TLS location rule's
// shares name is in have.
func backendTLSRunning(rule *model.RouteRule, have map[string]bool) bool {
	if rule == nil {
		return true
	}
	for _, b := range rule.Backends {
		if b.TLS != "" && !have[b.TLS] {
			return false
		}
	}
	return true
}

// Backends returns the backends of next that Lua lacks or holds with other
// endpoints or another Policy, in next's order, and the names Lua holds
// that next no longer has, sorted. held is sorted by name; when next is
// too (the model's list), both are walked once side by side.
func Backends(held []model.Backend, next model.List[model.Backend]) (upserts []model.Backend, removes []string) {
	if !sortedByName(next) {
		return backendsBySearch(held, next)
	}
	i := 0
	for b := range next.All() {
		for i < len(held) && held[i].Name < b.Name {
			removes = append(removes, held[i].Name)
			i++
		}
		if i < len(held) && held[i].Name == b.Name {
			if !sameBackend(held[i], b) {
				upserts = append(upserts, b)
			}
			i++
			continue
		}
		upserts = append(upserts, b)
	}
	for ; i < len(held); i++ {
		removes = append(removes, held[i].Name)
	}
	return upserts, removes
}

// changedBackends is Backends when Lua holds exactly from (sorted by
// name, as next): only the backends of the chunks next does not share
// with from are looked up in held and compared; compared counts them.
func changedBackends(held []model.Backend, from, next model.List[model.Backend]) (upserts []model.Backend, removes []string, compared int) {
	model.CompareLists(from, next, byName, func(was, b model.Backend, _, inNext bool) {
		compared++
		if !inNext {
			if _, ok := HeldBackend(held, was.Name); ok {
				removes = append(removes, was.Name)
			}
			return
		}
		if have, ok := HeldBackend(held, b.Name); !ok || !sameBackend(have, b) {
			upserts = append(upserts, b)
		}
	})
	return upserts, removes, compared
}

// backendsBySearch is Backends for a next not sorted by name.
func backendsBySearch(held []model.Backend, next model.List[model.Backend]) (upserts []model.Backend, removes []string) {
	found := 0
	for b := range next.All() {
		have, ok := HeldBackend(held, b.Name)
		if ok {
			found++
		}
		if !ok || !sameBackend(have, b) {
			upserts = append(upserts, b)
		}
	}
	// Names are unique in both: when Lua holds exactly the backends found
	// above, it holds none to remove, and the set is not built.
	if found == len(held) {
		return upserts, nil
	}
	wanted := make(map[string]struct{}, next.Len())
	for b := range next.All() {
		wanted[b.Name] = struct{}{}
	}
	for _, b := range held {
		if _, ok := wanted[b.Name]; !ok {
			removes = append(removes, b.Name)
		}
	}
	return upserts, removes
}

// byName orders backends by name.
func byName(a, b model.Backend) int { return strings.Compare(a.Name, b.Name) }

// sortedByName says whether backends are sorted by name.
func sortedByName(backends model.List[model.Backend]) bool {
	first, last := true, ""
	for b := range backends.All() {
		if !first && b.Name < last {
			return false
		}
		first, last = false, b.Name
	}
	return true
}

// HeldBackend returns the backend of name in held, which is sorted by
// name (Held.Backends).
func HeldBackend(held []model.Backend, name string) (model.Backend, bool) {
	i, ok := slices.BinarySearchFunc(held, name, func(b model.Backend, name string) int { return strings.Compare(b.Name, name) })
	if !ok {
		return model.Backend{}, false
	}
	return held[i], true
}

// changed returns the backends of only that Lua lacks or holds otherwise.
func changed(held, only []model.Backend) []model.Backend {
	var out []model.Backend
	for _, b := range only {
		if have, ok := HeldBackend(held, b.Name); !ok || !sameBackend(have, b) {
			out = append(out, b)
		}
	}
	return out
}

// sameBackend says whether a and b have the same Policy and endpoints;
// the same endpoints array does without a look (a model never changes
// the endpoints it handed out: the fast path puts in new ones, and apply
// keeps what it pushed), as sameLocations.
func sameBackend(a, b model.Backend) bool {
	if a.PolicyValue() != b.PolicyValue() || len(a.Endpoints) != len(b.Endpoints) {
		return false
	}
	return len(a.Endpoints) == 0 || &a.Endpoints[0] == &b.Endpoints[0] || slices.Equal(a.Endpoints, b.Endpoints)
}

// HeldCertificate is what Lua reports holding for one certificate name.
type HeldCertificate struct {
	// Hosts it is served for, sorted.
	Hosts []string
	// Hash of its content, as model.Certificate.Hash computes it.
	Hash string
	// NotAfter is when its leaf expires, when the agent knows the content
	// (it pushed it, or the model has a certificate of the same hash).
	NotAfter time.Time
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
//
// from, when not empty, is the list Lua holds exactly (the previous
// plan's, which left held current): only the certificates in the chunks
// next does not share with it are looked at (model.CompareLists), those
// equal to from's not compared (hashed), and those it had that next lacks
// are removed. Empty, every certificate of next is
// compared, and what held has beyond them is removed.
func Certificates(held map[string]HeldCertificate, lastGood map[string]model.Certificate, from, next model.List[model.Certificate]) CertificatePlan {
	var p CertificatePlan
	if from.Len() > 0 {
		// In name order, as Removes are sorted.
		model.CompareLists(from, next, byCertName, func(was, c model.Certificate, inFrom, inNext bool) {
			if inFrom && inNext && sameCertificate(was, c) {
				return // Lua holds what the previous plan left for it: not hashed
			}
			name := was.Name
			if inNext {
				if p.certificate(held, lastGood, c) {
					return
				}
				name = c.Name
			}
			if _, ok := held[name]; ok {
				p.Removes = append(p.Removes, name)
			}
		})
		return p
	}
	wanted := make(map[string]struct{}, next.Len())
	for c := range next.All() {
		if p.certificate(held, lastGood, c) {
			wanted[c.Name] = struct{}{}
		}
	}
	p.Removes = unwanted(held, wanted)
	return p
}

// certificate adds c to p when Lua must be told of it (Certificates),
// and says whether Lua is to hold c's name.
func (p *CertificatePlan) certificate(held map[string]HeldCertificate, lastGood map[string]model.Certificate, c model.Certificate) bool {
	if c.Invalid != "" {
		good, ok := lastGood[c.Name]
		h, isHeld := held[c.Name]
		switch {
		case ok && good.Invalid == "":
			good.Hosts = c.Hosts
			c = good
		case isHeld && slices.Equal(h.Hosts, c.Hosts):
			p.Kept = append(p.Kept, c.Name)
			return true
		default:
			return false
		}
		p.Kept = append(p.Kept, c.Name)
	}
	if h, ok := held[c.Name]; !ok || h.Hash != c.Hash() || !slices.Equal(h.Hosts, c.Hosts) {
		p.Upserts = append(p.Upserts, c)
	}
	return true
}

// sameCertificate says whether a and b are the same certificate: content,
// hosts, expiry and validity (a chunk made again holds the certificates
// no edit changed as they were, with the very same strings).
func sameCertificate(a, b model.Certificate) bool {
	return a.Name == b.Name && a.CertPEM == b.CertPEM && a.KeyPEM == b.KeyPEM && a.Invalid == b.Invalid &&
		a.NotAfter.Equal(b.NotAfter) && slices.Equal(a.Hosts, b.Hosts)
}

// byCertName orders certificates by name, as the model's list is.
func byCertName(a, b model.Certificate) int { return strings.Compare(a.Name, b.Name) }

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

// RoutePlan is the route work of one sync: the hosts whose locations
// changed.
type RoutePlan struct {
	// Upserts are routes Lua lacks or holds with other locations, in Host order.
	Upserts []model.Route
	// Removes are hosts Lua routes that next does not, sorted.
	Removes []string
}

// Empty reports whether the plan has nothing to push.
func (p RoutePlan) Empty() bool { return len(p.Upserts) == 0 && len(p.Removes) == 0 }

// Routes diffs next against the routes Lua holds, by host, in one walk of
// both lists in host order. The chunks next shares with held (render.Cache
// hands out the next list made from the last, and apply keeps the list it
// pushed) are not looked at, and a route whose locations are the very
// slice Lua's record holds is not compared location by location: a render
// that changed a few hosts costs their chunks.
func Routes(held, next render.RouteList) RoutePlan {
	var p RoutePlan
	render.CompareRoutes(held, next, func(have, r *model.Route) {
		switch {
		case r == nil:
			p.Removes = append(p.Removes, have.Host)
		case have == nil || !sameRoute(*have, *r):
			p.Upserts = append(p.Upserts, *r)
		}
	})
	return p
}

// changedRoutes is Routes when only the routes of hosts may differ from
// what Lua holds: the routes of next with those hosts that Lua lacks or
// holds otherwise, and those of the hosts Lua holds that next does not
// route. It costs a lookup in next and in held per host.
func changedRoutes(held, next render.RouteList, hosts map[string]bool) RoutePlan {
	var p RoutePlan
	sorted := make([]string, 0, len(hosts))
	for host := range hosts {
		sorted = append(sorted, host)
	}
	slices.Sort(sorted)
	for _, host := range sorted {
		have, isHeld := held.Get(host)
		r, ok := next.Get(host)
		switch {
		case ok && (!isHeld || !sameRoute(have, r)):
			p.Upserts = append(p.Upserts, r)
		case !ok && isHeld:
			p.Removes = append(p.Removes, host)
		}
	}
	return p
}

// sameRoute says whether Lua holding a serves as b does.
func sameRoute(a, b model.Route) bool {
	return a.HTTPS == b.HTTPS && a.Ordered == b.Ordered && a.Listener == b.Listener && sameLocations(a.Locations, b.Locations)
}

// sameLocations says whether a and b hold equal locations; the same
// slice does without a look.
func sameLocations(a, b []model.RouteLocation) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true
	}
	return slices.EqualFunc(a, b, model.RouteLocation.Equal)
}
