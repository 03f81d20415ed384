// Package syncer is the loop that drives the pipeline:
// source → model → render → plan → apply.
//
// Source events only mark the state dirty; one goroutine coalesces bursts for
// a few milliseconds and then syncs, so a thousand changes cost a handful of
// syncs. A sync builds the model (all of it, or on the fast path only the
// backends of the Services whose endpoints changed: model.EndpointPatch),
// renders it, asks plan.Compute for the steps against what apply recorded
// (apply.LuaState and apply.ConfigRecord), lets apply run them, and reports.
// The syncer keeps only the loop: coalescing, retries with backoff, and the
// verdicts it hands on: nginx's rejection of a config, or a render failure,
// to the quarantine (package quarantine) or to the ConfigMap (configmap.go).
//
// A render failure is isolated by rendering the models of subsets of the
// Ingresses (quarantine.RenderFailures) rather than by errors that name
// their objects: it covers every way render can fail with nothing in render
// to keep in step, and it costs nothing until a render fails.
package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/quarantine"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/snapshot"
	"github.com/restysync/restysync/agent/internal/source"
)

// Syncer keeps nginx in step with a Source.
type Syncer struct {
	src    source.Source
	nginx  *apply.Nginx
	opts   Options
	logger *slog.Logger
	dirty  chan struct{}

	kindsMu    sync.Mutex
	kinds      map[source.Kind]bool // changed since the last sync
	firstEvent time.Time            // first change since the last sync

	// The fields below are owned by the loop goroutine.
	lua     *apply.LuaState     // what Lua holds, and the pushers
	configs *apply.ConfigRecord // which nginx.conf nginx runs
	guard   *quarantine.Guard   // quarantine of Ingresses nginx or render refused
	// retiring says lastConfig keeps profiles only routes Lua held jump to;
	// rerender makes the next sync a full one, which renders them away.
	retiring, rerender bool
	// changedBackends are the backends the fast path resolved again for
	// this sync (nil after a full build): the plan compares only those.
	changedBackends []model.Backend
	lastConfig      render.Config // last rendered config
	lastRoutes      []model.Route // the routes of lastConfig's model
	started         time.Time     // when Run began
	firstApplied    bool          // a config was confirmed once: logged
	built           *model.Model  // the last model, for the fast path
	// builtIndex places each Service's backends in built.Backends; the
	// fast path keeps names and order, so it lasts until the next full
	// build (nil: not made yet).
	builtIndex model.BackendIndex
	builtFrom  int // Ingresses it was built from
	// builtSnap is the snapshot the model of this sync's full build was
	// built from (the guard's filter and the globals applied), kept for the
	// sync so that a render failure can be isolated.
	builtSnap model.Snapshot
	problems  []model.Problem // the problems of the last full build
	reported  map[string]bool // problems already logged
	// waitReason is why nginx did not answer at the last sync, already
	// logged ("": it answered); see noteWaiting.
	waitReason string
	authFiles  apply.AuthFileRecord // the htpasswd and TLS files written
	access     apply.AccessCheck    // the last check of the workers' access
	// pendingEvent is the first source event not yet applied, for
	// Metrics.Propagated; zero when there is none.
	pendingEvent time.Time
	// configMap is the agent's ConfigMap as last read, and the globals
	// nginx last took (configmap.go).
	configMap *snapshot.ConfigMap

	mu    sync.Mutex
	state State
	// stateRead says State handed out state.Model since the fast path
	// last changed its backends: they are copied before the next change.
	stateRead bool
}

// New returns a Syncer; Run starts it.
func New(src source.Source, nginx *apply.Nginx, opts Options, logger *slog.Logger) *Syncer {
	if opts.Coalesce <= 0 {
		opts.Coalesce = 5 * time.Millisecond
	}
	if opts.StructureCoalesce <= 0 {
		opts.StructureCoalesce = 25 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 100 * time.Millisecond
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 250 * time.Millisecond
	}
	if opts.StartBound <= 0 {
		opts.StartBound = 5 * time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = noMetrics{}
	}
	return &Syncer{
		src:       src,
		nginx:     nginx,
		opts:      opts,
		logger:    logger,
		dirty:     make(chan struct{}, 1),
		kinds:     map[source.Kind]bool{},
		reported:  map[string]bool{},
		lua:       newLuaState(nginx, opts.Metrics),
		configs:   apply.NewConfigRecord(nginx, opts.Render, opts.StartBound),
		guard:     quarantine.New(),
		configMap: snapshot.NewConfigMap(opts.snapshotOptions(), logger),
	}
}

