package render_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// TestGatewayJoinBackendTLSLocations: the backend TLS locations are
// listed for Lua in init_by_lua; a new route to a Service whose policy
// nginx already has a location for is a push; and a route whose share
// names a location this nginx lacks (a worker of the config before the
// reload that brought it) gets its connection closed unanswered, never a
// 500 nor the request sent without TLS.
func TestGatewayJoinBackendTLSLocations(t *testing.T) {
	j := startJoin(t)
	s := j.snapshot(t, "tests/backendtlspolicy.yaml")
	m, _ := j.sync(t, s)
	if len(m.BackendTLS) == 0 {
		t.Fatal("the model has no backend TLS location")
	}
	cfg, routes, err := render.Build(m, j.settings)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range m.BackendTLS {
		if !strings.Contains(string(cfg.Bytes), "\n            \""+b.Name+"\",\n") {
			t.Errorf("init_by_lua does not list %s", b.Name)
		}
	}
	addr := gatewayAddress(t, m, "same-namespace")
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, joinEcho, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Host = "abc.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return 0, joinEcho{}, err
		}
		defer resp.Body.Close()
		var echo joinEcho
		body, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(body, &echo)
		return resp.StatusCode, echo, nil
	}
	if code, echo, err := get("/backendtlspolicy"); err != nil || code != 200 || echo.SNI != "abc.example.com" {
		t.Fatalf("/backendtlspolicy: %d %+v %v, want 200 over TLS with SNI abc.example.com", code, echo, err)
	}

	// A second route to the same Service: a push.
	again := s.HTTPRoutes.At(0).DeepCopy()
	if again.Name != "backendtlspolicy" {
		t.Fatalf("the first HTTPRoute of the manifest is %s", again.Name)
	}
	again.Name = "backendtlspolicy-again"
	again.Spec.Hostnames = []gatewayv1.Hostname{"again.example.com"}
	s.HTTPRoutes = model.ListOf(append(s.HTTPRoutes.Slice(), again)...)
	m, res := j.sync(t, s)
	if res.Reloaded || res.RouteUpserts != 1 {
		t.Errorf("a route to a Service whose policy has its location: %+v (reasons %q), want 1 route pushed and no reload", res.Outcome, res.ReloadReasons)
	}

	// The same routes, but the share of /backendtlspolicy names a location
	// nginx lacks: pushed (the config is the same), and answered by
	// closing the connection.
	cfg, routes, err = render.Build(m, j.settings)
	if err != nil {
		t.Fatal(err)
	}
	const absent = model.BackendTLSPrefix + "000000000000000000000000"
	edited := 0
	for i := range routes {
		r := &routes[i]
		r.Locations = slices.Clone(r.Locations)
		for li := range r.Locations {
			l := &r.Locations[li]
			if l.Path != "/backendtlspolicy" || l.Rule == nil || !strings.HasSuffix(r.Host, " abc.example.com") {
				continue
			}
			rule := *l.Rule
			rule.Backends = slices.Clone(rule.Backends)
			for bi := range rule.Backends {
				rule.Backends[bi].TLS = absent
				edited++
			}
			l.Rule = &rule
		}
	}
	if edited == 0 {
		t.Fatalf("no share of /backendtlspolicy in %d routes", len(routes))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err = j.stage.Apply(ctx, apply.Step{Model: m, Config: cfg, Routes: render.NewRouteList(routes)})
	if err != nil || res.Reloaded || res.RouteUpserts == 0 {
		t.Fatalf("pushing the edited route: %+v, %v", res, err)
	}
	code, echo, err := get("/backendtlspolicy")
	if err == nil || !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") {
		t.Errorf("a share naming a location nginx lacks: %d %+v %v, want the connection closed unanswered", code, echo, err)
	}
	if code, _, err := get("/backendtlspolicy-host-mismatch"); err != nil || code != 502 {
		t.Errorf("the route's other rule: %d %v, want its 502 (host mismatch) as before", code, err)
	}
}
