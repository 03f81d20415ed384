package syncer

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// The last step of the loop: what a sync found and did goes to State (for
// health checks and tests), to OnSync (status, events), to Metrics, and
// to the log.

// Report is what one sync found and did, for OnSync.
type Report struct {
	// Model is what nginx should serve; Problems were left out of it.
	Model    model.Model
	Problems []model.Problem
	// Applied says nginx runs Model and Lua holds its backends, confirmed.
	Applied bool
	// ConfigHash is the hash of the nginx.conf nginx runs.
	ConfigHash string
	// GatewayAPIApplied is the Gateway API status of the last sync that
	// was Applied (this one's Model.GatewayAPI when it is): what nginx is
	// confirmed to serve, for the Programmed conditions.
	GatewayAPIApplied model.GatewayAPIStatus
	// Path is "fast" when only endpoints were resolved again: the servers,
	// and so the Ingresses served, are those of the previous report.
	Path string
	// Whole says the model was built whole (not by the Incremental's
	// islands, nor by the fast path): a sync whose garbage is about the
	// live heap.
	Whole bool
}

// State is what the loop last did, for health checks and tests.
type State struct {
	Synced     bool   // the source finished its first listing
	Applied    bool   // a config was confirmed running and Lua holds every backend
	ConfigHash string // hash nginx runs
	// LuaBoot is the nginx boot (luaapi.Status.BootID) whose Lua the last
	// applied sync brought up to date ("": none yet).
	LuaBoot    string
	LastSync   time.Time   // end of the last sync
	LastLoop   time.Time   // last time the loop came round: a sync or a status check
	WantedHash string      // hash of the config last rendered: what nginx should run
	Model      model.Model // what the last sync computed; read-only
	// Routes are the routes Lua should hold for Model's hosts, with each
	// location's profile (render.Cache.Build); never changed.
	Routes   render.RouteList
	Syncs    int
	Reloads  int
	Pushes   int
	Problems []model.Problem
	// Quarantined are the Ingresses ("namespace/name") nginx refused a
	// config with; their last good version serves until they change.
	Quarantined []string
	// ConfigMapRefused is why the agent's ConfigMap as it is was refused,
	// by nginx or by render ("nginx rejected the config: …"): the
	// ConfigMap nginx last took serves, with the Ingress changes on top,
	// until it changes ("" when none).
	ConfigMapRefused string
	// NginxUnreachable is why the config socket did not answer at the last
	// sync ("" when it did).
	NginxUnreachable string
	// WorkerAccess names each file under the shared dir that nginx's
	// workers need and cannot use (empty when they can use them all).
	WorkerAccess []string
	// CertificateNearestExpiry is when the first leaf of the certificates
	// Lua serves expires (zero: none known).
	CertificateNearestExpiry time.Time
	// Nginx is which nginx the config is rendered for (not detected until
	// nginx first answered), LoadModules the --load-module paths.
	Nginx       render.Nginx
	LoadModules []string

	// GatewayAPIApplied is the Gateway API status of the last applied
	// sync (Report.GatewayAPIApplied); read-only.
	GatewayAPIApplied model.GatewayAPIStatus
}

// State returns a copy of the loop's state. Its model's lists are the
// loop's own, which no sync changes (the fast path makes a new backends
// list: patchEndpoints).
func (s *Syncer) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.Problems = append([]model.Problem(nil), s.state.Problems...)
	st.Quarantined = slices.Clone(s.state.Quarantined)
	return st
}

func (s *Syncer) update(f func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.state)
}

// report records what the sync found and did in State, and hands it to
// OnSync.
func (s *Syncer) report(ctx context.Context, next model.Model, problems []model.Problem, path string, result syncResult, err error) {
	quarantined := s.guard.Keys()
	var access []string
	checked := false
	if err == nil && result.ConfigRunning {
		access, checked = s.stage.CheckAccess(ctx, next.AuthFiles)
	}
	applied := err == nil && result.Current
	if applied {
		s.gatewayAPIApplied = next.GatewayAPI
	}
	s.update(func(st *State) {
		st.NginxUnreachable = s.stage.WaitReason()
		st.ConfigMapRefused = s.configMap.Refused()
		st.CertificateNearestExpiry = s.stage.NearestExpiry()
		if checked {
			st.WorkerAccess = access
		}
		st.Syncs++
		st.LastSync = time.Now()
		st.LastLoop = st.LastSync
		st.WantedHash = s.lastConfig.Hash
		st.Model = next
		st.Routes = s.lastRoutes
		st.GatewayAPIApplied = s.gatewayAPIApplied
		st.Problems = problems
		st.Quarantined = quarantined
		st.ConfigHash = s.stage.Applied()
		st.Applied = applied
		if applied {
			st.LuaBoot = s.stage.Boot()
		}
		if result.Reloaded {
			st.Reloads++
		}
		if result.Pushed {
			st.Pushes++
		}
	})
	if !s.firstApplied && applied {
		s.firstApplied = true
		s.logger.Info("first config applied", "after_start", time.Since(s.started).Round(time.Millisecond))
	}
	if s.opts.OnSync != nil {
		s.opts.OnSync(Report{Model: next, Problems: problems, Applied: applied, ConfigHash: s.stage.Applied(),
			GatewayAPIApplied: s.gatewayAPIApplied, Path: path, Whole: path == "full" && !s.buildPath.Incremental})
	}
}