// Run starts the source and syncs until ctx is done.
func (s *Syncer) Run(ctx context.Context) error {
	start := time.Now()
	s.started = start
	if err := s.src.Start(ctx, s.changed); err != nil {
		return fmt.Errorf("starting source: %w", err)
	}
	s.update(func(st *State) { st.Synced = true })
	s.logger.Info("source synced", "duration", time.Since(start).Round(time.Millisecond))
	s.kindsMu.Lock()
	s.firstEvent = time.Time{} // the first listing is not a change to time
	s.kindsMu.Unlock()

	check := time.NewTicker(s.opts.CheckInterval)
	defer check.Stop()
	retry := newRetry()
	defer retry.timer.Stop()
	retry.after(s.sync(ctx))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.dirty:
			s.coalesce(ctx)
			retry.after(s.sync(ctx))
		case <-retry.timer.C:
			retry.after(s.sync(ctx))
		case <-check.C:
			s.update(func(st *State) { st.LastLoop = time.Now() })
			if s.needsSync(ctx) {
				retry.after(s.sync(ctx))
			}
		}
	}
}

// retry runs a failed sync again with exponential backoff, so that a push
// or reload that failed is never dropped while no new change arrives.
type retry struct {
	timer *time.Timer
	delay time.Duration
}

const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 10 * time.Second
)

func newRetry() *retry {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &retry{timer: t}
}

// after arms the timer when the sync failed and disarms it when it did not.
func (r *retry) after(err error) {
	if err == nil {
		r.delay = 0
		r.timer.Stop()
		return
	}
	r.delay = min(max(2*r.delay, retryFirst), retryMax)
	r.timer.Reset(r.delay)
}

// changed records which kind of object changed and wakes the loop.
func (s *Syncer) changed(kind source.Kind) {
	s.kindsMu.Lock()
	s.kinds[kind] = true
	if s.firstEvent.IsZero() {
		s.firstEvent = time.Now()
	}
	s.kindsMu.Unlock()
	s.markDirty()
}

// takeKinds returns the kinds changed since the last call, and keeps the
// time of the first of those changes in pendingEvent if none is pending.
func (s *Syncer) takeKinds() map[source.Kind]bool {
	s.kindsMu.Lock()
	defer s.kindsMu.Unlock()
	if s.pendingEvent.IsZero() {
		s.pendingEvent = s.firstEvent
	}
	s.firstEvent = time.Time{}
	kinds := s.kinds
	s.kinds = map[source.Kind]bool{}
	return kinds
}

// quietPeriod is Coalesce while only EndpointSlices changed since the last
// sync, else StructureCoalesce.
func (s *Syncer) quietPeriod() time.Duration {
	s.kindsMu.Lock()
	defer s.kindsMu.Unlock()
	for kind := range s.kinds {
		if kind != source.KindEndpointSlice {
			return s.opts.StructureCoalesce
		}
	}
	return s.opts.Coalesce
}

func (s *Syncer) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// coalesce waits until no event arrived for Coalesce (StructureCoalesce
// when more than EndpointSlices changed), or MaxDelay passed.
func (s *Syncer) coalesce(ctx context.Context) {
	deadline := time.Now().Add(s.opts.MaxDelay)
	quiet := time.NewTimer(min(s.quietPeriod(), time.Until(deadline)))
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.dirty:
			if time.Now().After(deadline) {
				return
			}
			quiet.Reset(min(s.quietPeriod(), time.Until(deadline)))
		case <-quiet.C:
			return
		}
	}
}

