package syncer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
)

// recordingMetrics keeps every report of the loop.
type recordingMetrics struct {
	mu          sync.Mutex
	syncs       []string // "path outcome"
	reloads     int
	unconfirmed int
	pushes      []string
	propagated  []time.Duration
	rejected    []string
}

func (m *recordingMetrics) ValidationFailed(validator string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rejected = append(m.rejected, validator)
}

func (m *recordingMetrics) Synced(path, outcome string, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncs = append(m.syncs, path+" "+outcome)
}

func (m *recordingMetrics) Reloaded(time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reloads++
}

func (m *recordingMetrics) ReloadUnconfirmed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unconfirmed++
}

func (m *recordingMetrics) Pushed(kind string, _ int, _ time.Duration, _ error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pushes = append(m.pushes, kind)
}

func (m *recordingMetrics) Propagated(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.propagated = append(m.propagated, d)
}

// Event-to-push runs from the first event of a batch; a failed sync keeps
// it pending; a sync that applies nothing drops it.
func TestPropagationTiming(t *testing.T) {
	rec := &recordingMetrics{}
	s := New(nil, nil, Options{Metrics: rec}, slog.New(slog.DiscardHandler))

	s.changed(source.Change{Kind: source.KindEndpointSlice})
	time.Sleep(20 * time.Millisecond)
	s.changed(source.Change{Kind: source.KindEndpointSlice}) // same batch: the first one counts
	s.takeKinds()
	s.recordSync("fast", syncResult{}, errors.New("lua down"), time.Now())
	if len(rec.propagated) != 0 {
		t.Fatalf("a failed sync reported propagation %v", rec.propagated)
	}
	s.changed(source.Change{Kind: source.KindService}) // a later event does not reset the pending one
	s.takeKinds()
	s.recordSync("full", syncResult{Result: apply.Result{Outcome: apply.Outcome{Pushed: true}}}, nil, time.Now())
	if len(rec.propagated) != 1 || rec.propagated[0] < 20*time.Millisecond {
		t.Fatalf("propagation %v, want one of at least 20ms", rec.propagated)
	}
	if !s.pendingEvent.IsZero() {
		t.Error("the applied event is still pending")
	}

	s.changed(source.Change{Kind: source.KindService})
	s.takeKinds()
	s.recordSync("full", syncResult{}, nil, time.Now()) // nothing to do
	s.takeKinds()
	s.recordSync("full", syncResult{Result: apply.Result{Outcome: apply.Outcome{Reloaded: true}}}, nil, time.Now()) // no event: a status check
	if len(rec.propagated) != 1 {
		t.Errorf("propagation reported without an applied event: %v", rec.propagated)
	}
	want := []string{"fast error", "full push", "full nothing", "full reload"}
	if len(rec.syncs) != len(want) {
		t.Fatalf("syncs %v, want %v", rec.syncs, want)
	}
	for i := range want {
		if rec.syncs[i] != want[i] {
			t.Errorf("syncs %v, want %v", rec.syncs, want)
		}
	}
}

// The loop reports every sync, and State says when it last came round.
func TestLoopReportsSyncs(t *testing.T) {
	shared := t.TempDir()
	rec := &recordingMetrics{}
	nginx := &apply.Nginx{SharedDir: shared, Lua: apply.NewLuaClient(filepath.Join(shared, "none.sock"))}
	s := New(&fakeSource{}, nginx, Options{
		Render:        render.Settings{SharedDir: shared, HTTPPort: 8080, HTTPSPort: 8443, WorkerProcesses: "1"},
		CheckInterval: 10 * time.Millisecond,
		Metrics:       rec,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.State()
		if st.Syncs > 0 && !st.LastLoop.IsZero() && st.LastLoop.After(st.LastSync) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %+v: want a sync and a later loop round", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.syncs) == 0 || rec.syncs[0] != "full wait-for-nginx" {
		t.Errorf("syncs %v, want the first to be \"full wait-for-nginx\" (no nginx here)", rec.syncs)
	}
	if s.State().WantedHash == "" {
		t.Error("State.WantedHash is empty after a render")
	}
}

// Each new Problem counts once as a validation failure of the agent, not
// again on every sync that still finds it.
func TestProblemsCountOnce(t *testing.T) {
	rec := &recordingMetrics{}
	s := New(nil, nil, Options{Metrics: rec}, slog.New(slog.DiscardHandler))
	bad := model.Problem{Kind: "Ingress", Namespace: "a", Name: "x", Reason: "bad path"}
	worse := model.Problem{Kind: "Ingress", Namespace: "a", Name: "y", Reason: "missing Service"}
	s.reportProblems([]model.Problem{bad})
	s.reportProblems([]model.Problem{bad})
	s.reportProblems([]model.Problem{bad, worse})
	s.reportProblems(nil)
	s.reportProblems([]model.Problem{bad}) // back after it was fixed: new again
	if want := []string{"agent", "agent", "agent"}; !slices.Equal(rec.rejected, want) {
		t.Errorf("validation failures %v, want %v", rec.rejected, want)
	}
}
