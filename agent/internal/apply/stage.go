package apply

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/render"
)

// StageMetrics is told what the apply stage does; the syncer's Metrics
// are one.
type StageMetrics interface {
	PushMetrics
	// Reloaded is called after every reload attempt: signal and confirmation.
	Reloaded(d time.Duration, err error)
	// ReloadUnconfirmed is called for a reload nginx neither took nor
	// refused within the confirmation timeout.
	ReloadUnconfirmed()
	// ValidationFailed is called with "nginx" for each config nginx did not take.
	ValidationFailed(validator string)
}

// Stage is the apply stage as the loop drives it, once per sync: given
// the rendered config and routes of the next model (Step), it reads
// nginx's status, takes plan.Held whole from ConfigRecord and LuaState,
// decides whether the reload waits, and computes and runs the plan. It
// owns the records of what nginx runs and Lua holds, the files it wrote
// and the last check of the workers' access, and logs what it finds.
type Stage struct {
	nginx     *Nginx
	lua       *LuaState
	configs   *ConfigRecord
	authFiles AuthFileRecord
	access    AccessCheck
	metrics   StageMetrics
	logger    *slog.Logger
	// fullPush sends every backend whenever any changed (the bench's baseline).
	fullPush bool
	// waitReason is why nginx did not answer at the last step, already
	// logged ("": it answered); see noteWaiting.
	waitReason string
	// found is which nginx answered last (render.NginxFromStatus); the
	// zero value until one answered.
	found     render.Nginx
	foundFrom nginxReport // the status fields found was read from
	// saveFor is the config hash and profiles the saved state is written
	// for, as the last step decided; state writes it (statefile.go).
	saveFor struct {
		hash     string
		profiles []render.Profile
	}
	state stateWriter
	// planned are the backends Lua holds after the last plan that ran
	// whole: the next plan compares only the chunks its list does not
	// share with it (plan.Next.BackendsFrom; none for the very same list).
	// A fast path's plan pushes the backends it changed in a list made from planned
	// (Step.BackendsFrom), which Lua then holds (a plan that does not run
	// whole leaves the record stale, which compares all).
	planned model.List[model.Backend]
	// plannedRoutes are the routes of the last plan that left Lua's
	// record current: Lua holds exactly them, so a step whose
	// Step.ChangedRoutes are relative to them compares only those.
	plannedRoutes render.RouteList
	// plannedCerts are the certificates of the last plan that left Lua's
	// record current: the next plan compares only the chunks its list
	// does not share with them, none for the very same list
	// (plan.Next.CertificatesFrom).
	plannedCerts model.List[model.Certificate]
}

// Nginx is which nginx answered last: the zero value (not detected)
// until nginx answered once.
func (s *Stage) Nginx() render.Nginx { return s.found }

// nginxReport is what nginx's status says of its build.
type nginxReport struct {
	version, luaVersion int
	configure           string
}

// NewStage returns the apply stage of nginx (nil in tests of the model
// alone). bootstrap, startBound: NewConfigRecord.
func NewStage(nginx *Nginx, bootstrap render.Settings, startBound time.Duration, fullPush bool, metrics StageMetrics, logger *slog.Logger) *Stage {
	var client *LuaClient
	if nginx != nil {
		client = nginx.Lua
	}
	return &Stage{nginx: nginx, lua: NewLuaState(client, metrics), configs: NewConfigRecord(nginx, bootstrap, startBound),
		metrics: metrics, logger: logger, fullPush: fullPush}
}

// Step is what one sync hands the apply stage.
type Step struct {
	Model  model.Model      // what nginx should serve
	Config render.Config    // its nginx.conf
	Routes render.RouteList // the routes of its hosts
	// ChangedBackends are the backends the fast path resolved again (nil
	// after a full build): the plan compares only those.
	ChangedBackends []model.Backend
	// BackendsFrom is the list the fast path made Model.Backends from,
	// with ChangedBackends put in: when the last plan left Lua holding
	// it, Lua holds Model.Backends once this plan pushed them.
	BackendsFrom model.List[model.Backend]
	// ChangedRoutes are the hosts whose route may differ from those of
	// RoutesFrom (render.Cache.ChangedRoutes; nil: any): when the last
	// plan left Lua holding RoutesFrom, the plan compares only those.
	RoutesFrom    render.RouteList
	ChangedRoutes map[string]bool
	// Judging says a config nginx rejected before is rendered again for a
	// verdict (a bisection step of the quarantine, or the ConfigMap's
	// globals on trial or changed): its reload is tried again, not held.
	Judging bool
}

