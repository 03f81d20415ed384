package apply

import (
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

	if held := r.Held(lua, "other", nil); held.ConfigHash != "other" || held.Profiles != nil {
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
	if held := r.Held(lua, "new", nil); len(held.Profiles) != 1 || held.Profiles[0].Name != "p1" {
		t.Errorf("held profiles %+v, want those of the good config", held.Profiles)
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
	lua.routes["a.test"] = model.Route{Host: "a.test", Locations: []model.RouteLocation{{Path: "/", Profile: "p2"}}}

	keep := r.Keep(lua)
	if len(keep) != 1 || keep[0].Name != "p2" {
		t.Fatalf("kept %+v, want p2 alone", keep)
	}
	routes := []model.Route{{Host: "a.test", Locations: []model.RouteLocation{{Path: "/", Profile: "p2"}}}}
	if Retiring(keep, routes) {
		t.Error("a kept profile routes still jump to is retiring")
	}
	routes[0].Locations[0].Profile = "p3"
	if !Retiring(keep, routes) {
		t.Error("a kept profile no route jumps to is not retiring")
	}
}
