// Package events reports, beside the pipeline (source → model → render → plan → apply),
// what it did with each Ingress as events.k8s.io/v1 Events on it: a
// Warning for each Problem model.Build found, and a Normal event when an
// Ingress is first served; a Warning on the agent's ConfigMap for each
// of its Problems (a value nginx refused); a Warning on an IngressClass
// named like ours whose controller is not ours; and a Warning on a
// GatewayClass, Gateway or HTTPRoute for each of its Problems
// (gatewayapi.go).
//
// A problem is reported once, when it appears, not on every sync: the
// Recorder remembers the problems of the last call and reports only new
// ones, so a sync loop that runs many times a second makes no Event noise.
// Each report is an Event of its own (the Recorder keeps no series: a
// problem that goes and comes back is a new Event), and each names the field
// it is about (regarding.fieldPath, taken from the start of the problem's
// reason), so the problems of one Ingress are told apart.
//
// The Recorder never waits for the API server: an Event goes into a bounded
// queue that one goroutine, run by Start, empties by creating each Event.
// When the queue is full, Events are dropped (one warning per run of
// drops); an Event the API server does not take is tried a few times with
// backoff, then dropped. Warnings have a queue of their own, sent first:
// an agent starting at 50,000 Ingresses emits a Normal "Sync" for each, and
// a tenant's Problem must not be dropped behind them.
//
// It writes through kubeclient, not client-go's EventBroadcaster: that one
// links the whole clientset and its scheme of every API group.
package events

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/reference"

	"github.com/restysync/restysync/agent/internal/kubeclient"
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

const (
	// noteLimit is the longest note the API server accepts, in bytes.
	noteLimit = 1024
	// nameLimit is the longest object name (a DNS subdomain), in bytes.
	nameLimit = 253
)

// The sender's defaults.
const (
	// queueSize is how many Events wait for the sender before new ones are
	// dropped (client-go's broadcaster queues 1000 too).
	queueSize = 1000
	// requestTimeout bounds one Create.
	requestTimeout = 10 * time.Second
	// maxTries is how many times an Event is tried before it is dropped.
	maxTries = 5
	// firstBackoff is the wait after the first failed try, doubled after
	// each next one up to maxBackoff (each ±25% jitter): at most about 15 s
	// of waiting for one Event.
	firstBackoff = time.Second
	maxBackoff   = 8 * time.Second
)

// Options configures a Recorder.
type Options struct {
	// Controller is the reportingController of the Events, a qualified name
	// (default model.ControllerName, "restysync.io/ingress-controller"). The
	// reportingInstance is Controller + "-" + the host name.
	Controller string
	// Logger receives each Event emitted, at Debug level, and the Events
	// dropped, at Warn level (default: discarded).
	Logger *slog.Logger
	// GatewayAPI makes GatewayAPIProblems report, reading the UID of each
	// Gateway API object an Event is about with the Recorder's client
	// (default: false, and GatewayAPIProblems reports nothing; set it only
	// where the API server serves the Gateway API).
	GatewayAPI bool
}

// Recorder emits Events about Ingresses. Its methods may be called from
// several goroutines; they never block on the API server.
type Recorder struct {
	client     kubeclient.Interface
	controller string // reportingController
	instance   string // reportingInstance
	logger     *slog.Logger

	// The sender: the Events emitted and not yet sent, Warnings apart.
	warnings *queue
	normals  *queue
	started  atomic.Bool
	stopped  atomic.Bool  // the sender has returned: Events are discarded
	stamp    atomic.Int64 // the last name suffix, Unix nanoseconds
	// How the sender tries (the defaults above; tests shorten them).
	timeout      time.Duration
	tries        int
	firstBackoff time.Duration
	maxBackoff   time.Duration

	mu       sync.Mutex
	problems map[model.Problem]bool // reported in the last call of Problems
	// configMapProblems are those reported in the last call of
	// ConfigMapProblems.
	configMapProblems map[model.Problem]bool
	// classProblems are those reported in the last call of
	// IngressClassProblems.
	classProblems map[model.Problem]bool
	// gatewayProblems are those reported in the last call of
	// GatewayAPIProblems.
	gatewayProblems map[model.Problem]bool
	// served is a hash of the UID of each Ingress served, by namespace and
	// name: a map per namespace (the namespace interned by the source), so
	// an entry is the name and 8 bytes, and holds no string of its own.
	// Keeping the UID string instead would keep alive each Ingress's old
	// UID once the Ingress is decoded anew (a status write, a relist): at
	// 50,000 Ingresses, TestServedHeap measured 6.8 MB live for a
	// NamespacedName → UID map (3.7 MB before any decode), 1.7 MB for this
	// one. The UID is remembered, not only the name, so that an Ingress
	// deleted and created again between two calls of Forget is served
	// anew; two UIDs of one name hashing alike (one chance in 2^64) would
	// cost one Normal Event.
	served     map[string]map[string]uint64
	uidSeed    maphash.Seed
	gatewayAPI bool
}