// Result is what one step did: the plan's run (Outcome), and what the
// stage found.
type Result struct {
	Outcome
	// Current: nginx runs the step's config and Lua holds its backends.
	Current bool
	// ConfigRunning: nginx runs the step's config.
	ConfigRunning bool
	// Waiting: nginx did not answer, or has yet to confirm a reload.
	Waiting  bool
	Executed bool          // the whole plan ran
	Status   time.Duration // asking Lua for its status
	// ReloadReasons say why the plan reloads nginx (render.Changes, or
	// the first config, or nginx restarted); nil when it does not.
	ReloadReasons []string
	// Plan is the time spent on what Lua holds and the plan's diff
	// against it; ComparedBackends how many backends that diff compared
	// (plan.Plan.ComparedBackends).
	Plan             time.Duration
	ComparedBackends int
}

// errUnconfirmed is what reload returns when nginx was signalled and has
// not confirmed the config yet: the step waits, it did not fail.
var errUnconfirmed = errors.New("reload not confirmed yet")

// Apply asks nginx what it runs and runs the plan that takes it and Lua
// to step.
func (s *Stage) Apply(ctx context.Context, step Step) (Result, error) {
	var res Result
	defer func() {
		if !res.Executed {
			s.Stale()
		}
	}()
	// htpasswd files before the config that names them; nginx reads them
	// on every request, so a changed Secret needs no reload. The CA and
	// certificate files of backend TLS are read when nginx loads its
	// config: those its profiles name stay.
	if err := s.authFiles.Write(s.nginx, step.Model.AuthFiles, step.Config.Files); err != nil {
		return res, err
	}
	statusStart := time.Now()
	status, err := s.nginx.Lua.Status(ctx)
	res.Status = time.Since(statusStart)
	if status.BootID == s.lua.Boot() {
		status.ConfigHash = s.configs.Running(status.ConfigHash)
	}
	if err != nil {
		// nginx is not up (yet): leave the right config for it to start with.
		res.Waiting = true
		return res, s.leaveForStart(step.Config, err)
	}
	previousBoot := s.lua.Boot()
	if err := s.observe(ctx, status, step.Config); err != nil {
		return res, err
	}
	planStart := time.Now()
	held := s.configs.Held(s.lua, status.ConfigHash, step.Model.Certificates)
	hold, err := s.holdReload(step, held, &res)
	if err != nil {
		return res, err
	}
	built := step.ChangedBackends == nil
	var changedRoutes map[string]bool
	if step.RoutesFrom.Same(s.plannedRoutes) {
		changedRoutes = step.ChangedRoutes
	}
	p := plan.Compute(held, plan.Next{Config: step.Config, Backends: step.Model.Backends, Certificates: step.Model.Certificates,
		Routes: step.Routes, EndpointsOnly: !built, ChangedBackends: step.ChangedBackends, BackendsFrom: s.planned,
		ChangedRoutes: changedRoutes, CertificatesFrom: s.plannedCerts, FullPush: s.fullPush, HoldReload: hold})
	res.Plan, res.ComparedBackends = time.Since(planStart), p.ComparedBackends
	planned := s.planned
	s.planned, s.plannedRoutes, s.plannedCerts = model.List[model.Backend]{}, render.RouteList{}, model.List[model.Certificate]{}
	if reload, ok := p.Step(plan.Reload); ok {
		res.ReloadReasons = reload.Reasons
		if reload.Reasons == nil {
			res.ReloadReasons = []string{s.unknownRunning(previousBoot, status.BootID)}
		}
	}
	res.Outcome, err = s.lua.Execute(ctx, p, s.reload)
	switch {
	case built && s.lua.current:
		s.planned = step.Model.Backends
	case s.lua.current && !built && step.BackendsFrom.Same(planned):
		// The fast path made this list from the one Lua held, and the
		// plan pushed its changes: Lua holds this one.
		s.planned = step.Model.Backends
	}
	if s.lua.current {
		s.plannedRoutes, s.plannedCerts = step.Routes, step.Model.Certificates
		s.lua.Adopt(step.Routes)
	}
	s.saveState(held, step.Config)
	if errors.Is(err, ErrRefused) {
		s.metrics.ValidationFailed("nginx")
	}
	if errors.Is(err, errUnconfirmed) {
		res.Waiting = true
		return res, nil
	}
	res.Executed = err == nil
	res.ConfigRunning = s.configs.Applied() == step.Config.Hash
	res.Current = res.ConfigRunning && err == nil
	return res, err
}

