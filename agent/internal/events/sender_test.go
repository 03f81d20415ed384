package events

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
)

const testTimeout = 10 * time.Second

// eventually fails t unless cond becomes true within testTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, testTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeClient is a kubeclient.Interface of which only Events works.
type fakeClient struct {
	kubeclient.Interface // nil: the Recorder asks only for Events
	events               *fakeEvents
}

func (c fakeClient) Events(namespace string) kubeclient.Events {
	return namespacedEvents{c.events, namespace}
}

// fakeEvents creates Events in memory; create, if set, answers each call
// (call counts from 1 for each regarding name) and may fail it.
type fakeEvents struct {
	create func(ctx context.Context, ev *eventsv1.Event, call int) error

	mu      sync.Mutex
	calls   map[string]int // by regarding name
	created []*eventsv1.Event
}

func newFakeEvents(create func(ctx context.Context, ev *eventsv1.Event, call int) error) *fakeEvents {
	return &fakeEvents{create: create, calls: map[string]int{}}
}

func (f *fakeEvents) client() kubeclient.Interface { return fakeClient{events: f} }

func (f *fakeEvents) callsOf(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

// createdNames returns the regarding names of the Events created, in order.
func (f *fakeEvents) createdNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ev := range f.created {
		out = append(out, ev.Regarding.Name)
	}
	return out
}

type namespacedEvents struct {
	f         *fakeEvents
	namespace string
}