// needsSync reads nginx's status and says whether it differs from the record:
// nginx cold-started (new boot id), runs another config, or was not reachable.
func (s *Syncer) needsSync(ctx context.Context) bool {
	st, err := s.nginx.Lua.Status(ctx)
	if err != nil {
		// Still down; the config for its start is written, unless it is
		// time to leave it a confirmed one instead.
		return s.configs.StartOverdue()
	}
	if st.BootID != s.lua.Boot() {
		return true
	}
	return s.configs.NeedsSync(st.ConfigHash, s.lastConfig.Hash)
}

// sync runs the pipeline once. Errors are logged and returned for the
// loop to retry: nothing is recorded as applied until nginx confirmed it.
func (s *Syncer) sync(ctx context.Context) error {
	start := time.Now()
	next, problems, path := s.model(s.takeKinds())
	buildTime := time.Since(start)
	s.reportProblems(problems)

	result, err := s.apply(ctx, next)
	if path == "full" && errors.Is(err, errRender) && s.isolateRenderFailure(err) {
		// Built again without the culprits (or on the good ConfigMap).
		index, tracks := s.src.(source.EndpointIndex)
		next, problems, _ = s.fullModel(index, tracks)
		s.reportProblems(problems)
		result, err = s.apply(ctx, next)
	}
	s.builtSnap = model.Snapshot{}
	if path == "full" {
		problems = append(problems, s.judge(result, err)...)
	}
	s.report(ctx, next, problems, path, result, err)
	s.recordSync(path, result, err, start)
	attrs := []any{
		"action", result.action(),
		"path", path,
		"ingresses", s.builtFrom,
		"servers", len(next.Servers),
		"backends", len(next.Backends),
		"certificates", len(next.Certificates),
		"upserts", result.Upserts,
		"removes", result.Removes,
		"cert_upserts", result.CertUpserts,
		"cert_removes", result.CertRemoves,
		"route_upserts", result.RouteUpserts,
		"route_removes", result.RouteRemoves,
		"bytes", result.Bytes,
		"problems", len(problems),
		"build", buildTime.Round(time.Microsecond),
		"render", result.render.Round(time.Microsecond),
		"status", result.status.Round(time.Microsecond),
		"push", result.Push.Round(time.Microsecond),
		"duration", time.Since(start).Round(time.Microsecond),
	}
	if err != nil {
		s.logger.Error("sync failed", append(attrs, "error", err)...)
		return err
	}
	s.logger.Info("sync", attrs...)
	return nil
}

// judge tells the quarantine whether nginx took the config of a full
// build, and schedules the next bisection step at once. It returns the
// Problems of the Ingresses it quarantined just now.
func (s *Syncer) judge(result syncResult, err error) []model.Problem {
	var quarantined []model.Problem
	switch {
	case errors.Is(err, apply.ErrRejected) || errors.Is(err, apply.ErrRefused):
		reason := quarantine.NginxReason(err)
		if s.judgeGlobals(reason) {
			return nil
		}
		if keys, blamed := s.guard.Rejected(reason); blamed {
			for _, key := range keys {
				s.logger.Warn("Ingress quarantined: nginx rejected a config with it", "ingress", key, "reason", reason)
				quarantined = append(quarantined, s.guard.Problem(key))
			}
			s.markDirty() // build without it: its Problem, and the next step
		}
	case result.configRunning:
		s.guard.Confirmed()
		s.confirmGlobals()
	}
	if s.guard.Bisecting() {
		group, left := s.guard.Queue()
		s.logger.Info("finding the Ingresses nginx rejects", "next_group", group, "groups_left", left)
		s.markDirty()
	}
	return quarantined
}

