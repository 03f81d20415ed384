// Package syncer is the loop that drives the pipeline:
// source → model → render → plan → apply.
//
// Source events only mark the state dirty; one goroutine coalesces bursts for
// a few milliseconds and then syncs, so a thousand changes cost a handful of
// syncs. A sync builds the model (model.Incremental: again only the
// Ingresses the changed objects touch, or all of them; or, on the fast
// path, only the backends of the Services whose endpoints changed), and the
// log line says which: path=incremental, path=full (with path_reason) or
// path=fast. It renders it, and hands the config to the apply stage (apply.Stage), which
// computes the plan against what nginx runs and Lua holds and runs it; then
// it reports.
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
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/quarantine"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/snapshot"
	"github.com/restysync/restysync/agent/internal/source"
)

// Syncer keeps nginx in step with a Source.
type Syncer struct {
	src    source.Source
	opts   Options
	logger *slog.Logger
	dirty  chan struct{}

	kindsMu    sync.Mutex
	kinds      map[source.Kind]bool // changed since the last sync
	objects    changes              // the objects changed since the last sync
	firstEvent time.Time            // first change since the last sync
	batchEnded bool                 // the last change was a batch's last (source.Change.Last)

	// The fields below are owned by the loop goroutine.
	stage *apply.Stage      // what nginx runs and Lua holds, and the steps that change it
	guard *quarantine.Guard // quarantine of Ingresses nginx or render refused
	// retiring says lastConfig keeps profiles only routes Lua held jump to;
	// rerender makes the next sync a full one, which renders them away (or
	// builds without an Ingress or ConfigMap nginx refused).
	retiring, rerender bool
	// changedBackends are the backends the fast path resolved again for
	// this sync (nil after a full build): the plan compares only those.
	changedBackends []model.Backend
	// patchedFrom is the backends list the fast path made this sync's
	// from (apply.Step.BackendsFrom); empty after a full build.
	patchedFrom  model.List[model.Backend]
	lastConfig   render.Config    // last rendered config
	lastRoutes   render.RouteList // the routes of lastConfig's model
	started      time.Time        // when Run began
	lastSync     time.Time        // when the last sync ended
	firstApplied bool             // a config was confirmed once: logged
	built        *model.Model     // the last model, for the fast path
	leanEnds     func()           // ends Options.LeanFullSync for the sync under way
	builtFrom    int              // Ingresses it was built from
	// incremental builds each model from the last one (model.Incremental);
	// buildPath says how it built the last, for the sync log line.
	incremental *model.Incremental
	buildPath   model.BuildPath
	// renderCache renders each model reusing what the last one's
	// unchanged servers gave (render.Cache).
	renderCache *render.Cache
	// builtSnap is the snapshot the model of this sync's full build was
	// built from (the guard's filter and the globals applied), kept for the
	// sync so that a render failure can be isolated.
	builtSnap model.Snapshot
	problems  []model.Problem // the problems of the last full build
	reported  map[string]bool // problems already logged
	// reportedList is the list reportProblems last went through.
	reportedList []model.Problem
	// pendingEvent is the first source event not yet applied, for
	// Metrics.Propagated; zero when there is none.
	pendingEvent time.Time
	// configMap is the agent's ConfigMap as last read, and the globals
	// nginx last took (configmap.go).
	configMap *snapshot.ConfigMap
	// gatewayAPIApplied is the Gateway API status of the last sync nginx
	// confirmed (Report.GatewayAPIApplied).
	gatewayAPIApplied model.GatewayAPIStatus

	mu    sync.Mutex
	state State
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
		opts:      opts,
		logger:    logger,
		dirty:     make(chan struct{}, 1),
		kinds:     map[source.Kind]bool{},
		reported:  map[string]bool{},
		stage:     apply.NewStage(nginx, opts.Render, opts.StartBound, opts.FullPush, opts.Metrics, logger),
		guard:     quarantine.New(),
		configMap: snapshot.NewConfigMap(opts.snapshotOptions(), logger),
		state:     State{LoadModules: opts.Render.LoadModules},

		incremental: model.NewIncremental(),
		renderCache: render.NewCache(),
	}
}

