package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/render"
)

// ConfigRecord is the record of which nginx.conf nginx runs, beside
// LuaState's record of what Lua holds: the config nginx last confirmed
// (good) and whether it runs it now (applied), the one it rejected (not
// tried again until the config changes), the one it was signalled to load
// and has not confirmed yet, and which config to leave on disk for its
// start while it does not answer (ForStart). With LuaState it makes
// plan.Held whole (Held).
type ConfigRecord struct {
	nginx *Nginx
	// bootstrap renders the config nginx starts with when it never
	// confirmed one; startBound is how long it may stay down with a config
	// it never confirmed.
	bootstrap  render.Settings
	startBound time.Duration

	applied     string        // hash of the config nginx is confirmed to run ("": none known)
	good        render.Config // the config nginx last confirmed (zero: none yet)
	failed      string        // hash of a config nginx rejected; not retried until it changes
	failedErr   error         // what the reload of failed returned
	unconfirmed string        // hash nginx was signalled to load and has not confirmed ("": none)
	// unprovenSince is when a config nginx never confirmed was left for
	// its start while it did not answer (zero: none); safeStart says that
	// nginx stayed down past startBound and the last good config (or the
	// bootstrap) was left instead.
	unprovenSince time.Time
	safeStart     bool
	// retired are the configs nginx ran before good since its boot: an
	// answer that names one comes from an old worker that has yet to take
	// its signal to quit (it still accepts for a moment after a new worker
	// confirmed good), not from nginx going back, which it cannot do
	// without a new boot (Running).
	retired map[string]bool
}

// NewConfigRecord returns an empty record for nginx (nil in tests that
// never reload). bootstrap are the flags' render settings; startBound is
// how long nginx may stay down with a config it never confirmed.
func NewConfigRecord(nginx *Nginx, bootstrap render.Settings, startBound time.Duration) *ConfigRecord {
	return &ConfigRecord{nginx: nginx, bootstrap: bootstrap, startBound: startBound}
}

// Applied is the hash of the config nginx is confirmed to run ("": none
// the agent knows).
func (r *ConfigRecord) Applied() string { return r.applied }

// Good is the config nginx last confirmed (zero: none yet).
func (r *ConfigRecord) Good() render.Config { return r.good }

// Answered records that nginx answered: the config left for its start is
// moot.
func (r *ConfigRecord) Answered() {
	r.unprovenSince, r.safeStart = time.Time{}, false
}

// Running is the config nginx runs, given the hash reported, running: the
// good config when running is one nginx ran before it since its boot.
func (r *ConfigRecord) Running(running string) string {
	if r.retired[running] {
		return r.good.Hash
	}
	return running
}

// NewBoot forgets the configs nginx ran before: a new nginx may start with
// any of them.
func (r *ConfigRecord) NewBoot() { clear(r.retired) }

// setGood records cfg as the config nginx last confirmed; the one before
// it is retired.
func (r *ConfigRecord) setGood(cfg render.Config) {
	if r.good.Hash != "" && r.good.Hash != cfg.Hash {
		if r.retired == nil {
			r.retired = map[string]bool{}
		}
		r.retired[r.good.Hash] = true
	}
	delete(r.retired, cfg.Hash)
	r.good = cfg
}

// Observe records that nginx runs the config of hash running, while cfg
// is the config of this sync. It says whether that confirms a reload
// nginx was slow to take.
func (r *ConfigRecord) Observe(running string, cfg render.Config) (confirmedSlow bool) {
	if r.unconfirmed != "" && running == r.unconfirmed {
		r.unconfirmed, confirmedSlow = "", true
	}
	if running == cfg.Hash {
		r.setGood(cfg)
	}
	r.applied = ""
	if running == r.good.Hash {
		r.applied = running
	}
	return confirmedSlow
}

// ReadBack records running, the hash of the config nginx runs, as the good
// config when the record has none: the agent started while nginx ran a
// config an earlier agent wrote. It is read back from the nginx.conf in
// the shared dir, when that is the config of hash running
// (render.ReadBack), so that Held has its profiles and Keep keeps those
// Lua's routes still jump to, as if the agent had never restarted. It
// says whether it did; an error says why the profiles stay unknown.
func (r *ConfigRecord) ReadBack(running string) (bool, error) {
	if r.good.Hash != "" || running == "" {
		return false, nil
	}
	conf, err := r.nginx.ReadConfig()
	if err != nil {
		return false, err
	}
	cfg, err := render.ReadBack(conf, running)
	if err != nil {
		return false, err
	}
	r.good = cfg
	return true, nil
}

