package syncer

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	changed func(source.Change)
	snap    model.Snapshot
}

func (f *fakeSource) Start(_ context.Context, changed func(source.Change)) error {
	f.changed = changed
	return nil
}

func (f *fakeSource) Snapshot() (model.Snapshot, []model.Problem) { return f.snap, nil }

// A burst of 1,000 changes costs a handful of syncs, not 1,000 (and
// OnListed was called once, after the source's listing).
func TestBurstCoalesces(t *testing.T) {
	shared := t.TempDir()
	src := &fakeSource{}
	nginx := &apply.Nginx{SharedDir: shared, Lua: apply.NewLuaClient(filepath.Join(shared, "none.sock"))}
	var listed atomic.Int32
	s := New(src, nginx, Options{Render: render.Settings{SharedDir: shared, HTTPPort: 8080, HTTPSPort: 8443, WorkerProcesses: "1"},
		OnListed: func() { listed.Add(1) }},
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
		src.changed(source.Change{Kind: source.KindEndpointSlice})
	}
	after := waitSyncs(before + 1)
	if n := after - before; n > 5 {
		t.Errorf("1,000 changes cost %d syncs, want at most 5", n)
	}
	if n := listed.Load(); n != 1 {
		t.Errorf("OnListed called %d times, want once", n)
	}
}

// indexSource is a fakeSource that also tracks changed Services.
type indexSource struct {
	fakeSource
	snapshots int
	changed   []source.ServiceKey
}

func (f *indexSource) Snapshot() (model.Snapshot, []model.Problem) {
	f.snapshots++
	return f.snap, nil
}

func (f *indexSource) TakeChangedServices() []source.ServiceKey {
	out := f.changed
	f.changed = nil
	return out
}

func (f *indexSource) ServiceEndpoints(namespace, name string) (*model.Service, []*discoveryv1.EndpointSlice) {
	var svc *model.Service
	for s := range f.snap.Services.All() {
		if s.Namespace == namespace && s.Name == name {
			svc = s
		}
	}
	var out []*discoveryv1.EndpointSlice
	for sl := range f.snap.EndpointSlices.All() {
		if sl.Namespace == namespace && sl.Labels[discoveryv1.LabelServiceName] == name {
			out = append(out, sl)
		}
	}
	return svc, out
}

// An EndpointSlice change resolves only that Service's backend again, with
// no snapshot and no full build; any other change builds everything.
func TestFastPathForEndpointsOnly(t *testing.T) {
	src := &indexSource{fakeSource: fakeSource{snap: oneIngressSnapshot("10.0.0.1")}}
	s := New(src, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))

	m, _, path := s.model(map[source.Kind]bool{source.KindIngress: true})
	if path != "full" || src.snapshots != 1 || m.Backends.Len() != 1 || m.Backends.At(0).Endpoints[0].Address != "10.0.0.1" {
		t.Fatalf("first build: path %s, snapshots %d, model %+v", path, src.snapshots, m)
	}

	src.snap = oneIngressSnapshot("10.0.0.2")
	src.changed = []source.ServiceKey{{Namespace: "default", Name: "web"}}
	m, _, path = s.model(map[source.Kind]bool{source.KindEndpointSlice: true})
	if path != "fast" || src.snapshots != 1 {
		t.Fatalf("endpoint change: path %s, snapshots %d", path, src.snapshots)
	}
	if got := m.Backends.At(0).Endpoints; len(got) != 1 || got[0].Address != "10.0.0.2" {
		t.Errorf("fast path endpoints %+v, want 10.0.0.2", got)
	}
	if m.Servers.Len() != 1 {
		t.Errorf("fast path lost the servers: %+v", m.Servers)
	}

	m, _, path = s.model(map[source.Kind]bool{source.KindEndpointSlice: true, source.KindService: true})
	if path != "full" || src.snapshots != 2 || m.Backends.At(0).Endpoints[0].Address != "10.0.0.2" {
		t.Errorf("service change: path %s, snapshots %d", path, src.snapshots)
	}
}