// WaitStateWritten waits for the running write of the saved state
// (apply.Stage.WaitStateWritten); any goroutine may call it.
func (s *Syncer) WaitStateWritten() { s.stage.WaitStateWritten() }

// Run starts the source and syncs until ctx is done.
func (s *Syncer) Run(ctx context.Context) error {
	start := time.Now()
	s.started = start
	if err := s.src.Start(ctx, s.changed); err != nil {
		return fmt.Errorf("starting source: %w", err)
	}
	s.update(func(st *State) { st.Synced = true })
	s.logger.Info("source synced", "duration", time.Since(start).Round(time.Millisecond))
	if s.opts.OnListed != nil {
		s.opts.OnListed()
	}
	s.kindsMu.Lock()
	s.firstEvent = time.Time{} // the first listing is not a change to time
	s.objects.take()           // nor one to name
	s.kindsMu.Unlock()

	check := time.NewTicker(s.opts.CheckInterval)
	defer check.Stop()
	retry := newRetry()
	defer retry.timer.Stop()
	retry.after(s.sync(ctx))
	for {
		select {
		case <-ctx.Done():
			s.stage.FlushState()
			return nil
		case <-s.dirty:
			s.coalesce(ctx)
			retry.after(s.sync(ctx))
			s.lastSync = time.Now()
		case <-retry.timer.C:
			retry.after(s.sync(ctx))
		case <-check.C:
			s.update(func(st *State) { st.LastLoop = time.Now() })
			s.stage.TrimErrorLog() // between syncs: no reload reads it now
			s.stage.SaveState()    // what the last syncs changed, if the writer was busy
			if s.stage.NeedsSync(ctx, s.lastConfig.Hash) {
				retry.after(s.sync(ctx))
			}
		}
	}
}

// coalesce waits until no event arrived for quietPeriod, or MaxDelay
// passed.
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

// sync runs the pipeline once. Errors are logged and returned for the
// loop to retry: nothing is recorded as applied until nginx confirmed it.
func (s *Syncer) sync(ctx context.Context) error {
	start := time.Now()
	defer s.endLean()
	// Before the first build and render: what an earlier agent left
	// running, and which nginx answers, so that this sync builds and
	// renders for it (snippets' headers-more, the HTTP/2 form).
	s.stage.Recover(ctx)
	if s.meetNginx() {
		s.lastConfig = render.Config{}
		s.rerender = true
	}
	kinds, objects := s.takeKinds()
	next, problems, path := s.model(kinds)
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
	result.build = buildTime
	s.builtSnap = model.Snapshot{}
	if path == "full" {
		problems = append(problems, s.judge(result, err)...)
	}
	s.report(ctx, next, problems, path, result, err)
	s.recordSync(path, result, err, start)
	s.logSync(next, len(problems), path, objects, result, start, err)
	return err
}

// endLean ends what Options.LeanFullSync began for this sync, if it was
// called.
func (s *Syncer) endLean() {
	if s.leanEnds != nil {
		s.leanEnds()
		s.leanEnds = nil
	}
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
			s.rerender = true // build without it: its Problem, and the next step
			s.markDirty()
		}
	case result.ConfigRunning:
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