// saveState notes which config the saved state is for, and writes what
// Lua holds for nginx's next cold start (SaveState).
func (s *Stage) saveState(held plan.Held, cfg render.Config) {
	s.saveFor.hash, s.saveFor.profiles = held.ConfigHash, held.Config.Profiles
	if s.configs.Applied() == cfg.Hash {
		s.saveFor.hash, s.saveFor.profiles = cfg.Hash, cfg.Profiles
	}
	s.SaveState()
}

// SaveState starts writing what Lua holds for nginx's next cold start
// when it changed since the last write and the writer is ready (once a
// second at most: stateWriter); the sync loop calls it between syncs too,
// so a change the writer was not ready for is written within about a
// second. Apply calls it after the plan's pushes: serving a change never
// waits for the file. A failure is logged; nginx serves on, and the next
// call tries again.
func (s *Stage) SaveState() {
	if s.nginx == nil || s.lua.Boot() == "" {
		return
	}
	now := time.Now()
	ready, err := s.state.ready(now)
	s.noteSaveError(err)
	if !ready {
		return
	}
	state, err := s.lua.snapshot(s.saveFor.hash, s.saveFor.profiles)
	if err != nil {
		s.logger.Warn("could not save the state nginx starts with; a cold-started nginx would serve an older one", "error", err)
		return
	}
	if state != nil {
		s.state.start(s.nginx.SharedDir, state, now)
	}
}

// FlushState waits for the running write of the saved state and writes
// what changed since: call it when the agent stops, so that nginx's next
// cold start loads the last state the agent pushed.
func (s *Stage) FlushState() {
	if s.nginx == nil || s.lua.Boot() == "" {
		return
	}
	s.noteSaveError(s.state.wait())
	if _, err := s.lua.Save(s.nginx.SharedDir, s.saveFor.hash, s.saveFor.profiles); err != nil {
		s.noteSaveError(err)
	}
}

// WaitStateWritten waits for the running write of the saved state, if
// one runs (it may be called from any goroutine): the first save after a
// start encodes every item off the sync path, and a release of memory to
// the OS made before it ends leaves that garbage in the agent's RSS until
// the next collection.
func (s *Stage) WaitStateWritten() { s.state.idle() }

// noteSaveError logs a failed write of the saved state, and marks the
// state unsaved so that the next SaveState writes it again.
func (s *Stage) noteSaveError(err error) {
	if err == nil {
		return
	}
	s.lua.unsaved = true
	s.logger.Warn("could not save the state nginx starts with; a cold-started nginx would serve an older one", "error", err)
}

// Recover reads what nginx runs and Lua holds when the record has no nginx
// boot yet (the agent just started, and nginx may run a config an earlier
// agent rendered): call it before the first render, so that Keep keeps the
// profiles Lua's routes jump to and the next config does not drop them
// under those routes. Nothing when nginx does not answer; Apply observes
// it then.
func (s *Stage) Recover(ctx context.Context) {
	if s.nginx == nil || s.lua.Boot() != "" {
		return
	}
	status, err := s.nginx.Lua.Status(ctx)
	if err != nil {
		return
	}
	if err := s.observe(ctx, status, render.Config{}); err != nil {
		s.logger.Warn("could not read back what Lua holds before the first render", "error", err)
	}
}