// apply renders next (or reuses the last render on the fast path), asks
// nginx what it runs, and runs the plan that takes it and Lua to next.
func (s *Syncer) apply(ctx context.Context, next model.Model) (syncResult, error) {
	var res syncResult
	// A sync that does not run its whole plan leaves the record of what
	// Lua holds behind its model: the next plan compares everything.
	defer func() {
		if !res.executed {
			s.lua.Stale()
		}
	}()
	renderStart := time.Now()
	cfg, routes, rendered, err := s.configFor(next)
	if err != nil {
		return res, err
	}
	if rendered {
		res.render = time.Since(renderStart)
	}
	// htpasswd files before the config that names them; nginx reads them
	// on every request, so a changed Secret needs no reload. The CA and
	// certificate files of backend TLS are read when nginx loads its
	// config: those its profiles name stay.
	if err := s.authFiles.Write(s.nginx, next.AuthFiles, cfg.Files); err != nil {
		return res, err
	}
	statusStart := time.Now()
	status, err := s.nginx.Lua.Status(ctx)
	res.status = time.Since(statusStart)
	if err != nil {
		// nginx is not up (yet): leave the right config for it to start with.
		res.waiting = true
		return res, s.leaveForStart(cfg, err)
	}
	if err := s.observe(ctx, status, cfg); err != nil {
		return res, err
	}
	held := s.configs.Held(s.lua, status.ConfigHash, next.Certificates)
	hold, err := s.holdReload(cfg, held, &res)
	if err != nil {
		return res, err
	}
	p := plan.Compute(held, plan.Next{Config: cfg, Backends: next.Backends, Certificates: next.Certificates, Routes: routes,
		EndpointsOnly: s.changedBackends != nil, ChangedBackends: s.changedBackends, FullPush: s.opts.FullPush, HoldReload: hold})
	res.Outcome, err = s.lua.Execute(ctx, p, s.reload)
	if errors.Is(err, apply.ErrRefused) {
		s.opts.Metrics.ValidationFailed("nginx")
	}
	if errors.Is(err, errUnconfirmed) {
		res.waiting = true
		return res, nil
	}
	res.executed = err == nil
	res.configRunning = s.configs.Applied() == cfg.Hash
	res.current = res.configRunning && err == nil
	if res.executed && s.retiring {
		// The routes have left the kept profiles: render them away.
		s.rerender = true
		s.markDirty()
	}
	return res, err
}

// observe records what nginx's status says: a new boot (Lua lost or holds
// other state: it is read back) and the config it runs.
func (s *Syncer) observe(ctx context.Context, status luaapi.Status, cfg render.Config) error {
	s.waitReason = ""
	s.configs.Answered()
	previousBoot := s.lua.Boot()
	newBoot, err := s.lua.Observe(ctx, status)
	if err != nil {
		return err
	}
	if newBoot {
		if err := s.nginx.TightenSocket(); err != nil {
			s.logger.Warn("the config socket stays open to more than nginx and the agent", "error", err)
		}
		if previousBoot != "" {
			s.logger.Warn("nginx restarted; pushing state again", "boot_id", status.BootID)
		}
	}
	if s.configs.Observe(status.ConfigHash, cfg) {
		s.logger.Info("nginx confirmed the slow reload", "config_hash", short(status.ConfigHash))
	}
	return nil
}

// holdReload says whether the plan must stop before reloading nginx with
// cfg: nginx rejected it before (the same verdict again, while the guard
// or the ConfigMap's trial waits for one), or it was signalled already.
func (s *Syncer) holdReload(cfg render.Config, held plan.Held, res *syncResult) (bool, error) {
	if cfg.Hash == held.ConfigHash {
		return false, nil // no reload
	}
	if err := s.configs.Rejected(cfg.Hash); err != nil {
		if s.guard.Bisecting() || s.configMap.Trial() || s.globalsChanged() {
			// A step whose Ingresses render the rejected nginx.conf
			// again (the others are routed in Lua), or a ConfigMap
			// that changed back to one nginx refused: the same
			// verdict, for the guard or the ConfigMap's trial.
			return false, err
		}
		s.logger.Debug("nginx rejected this config before; waiting for the next change", "config_hash", short(cfg.Hash))
		return true, nil
	}
	if s.configs.Unconfirmed(cfg.Hash) {
		// Signalled already: a second HUP would only make a slow
		// nginx slower. needsSync comes back once it runs the hash.
		res.waiting = true
		return true, nil
	}
	return false, nil
}

