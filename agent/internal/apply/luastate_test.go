package apply_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// Execute runs a plan's steps in order against the real config API and
// keeps its record equal to what Lua holds: a step that fails stops the
// plan, and what ran before it stays recorded.
func TestExecuteKeepsTheRecordOfWhatLuaHolds(t *testing.T) {
	n, _, cfg := agentnginx.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l := apply.NewLuaState(n.Lua, nil)
	status, err := n.Lua.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newBoot, err := l.Observe(ctx, status); err != nil || !newBoot {
		t.Fatalf("first Observe: new boot %v, %v; want true", newBoot, err)
	}
	a := model.Backend{Name: "default/a:80", Endpoints: []model.Endpoint{{Address: "127.0.0.1", Port: 9}}}
	b := model.Backend{Name: "default/b:80", Endpoints: []model.Endpoint{{Address: "127.0.0.2", Port: 9}}}
	route := model.Route{Host: "a.example.com", Locations: []model.RouteLocation{{Path: "/", Backend: a.Name}}}
	var order []plan.StepKind
	reload := func(_ context.Context, got render.Config) error {
		order = append(order, plan.Reload)
		if got.Hash == "rejected" {
			return apply.ErrRejected
		}
		return nil
	}

	next := plan.Next{Config: cfg, Backends: model.ListOf([]model.Backend{a, b}...), Routes: render.NewRouteList([]model.Route{route})}
	p := plan.Compute(l.Held(status.ConfigHash, model.List[model.Certificate]{}), next)
	out, err := l.Execute(ctx, p, reload)
	if err != nil {
		t.Fatal(err)
	}
	if out.Upserts != 2 || out.RouteUpserts != 1 || out.Reloaded || len(order) != 0 {
		t.Errorf("outcome %+v, reloads %v; want 2 backends, 1 route, no reload", out, order)
	}
	held, err := n.Lua.Backends(ctx)
	if err != nil || len(held) != 2 {
		t.Fatalf("Lua holds %v (%v), want 2 backends", held, err)
	}
	// nginx's own answer to GET /metrics reads (luaapi.ReadLuaMetrics):
	// both backends, sorted by name, with their endpoints.
	m, err := n.Lua.Metrics(ctx)
	if got := slices.Collect(m.Backends.All()); err != nil || len(got) != 2 || got[0].Name != a.Name ||
		got[0].Endpoints != 1 || got[1].Name != b.Name || !m.Counting {
		t.Errorf("GET /metrics: %+v, counting %v, %v", got, m.Counting, err)
	}
	if p := plan.Compute(l.Held(status.ConfigHash, model.List[model.Certificate]{}), next); !p.Empty() {
		t.Errorf("the same state again: plan %+v, want nothing", p.Steps)
	}

	// b goes and the config changes; nginx rejects the config: the removal
	// after the reload does not run, and b stays recorded as Lua has it.
	next = plan.Next{Config: render.Config{Hash: "rejected"}, Backends: model.ListOf([]model.Backend{a}...), Routes: render.NewRouteList([]model.Route{route})}
	p = plan.Compute(l.Held(status.ConfigHash, model.List[model.Certificate]{}), next)
	if _, err := l.Execute(ctx, p, reload); !errors.Is(err, apply.ErrRejected) {
		t.Fatalf("Execute: %v, want the reload's error", err)
	}
	if len(order) != 1 {
		t.Errorf("reloads %v, want one", order)
	}
	if held, _ := n.Lua.Backends(ctx); len(held) != 2 {
		t.Errorf("Lua holds %d backends, want b still there", len(held))
	}
	h := l.Held(status.ConfigHash, model.List[model.Certificate]{})
	if _, ok := plan.HeldBackend(h.Backends, b.Name); !ok || h.Current {
		t.Errorf("record %+v: want b kept and the record not current", h)
	}

	// The same boot again: nothing is read back.
	if newBoot, err := l.Observe(ctx, status); err != nil || newBoot {
		t.Errorf("Observe of the same boot: %v, %v", newBoot, err)
	}
}

