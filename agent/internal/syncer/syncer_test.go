package syncer

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
)

// Every problem, from the source or the model, is logged once when it
// appears, not on every sync, and again if it comes back after a fix.
func TestProblemsLoggedOnce(t *testing.T) {
	var logs strings.Builder
	s := New(nil, nil, Options{}, slog.New(slog.NewTextHandler(&logs, nil)))
	file := model.Problem{Kind: "File", Name: "/m/x.yaml#1", Reason: "unknown kind Pod"}
	ing := model.Problem{Kind: "Ingress", Namespace: "default", Name: "a", Reason: "bad path"}
	for range 3 {
		s.reportProblems([]model.Problem{file, ing})
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 2 {
		t.Fatalf("%d warnings, want 2:\n%s", got, logs.String())
	}
	for _, want := range []string{"x.yaml#1", "Ingress default/a", "bad path"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not name %q:\n%s", want, logs.String())
		}
	}
	s.reportProblems([]model.Problem{ing})
	s.reportProblems([]model.Problem{file, ing})
	if got := strings.Count(logs.String(), "level=WARN"); got != 3 {
		t.Errorf("%d warnings after the file problem came back, want 3:\n%s", got, logs.String())
	}
}

// fakeSource is a Source whose changes the test triggers.
type fakeSource struct {
	changed func(source.Kind)
	snap    model.Snapshot
}

func (f *fakeSource) Start(_ context.Context, changed func(source.Kind)) error {
	f.changed = changed
	return nil
}

func (f *fakeSource) Snapshot() (model.Snapshot, []model.Problem) { return f.snap, nil }

// A burst of 1,000 changes costs a handful of syncs, not 1,000.
func TestBurstCoalesces(t *testing.T) {
	shared := t.TempDir()
	src := &fakeSource{}
	nginx := &apply.Nginx{SharedDir: shared, Lua: apply.NewLuaClient(filepath.Join(shared, "none.sock"))}
	s := New(src, nginx, Options{Render: render.Settings{SharedDir: shared, HTTPPort: 8080, HTTPSPort: 8443, WorkerProcesses: "1"}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	waitSyncs := func(atLeast int) int {
		deadline := time.Now().Add(5 * time.Second)
		for {
			// Quiet for 300 ms: the loop has finished with the burst.
			n := s.State().Syncs
			time.Sleep(300 * time.Millisecond)
			if m := s.State().Syncs; m == n && m >= atLeast {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("syncs did not settle: %d", s.State().Syncs)
			}
		}
	}
	before := waitSyncs(1)
	for range 1000 {
		src.changed(source.KindEndpointSlice)
	}
	after := waitSyncs(before + 1)
	if n := after - before; n > 5 {
		t.Errorf("1,000 changes cost %d syncs, want at most 5", n)
	}
}