// leaveForStart writes the config nginx should start with while it does
// not answer (apply.ConfigRecord.ForStart), saying why it does not.
func (s *Syncer) leaveForStart(cfg render.Config, statusErr error) error {
	start, fellBack, err := s.configs.ForStart(cfg)
	if err != nil {
		return err
	}
	if fellBack {
		s.logger.Warn("nginx did not come up with a config it never confirmed; leaving it the last confirmed one to start with",
			"after", s.opts.StartBound, "unconfirmed_hash", short(cfg.Hash), "config_hash", short(start.Hash))
	}
	if err := s.nginx.WriteConfig(start.Bytes); err != nil {
		return err
	}
	s.noteWaiting(statusErr)
	return nil
}

// errUnconfirmed is what reload returns when nginx was signalled and has
// not confirmed the config yet: the sync waits, it did not fail.
var errUnconfirmed = errors.New("reload not confirmed yet")

// configFor renders next and the routes of its hosts, or reuses the last
// ones on the fast path, which changed endpoints only; rendered says which.
func (s *Syncer) configFor(next model.Model) (cfg render.Config, routes []model.Route, rendered bool, err error) {
	if s.lastConfig.Hash != "" && s.changedBackends != nil {
		return s.lastConfig, s.lastRoutes, false, nil
	}
	// Profiles the routes Lua holds still jump to stay one more config:
	// the routes leave them first (after this config's reload), and the
	// next full sync renders them away.
	keep := s.configs.Keep(s.lua)
	cfg, routes, err = renderBuild(next, s.configMap.Settings(), keep...)
	if err != nil {
		return render.Config{}, nil, false, fmt.Errorf("%w: %w", errRender, err)
	}
	s.retiring = apply.Retiring(keep, routes)
	s.lastConfig, s.lastRoutes = cfg, routes
	return cfg, routes, true, nil
}

// model returns what nginx should serve, its problems, and which path
// computed it. When nothing but EndpointSlices changed since the last
// build and the source tracks them, only the backends of the Services
// whose slices changed are resolved again ("fast"): O(changed), no
// snapshot, no full build. Anything else builds the whole model ("full").
// The fast path keeps the problems of the last full build and adds those
// of the slices it read (an endpoint address refused, say); a problem a
// changed slice no longer has stays listed until the next full build.
func (s *Syncer) model(kinds map[source.Kind]bool) (model.Model, []model.Problem, string) {
	index, tracks := s.src.(source.EndpointIndex)
	onlyEndpoints := len(kinds) == 0 || (len(kinds) == 1 && kinds[source.KindEndpointSlice])
	s.changedBackends = nil
	if !tracks || s.built == nil || !onlyEndpoints || s.guard.Bisecting() || s.rerender {
		return s.fullModel(index, tracks)
	}
	changed := index.TakeChangedServices()
	if usesStream(s.built.Stream, changed) {
		// Their endpoints are in nginx.conf: a new one is rendered.
		return s.fullModel(index, tracks)
	}
	next := s.patchEndpoints(index, changed)
	return next, s.problems, "fast"
}

// patchEndpoints is the fast path: the last model with the backends of
// the changed Services resolved again (model.EndpointPatch), in place.
// The only other reader of the backends is State; once it has handed
// them out they are copied before the next change (copy on write).
func (s *Syncer) patchEndpoints(index source.EndpointIndex, changed []source.ServiceKey) model.Model {
	next := *s.built
	s.changedBackends = []model.Backend{}
	if len(changed) > 0 {
		if s.builtIndex == nil {
			s.builtIndex = model.IndexBackends(next.Backends)
		}
		var patch model.EndpointPatch
		for _, k := range changed {
			positions := s.builtIndex.Positions(k.Namespace, k.Name)
			if len(positions) == 0 {
				continue
			}
			svc, endpointSlices := index.ServiceEndpoints(k.Namespace, k.Name)
			patch.AddService(next.Backends, positions, svc, endpointSlices, s.opts.Targets)
		}
		s.mu.Lock()
		if s.stateRead {
			next.Backends = slices.Clone(next.Backends)
			s.stateRead = false
		}
		patch.ApplyTo(next.Backends)
		s.mu.Unlock()
		s.changedBackends = append(s.changedBackends, patch.Backends()...)
		s.problems = withNewProblems(s.problems, patch.Problems)
	}
	s.built = &next
	return next
}

