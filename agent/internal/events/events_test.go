package events

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/restysync/restysync/agent/internal/model"
)

// take returns the Events queued since the last call, as "Type Reason
// namespace/name fieldPath: note" (the Recorder is not started: the test
// is its sender).
func take(r *Recorder) []string {
	var out []string
	for _, ev := range drain(r) {
		ref := ev.Regarding
		out = append(out, fmt.Sprintf("%s %s %s/%s %s: %s", ev.Type, ev.Reason, ref.Namespace, ref.Name, ref.FieldPath, ev.Note))
	}
	return out
}

// drain returns the Events queued and not yet sent.
// drain returns the queued Events, Warnings first, and empties the queues.
func drain(r *Recorder) []*eventsv1.Event {
	var out []*eventsv1.Event
	for _, q := range []*queue{r.warnings, r.normals} {
		for len(q.events) > 0 {
			out = append(out, <-q.events)
		}
	}
	return out
}

// queued returns how many Events wait to be sent.
func (r *Recorder) queued() int { return len(r.warnings.events) + len(r.normals.events) }

func ingress(name string, uid types.UID) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, UID: uid}}
}

// cluster is a lookup over a set of Ingresses.
type cluster map[string]*networkingv1.Ingress

func (c cluster) lookup(namespace, name string) runtime.Object {
	if ing, ok := c[namespace+"/"+name]; ok {
		return ing
	}
	return nil
}