func (n namespacedEvents) Create(ctx context.Context, ev *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	if ev.Namespace != n.namespace {
		return nil, fmt.Errorf("event in %q created through Events(%q)", ev.Namespace, n.namespace)
	}
	f := n.f
	f.mu.Lock()
	f.calls[ev.Regarding.Name]++
	call := f.calls[ev.Regarding.Name]
	f.mu.Unlock()
	if f.create != nil {
		if err := f.create(ctx, ev, call); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, ev.DeepCopy())
	return ev, nil
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// TestEventFields checks each field of an Event as client-go's recorder
// fills it.
func TestEventFields(t *testing.T) {
	r := New(nil, Options{Controller: "example.com/controller"})
	ing := ingress("app", "1")
	problem := model.Problem{Kind: "Ingress", Namespace: "web", Name: "app", Reason: "spec.rules[0].host: " + strings.Repeat("é", 1000)}
	before := time.Now()
	r.Problems([]model.Problem{problem}, cluster{"web/app": ing}.lookup)
	r.Served(ing)
	after := time.Now()
	got := drain(r)
	if len(got) != 2 {
		t.Fatalf("%d events, want 2", len(got))
	}
	hostname, _ := os.Hostname()
	for i, ev := range got {
		if !strings.HasPrefix(ev.Name, "app.") {
			t.Errorf("event %d: name %q, want app.<hex>", i, ev.Name)
		} else if _, err := strconv.ParseUint(strings.TrimPrefix(ev.Name, "app."), 16, 64); err != nil {
			t.Errorf("event %d: name %q, want app.<hex>: %v", i, ev.Name, err)
		}
		if ev.Namespace != "web" {
			t.Errorf("event %d: namespace %q, want web", i, ev.Namespace)
		}
		if ev.EventTime.Time.Before(before) || ev.EventTime.Time.After(after) {
			t.Errorf("event %d: eventTime %s, not between %s and %s", i, ev.EventTime, before, after)
		}
		if ev.ReportingController != "example.com/controller" || ev.ReportingInstance != "example.com/controller-"+hostname {
			t.Errorf("event %d: reported by %q/%q", i, ev.ReportingController, ev.ReportingInstance)
		}
		if ev.Action != Action || ev.Series != nil || ev.Related != nil {
			t.Errorf("event %d: action %q, series %v, related %v", i, ev.Action, ev.Series, ev.Related)
		}
		ref := ev.Regarding
		if ref.Kind != "Ingress" || ref.APIVersion != "networking.k8s.io/v1" || ref.Namespace != "web" || ref.Name != "app" || ref.UID != "1" {
			t.Errorf("event %d: regarding %+v, want Ingress web/app", i, ref)
		}
	}
	if got[0].Name == got[1].Name {
		t.Errorf("two events named %s", got[0].Name)
	}
	if ev := got[0]; ev.Type != corev1.EventTypeWarning || ev.Reason != ReasonProblem ||
		ev.Regarding.FieldPath != "spec.rules[0].host" || ev.Note != truncate(problem.Reason) || len(ev.Note) > noteLimit {
		t.Errorf("problem event: %s %s %s, note of %d bytes", ev.Type, ev.Reason, ev.Regarding.FieldPath, len(ev.Note))
	}
	if ev := got[1]; ev.Type != corev1.EventTypeNormal || ev.Reason != ReasonSync || ev.Regarding.FieldPath != "" {
		t.Errorf("served event: %s %s %q", ev.Type, ev.Reason, ev.Regarding.FieldPath)
	}

	// A cluster-scoped object's Events go in the default namespace; a
	// long name is cut to leave room for the suffix.
	long := strings.Repeat("a", 250) + "-b"
	r.emit(&corev1.ObjectReference{Kind: "IngressClass", Name: long}, corev1.EventTypeNormal, ReasonSync, "note")
	r.emit(&corev1.ObjectReference{Kind: "IngressClass", Name: long}, corev1.EventTypeNormal, ReasonSync, "note")
	got = drain(r)
	if len(got) != 2 || got[0].Name == got[1].Name {
		t.Fatalf("events %v, want two of different names", got)
	}
	for _, ev := range got {
		if ev.Namespace != metav1.NamespaceDefault {
			t.Errorf("event on a cluster-scoped object in %q, want default", ev.Namespace)
		}
		if errs := validation.IsDNS1123Subdomain(ev.Name); len(errs) > 0 || !strings.HasPrefix(ev.Name, "aaaa") {
			t.Errorf("event name %q: %v", ev.Name, errs)
		}
	}
}

// TestSend creates the Events in a fake clientset and reads them back.
func TestSend(t *testing.T) {
	cs := fake.NewClientset()
	r := New(kubeclienttest.Wrap(cs), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err == nil {
		t.Error("second Start: no error")
	}
	objects := cluster{"web/app": ingress("app", "1")}
	p1 := model.Problem{Kind: "Ingress", Namespace: "web", Name: "app", Reason: `spec.rules[0].http.paths[0].backend: service "x" not found; the path answers 503`}
	p2 := model.Problem{Kind: "Ingress", Namespace: "web", Name: "app", Reason: `spec: has no rules and no default backend; nothing to serve`}
	r.Problems([]model.Problem{p1, p2}, objects.lookup)
	r.Served(objects["web/app"])

	want := []string{
		"Normal Sync web/app : Ingress web/app is served",
		"Warning Problem web/app spec.rules[0].http.paths[0].backend: " + p1.Reason,
		"Warning Problem web/app spec: " + p2.Reason,
	}
	var summary []string
	eventually(t, "three events created", func() bool {
		list, err := cs.EventsV1().Events("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		summary = summary[:0]
		for _, ev := range list.Items {
			ref := ev.Regarding
			summary = append(summary, fmt.Sprintf("%s %s %s/%s %s: %s", ev.Type, ev.Reason, ref.Namespace, ref.Name, ref.FieldPath, ev.Note))
		}
		slices.Sort(summary)
		return len(summary) >= len(want)
	})
	if !slices.Equal(summary, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(summary, "\n"), strings.Join(want, "\n"))
	}
}

// TestStartSendsQueued: Events emitted before Start wait in the queue and
// are sent, in order, once it is called.
func TestStartSendsQueued(t *testing.T) {
	f := newFakeEvents(nil)
	r := New(f.client(), Options{})
	for i := range 3 {
		r.Served(ingress("app"+strconv.Itoa(i), "1"))
	}
	time.Sleep(20 * time.Millisecond)
	if got := f.createdNames(); len(got) != 0 {
		t.Fatalf("events created before Start: %v", got)
	}
	if n := r.queued(); n != 3 {
		t.Fatalf("%d events queued, want 3", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "queued events sent", func() bool { return len(f.createdNames()) == 3 })
	if got, want := f.createdNames(), []string{"app0", "app1", "app2"}; !slices.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}
}

// TestQueueFullDrops: while the API server does not answer, a full queue
// drops Events and the callers go on; the queued ones are sent once it
// answers.
func TestQueueFullDrops(t *testing.T) {
	answer := make(chan struct{})
	f := newFakeEvents(func(ctx context.Context, _ *eventsv1.Event, _ int) error {
		select {
		case <-answer:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	var logs logBuffer
	r := newRecorder(f.client(), Options{Logger: logs.logger()}, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.Served(ingress("app0", "1"))
	eventually(t, "the sender waiting for the API server", func() bool { return f.callsOf("app0") == 1 })

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 100; i++ {
			r.Served(ingress("app"+strconv.Itoa(i), "1"))
			r.Problems([]model.Problem{{Kind: "Ingress", Namespace: "web", Name: "app" + strconv.Itoa(i), Reason: "spec: bad"}},
				func(_, name string) runtime.Object { return ingress(name, "1") })
		}
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("emitting blocked while the API server did not answer")
	}
	if n := r.queued(); n != 4 {
		t.Errorf("%d events queued, want 4 (2 Normal, 2 Warning)", n)
	}
	for _, eventType := range []string{"Normal", "Warning"} {
		if n := logs.count("event queue full: dropping " + eventType + " events"); n != 1 {
			t.Errorf("%d warnings about the full %s queue, want 1 for the run of drops:\n%s", n, eventType, logs.String())
		}
	}

	close(answer)
	eventually(t, "the queued events sent", func() bool { return len(f.createdNames()) == 5 })
	if got, want := f.createdNames(), []string{"app0", "app1", "app2", "app1", "app2"}; !slices.Equal(got, want) {
		t.Errorf("created %v, want %v (the first, then the two queued Warnings, then the two Normals)", got, want)
	}
}

// TestWarningsGoFirst: a flood of Normal "Sync" Events (an agent starting
// with many Ingresses) neither drops a Warning nor sends it after them.
func TestWarningsGoFirst(t *testing.T) {
	f := newFakeEvents(nil)
	r := newRecorder(f.client(), Options{}, 3)
	for i := range 10 {
		r.Served(ingress("app"+strconv.Itoa(i), "1"))
	}
	r.Problems([]model.Problem{{Kind: "Ingress", Namespace: "web", Name: "broken", Reason: "spec: bad"}},
		func(_, name string) runtime.Object { return ingress(name, "1") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the queued events sent", func() bool { return len(f.createdNames()) == 4 })
	if got, want := f.createdNames(), []string{"broken", "app0", "app1", "app2"}; !slices.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}
}

// TestDropRuns: each run of drops logs one warning.
func TestDropRuns(t *testing.T) {
	var logs logBuffer
	r := newRecorder(nil, Options{Logger: logs.logger()}, 2)
	emit := func(n int) {
		for range n {
			r.emit(&corev1.ObjectReference{Kind: "Ingress", Namespace: "web", Name: "app"}, corev1.EventTypeNormal, ReasonSync, "note")
		}
	}
	emit(5) // 2 queued, 3 dropped
	if n := logs.count("event queue full"); n != 1 {
		t.Fatalf("%d warnings after the first run of drops, want 1", n)
	}
	drain(r)
	emit(1) // queued: the run ends
	emit(4) // 1 queued, 3 dropped
	if n := logs.count("event queue full"); n != 2 {
		t.Errorf("%d warnings after the second run of drops, want 2", n)
	}
	if got := len(drain(r)); got != 2 {
		t.Errorf("%d events queued, want 2", got)
	}
}

// TestRetry: an error that may pass is tried again, a few times; one the
// API server would answer again is not; a Create that hangs times out.
func TestRetry(t *testing.T) {
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	unavailable := apierrors.NewServiceUnavailable("down")
	for _, tc := range []struct {
		name      string
		errs      []error // answers of the calls in turn; past the end: the last
		hang      bool    // each call waits for its context
		wantCalls int
		created   bool
	}{
		{name: "created", errs: []error{nil}, wantCalls: 1, created: true},
		{name: "unavailable, then created", errs: []error{unavailable, fmt.Errorf("connection refused"), nil}, wantCalls: 3, created: true},
		{name: "unavailable throughout", errs: []error{unavailable}, wantCalls: 3},
		{name: "already exists", errs: []error{apierrors.NewAlreadyExists(gr, "app.1")}, wantCalls: 1},
		{name: "invalid", errs: []error{apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "app.1", field.ErrorList{field.Required(field.NewPath("action"), "")})}, wantCalls: 1},
		{name: "forbidden", errs: []error{apierrors.NewForbidden(gr, "app.1", fmt.Errorf("no"))}, wantCalls: 1},
		{name: "hangs", hang: true, wantCalls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEvents(func(ctx context.Context, ev *eventsv1.Event, call int) error {
				if ev.Regarding.Name != "app" {
					return nil // the marker that the sender is done with app
				}
				if tc.hang {
					<-ctx.Done()
					return ctx.Err()
				}
				return tc.errs[min(call, len(tc.errs))-1]
			})
			r := New(f.client(), Options{})
			r.tries, r.firstBackoff, r.maxBackoff, r.timeout = 3, time.Millisecond, 2*time.Millisecond, 20*time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			r.Served(ingress("app", "1"))
			r.Served(ingress("next", "1"))
			eventually(t, "the next event sent", func() bool { return f.callsOf("next") == 1 })
			if got := f.callsOf("app"); got != tc.wantCalls {
				t.Errorf("%d calls, want %d", got, tc.wantCalls)
			}
			if got := slices.Contains(f.createdNames(), "app"); got != tc.created {
				t.Errorf("created %v, want %v", got, tc.created)
			}
		})
	}
}

// TestStop: the sender stops when its context ends, even while it waits
// to try again, and the Events emitted after that are discarded.
func TestStop(t *testing.T) {
	f := newFakeEvents(func(context.Context, *eventsv1.Event, int) error {
		return apierrors.NewServiceUnavailable("down")
	})
	r := New(f.client(), Options{})
	r.firstBackoff = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.Served(ingress("app", "1"))
	eventually(t, "the first try", func() bool { return f.callsOf("app") == 1 })
	cancel()
	eventually(t, "the sender stopped", r.stopped.Load)
	r.Served(ingress("other", "1"))
	if n := r.queued(); n != 0 {
		t.Errorf("%d events queued after the stop, want 0", n)
	}
	if got := f.callsOf("app"); got != 1 {
		t.Errorf("%d calls, want 1", got)
	}
}
