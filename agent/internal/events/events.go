// Package events reports what the pipeline (source → model → plan →
// render/apply) did with each Ingress as events.k8s.io/v1 Events on it: a
// Warning for each Problem model.Build found, and a Normal event when an
// Ingress is first served.
//
// A problem is reported once, when it appears, not on every sync: the
// Recorder remembers the problems of the last call and reports only new
// ones, so a sync loop that runs many times a second makes no Event noise.
// client-go's EventBroadcaster merges Events that differ only in their note
// into one series, which would hide the second problem of an Ingress behind
// the first; each Event therefore names the field it is about
// (regarding.fieldPath, taken from the start of the problem's reason).
package events

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"

	"github.com/restysync/restysync/agent/internal/model"
)

// Reasons and action of the Events.
const (
	// ReasonProblem is the reason of the Warning about a Problem.
	ReasonProblem = "Problem"
	// ReasonSync is the reason of the Normal event of a newly served Ingress.
	ReasonSync = "Sync"
	// Action is the action of every Event.
	Action = "Sync"
)

// noteLimit is the longest note the API server accepts, in bytes.
const noteLimit = 1024

// Options configures a Recorder.
type Options struct {
	// Controller is the reportingController of the Events, a qualified name
	// (default model.ControllerName, "restysync.io/ingress-controller"). The
	// reportingInstance is Controller + "-" + the host name.
	Controller string
	// Logger receives each Event emitted, at Debug level (default: discarded).
	Logger *slog.Logger
}

// Recorder emits Events about Ingresses. Its methods may be called from
// several goroutines; they never block on the API server.
type Recorder struct {
	broadcaster events.EventBroadcaster // nil in unit tests
	recorder    events.EventRecorder
	logger      *slog.Logger

	mu       sync.Mutex
	problems map[model.Problem]bool // reported in the last call of Problems
	served   map[types.NamespacedName]types.UID
}

// New returns a Recorder that writes Events through client once Start has
// been called.
func New(client kubernetes.Interface, opts Options) *Recorder {
	controller := opts.Controller
	if controller == "" {
		controller = model.ControllerName
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	r := newRecorder(broadcaster.NewRecorder(scheme.Scheme, controller), opts.Logger)
	r.broadcaster = broadcaster
	return r
}

func newRecorder(rec events.EventRecorder, logger *slog.Logger) *Recorder {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Recorder{
		recorder: rec,
		logger:   logger,
		problems: map[model.Problem]bool{},
		served:   map[types.NamespacedName]types.UID{},
	}
}

// Start sends Events to the API server until ctx is done, then stops the
// broadcaster. Events emitted before Start are sent once it is called.
func (r *Recorder) Start(ctx context.Context) error {
	if r.broadcaster == nil {
		return nil
	}
	if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		r.broadcaster.Shutdown()
	}()
	return nil
}

// Problems emits a Warning Event on the Ingress of each problem of Kind
// "Ingress" that was not in the previous call; problems of other kinds are
// not about an Ingress and are skipped. A problem that disappears and comes
// back is reported again. lookup returns the Ingress namespace/name (nil if
// it does not exist: the problem is then tried again on the next call).
func (r *Recorder) Problems(problems []model.Problem, lookup func(namespace, name string) runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()

	next := make(map[model.Problem]bool, len(problems))
	for _, p := range problems {
		if p.Kind != "Ingress" {
			continue
		}
		if r.problems[p] || next[p] {
			next[p] = true
			continue
		}
		obj := lookup(p.Namespace, p.Name)
		if obj == nil {
			continue
		}
		ref, err := reference.GetPartialReference(scheme.Scheme, obj, fieldPath(p.Reason))
		if err != nil {
			r.logger.Warn("cannot refer to an object in an Event", "object", p.Object(), "error", err)
			continue
		}
		r.recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonProblem, Action, "%s", truncate(p.Reason))
		r.logger.Debug("event", "ingress", p.Namespace+"/"+p.Name, "type", corev1.EventTypeWarning, "note", p.Reason)
		next[p] = true
	}
	r.problems = next
}

// Forget drops the served Ingresses that lookup no longer finds, or finds
// with another UID, so Served reports a re-created Ingress again. It looks
// up every served Ingress: call it when Ingresses may have changed (a full
// sync), not on an endpoint change, where at 10,000 Ingresses it cost
// 10–20 ms a sync.
func (r *Recorder) Forget(lookup func(namespace, name string) runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, uid := range r.served {
		if current := lookup(key.Namespace, key.Name); current == nil || uidOf(current) != uid {
			delete(r.served, key)
		}
	}
}

// Served emits a Normal "Sync" Event on ing the first time it is served.
// An Ingress deleted and created again (a new UID) is served anew.
func (r *Recorder) Served(ing *networkingv1.Ingress) {
	if ing == nil {
		return
	}
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, ok := r.served[key]; ok && uid == ing.UID {
		return
	}
	r.served[key] = ing.UID
	r.recorder.Eventf(ing, nil, corev1.EventTypeNormal, ReasonSync, Action, "Ingress %s is served", key)
	r.logger.Debug("event", "ingress", key.String(), "type", corev1.EventTypeNormal, "reason", ReasonSync)
}

// reported returns the problems now remembered, for tests.
func (r *Recorder) reported() map[model.Problem]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.problems)
}

func uidOf(obj runtime.Object) types.UID {
	if o, ok := obj.(interface{ GetUID() types.UID }); ok {
		return o.GetUID()
	}
	return ""
}

// fieldPath returns the field a problem's reason starts with
// ("spec.rules[0].http.paths[1].backend: ..." → "spec.rules[0].http.paths[1].backend"),
// or "" if it does not start with one.
func fieldPath(reason string) string {
	end := strings.IndexAny(reason, " :;")
	if end < 0 {
		end = len(reason)
	}
	path := reason[:end]
	if path != "spec" && !strings.HasPrefix(path, "spec.") && !strings.HasPrefix(path, "metadata.") {
		return ""
	}
	for _, c := range path {
		if !(c == '.' || c == '[' || c == ']' || c == '_' || c == '-' ||
			'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return ""
		}
	}
	return path
}

// truncate cuts a note to the API server's limit, on a rune boundary.
func truncate(note string) string {
	if len(note) <= noteLimit {
		return note
	}
	const ellipsis = "…"
	cut := noteLimit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + ellipsis
}
