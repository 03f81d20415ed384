package syncer

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// The sync log line says how the model was computed: path=full with the
// reason (the first build, an IngressClass changed), path=incremental for
// a new Ingress (only it is built, and the line counts what was built),
// path=fast when only endpoints moved;
// and each model is the one a full build gives.
func TestSyncLogPath(t *testing.T) {
	var logs strings.Builder
	src := &indexSource{fakeSource: fakeSource{snap: oneIngressSnapshot("10.0.0.1")}}
	s := New(src, nil, Options{IngressClass: "restysync"}, slog.New(slog.NewTextHandler(&logs, nil)))
	step := func(kinds map[source.Kind]bool, want ...string) {
		t.Helper()
		logs.Reset()
		next, problems, path := s.model(kinds)
		s.logSync(next, len(problems), path, "", syncResult{}, time.Now(), nil)
		for _, w := range want {
			if !strings.Contains(logs.String(), w) {
				t.Errorf("sync log line %q lacks %q", logs.String(), w)
			}
		}
		if path != "fast" {
			if full, _ := model.Build(s.builtSnap); !slices.EqualFunc(next.Servers.Slice(), full.Servers.Slice(), func(a, b *model.Server) bool { return a.Host == b.Host }) {
				t.Errorf("servers %v, a full build's %v", next.Servers, full.Servers)
			}
		}
	}
	step(map[source.Kind]bool{source.KindIngress: true}, "path=full", `path_reason="first build"`)

	// A second Ingress: built alone.
	second := src.snap.Ingresses.At(0).DeepCopy()
	second.Name, second.Spec.Rules[0].Host = "second", "second.test"
	src.snap.Ingresses = model.ListOf(append(src.snap.Ingresses.Slice(), second)...)
	step(map[source.Kind]bool{source.KindIngress: true}, "path=incremental", "servers=2",
		"built_islands=1 built_ingresses=1 built_httproutes=0 built_globals=false")
	if strings.Contains(logs.String(), "path_reason") {
		t.Errorf("an incremental sync names a reason: %q", logs.String())
	}

	// An IngressClass: everything.
	class := src.snap.IngressClasses.At(0).DeepCopy()
	src.snap.IngressClasses = model.ListOf(class)
	step(map[source.Kind]bool{source.KindIngressClass: true}, "path=full", `path_reason="an IngressClass changed"`, "servers=2")

	// Endpoints only.
	src.changed = []source.ServiceKey{{Namespace: "default", Name: "web"}}
	step(map[source.Kind]bool{source.KindEndpointSlice: true}, "path=fast")
	if strings.Contains(logs.String(), "path_reason") {
		t.Errorf("a fast sync names a reason: %q", logs.String())
	}
}

// A sync that builds the whole model (the first, an IngressClass change)
// is lean (Options.LeanFullSync: the agent lowers its GC percent), from
// before its build to the end of its render; an incremental or fast sync
// is not.
func TestLeanFullSyncOnlyForWholeBuilds(t *testing.T) {
	src := &indexSource{fakeSource: fakeSource{snap: oneIngressSnapshot("10.0.0.1")}}
	lean, ended := 0, 0
	s := New(src, nil, Options{IngressClass: "restysync", LeanFullSync: func() func() {
		lean++
		return func() { ended++ }
	}}, slog.New(slog.DiscardHandler))
	step := func(kinds map[source.Kind]bool, wantPath string, wantLean int) {
		t.Helper()
		before := lean
		s.model(kinds)
		if lean > before && s.buildPath.Incremental {
			t.Errorf("after a %s sync: lean, but the build was incremental", wantPath)
		}
		if lean != wantLean {
			t.Errorf("after a %s sync: LeanFullSync called %d times, want %d", wantPath, lean, wantLean)
		}
		s.endLean() // as sync does when it ends
		if ended != lean {
			t.Errorf("after a %s sync: %d lean syncs ended of %d", wantPath, ended, lean)
		}
	}
	step(map[source.Kind]bool{source.KindIngress: true}, "first", 1)

	second := src.snap.Ingresses.At(0).DeepCopy()
	second.Name, second.Spec.Rules[0].Host = "second", "second.test"
	src.snap.Ingresses = model.ListOf(append(src.snap.Ingresses.Slice(), second)...)
	step(map[source.Kind]bool{source.KindIngress: true}, "incremental", 1)

	src.snap.IngressClasses = model.ListOf(src.snap.IngressClasses.At(0).DeepCopy())
	step(map[source.Kind]bool{source.KindIngressClass: true}, "whole", 2)

	src.changed = []source.ServiceKey{{Namespace: "default", Name: "web"}}
	step(map[source.Kind]bool{source.KindEndpointSlice: true}, "fast", 2)
}