// The fast path gives the model a full build of the new endpoints gives,
// and never changes a model State handed out under its reader.
func TestFastPathMatchesFullBuildAndKeepsHandedOutModel(t *testing.T) {
	src := &indexSource{fakeSource: fakeSource{snap: oneIngressSnapshot("10.0.0.1")}}
	s := New(src, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))
	full := func() model.Model {
		t.Helper()
		fresh := New(&fakeSource{snap: src.snap}, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))
		m, _, path := fresh.model(map[source.Kind]bool{source.KindIngress: true})
		if path != "full" {
			t.Fatalf("fresh build: path %s", path)
		}
		return m
	}
	m, _, _ := s.model(map[source.Kind]bool{source.KindIngress: true})
	s.update(func(st *State) { st.Model = m })

	read := s.State().Model
	kept := full()
	for round, address := range []string{"10.0.0.2", "10.0.0.3"} {
		// Round 0: State handed the model out; round 1: nobody read it since.
		src.snap = oneIngressSnapshot(address)
		src.changed = []source.ServiceKey{{Namespace: "default", Name: "web"}}
		next, _, path := s.model(map[source.Kind]bool{source.KindEndpointSlice: true})
		s.update(func(st *State) { st.Model = next })
		if path != "fast" {
			t.Fatalf("round %d: path %s, want fast", round, path)
		}
		if want := full(); !reflect.DeepEqual(next, want) {
			t.Errorf("round %d: the fast path's model differs from a full build:\n%+v\nwant\n%+v", round, next.Backends, want.Backends)
		}
		if !reflect.DeepEqual(read, kept) {
			t.Errorf("round %d: the model State handed out changed under its reader: %+v", round, read.Backends)
		}
	}
}

func oneIngressSnapshot(address string) model.Snapshot {
	prefix, class, ready := networkingv1.PathTypePrefix, "restysync", true
	port, portName := int32(8080), "http"
	return model.Snapshot{
		IngressClasses: model.ListOf(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
			Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}}),
		Ingresses: model.ListOf(&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: "web.test",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}),
		Services: model.ListOf(model.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})),
		EndpointSlices: model.ListOf(&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{address}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}),
	}
}

// Endpoint changes wait Coalesce for more; any other change waits the
// longer StructureCoalesce while changes keep coming, Coalesce after a
// quiet spell.
func TestQuietPeriod(t *testing.T) {
	s := New(&fakeSource{}, nil, Options{}, slog.New(slog.DiscardHandler))
	s.lastSync = time.Now()
	s.changed(source.Change{Kind: source.KindEndpointSlice})
	if got := s.quietPeriod(); got != 5*time.Millisecond {
		t.Errorf("only EndpointSlices: %s, want 5ms", got)
	}
	s.changed(source.Change{Kind: source.KindService})
	if got := s.quietPeriod(); got != 25*time.Millisecond {
		t.Errorf("a Service too, a sync just now: %s, want 25ms", got)
	}
	s.lastSync = time.Now().Add(-time.Second)
	if got := s.quietPeriod(); got != 5*time.Millisecond {
		t.Errorf("a Service after a quiet second: %s, want 5ms", got)
	}
	s.lastSync = time.Now()
	s.takeKinds()
	if got := s.quietPeriod(); got != 5*time.Millisecond {
		t.Errorf("after the sync took them: %s, want 5ms", got)
	}
}

