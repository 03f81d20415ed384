//go:build linux

package events

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

const waitTimeout = 10 * time.Second

// waitForEvents polls the Events of namespace until want of them exist,
// at most waitTimeout, and returns them.
func waitForEvents(t *testing.T, client kubernetes.Interface, namespace string, want int) []eventsv1.Event {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		list, err := client.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The API server's own (e.g. ClusterIPNotAllocated about Service
		// default/kubernetes, when its repair loop races its start) are not
		// the recorder's.
		ours := slices.DeleteFunc(list.Items, func(ev eventsv1.Event) bool {
			return ev.ReportingController != model.ControllerName
		})
		if len(ours) >= want {
			return ours
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events of %s in %s after %s, want %d: %+v", len(ours), model.ControllerName, namespace, waitTimeout, want, list.Items)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRecorderAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	client, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ing, err := client.NetworkingV1().Ingresses("web").Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "missing", Port: networkingv1.ServiceBackendPort{Number: 80}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(namespace, name string) runtime.Object {
		if namespace == ing.Namespace && name == ing.Name {
			return ing
		}
		return nil
	}

	kc, err := kubeclient.New(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	rec := New(kc, Options{})
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if err := rec.Start(runCtx); err != nil {
		t.Fatal(err)
	}

	problems := []model.Problem{
		{Kind: "Ingress", Namespace: "web", Name: "app", Reason: `spec.defaultBackend.service.name "missing": Service not found; requests sent to it answer 503`},
		{Kind: "Ingress", Namespace: "web", Name: "app", Reason: `spec.rules[0].host "a..b": not a valid host; rule left out`},
	}
	for range 3 { // deduplicated: two Events, not six
		rec.Problems(problems, lookup)
	}
	rec.Served(ing)
	rec.Served(ing)

	got := waitForEvents(t, client, "web", 3)
	var summary []string
	for _, ev := range got {
		if ev.Regarding.Kind != "Ingress" || ev.Regarding.Name != "app" || ev.Regarding.UID != ing.UID {
			t.Errorf("event %s regards %+v, want Ingress web/app", ev.Name, ev.Regarding)
		}
		if ev.ReportingController != model.ControllerName || !strings.HasPrefix(ev.ReportingInstance, model.ControllerName+"-") {
			t.Errorf("event %s reported by %q/%q", ev.Name, ev.ReportingController, ev.ReportingInstance)
		}
		if ev.Series != nil {
			t.Errorf("event %s has a series %+v: a problem was emitted twice or merged with another", ev.Name, ev.Series)
		}
		if ev.Namespace != "web" || !strings.HasPrefix(ev.Name, "app.") || ev.Action != Action || ev.EventTime.IsZero() {
			t.Errorf("event %s/%s: action %q, eventTime %s", ev.Namespace, ev.Name, ev.Action, ev.EventTime)
		}
		summary = append(summary, ev.Type+" "+ev.Reason+" "+ev.Regarding.FieldPath+": "+ev.Note)
	}
	slices.Sort(summary)
	want := []string{
		"Normal Sync : Ingress web/app is served",
		"Warning Problem spec.defaultBackend.service.name: " + problems[0].Reason,
		"Warning Problem spec.rules[0].host: " + problems[1].Reason,
	}
	if !slices.Equal(summary, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(summary, "\n"), strings.Join(want, "\n"))
	}

	// A problem that goes and comes back is a new Event, not a series.
	rec.Problems(nil, lookup)
	rec.Problems(problems[:1], lookup)
	got = waitForEvents(t, client, "web", 4)
	var again []string
	for _, ev := range got {
		if ev.Note == problems[0].Reason {
			again = append(again, ev.Name)
		}
		if ev.Series != nil {
			t.Errorf("event %s has a series %+v", ev.Name, ev.Series)
		}
	}
	if len(got) != 4 || len(again) != 2 {
		t.Errorf("%d events, %d of the problem that came back (%v), want 4 and 2", len(got), len(again), again)
	}
}
