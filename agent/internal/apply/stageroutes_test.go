package apply_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
)

// A step whose plan ran whole leaves the record holding the step's routes
// list itself, not a copy of it; the next step, of a list made from that
// one, pushes only its change, and Lua holds what the record says.
func TestStageHoldsTheStepsRoutes(t *testing.T) {
	n, settings, good := agentnginx.Start(t)
	s := apply.NewStage(n, settings, 5*time.Second, false, &stageMetrics{}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var routes []model.Route
	for i := range 600 {
		routes = append(routes, model.Route{Host: fmt.Sprintf("h%04d.test", i), Locations: []model.RouteLocation{{Path: "/", Backend: "ns/a:80"}}})
	}
	first := render.NewRouteList(routes)
	res, err := s.Apply(ctx, apply.Step{Config: good, Routes: first})
	if err != nil || !res.Executed || res.RouteUpserts != 600 {
		t.Fatalf("first step: %+v, %v", res, err)
	}
	if !s.HeldRoutes().Same(first) {
		t.Error("after a plan that ran whole the record is not the step's list")
	}
	added := model.Route{Host: "new.test", Locations: []model.RouteLocation{{Path: "/", Backend: "ns/a:80"}}}
	second := first.Upsert([]model.Route{added})
	res, err = s.Apply(ctx, apply.Step{Config: good, Routes: second})
	if err != nil || !res.Executed || res.RouteUpserts != 1 || res.RouteRemoves != 0 {
		t.Fatalf("second step: %+v, %v; want one route pushed", res, err)
	}
	if !s.HeldRoutes().Same(second) {
		t.Error("after the second plan the record is not its list")
	}
	held, err := n.Lua.Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 601 || held[added.Host].Host != added.Host {
		t.Errorf("Lua holds %d routes, want 601 with %s", len(held), added.Host)
	}
}