// New returns a Recorder that writes Events through client once Start has
// been called.
func New(client kubeclient.Interface, opts Options) *Recorder {
	return newRecorder(client, opts, queueSize)
}

func newRecorder(client kubeclient.Interface, opts Options, size int) *Recorder {
	controller := opts.Controller
	if controller == "" {
		controller = model.ControllerName
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	hostname, _ := os.Hostname()
	return &Recorder{
		client:       client,
		controller:   controller,
		instance:     controller + "-" + hostname,
		logger:       logger,
		warnings:     newQueue(corev1.EventTypeWarning, size),
		normals:      newQueue(corev1.EventTypeNormal, size),
		timeout:      requestTimeout,
		tries:        maxTries,
		firstBackoff: firstBackoff,
		maxBackoff:   maxBackoff,
		problems:     map[model.Problem]bool{},
		served:       map[string]map[string]uint64{},
		uidSeed:      maphash.MakeSeed(),
		gatewayAPI:   opts.GatewayAPI,
	}
}

// Start sends Events to the API server until ctx is done; Events emitted
// after that are discarded. Events emitted before Start are sent once it is
// called. It returns at once, and fails if called twice.
func (r *Recorder) Start(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("events: Recorder started twice")
	}
	go r.run(ctx)
	return nil
}

// queue holds the Events of one type emitted and not yet sent.
type queue struct {
	eventType string
	events    chan *eventsv1.Event
	dropping  atomic.Bool // the last Event offered was dropped (queue full)
}

func newQueue(eventType string, size int) *queue {
	return &queue{eventType: eventType, events: make(chan *eventsv1.Event, size)}
}

// offer queues ev, or drops it if the queue is full; it logs the first
// drop of each run of drops.
func (q *queue) offer(ev *eventsv1.Event, logger *slog.Logger) {
	select {
	case q.events <- ev:
		q.dropping.Store(false)
	default:
		if !q.dropping.Swap(true) {
			logger.Warn("event queue full: dropping "+q.eventType+" events until it drains", "capacity", cap(q.events),
				"regarding", ev.Regarding.Namespace+"/"+ev.Regarding.Name, "reason", ev.Reason)
		}
	}
}

// queueFor returns the queue of Events of eventType.
func (r *Recorder) queueFor(eventType string) *queue {
	if eventType == corev1.EventTypeWarning {
		return r.warnings
	}
	return r.normals
}

// run sends the queued Events, one at a time, Warnings first, until ctx
// is done.
func (r *Recorder) run(ctx context.Context) {
	defer r.stopped.Store(true)
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.warnings.events:
			r.send(ctx, ev)
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return
		case ev := <-r.warnings.events:
			r.send(ctx, ev)
		case ev := <-r.normals.events:
			r.send(ctx, ev)
		}
	}
}

