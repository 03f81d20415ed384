// Package admin is the agent's operator interface beside the pipeline: an
// HTTP server with /metrics, /healthz, /readyz and /debug/state, and the
// Report that `restysync inspect` prints.
//
// It only reads: the syncer's State, the Lua config API and the metrics
// registry. It never changes what nginx runs.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// Lua is what the admin server reads from the Lua config API;
// *apply.LuaClient is one.
type Lua interface {
	Status(ctx context.Context) (luaapi.Status, error)
	Backends(ctx context.Context) (map[string]model.Backend, error)
	Certificates(ctx context.Context) ([]luaapi.HeldCertificate, error)
}

var _ Lua = (*apply.LuaClient)(nil)

// Options configure a Server. Zero durations take the defaults noted.
type Options struct {
	// Metrics serves /metrics; nil answers 404 there.
	Metrics http.Handler
	// State is the syncer's state.
	State func() syncer.State
	// Lua is asked whether nginx answers, and what it holds.
	Lua Lua
	// StuckAfter is how long the loop may go without coming round before
	// /healthz fails (default 30s). The loop comes round at least every
	// check interval (250ms) unless a sync or a status read hangs.
	StuckAfter time.Duration
	// LuaTimeout bounds each read from Lua for /readyz and /debug/state
	// (default 2s).
	LuaTimeout time.Duration
	Logger     *slog.Logger
	// Now is the clock (default time.Now), for tests.
	Now func() time.Time
	// Profiling serves Go's profiles under /debug/pprof/ (the admin
	// listener only, never the probes one).
	Profiling bool
}

// Server is the admin HTTP server.
type Server struct {
	opts Options
	mux  *http.ServeMux
	// probes serves /metrics, /healthz and /readyz alone: what the
	// kubelet and Prometheus need on the pod network, without
	// /debug/state, which shows every tenant's configuration.
	probes *http.ServeMux
}

// New returns a Server; Handler serves it, Serve runs it on a listener.
func New(opts Options) *Server {
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = 30 * time.Second
	}
	if opts.LuaTimeout <= 0 {
		opts.LuaTimeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), probes: http.NewServeMux()}
	for _, mux := range []*http.ServeMux{s.mux, s.probes} {
		if opts.Metrics != nil {
			mux.Handle("GET /metrics", opts.Metrics)
		}
		mux.HandleFunc("GET /healthz", s.healthz)
		mux.HandleFunc("GET /readyz", s.readyz)
	}
	s.mux.HandleFunc("GET /debug/state", s.debugState)
	s.mux.HandleFunc("GET /{$}", s.index)
	if opts.Profiling {
		s.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		s.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return s
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler { return s.mux }

// ProbesHandler returns /metrics, /healthz and /readyz alone.
func (s *Server) ProbesHandler() http.Handler { return s.probes }

// Serve answers on ln until ctx is done, then shuts down within a second.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.mux)
}

// ServeProbes is Serve with ProbesHandler's routes alone.
func (s *Server) ServeProbes(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.probes)
}

func (s *Server) serve(ctx context.Context, ln net.Listener, handler http.Handler) error {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	err := srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("admin server: %w", err)
}

func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "restysync agent: /metrics /healthz /readyz /debug/state")
}

// Health is the verdict of /healthz or /readyz, and its JSON body.
type Health struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason"`
}

// Healthy says whether the agent is alive: its source is still listing, or
// its loop came round within StuckAfter.
func (s *Server) Healthy() Health {
	st := s.opts.State()
	if !st.Synced {
		return Health{OK: true, Reason: "the source is still listing"}
	}
	last := st.LastLoop
	if last.IsZero() {
		last = st.LastSync
	}
	if last.IsZero() {
		return Health{OK: true, Reason: "the first sync is running"}
	}
	if age := s.opts.Now().Sub(last); age > s.opts.StuckAfter {
		return Health{Reason: fmt.Sprintf("the sync loop has not come round for %s (limit %s)", age.Round(time.Second), s.opts.StuckAfter)}
	}
	return Health{OK: true, Reason: "the sync loop is running"}
}

// Ready says whether this replica runs as configured: the source
// finished its first listing, nginx was confirmed to run a config of this
// agent (by its hash), the agent's ConfigMap is not refused as it is, and
// nginx answers now, running that config, and serves a state: the agent
// brought this nginx boot up to date, or it started from the state the
// agent saved.
//
// serving asks only whether the replica should get traffic (GET
// /readyz?serving, the charts' readiness probe): a refused ConfigMap then
// does not count, since nginx serves its last good version. A ConfigMap
// is shared by every replica, so a readiness probe that failed on it
// would take them all out of the Service at once.
func (s *Server) Ready(ctx context.Context, serving bool) Health {
	st := s.opts.State()
	switch {
	case !st.Synced:
		return Health{Reason: "the source has not finished its first listing"}
	case st.ConfigHash == "" && st.NginxUnreachable != "":
		return Health{Reason: "no config is confirmed running in nginx yet: nginx does not answer: " + st.NginxUnreachable}
	case st.ConfigHash == "":
		return Health{Reason: "no config is confirmed running in nginx yet"}
	case len(st.WorkerAccess) > 0:
		return Health{Reason: strings.Join(st.WorkerAccess, "; ")}
	case st.ConfigMapRefused != "" && !serving:
		return Health{Reason: "the agent's ConfigMap is refused as it is; the last version nginx took serves, with the Ingress changes on top, until the ConfigMap changes: " + st.ConfigMapRefused}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.LuaTimeout)
	defer cancel()
	status, err := s.opts.Lua.Status(ctx)
	if err != nil {
		return Health{Reason: "nginx does not answer: " + err.Error()}
	}
	if status.ConfigHash != st.ConfigHash {
		return Health{Reason: fmt.Sprintf("nginx runs config %s, not the applied %s", short(status.ConfigHash), short(st.ConfigHash))}
	}
	// A cold-started nginx serves the state the agent saved from its first
	// request (restored); one that started without it serves nothing until
	// the agent has brought this boot up to date.
	if status.BootID != st.LuaBoot && !status.Restored {
		return Health{Reason: "nginx started without a saved state and the agent has not pushed to it yet"}
	}
	return Health{OK: true, Reason: "nginx runs config " + short(st.ConfigHash)}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeHealth(w, s.Healthy())
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	writeHealth(w, s.Ready(r.Context(), r.URL.Query().Has("serving")))
}

func writeHealth(w http.ResponseWriter, h Health) {
	status := http.StatusOK
	if !h.OK {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}

// debugState answers with the Report of the running agent.
func (s *Server) debugState(w http.ResponseWriter, r *http.Request) {
	st := s.opts.State()
	report := FromModel(st.Model, st.Routes, st.Problems)
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.LuaTimeout)
	defer cancel()
	report.AddLive(ctx, st, s.opts.Lua)
	writeJSON(w, http.StatusOK, report)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