// Held is what nginx runs and Lua holds, for plan.Compute: lua's record
// (LuaState.Held), with the config nginx runs when it is the one it last
// confirmed.
func (r *ConfigRecord) Held(lua *LuaState, running string, certs model.List[model.Certificate]) plan.Held {
	held := lua.Held(running, certs)
	if running == r.good.Hash {
		held.Config = r.good
	}
	return held
}

// Rejected returns what the reload of the config hash returned when nginx
// rejected it since it last took one (nil: it did not).
func (r *ConfigRecord) Rejected(hash string) error {
	if r.failed == "" || hash != r.failed {
		return nil
	}
	return r.failedErr
}

// Unconfirmed says nginx was signalled to load the config hash and has not
// confirmed it yet: a second signal would only make a slow nginx slower.
func (r *ConfigRecord) Unconfirmed(hash string) bool {
	return r.unconfirmed != "" && hash == r.unconfirmed
}

// NeedsSync says whether running, the hash nginx reports, calls for a
// sync: it is not the config the record says nginx runs, and wanted, the
// config last rendered, is not one nginx rejected.
func (r *ConfigRecord) NeedsSync(running, wanted string) bool {
	return running != r.applied && wanted != r.failed
}

// Reload makes nginx run cfg (Nginx.ApplyConfig) and records the verdict:
// a config nginx took is good and applied; one it rejected is remembered
// until it takes another; one it has yet to confirm (ErrNotConfirmed) is
// not signalled again.
func (r *ConfigRecord) Reload(ctx context.Context, cfg render.Config) error {
	err := r.nginx.ApplyConfig(ctx, cfg)
	switch {
	case err == nil:
		r.failed = ""
		r.applied = cfg.Hash
		r.setGood(cfg)
	case errors.Is(err, ErrNotConfirmed):
		r.unconfirmed = cfg.Hash
	case errors.Is(err, ErrRejected):
		r.failed, r.failedErr = cfg.Hash, err
	}
	return err
}

// Keep returns the profiles of the good config that the routes lua holds
// still jump to: they stay one more config, since the routes leave them
// only after that config's reload (Retiring).
func (r *ConfigRecord) Keep(lua *LuaState) []render.Profile {
	var keep []render.Profile
	held := lua.RouteProfiles()
	for _, p := range r.good.Profiles {
		if held[p.Name] {
			keep = append(keep, p)
		}
	}
	return keep
}

// Retiring says whether a profile of kept is one routes no longer jump
// to: once the routes left it, the next config renders it away.
func Retiring(kept []render.Profile, routes render.RouteList) bool {
	used := map[string]bool{}
	for r := range routes.All() {
		for _, l := range r.Locations {
			used[l.Profile] = true
		}
	}
	for _, p := range kept {
		if !used[p.Name] {
			return true
		}
	}
	return false
}

// StartOverdue says nginx has stayed down for startBound with a config it
// never confirmed left for its start, and ForStart has not yet left it the
// last confirmed one instead: a sync is due to do so.
func (r *ConfigRecord) StartOverdue() bool {
	return !r.unprovenSince.IsZero() && !r.safeStart && time.Since(r.unprovenSince) >= r.startBound
}

// ForStart is what to leave on disk for nginx's next start while it does
// not answer: cfg, unless nginx stayed down for startBound since a config
// it never confirmed was left there; from then on the last config it
// confirmed, or the bootstrap one. A config nginx rejects (a regex PCRE
// refuses) would otherwise keep it from starting at all, and with it every
// other Ingress; once nginx is up, cfg follows by a verified reload, and
// the quarantine finds the Ingress to blame (or the ConfigMap is blamed).
// fellBack is true once, when the confirmed config is first left instead.
func (r *ConfigRecord) ForStart(cfg render.Config) (start render.Config, fellBack bool, err error) {
	if cfg.Hash == r.good.Hash {
		return cfg, false, nil
	}
	if r.unprovenSince.IsZero() {
		r.unprovenSince = time.Now()
	}
	if !r.safeStart && time.Since(r.unprovenSince) < r.startBound {
		return cfg, false, nil
	}
	safe := r.good
	if safe.Hash == "" {
		// The bootstrap: no Ingress and the flags' settings alone, so that
		// a ConfigMap nginx refuses cannot keep it from starting either.
		// Once nginx runs it, the ConfigMap is judged as one that changed
		// since the flags' settings (syncer/configmap.go).
		if safe, err = render.Render(model.Model{}, r.bootstrap); err != nil {
			return render.Config{}, false, fmt.Errorf("rendering the bootstrap nginx.conf: %w", err)
		}
	}
	fellBack = !r.safeStart
	r.safeStart = true
	return safe, fellBack, nil
}