// unknownRunning is why nginx reloads when the agent does not know the
// config it runs: it never had one confirmed (the first config), nginx
// restarted since the last status (previousBoot is not bootID), or
// another config runs.
func (s *Stage) unknownRunning(previousBoot, bootID string) string {
	switch {
	case s.configs.Good().Hash == "":
		return render.ReasonFirstConfig
	case previousBoot != "" && previousBoot != bootID:
		return render.ReasonNginxRestarted
	}
	return render.ReasonUnknownRunning
}

// Stale marks the record of what Lua holds as behind the model of a sync
// that did not run its plan (LuaState.Stale).
func (s *Stage) Stale() { s.lua.Stale() }

// observe records what nginx's status says: a new boot (Lua lost or holds
// other state: it is read back) and the config it runs.
func (s *Stage) observe(ctx context.Context, status luaapi.Status, cfg render.Config) error {
	s.waitReason = ""
	s.configs.Answered()
	if s.foundFrom != (nginxReport{status.NginxVersion, status.LuaVersion, status.Configure}) {
		// Parsed again only when it changes: the status is read every sync.
		s.foundFrom = nginxReport{status.NginxVersion, status.LuaVersion, status.Configure}
		s.found = render.NginxFromStatus(status.NginxVersion, status.LuaVersion, status.Configure)
	}
	previousBoot := s.lua.Boot()
	newBoot, err := s.lua.Observe(ctx, status)
	if err != nil {
		return err
	}
	if newBoot {
		s.configs.NewBoot()
		if err := s.nginx.TightenSocket(); err != nil {
			s.logger.Warn("the config socket stays open to more than nginx and the agent", "error", err)
		}
		if previousBoot != "" {
			s.logger.Warn("nginx restarted; pushing what changed since its saved state", "boot_id", status.BootID,
				"restored", status.Restored)
		}
		if ok, err := s.configs.ReadBack(status.ConfigHash); err != nil {
			s.logger.Warn("could not read back the config nginx runs: its profiles are unknown until the next reload",
				"config_hash", short(status.ConfigHash), "error", err)
		} else if ok {
			s.logger.Info("read back the config nginx runs, with its profiles", "config_hash", short(status.ConfigHash),
				"profiles", len(s.configs.Good().Profiles))
		}
	}
	if s.configs.Observe(status.ConfigHash, cfg) {
		s.logger.Info("nginx confirmed the slow reload", "config_hash", short(status.ConfigHash))
	}
	return nil
}

// holdReload says whether the plan must stop before reloading nginx with
// the step's config: nginx rejected it before (the same verdict again,
// unless the step is judging), or it was signalled already.
func (s *Stage) holdReload(step Step, held plan.Held, res *Result) (bool, error) {
	cfg := step.Config
	if cfg.Hash == held.ConfigHash {
		return false, nil // no reload
	}
	if err := s.configs.Rejected(cfg.Hash); err != nil {
		if step.Judging {
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
		// nginx slower. NeedsSync comes back once it runs the hash.
		res.Waiting = true
		return true, nil
	}
	return false, nil
}

// reload is the plan's Reload step: ConfigRecord.Reload, with the verdict
// told to the metrics. A config nginx has yet to confirm is
// errUnconfirmed, waited for.
func (s *Stage) reload(ctx context.Context, cfg render.Config) error {
	reloadStart := time.Now()
	err := s.configs.Reload(ctx, cfg)
	if errors.Is(err, ErrNotConfirmed) {
		s.metrics.ReloadUnconfirmed()
		s.logger.Warn("nginx has not confirmed the reload yet; waiting for it, no Ingress is blamed",
			"config_hash", short(cfg.Hash), "waited", time.Since(reloadStart).Round(time.Millisecond), "error", err)
		return errUnconfirmed
	}
	s.metrics.Reloaded(time.Since(reloadStart), err)
	if errors.Is(err, ErrRejected) {
		s.metrics.ValidationFailed("nginx")
	}
	return err
}

// leaveForStart writes the config nginx should start with while it does
// not answer (ConfigRecord.ForStart), saying why it does not.
func (s *Stage) leaveForStart(cfg render.Config, statusErr error) error {
	start, fellBack, err := s.configs.ForStart(cfg)
	if err != nil {
		return err
	}
	if fellBack {
		s.logger.Warn("nginx did not come up with a config it never confirmed; leaving it the last confirmed one to start with",
			"after", s.configs.startBound, "unconfirmed_hash", short(cfg.Hash), "config_hash", short(start.Hash))
	}
	if err := s.nginx.WriteConfig(start.Bytes); err != nil {
		return err
	}
	s.noteWaiting(statusErr)
	return nil
}

// noteWaiting logs why nginx does not answer. Not running yet (no socket,
// nobody listening) is the normal start and stays at debug level; any other
// reason (a socket the agent may not open, a config API that fails) is a
// warning, logged once each time the reason changes.
func (s *Stage) noteWaiting(err error) {
	reason := err.Error()
	if reason == s.waitReason {
		return
	}
	s.waitReason = reason
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		s.logger.Debug("nginx not answering yet; config written for its start", "error", err)
		return
	}
	s.logger.Warn("nginx does not answer on the config socket; config written for its start", "socket", s.nginx.SocketPath(), "error", err)
}

