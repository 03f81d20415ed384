package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/quarantine"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
)

// refusedHost is the host whose locations the render of refuseHost fails.
const refusedHost = "refused.test"

// refuseHost makes render fail, for the test, on any model that serves
// refusedHost, as render.Quote fails on a value the model let through; it
// counts the renders.
func refuseHost(t *testing.T) *int {
	t.Helper()
	renders := 0
	renderRefuses = func(m model.Model, _ render.Settings) error {
		renders++
		for srv := range m.Servers.All() {
			if srv.Host == refusedHost {
				return fmt.Errorf("server %q: path \"/\" of %s: contains control character U+0085", srv.Host, srv.Locations[0].Ingress)
			}
		}
		return nil
	}
	t.Cleanup(func() { renderRefuses = nil })
	return &renders
}

// hostIngress is the web Ingress of oneIngressSnapshot as name, for host.
func hostIngress(name, host string) *networkingv1.Ingress {
	ing := oneIngressSnapshot("10.0.0.1").Ingresses.At(0).DeepCopy()
	ing.Name = name
	ing.Spec.Rules[0].Host = host
	return ing
}

// The culprits of a render failure are found by bisection, in about
// 2k·log2(n) renders; trusted Ingresses are never blamed, and when they do
// not render on their own nobody is.
func TestRenderFailuresBisects(t *testing.T) {
	renders := refuseHost(t)
	settings := render.Settings{SharedDir: t.TempDir(), HTTPPort: 8080, HTTPSPort: 8443}
	snap := oneIngressSnapshot("10.0.0.1")
	snap.IngressClass = "restysync"
	snap.Ingresses = model.List[*networkingv1.Ingress]{}
	for i := range 32 {
		host := fmt.Sprintf("ok-%02d.test", i)
		if i == 7 || i == 20 {
			host = refusedHost
		}
		snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), hostIngress(fmt.Sprintf("ing-%02d", i), host))...)
	}
	culprits, err := RenderFailures(snap, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(culprits)); !slices.Equal(got, []string{"default/ing-07", "default/ing-20"}) {
		t.Errorf("culprits %v, want default/ing-07 and default/ing-20", got)
	}
	if !strings.Contains(fmt.Sprint(culprits["default/ing-07"]), "U+0085") {
		t.Errorf("the culprit's reason %q is not render's", culprits["default/ing-07"])
	}
	if *renders > 2*2*5+2 {
		t.Errorf("%d renders to find 2 culprits among 32", *renders)
	}
	t.Logf("2 culprits among 32 Ingresses found in %d renders", *renders)

	// A trusted Ingress that fails is not blamed: the failure is not the
	// changed Ingresses'.
	_, err = RenderFailures(snap, settings, func(ing *networkingv1.Ingress) bool { return ing.Name == "ing-07" })
	if !errors.Is(err, quarantine.ErrNotIngresses) {
		t.Errorf("trusted Ingresses that fail: %v, want quarantine.ErrNotIngresses", err)
	}
}

// An Ingress render refuses is quarantined with a Problem that names it
// and render's reason, and everything else is served: a new Ingress of
// another tenant, and the fixed Ingress once it changes.
func TestRenderFailureQuarantines(t *testing.T) {
	refuseHost(t)
	shared := t.TempDir()
	settings := render.Settings{SharedDir: shared, HTTPPort: 8080, HTTPSPort: 8443, WorkerProcesses: "1"}
	snap := oneIngressSnapshot("10.0.0.1")
	snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), hostIngress("b", refusedHost))...)
	src := &fakeSource{snap: snap}
	// nginx does not answer: the sync renders, and leaves the config for
	// its start.
	nginx := &apply.Nginx{SharedDir: shared, Lua: apply.NewLuaClient(filepath.Join(shared, "none.sock"))}
	s := New(src, nginx, Options{IngressClass: "restysync", Render: settings}, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	hosts := func() []string {
		var out []string
		for srv := range s.State().Model.Servers.All() {
			out = append(out, srv.Host)
		}
		return out
	}

	if err := s.sync(ctx); err != nil {
		t.Fatalf("the sync failed with an Ingress render refuses: %v", err)
	}
	st := s.State()
	if !slices.Equal(st.Quarantined, []string{"default/b"}) {
		t.Errorf("quarantined %v, want [default/b]", st.Quarantined)
	}
	if got := hosts(); !slices.Equal(got, []string{"web.test"}) {
		t.Errorf("hosts %v, want [web.test]", got)
	}
	var problem string
	for _, p := range st.Problems {
		if p.Object() == "Ingress default/b" {
			problem = p.Reason
		}
	}
	for _, want := range []string{"quarantined: the agent cannot render nginx.conf", "U+0085", "not served"} {
		if !strings.Contains(problem, want) {
			t.Errorf("problem of default/b %q: want %q", problem, want)
		}
	}
	if st.WantedHash == "" {
		t.Error("no config was rendered")
	}

	// Another tenant's new Ingress is served while b stays out.
	snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), hostIngress("a2", "a2.test"))...)
	src.snap = snap
	s.changed(source.Change{Kind: source.KindIngress})
	if err := s.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hosts(); !slices.Equal(got, []string{"a2.test", "web.test"}) {
		t.Errorf("hosts %v, want a2.test and web.test", got)
	}
	if q := s.State().Quarantined; !slices.Equal(q, []string{"default/b"}) {
		t.Errorf("quarantined %v, want [default/b]", q)
	}

	// Fixed, b is tried again and served.
	fixed := snap.Ingresses.Slice()
	fixed[1] = hostIngress("b", "b.test")
	snap.Ingresses = model.ListOf(fixed...)
	src.snap = snap
	s.changed(source.Change{Kind: source.KindIngress})
	if err := s.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hosts(); !slices.Equal(got, []string{"a2.test", "b.test", "web.test"}) {
		t.Errorf("hosts %v after the fix, want a2.test, b.test and web.test", got)
	}
	if q := s.State().Quarantined; len(q) != 0 {
		t.Errorf("quarantined %v after the fix, want none", q)
	}
}
