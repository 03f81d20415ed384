package apply

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// Held carries the profiles of the config nginx runs when it is the one
// nginx confirmed; applied follows the status, for the good config alone.
func TestConfigRecordHeldAndApplied(t *testing.T) {
	r := NewConfigRecord(nil, render.Settings{}, time.Second)
	lua := NewLuaState(nil, nil)
	cfg := render.Config{Hash: "new", Profiles: []render.Profile{{Name: "p1"}}}

	if held := r.Held(lua, "other", model.List[model.Certificate]{}); held.ConfigHash != "other" || held.Config.Profiles != nil {
		t.Errorf("nginx runs a config the record does not know: %+v", held)
	}
	r.Observe("other", cfg)
	if r.Applied() != "" || !r.NeedsSync("other", cfg.Hash) {
		t.Errorf("applied %q for a config nginx runs and the agent never confirmed", r.Applied())
	}
	r.Observe("new", cfg)
	if r.Applied() != "new" || r.Good().Hash != "new" || r.NeedsSync("new", cfg.Hash) {
		t.Errorf("nginx runs the new config: applied %q, good %q", r.Applied(), r.Good().Hash)
	}
	if held := r.Held(lua, "new", model.List[model.Certificate]{}); len(held.Config.Profiles) != 1 || held.Config.Profiles[0].Name != "p1" {
		t.Errorf("held profiles %+v, want those of the good config", held.Config.Profiles)
	}

	// A rejected config does not ask for a sync until the config changes.
	r.failed, r.failedErr = "bad", ErrRejected
	if r.Rejected("bad") == nil || r.Rejected("new") != nil || r.NeedsSync("other", "bad") {
		t.Error("the rejected config is not remembered as such")
	}
	r.unconfirmed = "slow"
	if !r.Unconfirmed("slow") || !r.Observe("slow", render.Config{Hash: "slow"}) || r.Unconfirmed("slow") {
		t.Error("a slow reload nginx now runs is not confirmed")
	}
}

// The profiles of the good config that routes Lua holds jump to are kept;
// a kept one no route of the new config jumps to is retiring.
func TestConfigRecordKeepsProfilesRoutesJumpTo(t *testing.T) {
	r := NewConfigRecord(nil, render.Settings{}, time.Second)
	good := render.Config{Hash: "good", Profiles: []render.Profile{{Name: "p1"}, {Name: "p2"}}}
	r.Observe("good", good)
	lua := NewLuaState(nil, nil)
	lua.holdRoute(model.Route{Host: "a.test", Locations: []model.RouteLocation{{Path: "/", Profile: "p2"}}})

	keep := r.Keep(lua)
	if len(keep) != 1 || keep[0].Name != "p2" {
		t.Fatalf("kept %+v, want p2 alone", keep)
	}
	routes := []model.Route{{Host: "a.test", Locations: []model.RouteLocation{{Path: "/", Profile: "p2"}}}}
	if Retiring(keep, render.NewRouteList(routes)) {
		t.Error("a kept profile routes still jump to is retiring")
	}
	routes[0].Locations[0].Profile = "p3"
	if !Retiring(keep, render.NewRouteList(routes)) {
		t.Error("a kept profile no route jumps to is not retiring")
	}
}

// While nginx does not answer, the config left for its start is the new one
// at first; after the start bound it is the last confirmed one, or the
// bootstrap, so that a config nginx rejects cannot keep it from starting.
func TestConfigForStartFallsBack(t *testing.T) {
	shared := t.TempDir()
	settings := render.Settings{SharedDir: shared, HTTPPort: 8080, HTTPSPort: 8443, WorkerProcesses: "1"}
	bootstrap, err := render.Render(model.Model{}, settings)
	if err != nil {
		t.Fatal(err)
	}
	newStage := func() *Stage {
		nginx := &Nginx{SharedDir: shared, Lua: NewLuaClient(filepath.Join(shared, "none.sock"))}
		return NewStage(nginx, settings, 50*time.Millisecond, false, noStageMetrics{}, slog.New(slog.DiscardHandler))
	}
	candidate := render.Config{Hash: "candidate", Bytes: []byte("candidate")}
	startWith := func(s *Stage) string {
		t.Helper()
		res, err := s.Apply(context.Background(), Step{Config: candidate})
		if err != nil || !res.Waiting {
			t.Fatalf("nginx down: %+v, %v; want waiting, no error", res, err)
		}
		onDisk, err := os.ReadFile(filepath.Join(shared, render.ConfigName))
		if err != nil {
			t.Fatal(err)
		}
		return string(onDisk)
	}
	confirmed := func(s *Stage, cfg render.Config) { s.configs.Observe(cfg.Hash, cfg) }
	needsSync := func(s *Stage) bool { return s.NeedsSync(context.Background(), "") }

	s := newStage()
	if got := startWith(s); got != "candidate" {
		t.Fatalf("at first: %q, want the candidate", got)
	}
	if needsSync(s) {
		t.Error("NeedsSync before the start bound passed")
	}
	time.Sleep(60 * time.Millisecond)
	if !needsSync(s) {
		t.Error("no sync asked for once the start bound passed")
	}
	if got := startWith(s); got != string(bootstrap.Bytes) {
		t.Errorf("after the start bound with nothing confirmed: %.60q, want the bootstrap config", got)
	}
	if needsSync(s) || startWith(s) != string(bootstrap.Bytes) {
		t.Error("the fallback does not stay until nginx answers")
	}

	s = newStage()
	confirmed(s, render.Config{Hash: "good", Bytes: []byte("good")})
	startWith(s)
	time.Sleep(60 * time.Millisecond)
	if got := startWith(s); got != "good" {
		t.Errorf("after the start bound: %q, want the last confirmed config", got)
	}

	s = newStage()
	confirmed(s, candidate)
	time.Sleep(60 * time.Millisecond)
	got := startWith(s)
	time.Sleep(60 * time.Millisecond)
	if got != "candidate" || needsSync(s) {
		t.Errorf("a confirmed candidate: %q (a sync asked for: %v), want it at once and for good", got, needsSync(s))
	}
}