// NeedsSync reads nginx's status and says whether it differs from the
// record: nginx cold-started (new boot id), runs another config than
// wanted (the hash of the config last rendered), or was not reachable.
func (s *Stage) NeedsSync(ctx context.Context, wanted string) bool {
	st, err := s.nginx.Lua.Status(ctx)
	if err != nil {
		// Still down; the config for its start is written, unless it is
		// time to leave it a confirmed one instead.
		return s.configs.StartOverdue()
	}
	if st.BootID != s.lua.Boot() {
		return true
	}
	return s.configs.NeedsSync(s.configs.Running(st.ConfigHash), wanted)
}

// TrimErrorLog keeps nginx's error log file under MaxErrorLogSize
// (Nginx.TrimErrorLog); the syncer calls it between syncs.
func (s *Stage) TrimErrorLog() {
	trimmed, err := s.nginx.TrimErrorLog(MaxErrorLogSize)
	switch {
	case err != nil:
		s.logger.Warn("could not keep nginx's error log small", "error", err)
	case trimmed:
		s.logger.Info("nginx's error log file passed its limit and was emptied; nginx's stderr has every line",
			"file", filepath.Join(s.nginx.SharedDir, render.ErrorLogName), "limit_bytes", MaxErrorLogSize)
	}
}

// CheckAccess asks nginx's workers, once per nginx boot and each time the
// files they need change, whether they can use them (AccessCheck), and
// logs a warning that names each one they cannot. checked is false when
// no check was due (the last answer stands).
func (s *Stage) CheckAccess(ctx context.Context, files []model.AuthFile) (denied []string, checked bool) {
	found, due, err := s.access.Check(ctx, s.nginx.Lua, s.lua.Boot(), files)
	if err != nil {
		s.logger.Warn("could not ask nginx's workers which files they can use", "error", err)
	}
	if !due || err != nil {
		return nil, false
	}
	for _, d := range found {
		s.logger.Warn("nginx workers cannot use a file they need: fix the owner or mode of it or of a folder above it",
			"path", d.Path, "access", d.Access, "error", d.Error)
		denied = append(denied, d.String())
	}
	return denied, true
}

// Keep returns the profiles to render beside the next model's
// (ConfigRecord.Keep).
func (s *Stage) Keep() []render.Profile { return s.configs.Keep(s.lua) }

// Rejected: ConfigRecord.Rejected.
func (s *Stage) Rejected(hash string) error { return s.configs.Rejected(hash) }

// Applied is the hash of the config nginx is confirmed to run ("": none known).
func (s *Stage) Applied() string { return s.configs.Applied() }

// NearestExpiry: LuaState.NearestExpiry.
func (s *Stage) NearestExpiry() time.Time { return s.lua.NearestExpiry() }

// Boot is the nginx boot the record of what Lua holds belongs to.
func (s *Stage) Boot() string { return s.lua.Boot() }

// WaitReason is why nginx did not answer at the last step ("": it answered).
func (s *Stage) WaitReason() string { return s.waitReason }
