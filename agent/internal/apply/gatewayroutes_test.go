package apply_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
)

// Gateway routes pushed through the agent's Lua client read back equal:
// the next plan has nothing to push, so a sync does not send them again
// (Lua keeps exactly the fields of a rule it is sent).
func TestGatewayRoutesReadBackAsPushed(t *testing.T) {
	n, _, _ := agentnginx.Start(t)
	front := model.FrontName("127.29.0.9", 8080)
	routes := []model.Route{
		{Host: model.FrontKey(front, "app.example.com"), Ordered: true, Locations: []model.RouteLocation{
			{Path: "/exact", Exact: true, Backend: "ns/a:80", Rule: &model.RouteRule{Route: "HTTPRoute ns/app"}},
			{Path: "/api", Rule: &model.RouteRule{Method: "GET",
				Headers:         []model.ValueMatch{{Name: "Version", Value: "^v[0-9]+$", Regex: true}},
				Query:           []model.ValueMatch{{Name: "q", Value: "1"}},
				RequestHeaders:  &model.HeaderChanges{Set: []model.Header{{Name: "X-A", Value: `a "quoted" \ value/`}}, Remove: []string{"X-B"}},
				ResponseHeaders: &model.HeaderChanges{Add: []model.Header{{Name: "X-C", Value: "c"}}},
				Rewrite:         &model.Rewrite{Host: "internal.example.com", Path: "/v2", ReplacePrefix: true, MatchedPrefix: "/api"},
				Backends:        []model.WeightedBackend{{Backend: "ns/a:80", Weight: 90}, {Backend: "ns/b:80", Weight: 10}, {Weight: 0}},
				Route:           "HTTPRoute ns/app"}},
			{Path: "^/re/.*", Regex: true, Rule: &model.RouteRule{CaseSensitive: true,
				Redirect: &model.Redirect{Scheme: "https", Host: "example.org", Port: 8443, Path: "/x", Status: 308}}},
			{Path: "/", Rule: &model.RouteRule{Status: 500}},
		}},
		{Host: model.FrontKey(front, "_"), Ordered: true, Locations: []model.RouteLocation{{Path: "/", Backend: "ns/a:80"}}},
		{Host: "ingress.example.com", Locations: []model.RouteLocation{{Path: "/", Backend: "ns/a:80"}}},
	}
	ctx := context.Background()
	if _, err := n.Lua.PushRoutes(ctx, luaapi.RouteUpdate{Upserts: luaapi.RoutePayloads(routes)}); err != nil {
		t.Fatal(err)
	}
	held, err := n.Lua.Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := plan.Routes(render.NewRouteList(slices.Collect(maps.Values(held))), render.NewRouteList(routes)); !p.Empty() {
		for _, r := range p.Upserts {
			t.Errorf("pushed again: %+v, held %+v", r, held[r.Host])
		}
		t.Errorf("removes %v", p.Removes)
	}
}