// send creates ev, trying again after a backoff on an error that may pass
// (the API server down or slow), at most r.tries times, until ctx is done.
func (r *Recorder) send(ctx context.Context, ev *eventsv1.Event) {
	wait := r.firstBackoff
	for try := 1; ; try++ {
		exists, err := r.resolveGatewayAPI(ctx, &ev.Regarding)
		if err == nil && !exists {
			r.logger.Debug("event dropped: its object is gone", logAttrs(ev, nil)...)
			return
		}
		if err == nil {
			reqCtx, cancel := context.WithTimeout(ctx, r.timeout)
			_, err = r.client.Events(ev.Namespace).Create(reqCtx, ev, metav1.CreateOptions{})
			cancel()
		}
		switch {
		case err == nil:
			return
		case ctx.Err() != nil:
			return // stopping: the Event is dropped
		case apierrors.IsAlreadyExists(err):
			// Sent before, its answer lost.
			r.logger.Debug("event already exists", "event", ev.Namespace+"/"+ev.Name)
			return
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
			// The same Event would be refused again (Forbidden: not granted,
			// or its namespace is being deleted).
			r.logger.Warn("event refused by the API server, dropped", logAttrs(ev, err)...)
			return
		case try >= r.tries:
			r.logger.Warn("event not sent after "+strconv.Itoa(try)+" tries, dropped", logAttrs(ev, err)...)
			return
		}
		r.logger.Debug("event not sent, will try again", logAttrs(ev, err)...)
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(wait)):
		}
		wait = min(2*wait, r.maxBackoff)
	}
}

func logAttrs(ev *eventsv1.Event, err error) []any {
	return []any{"event", ev.Namespace + "/" + ev.Name,
		"regarding", ev.Regarding.Namespace + "/" + ev.Regarding.Name, "reason", ev.Reason, "error", err}
}

// jitter returns d ±25%, so that replicas do not retry in step.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d - d/4 + rand.N(d/2+1)
}

// emit queues an Event on regarding, or drops it if its queue is full. It
// never blocks.
func (r *Recorder) emit(regarding *corev1.ObjectReference, eventType, reason, note string) {
	if r.stopped.Load() {
		r.logger.Debug("event discarded: the recorder has stopped", "regarding", regarding.Namespace+"/"+regarding.Name, "reason", reason)
		return
	}
	now := time.Now()
	namespace := regarding.Namespace
	if namespace == "" { // a cluster-scoped object's Events go in default
		namespace = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: r.eventName(regarding.Name, now), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              Action,
		Reason:              reason,
		Type:                eventType,
		Regarding:           *regarding,
		Note:                truncate(note),
	}
	r.queueFor(eventType).offer(ev, r.logger)
}

// eventName returns regarding name + "." + a hex time stamp, as client-go
// names Events. The stamp is now in Unix nanoseconds, or one more than the
// last name's, so two Events of one Recorder never share a name; the
// object's name is cut so the whole fits a DNS subdomain.
func (r *Recorder) eventName(name string, now time.Time) string {
	stamp := now.UnixNano()
	for {
		last := r.stamp.Load()
		if stamp <= last {
			stamp = last + 1
		}
		if r.stamp.CompareAndSwap(last, stamp) {
			break
		}
	}
	suffix := "." + strconv.FormatInt(stamp, 16)
	if len(name)+len(suffix) > nameLimit {
		name = strings.TrimRight(name[:nameLimit-len(suffix)], ".-")
	}
	return name + suffix
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
		ref, err := reference.GetPartialReference(kubeclient.Scheme, obj, fieldPath(p.Reason))
		if err != nil {
			r.logger.Warn("cannot refer to an object in an Event", "object", p.Object(), "error", err)
			continue
		}
		r.emit(ref, corev1.EventTypeWarning, ReasonProblem, p.Reason)
		r.logger.Debug("event", "ingress", p.Namespace+"/"+p.Name, "type", corev1.EventTypeWarning, "note", p.Reason)
		next[p] = true
	}
	r.problems = next
}