// A change that closes a batch the source reported whole
// (source.Change.Last, the file source's) goes at once after a quiet
// spell, with no Coalesce wait; one that does not, or a batch while
// changes keep coming, waits as before.
func TestQuietPeriodAfterABatch(t *testing.T) {
	s := New(&fakeSource{}, nil, Options{}, slog.New(slog.DiscardHandler))
	s.lastSync = time.Now().Add(-time.Second)
	s.changed(source.Change{Kind: source.KindIngress, Namespace: "default", Name: "web"})
	if got := s.quietPeriod(); got != 5*time.Millisecond {
		t.Errorf("a change, more may follow: %s, want 5ms", got)
	}
	s.changed(source.Change{Kind: source.KindService, Namespace: "default", Name: "web", Last: true})
	if got := s.quietPeriod(); got != 0 {
		t.Errorf("the batch's last change after a quiet second: %s, want 0", got)
	}
	if _, objects := s.takeKinds(); objects != "Ingress default/web,Service default/web" {
		t.Errorf("changed objects %q: Last is not part of a change's name", objects)
	}
	s.lastSync = time.Now()
	s.changed(source.Change{Kind: source.KindIngress, Namespace: "default", Name: "web", Last: true})
	if got := s.quietPeriod(); got != 25*time.Millisecond {
		t.Errorf("a batch while changes keep coming: %s, want 25ms", got)
	}
	s.takeKinds()
	s.changed(source.Change{Kind: source.KindEndpointSlice, Namespace: "default", Name: "web-1", Last: true})
	if got := s.quietPeriod(); got != 0 {
		t.Errorf("a batch of EndpointSlices: %s, want 0", got)
	}
	s.changed(source.Change{Kind: source.KindEndpointSlice, Namespace: "default", Name: "web-2"})
	if got := s.quietPeriod(); got != 5*time.Millisecond {
		t.Errorf("a change after the batch: %s, want 5ms", got)
	}
}

// The sync log line names the first objects that changed, each once, then
// how many more did; and, for a reload, why.
func TestSyncLogNamesChangesAndReloadReason(t *testing.T) {
	var logs strings.Builder
	s := New(&fakeSource{}, nil, Options{}, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, c := range []source.Change{
		{Kind: source.KindIngress, Namespace: "default", Name: "web"},
		{Kind: source.KindService, Namespace: "default", Name: "web"},
		{Kind: source.KindIngress, Namespace: "default", Name: "web"}, // again: counted once
		{Kind: source.KindIngressClass, Name: "restysync"},
		{Kind: source.KindEndpointSlice, Namespace: "default", Name: "web-1"},
		{Kind: source.KindEndpointSlice, Namespace: "default", Name: "web-2"},
	} {
		s.changed(c)
	}
	_, objects := s.takeKinds()
	if want := "Ingress default/web,Service default/web,IngressClass restysync +2 more"; objects != want {
		t.Errorf("changed objects %q, want %q", objects, want)
	}
	if _, again := s.takeKinds(); again != "" {
		t.Errorf("after a sync took them: %q, want none", again)
	}

	result := syncResult{Result: apply.Result{Outcome: apply.Outcome{Reloaded: true},
		ReloadReasons: []string{"1 new profile", render.ReasonCertificateFile}}}
	s.logSync(model.Model{}, 0, "full", objects, result, time.Now(), nil)
	line := logs.String()
	for _, want := range []string{`action=reload path=full changed="Ingress default/web,Service default/web,IngressClass restysync +2 more" reason="1 new profile,certificate file" ingresses=0 `} {
		if !strings.Contains(line, want) {
			t.Errorf("sync log line %q lacks %q", line, want)
		}
	}

	logs.Reset()
	s.changed(source.Change{Kind: source.KindEndpointSlice, Namespace: "default", Name: "web-1"})
	_, objects = s.takeKinds()
	result = syncResult{Result: apply.Result{Outcome: apply.Outcome{Pushed: true}}}
	s.logSync(model.Model{}, 0, "fast", objects, result, time.Now(), nil)
	if want := "action=push path=fast changed=\"EndpointSlice default/web-1\" ingresses="; !strings.Contains(logs.String(), want) || strings.Contains(logs.String(), "reason=") {
		t.Errorf("fast sync log line %q: want %q and no reason", logs.String(), want)
	}
}