// The certificates' expiry comes from the agent, which parsed each: known
// for what it pushed, and, after an agent restart reads Lua back, once the
// model names the same content.
func TestNearestExpiryOfHeldCertificates(t *testing.T) {
	n, _, cfg := agentnginx.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	soon := testCertificate(t, "ns/soon", "soon.example.com", time.Now().Add(48*time.Hour))
	late := testCertificate(t, "ns/late", "late.example.com", time.Now().Add(900*time.Hour))
	certs := model.ListOf(late, soon)

	l := apply.NewLuaState(n.Lua, nil)
	status, err := n.Lua.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, status); err != nil {
		t.Fatal(err)
	}
	p := plan.Compute(l.Held(status.ConfigHash, certs), plan.Next{Config: cfg, Certificates: certs})
	if _, err := l.Execute(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if got := l.NearestExpiry(); !got.Equal(soon.NotAfter) {
		t.Errorf("NearestExpiry = %s, want %s", got, soon.NotAfter)
	}

	restarted := apply.NewLuaState(n.Lua, nil)
	if _, err := restarted.Observe(ctx, status); err != nil {
		t.Fatal(err)
	}
	if got := restarted.NearestExpiry(); !got.IsZero() {
		t.Errorf("read back from Lua: NearestExpiry = %s, want none known yet", got)
	}
	restarted.Held(status.ConfigHash, certs)
	if got := restarted.NearestExpiry(); !got.Equal(soon.NotAfter) {
		t.Errorf("after the model named them: NearestExpiry = %s, want %s", got, soon.NotAfter)
	}
}

func testCertificate(t *testing.T, name, host string, notAfter time.Time) model.Certificate {
	t.Helper()
	notAfter = notAfter.UTC().Truncate(time.Second)
	cert, key := testcert.New(t, 1, notAfter, host)
	return model.Certificate{Name: name, Hosts: []string{host}, NotAfter: notAfter, CertPEM: cert, KeyPEM: key}
}

// Held walks the model's certificates only when they, or what Lua holds of
// them, changed since it last did: a sync that changed no certificate (an
// endpoint change, a new Ingress without TLS) costs none of their walk at
// 50,000 TLS hosts. What the walk learns still comes when they change:
// the expiry of a certificate read back after a restart (Observe).
func TestHeldWalksCertificatesOnlyWhenTheyChange(t *testing.T) {
	n, _, cfg := agentnginx.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var all []model.Certificate
	for i := range 200 {
		all = append(all, testCertificate(t, fmt.Sprintf("ns/c%03d", i), fmt.Sprintf("c%d.example.com", i), time.Now().Add(time.Duration(48+i)*time.Hour)))
	}
	certs := model.ListOf(slices.Clone(all)...)
	l := apply.NewLuaState(n.Lua, nil)
	status, err := n.Lua.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, status); err != nil {
		t.Fatal(err)
	}
	p := plan.Compute(l.Held(status.ConfigHash, certs), plan.Next{Config: cfg, Certificates: certs})
	if _, err := l.Execute(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	l.Held(status.ConfigHash, certs)
	if allocs := testing.AllocsPerRun(20, func() { l.Held(status.ConfigHash, certs) }); allocs > 0 {
		t.Errorf("Held of the same certificates, nothing changed: %.0f allocations, want none (a walk of every certificate)", allocs)
	}
	if got := l.NearestExpiry(); !got.Equal(all[0].NotAfter) {
		t.Errorf("NearestExpiry = %s, want %s", got, all[0].NotAfter)
	}

	// Read back by an agent that knows the list already (a new boot of
	// the same state): the same list is walked again for the expiry.
	restarted := apply.NewLuaState(n.Lua, nil)
	restarted.Held(status.ConfigHash, certs)
	if _, err := restarted.Observe(ctx, status); err != nil {
		t.Fatal(err)
	}
	if got := restarted.NearestExpiry(); !got.IsZero() {
		t.Errorf("read back from Lua: NearestExpiry = %s, want none known yet", got)
	}
	restarted.Held(status.ConfigHash, certs)
	if got := restarted.NearestExpiry(); !got.Equal(all[0].NotAfter) {
		t.Errorf("the same list after the read back: NearestExpiry = %s, want %s", got, all[0].NotAfter)
	}

	// A certificate with an earlier expiry pushed: NearestExpiry follows.
	soonest := testCertificate(t, "ns/sooner", "sooner.example.com", time.Now().Add(24*time.Hour))
	sooner := model.ListOf(append(slices.Clone(all), soonest)...)
	p = plan.Compute(l.Held(status.ConfigHash, sooner), plan.Next{Config: cfg, Certificates: sooner})
	if _, err := l.Execute(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if got := l.NearestExpiry(); !got.Equal(soonest.NotAfter) {
		t.Errorf("after a sooner one: NearestExpiry = %s, want %s", got, soonest.NotAfter)
	}
}