// ConfigMapProblems emits a Warning Event on cm, the agent's ConfigMap,
// for each problem naming it that was not in the previous call, as
// Problems does for Ingresses: a value nginx refused, or one the agent
// does not apply. A nil cm (none, or not listed yet) reports nothing, and
// its problems are tried again on the next call.
func (r *Recorder) ConfigMapProblems(problems []model.Problem, cm *corev1.ConfigMap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[model.Problem]bool{}
	if cm == nil {
		r.configMapProblems = next
		return
	}
	for _, p := range problems {
		if p.Kind != "ConfigMap" || p.Namespace != cm.Namespace || p.Name != cm.Name {
			continue
		}
		if !r.configMapProblems[p] && !next[p] {
			ref, err := reference.GetReference(kubeclient.Scheme, cm)
			if err != nil {
				r.logger.Warn("cannot refer to an object in an Event", "object", p.Object(), "error", err)
				continue
			}
			r.emit(ref, corev1.EventTypeWarning, ReasonProblem, p.Reason)
			r.logger.Debug("event", "configmap", p.Namespace+"/"+p.Name, "type", corev1.EventTypeWarning, "note", p.Reason)
		}
		next[p] = true
	}
	r.configMapProblems = next
}

// IngressClassProblems emits a Warning Event on the IngressClass of each
// problem of Kind "IngressClass" that was not in the previous call, as
// Problems does for Ingresses: one named like ours whose controller is
// not ours. lookup returns the IngressClass (nil if it does not exist: the
// problem is then tried again on the next call). Events on an IngressClass,
// which has no namespace, go in the default namespace.
func (r *Recorder) IngressClassProblems(problems []model.Problem, lookup func(name string) runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[model.Problem]bool{}
	for _, p := range problems {
		if p.Kind != "IngressClass" {
			continue
		}
		if !r.classProblems[p] && !next[p] {
			obj := lookup(p.Name)
			if obj == nil {
				continue
			}
			ref, err := reference.GetPartialReference(kubeclient.Scheme, obj, fieldPath(p.Reason))
			if err != nil {
				r.logger.Warn("cannot refer to an object in an Event", "object", p.Object(), "error", err)
				continue
			}
			r.emit(ref, corev1.EventTypeWarning, ReasonProblem, p.Reason)
			r.logger.Debug("event", "ingressclass", p.Name, "type", corev1.EventTypeWarning, "note", p.Reason)
		}
		next[p] = true
	}
	r.classProblems = next
}

// Forget drops the served Ingresses that lookup no longer finds, or finds
// with another UID, so Served reports a re-created Ingress again. It looks
// up every served Ingress: call it when Ingresses may have changed (a full
// sync), not on an endpoint change, where at 10,000 Ingresses it cost
// 10–20 ms a sync.
func (r *Recorder) Forget(lookup func(namespace, name string) runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for namespace, names := range r.served {
		for name, uid := range names {
			if current := lookup(namespace, name); current == nil || r.uidHash(uidOf(current)) != uid {
				delete(names, name)
			}
		}
		if len(names) == 0 {
			delete(r.served, namespace)
		}
	}
}

// Served emits a Normal "Sync" Event on ing the first time it is served.
// An Ingress deleted and created again (a new UID) is served anew.
func (r *Recorder) Served(ing *networkingv1.Ingress) {
	if ing == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	uid := r.uidHash(ing.UID)
	names := r.served[ing.Namespace]
	if last, ok := names[ing.Name]; ok && last == uid {
		// Stored again: the key becomes this Ingress's name, so that the
		// map does not keep alive the name of an older copy.
		names[ing.Name] = uid
		return
	}
	if names == nil {
		names = map[string]uint64{}
		r.served[ing.Namespace] = names
	}
	names[ing.Name] = uid
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	ref, err := reference.GetReference(kubeclient.Scheme, ing)
	if err != nil {
		r.logger.Warn("cannot refer to an object in an Event", "object", "Ingress "+key.String(), "error", err)
		return
	}
	r.emit(ref, corev1.EventTypeNormal, ReasonSync, "Ingress "+key.String()+" is served")
	r.logger.Debug("event", "ingress", key.String(), "type", corev1.EventTypeNormal, "reason", ReasonSync)
}

// servedCount returns how many Ingresses are remembered served, for tests.
func (r *Recorder) servedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, names := range r.served {
		n += len(names)
	}
	return n
}

// reported returns the problems now remembered, for tests.
func (r *Recorder) reported() map[model.Problem]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.problems)
}

// uidHash returns the hash of uid that served keeps.
func (r *Recorder) uidHash(uid types.UID) uint64 {
	return maphash.String(r.uidSeed, string(uid))
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