// apply renders next (or reuses the last render on the fast path) and
// hands it to the apply stage (apply.Stage), which runs the plan that takes
// nginx and Lua to it.
func (s *Syncer) apply(ctx context.Context, next model.Model) (syncResult, error) {
	var res syncResult
	renderStart := time.Now()
	cfg, routes, rendered, err := s.configFor(next)
	// The lean GC of a whole build ends with its render: the push runs
	// at Go's percent, or the collector's idle workers take the CPU
	// nginx needs to read it (a 14 MB first push at 50,000 Ingresses
	// timed out once).
	s.endLean()
	if err != nil {
		s.stage.Stale()
		return res, err
	}
	if rendered {
		res.render = time.Since(renderStart)
		res.rendered, res.renderStats = true, s.renderCache.Stats()
	}
	// A config nginx rejected before is rendered again for a verdict while
	// the guard bisects or the ConfigMap's globals are on trial or changed.
	judging := s.stage.Rejected(cfg.Hash) != nil && (s.guard.Bisecting() || s.configMap.Trial() || s.globalsChanged())
	step := apply.Step{Model: next, Config: cfg, Routes: routes, ChangedBackends: s.changedBackends, BackendsFrom: s.patchedFrom,
		Judging: judging}
	if rendered {
		step.RoutesFrom, step.ChangedRoutes, _ = s.renderCache.ChangedRoutes()
	}
	res.Result, err = s.stage.Apply(ctx, step)
	if s.meetNginx() {
		s.lastConfig = render.Config{}
		s.rerender = true
		s.markDirty()
	}
	if res.Executed && s.retiring {
		// The routes have left the kept profiles: render them away.
		s.rerender = true
		s.markDirty()
	}
	return res, err
}

// meetNginx makes the settings name the nginx that answers when they do
// not, and says whether they changed: the first answer after the agent
// started (the bootstrap and the configs before it were rendered for an
// nginx not detected), or another nginx after a cold start (a new boot
// reports itself anew). The caller renders again: at once when the
// status was read before this sync's render (an nginx already running
// when the agent starts), else in a full sync after this one; nginx
// reloads when the bytes differ (on the chart's image: http2 on,
// headers-more).
func (s *Syncer) meetNginx() bool {
	found := s.stage.Nginx()
	settings := s.configMap.Settings()
	if !found.Detected() || reflect.DeepEqual(found, settings.Nginx) {
		return false
	}
	s.configMap.SetNginx(found)
	settings = s.configMap.Settings()
	s.update(func(st *State) { st.Nginx = found })
	s.logger.Info("nginx detected; rendering for it", "nginx", found.Version, "lua_nginx_module", found.LuaVersion,
		"built_in_modules", strings.Join(found.BuiltIn, ","), "http2", render.HTTP2Form(found),
		"headers_more", render.HeadersMoreForm(settings))
	if dropped := found.LoadsBuiltIn(settings.LoadModules); len(dropped) > 0 {
		s.logger.Warn("--load-module names modules this nginx has built in; their load_module lines are left out (a load_module of a module built in stops nginx)",
			"modules", strings.Join(dropped, ","))
	}
	return true
}

// configFor renders next and the routes of its hosts, or reuses the last
// ones on the fast path, which changed endpoints only; rendered says which.
func (s *Syncer) configFor(next model.Model) (cfg render.Config, routes render.RouteList, rendered bool, err error) {
	if s.lastConfig.Hash != "" && s.changedBackends != nil {
		return s.lastConfig, s.lastRoutes, false, nil
	}
	// Profiles the routes Lua holds still jump to stay one more config:
	// the routes leave them first (after this config's reload), and the
	// next full sync renders them away.
	keep := s.stage.Keep()
	// Which servers the model changed, or nil: a hint not taken by the
	// render it was for must not outlive it.
	from, hosts, _ := s.incremental.ChangedServers()
	s.renderCache.ServersChanged(from, hosts)
	gatewayFrom, gatewayHosts, _ := s.incremental.ChangedGatewayRoutes()
	s.renderCache.GatewayRoutesChanged(gatewayFrom, gatewayHosts)
	cfg, routes, err = renderCached(s.renderCache, next, s.configMap.Settings(), keep...)
	if err != nil {
		return render.Config{}, render.RouteList{}, false, fmt.Errorf("%w: %w", errRender, err)
	}
	s.retiring = len(keep) > 0 && apply.Retiring(keep, routes) // no kept profile: no look at every route
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
	// A sync no source event asked for (a retry, the loop's own verdict,
	// nginx running another config) builds everything.
	onlyEndpoints := len(kinds) == 1 && kinds[source.KindEndpointSlice]
	s.changedBackends, s.patchedFrom = nil, model.List[model.Backend]{}
	if !tracks || s.built == nil || !onlyEndpoints || s.guard.Bisecting() || s.rerender {
		return s.fullModel(index, tracks)
	}
	changed := index.TakeChangedServices()
	if source.StreamUsesAny(s.built.Stream, changed) {
		// Their endpoints are in nginx.conf: a new one is rendered.
		return s.fullModel(index, tracks)
	}
	next := s.patchEndpoints(index, changed)
	return next, s.problems, "fast"
}