type noStageMetrics struct{ noPushMetrics }

func (noStageMetrics) Reloaded(time.Duration, error) {}
func (noStageMetrics) ReloadUnconfirmed()            {}
func (noStageMetrics) ValidationFailed(string)       {}

// An agent that restarts reads back the config nginx runs from the
// nginx.conf in the shared dir: Held has its profiles and Keep keeps the
// one Lua's routes jump to, as if the agent had never restarted. Another
// hash than the file's reads back nothing.
func TestConfigRecordReadsBackTheRunningConfig(t *testing.T) {
	conf, err := os.ReadFile(filepath.Join("..", "render", "testdata", "proxy.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, render.ConfigName), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(conf), `init("`)
	running := string(conf[i+6 : i+6+64])
	r := NewConfigRecord(&Nginx{SharedDir: dir}, render.Settings{}, time.Second)

	if ok, err := r.ReadBack(strings.Repeat("0", 64)); ok || err == nil {
		t.Errorf("read back for another hash: %v, %v", ok, err)
	}
	if ok, err := r.ReadBack(running); !ok || err != nil {
		t.Fatalf("ReadBack: %v, %v", ok, err)
	}
	good := r.Good()
	if good.Hash != running || len(good.Profiles) < 2 || string(good.Bytes) != string(conf) {
		t.Fatalf("good config %.12s with %d profiles", good.Hash, len(good.Profiles))
	}
	lua := NewLuaState(nil, nil)
	p := good.Profiles[1].Name
	lua.holdRoute(model.Route{Host: "a.test", Locations: []model.RouteLocation{{Path: "/", Profile: p}}})
	if held := r.Held(lua, running, model.List[model.Certificate]{}); len(held.Config.Profiles) != len(good.Profiles) {
		t.Errorf("held %d profiles, want %d", len(held.Config.Profiles), len(good.Profiles))
	}
	if keep := r.Keep(lua); len(keep) != 1 || keep[0].Name != p {
		t.Errorf("kept %+v, want %s", keep, p)
	}
	if ok, _ := r.ReadBack(running); ok {
		t.Error("read back again over a good config")
	}
}

// An answer naming a config nginx ran before the good one, in the same
// boot, comes from an old worker still draining: it is read as the good
// one, so the next sync does not reload for it. A new boot forgets them.
func TestConfigRecordRetired(t *testing.T) {
	r := NewConfigRecord(nil, render.Settings{}, time.Second)
	a, b := render.Config{Hash: "a"}, render.Config{Hash: "b"}
	r.Observe("a", a)
	r.Observe("b", b)
	if got := r.Running("a"); got != "b" {
		t.Errorf("Running(a) after b = %q, want b (a is retired)", got)
	}
	if got := r.Running("c"); got != "c" {
		t.Errorf("Running(c) = %q, want c (never ran)", got)
	}
	r.Observe("a", a)
	if got, back := r.Running("a"), r.Running("b"); got != "a" || back != "a" {
		t.Errorf("after a again: Running(a) = %q, Running(b) = %q; want a, a", got, back)
	}
	r.NewBoot()
	if got := r.Running("b"); got != "b" {
		t.Errorf("Running(b) after a new boot = %q, want b", got)
	}
}

// The profiles Lua's routes jump to follow each route held, replaced
// and dropped (the counts Stage.Keep reads instead of every route).
func TestRouteProfilesFollowRoutes(t *testing.T) {
	l := NewLuaState(nil, nil)
	route := func(host string, profiles ...string) model.Route {
		r := model.Route{Host: host}
		for _, p := range profiles {
			r.Locations = append(r.Locations, model.RouteLocation{Path: "/" + p, Profile: p})
		}
		return r
	}
	check := func(what string, want ...string) {
		t.Helper()
		got := slices.Sorted(maps.Keys(l.RouteProfiles()))
		if !slices.Equal(got, want) {
			t.Errorf("%s: profiles %v, want %v", what, got, want)
		}
	}
	l.holdRoute(route("a.test", "p1", "p2", ""))
	l.holdRoute(route("b.test", "p1"))
	check("two routes", "p1", "p2")
	l.holdRoute(route("a.test", "p3"))
	check("a.test replaced", "p1", "p3")
	l.dropRoute("b.test")
	check("b.test dropped", "p3")
	l.dropRoute("a.test")
	l.dropRoute("c.test")
	check("none left")
}