// recordSync tells Metrics about the sync that began at start. A change
// that a failed sync did not apply stays pending for the next one.
func (s *Syncer) recordSync(path string, result syncResult, err error, start time.Time) {
	outcome := result.action()
	if err != nil {
		outcome = "error"
	}
	s.opts.Metrics.Synced(path, outcome, time.Since(start))
	if err != nil {
		return
	}
	if (result.Reloaded || result.Pushed) && !s.pendingEvent.IsZero() {
		s.opts.Metrics.Propagated(time.Since(s.pendingEvent))
	}
	s.pendingEvent = time.Time{}
}

// syncResult is what one sync did: what the apply stage did (Result), and
// how long the build and the render took.
type syncResult struct {
	apply.Result
	build  time.Duration
	render time.Duration // 0 when the last render was reused
	// rendered says the model was rendered (not the fast path), and
	// renderStats what the render cache made again.
	rendered    bool
	renderStats render.CacheStats
}

func (r syncResult) action() string {
	switch {
	case r.Waiting:
		return "wait-for-nginx"
	case r.Reloaded && r.Pushed:
		return "reload+push"
	case r.Reloaded:
		return "reload"
	case r.Pushed:
		return "push"
	}
	return "nothing"
}

// logSync logs what the sync that began at start did: after its action
// and path (and on path=incremental what was built again: islands,
// Ingresses, HTTPRoutes, the globals part), the objects changed since the last sync (changes.take; left
// out when none did) and why it reloaded nginx (left out when it did not
// try), then the counters.
func (s *Syncer) logSync(next model.Model, problems int, path, objects string, result syncResult, start time.Time, err error) {
	// Attrs, not key-value pairs: each number boxed into an any was a
	// heap allocation, some 3 KB a sync.
	attrs := []slog.Attr{
		slog.String("action", result.action()),
		slog.String("path", s.logPath(path)),
	}
	if path == "full" && !s.buildPath.Incremental && s.buildPath.Reason != "" {
		attrs = append(attrs, slog.String("path_reason", s.buildPath.Reason))
	}
	if path == "full" && s.buildPath.Incremental {
		// What the Incremental built again (model.BuildPath).
		attrs = append(attrs, slog.Int("built_islands", s.buildPath.Islands), slog.Int("built_ingresses", s.buildPath.Ingresses),
			slog.Int("built_httproutes", s.buildPath.HTTPRoutes), slog.Bool("built_globals", s.buildPath.Globals))
	}
	if objects != "" {
		attrs = append(attrs, slog.String("changed", objects))
	}
	if len(result.ReloadReasons) > 0 && (result.Reloaded || err != nil) {
		attrs = append(attrs, slog.String("reason", strings.Join(result.ReloadReasons, ",")))
	}
	attrs = append(attrs,
		slog.Int("ingresses", s.builtFrom),
		slog.Int("servers", next.Servers.Len()),
		slog.Int("backends", next.Backends.Len()),
		slog.Int("certificates", next.Certificates.Len()),
		slog.Int("upserts", result.Upserts),
		slog.Int("removes", result.Removes),
		slog.Int("cert_upserts", result.CertUpserts),
		slog.Int("cert_removes", result.CertRemoves),
		slog.Int("route_upserts", result.RouteUpserts),
		slog.Int("route_removes", result.RouteRemoves),
		slog.Int("bytes", result.Bytes),
		slog.Int("problems", problems),
		slog.Duration("build", result.build.Round(time.Microsecond)),
		slog.Duration("render", result.render.Round(time.Microsecond)),
		slog.Duration("status", result.Status.Round(time.Microsecond)),
		slog.Duration("plan", result.Plan.Round(time.Microsecond)),
		slog.Int("compared_backends", result.ComparedBackends),
		slog.Duration("push", result.Push.Round(time.Microsecond)),
		slog.Duration("duration", time.Since(start).Round(time.Microsecond)),
	)
	if result.rendered {
		// How much the render made again: the hosts whose servers
		// changed, and nginx.conf or not (render.Cache).
		attrs = append(attrs, slog.Int("render_hosts", result.renderStats.Hosts), slog.Bool("conf_reused", result.renderStats.ConfReused))
	}
	if err != nil {
		s.logger.LogAttrs(context.Background(), slog.LevelError, "sync failed", append(attrs, slog.Any("error", err))...)
		return
	}
	s.logger.LogAttrs(context.Background(), slog.LevelInfo, "sync", attrs...)
}

// logPath is how the model of a sync was computed: "fast" (the
// endpoints of the changed Services resolved again), "incremental" (the
// Ingresses the changed objects touch built again, model.Incremental) or
// "full" (every Ingress built; the log line gives the reason).
func (s *Syncer) logPath(path string) string {
	if path == "full" && s.buildPath.Incremental {
		return "incremental"
	}
	return path
}

// reportProblems logs and counts the problems not reported by the last
// call. The very list of the last call (the fast path keeps the problems
// of the last build) is not walked again: an endpoint change beside
// thousands of invalid Ingresses costs none of their keys.
func (s *Syncer) reportProblems(problems []model.Problem) {
	if len(problems) == len(s.reportedList) && (len(problems) == 0 || &problems[0] == &s.reportedList[0]) {
		return
	}
	s.reportedList = problems
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		key := p.String()
		seen[key] = true
		if !s.reported[key] {
			s.logger.Warn("problem", "object", p.Object(), "reason", p.Reason)
			s.opts.Metrics.ValidationFailed("agent")
		}
	}
	s.reported = seen
}