// patchEndpoints is the fast path: the last model with the backends of
// the changed Services resolved again (source.PatchEndpoints), in a new
// list made from the last build's (model.EndpointPatch.Apply), which
// shares every chunk but the changed Services': a copy of every backend
// per change would make the change cost the model's size (2.4 MB at
// 50,000 backends). No list handed out changes, so State hands out the
// model as it is. The model.Incremental the list came from holds the new
// one from then on (PatchedBackends), and the stage, told the list it
// was made from (apply.Step.BackendsFrom), knows Lua holds it once the
// plan pushed the changed backends.
func (s *Syncer) patchEndpoints(index source.EndpointIndex, changed []source.ServiceKey) model.Model {
	next := *s.built
	s.changedBackends, s.patchedFrom = []model.Backend{}, next.Backends
	if len(changed) > 0 {
		patch := source.PatchEndpoints(index, changed, next.Backends, s.opts.Targets)
		next.Backends = patch.Apply(next.Backends)
		s.incremental.PatchedBackends(s.built.Backends, next.Backends)
		s.changedBackends = append(s.changedBackends, patch.Backends()...)
		s.problems = patch.MergeProblems(s.problems)
	}
	s.built = &next
	return next
}

// fullModel builds the whole model from a snapshot of the source: by
// model.Incremental, which builds again only what the objects changed
// since the last snapshot touch, and gives the model model.Build would.
// The path stays "full" for the report and the metrics (a new model, not
// the fast path's patch); the log line says which (logPath).
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
	snap.GatewayAddressesServed = servedAddresses(s.built)
	if s.opts.LeanFullSync != nil && s.leanEnds == nil && s.incremental.FullReason(snap) != "" {
		s.leanEnds = s.opts.LeanFullSync() // sync calls it when it ends
	}
	next, buildProblems, buildPath := s.incremental.Build(snap)
	problems = append(problems, buildProblems...)
	s.built, s.builtFrom, s.problems, s.buildPath = &next, snap.Ingresses.Len(), problems, buildPath
	s.builtSnap = snap
	return next, problems, "full"
}

// servedAddresses are the addresses each Gateway of last was served on.
func servedAddresses(last *model.Model) map[string][]string {
	if last == nil || len(last.GatewayAPI.Gateways) == 0 {
		return nil
	}
	served := make(map[string][]string, len(last.GatewayAPI.Gateways))
	for _, g := range last.GatewayAPI.Gateways {
		if len(g.Addresses) > 0 {
			served[g.Namespace+"/"+g.Name] = g.Addresses
		}
	}
	return served
}

// isolateRenderFailure quarantines the Ingresses of the last full build
// that render refuses (quarantine.Guard.RefuseRenders), or blames the
// ConfigMap when the Ingresses nginx last took do not render with it since
// it changed; it says whether it did either: then the model is built again.
func (s *Syncer) isolateRenderFailure(renderErr error) bool {
	refused, err := s.guard.RefuseRenders(s.builtSnap, s.configMap.Settings(), renderBuild)
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
	for _, r := range refused {
		s.logger.Warn("Ingress quarantined: the agent cannot render nginx.conf with it", "ingress", r.Key, "reason", r.Reason)
	}
	return len(refused) > 0
}