func TestProblems(t *testing.T) {
	r := New(nil, Options{})
	objects := cluster{"web/app": ingress("app", "1")}
	p1 := model.Problem{Kind: "Ingress", Namespace: "web", Name: "app", Reason: `spec.rules[0].http.paths[0].backend: service "x" not found; the path answers 503`}
	p2 := model.Problem{Kind: "Ingress", Namespace: "web", Name: "app", Reason: `spec: has no rules and no default backend; nothing to serve`}
	onSlice := model.Problem{Kind: "EndpointSlice", Namespace: "web", Name: "app-1", Reason: "bad address"}
	onMissing := model.Problem{Kind: "Ingress", Namespace: "web", Name: "gone", Reason: "spec: whatever"}

	steps := []struct {
		name     string
		problems []model.Problem
		want     []string
	}{
		{"first", []model.Problem{p1, p2, onSlice, onMissing}, []string{
			`Warning Problem web/app spec.rules[0].http.paths[0].backend: ` + p1.Reason,
			`Warning Problem web/app spec: ` + p2.Reason,
		}},
		{"same again", []model.Problem{p2, p1, onSlice}, nil},
		{"one gone", []model.Problem{p1}, nil},
		{"it comes back", []model.Problem{p1, p2}, []string{`Warning Problem web/app spec: ` + p2.Reason}},
		{"all gone", nil, nil},
		{"all back", []model.Problem{p1, p1}, []string{`Warning Problem web/app spec.rules[0].http.paths[0].backend: ` + p1.Reason}},
	}
	for _, step := range steps {
		r.Problems(step.problems, objects.lookup)
		if got := take(r); !slices.Equal(got, step.want) {
			t.Errorf("%s: events\n%s\nwant\n%s", step.name, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
	}

	// The Ingress appears later: its problem is reported then.
	objects["web/gone"] = ingress("gone", "2")
	r.Problems([]model.Problem{onMissing}, objects.lookup)
	if got := take(r); len(got) != 1 {
		t.Errorf("problem of an Ingress that appeared: events %v, want 1", got)
	}
	if got := r.reported(); len(got) != 1 || !got[onMissing] {
		t.Errorf("remembered problems = %v, want only %v", got, onMissing)
	}
}

func TestServed(t *testing.T) {
	r := New(nil, Options{})
	objects := cluster{"web/app": ingress("app", "1")}

	r.Served(objects["web/app"])
	r.Served(objects["web/app"])
	r.Served(nil)
	if got, want := take(r), []string{"Normal Sync web/app : Ingress web/app is served"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}

	// Deleted and created again: a new UID is served anew, once Forget
	// has let the Recorder drop the old one.
	objects["web/app"] = ingress("app", "2")
	r.Forget(objects.lookup)
	r.Served(objects["web/app"])
	r.Served(objects["web/app"])
	if got := take(r); len(got) != 1 {
		t.Errorf("re-created Ingress: events %v, want 1", got)
	}
	delete(objects, "web/app")
	r.Forget(objects.lookup)
	if n := r.servedCount(); n != 0 {
		t.Errorf("%d served Ingresses remembered after the delete, want 0", n)
	}
	if n := len(r.served); n != 0 {
		t.Errorf("%d namespaces remembered after the delete, want 0", n)
	}
}

// TestServedOnce: a served Ingress gets its Sync Event once, however its
// copies come (a relist after the informer restarts, a status write) and
// whether or not it is served in between; one deleted and created again
// gets it again, with or without Forget in between.
func TestServedOnce(t *testing.T) {
	r := New(nil, Options{})
	objects := cluster{"web/app": ingress("app", "1"), "web/other": ingress("other", "7")}
	r.Served(objects["web/app"])
	r.Served(objects["web/other"])
	take(r)

	// A relist decodes every Ingress anew: same UID, new strings.
	relisted := func(ing *networkingv1.Ingress) *networkingv1.Ingress {
		c := ing.DeepCopy()
		c.Namespace, c.Name = strings.Clone(c.Namespace), strings.Clone(c.Name)
		c.UID = types.UID(strings.Clone(string(c.UID)))
		return c
	}
	objects["web/app"], objects["web/other"] = relisted(objects["web/app"]), relisted(objects["web/other"])
	r.Forget(objects.lookup)
	r.Served(objects["web/app"])
	// web/other is not served on this sync (a problem, another class),
	// then served again: no second Event, it was never deleted.
	r.Forget(objects.lookup)
	r.Served(objects["web/app"])
	r.Served(objects["web/other"])
	if got := take(r); len(got) != 0 {
		t.Errorf("relisted Ingresses: events %v, want none", got)
	}

	// Deleted and created again between two syncs, without Forget.
	objects["web/app"] = ingress("app", "2")
	r.Served(objects["web/app"])
	if got, want := take(r), []string{"Normal Sync web/app : Ingress web/app is served"}; !slices.Equal(got, want) {
		t.Errorf("re-created Ingress without Forget: events %v, want %v", got, want)
	}
	// And again with Forget: the new UID is served once.
	objects["web/app"] = ingress("app", "3")
	r.Forget(objects.lookup)
	if n := r.servedCount(); n != 1 {
		t.Errorf("%d Ingresses remembered once web/app is re-created, want 1 (web/other)", n)
	}
	r.Served(objects["web/app"])
	r.Served(objects["web/app"])
	if got := take(r); len(got) != 1 {
		t.Errorf("re-created Ingress after Forget: events %v, want 1", got)
	}
}

func TestFieldPath(t *testing.T) {
	for reason, want := range map[string]string{
		`spec: has no rules`:                                "spec",
		`spec.rules[0].host "a b": bad; rule left out`:      "spec.rules[0].host",
		`spec.defaultBackend.service.name "x": not found`:   "spec.defaultBackend.service.name",
		`spec.rules[1].http.paths[0].backend; the path 503`: "spec.rules[1].http.paths[0].backend",
		`metadata.annotations: bad`:                         "metadata.annotations",
		`service "x" not found`:                             "",
		`specification: odd`:                                "",
		`spec.rules[0]{}: odd`:                              "",
		``:                                                  "",
	} {
		if got := fieldPath(reason); got != want {
			t.Errorf("fieldPath(%q) = %q, want %q", reason, got, want)
		}
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("short"); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
	long := strings.Repeat("é", 1000) // 2000 bytes
	got := truncate(long)
	if len(got) > noteLimit || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}

// A problem of the agent's ConfigMap (nginx refused it) is a Warning on
// the ConfigMap, once; problems of other objects are not its.
func TestConfigMapProblems(t *testing.T) {
	r := New(nil, Options{})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "restysync", UID: "3"}}
	refused := model.Problem{Kind: "ConfigMap", Namespace: "ingress", Name: "restysync", Reason: "nginx rejected the config with this version of it (bad)"}
	other := model.Problem{Kind: "ConfigMap", Namespace: "web", Name: "headers", Reason: "not found"}
	onIngress := model.Problem{Kind: "Ingress", Namespace: "ingress", Name: "restysync", Reason: "spec: bad"}

	r.ConfigMapProblems([]model.Problem{refused, other, onIngress}, nil)
	if got := take(r); len(got) != 0 {
		t.Errorf("without the ConfigMap: events %v, want none", got)
	}
	for _, step := range []struct {
		name string
		want []string
	}{
		{"first", []string{"Warning Problem ingress/restysync : " + refused.Reason}},
		{"same again", nil},
	} {
		r.ConfigMapProblems([]model.Problem{refused, other, onIngress}, cm)
		if got := take(r); !slices.Equal(got, step.want) {
			t.Errorf("%s: events %v, want %v", step.name, got, step.want)
		}
	}
	r.ConfigMapProblems(nil, cm)
	r.ConfigMapProblems([]model.Problem{refused}, cm)
	if got := take(r); len(got) != 1 {
		t.Errorf("a problem that came back: events %v, want 1", got)
	}
}