// withNewProblems returns held with the problems of fresh it lacks, in a
// new slice: held may have been handed out in a Report.
func withNewProblems(held, fresh []model.Problem) []model.Problem {
	var added []model.Problem
	for _, p := range fresh {
		if !slices.Contains(held, p) && !slices.Contains(added, p) {
			added = append(added, p)
		}
	}
	if len(added) == 0 {
		return held
	}
	return append(slices.Clone(held), added...)
}

// usesStream says whether a Service of changed has endpoints in nginx.conf.
func usesStream(st model.Stream, changed []source.ServiceKey) bool {
	for _, k := range changed {
		if st.UsesService(k.Namespace, k.Name) {
			return true
		}
	}
	return false
}

// fullModel builds the whole model from a snapshot of the source.
func (s *Syncer) fullModel(index source.EndpointIndex, tracks bool) (model.Model, []model.Problem, string) {
	s.changedBackends = nil
	s.rerender = false
	if tracks {
		index.TakeChangedServices() // the full build covers them
	}
	held, problems := s.src.Snapshot()
	built := s.buildSnapshot(held)
	problems = append(problems, built.Problems...)
	snap := built.Snapshot
	next, buildProblems := model.Build(snap)
	problems = append(problems, buildProblems...)
	s.built, s.builtFrom, s.problems, s.builtIndex = &next, len(snap.Ingresses), problems, nil
	s.builtSnap = snap
	return next, problems, "full"
}

// isolateRenderFailure quarantines the Ingresses of the last full build
// that render refuses (quarantine.RenderFailures), or blames the ConfigMap
// when the Ingresses nginx last took do not render with it since it
// changed; it says whether it did either: then the model is built again.
func (s *Syncer) isolateRenderFailure(renderErr error) bool {
	culprits, err := quarantine.RenderFailures(s.builtSnap, s.configMap.Settings(), s.guard.Trusted, renderBuild)
	if err != nil {
		if s.globalsChanged() {
			// The ConfigMap changed since nginx last took a config, and
			// the Ingresses of that config do not render with it.
			s.blameConfigMap(quarantine.RenderRefused, strings.TrimPrefix(renderErr.Error(), errRender.Error()+": "))
			return true
		}
		s.logger.Warn("render fails without the changed Ingresses: no Ingress is quarantined for it", "error", renderErr)
		return false
	}
	for _, key := range slices.Sorted(maps.Keys(culprits)) {
		reason := strings.TrimPrefix(culprits[key].Error(), errRender.Error()+": ")
		s.guard.RefuseRender(key, reason)
		s.logger.Warn("Ingress quarantined: the agent cannot render nginx.conf with it", "ingress", key, "reason", reason)
	}
	return len(culprits) > 0
}

func newLuaState(nginx *apply.Nginx, metrics Metrics) *apply.LuaState {
	if nginx == nil { // tests of the model alone
		return apply.NewLuaState(nil, metrics)
	}
	return apply.NewLuaState(nginx.Lua, metrics)
}

// reload is the plan's Reload step: apply.ConfigRecord.Reload, with the
// verdict told to the metrics. A config nginx has yet to confirm is
// errUnconfirmed, waited for.
func (s *Syncer) reload(ctx context.Context, cfg render.Config) error {
	reloadStart := time.Now()
	err := s.configs.Reload(ctx, cfg)
	if errors.Is(err, apply.ErrNotConfirmed) {
		s.opts.Metrics.ReloadUnconfirmed()
		s.logger.Warn("nginx has not confirmed the reload yet; waiting for it, no Ingress is blamed",
			"config_hash", short(cfg.Hash), "waited", time.Since(reloadStart).Round(time.Millisecond), "error", err)
		return errUnconfirmed
	}
	s.opts.Metrics.Reloaded(time.Since(reloadStart), err)
	if errors.Is(err, apply.ErrRejected) {
		s.opts.Metrics.ValidationFailed("nginx")
	}
	return err
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
