//go:build linux

package kubeclient_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// roundTripFunc records requests.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClientAgainstAPIServer drives every call the agent makes through the
// real API server, and checks that they speak protobuf.
func TestClientAgainstAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	cfg := rest.CopyConfig(srv.Config())
	var mu sync.Mutex
	var accepts []string
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			accepts = append(accepts, req.Header.Get("Accept")+" "+req.URL.String())
			mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	c, err := kubeclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if !c.Readyz(ctx) {
		t.Fatal("Readyz: false on a ready API server")
	}

	// Create through Leases (namespace default exists from the start).
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "default"}}
	created, err := c.Leases("default").Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := "me"
	created.Spec.HolderIdentity = &holder
	if _, err := c.Leases("default").Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Leases("default").Get(ctx, "l", metav1.GetOptions{})
	if err != nil || got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "me" {
		t.Fatalf("Get after Update: %v, %+v", err, got.Spec)
	}
	// A stale resourceVersion is a conflict, which the election relies on.
	if _, err := c.Leases("default").Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("Update with a stale resourceVersion: %v, want a conflict", err)
	}
	if _, err := c.Leases("default").Get(ctx, "none", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing Lease: %v, want not found", err)
	}

	// Events.
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "e1", Namespace: "default"},
		EventTime:           metav1.NowMicro(),
		ReportingController: "restysync.io/test", ReportingInstance: "restysync.io/test-1",
		Action: "Sync", Reason: "Test", Type: corev1.EventTypeNormal, Note: "hello",
		Regarding: corev1.ObjectReference{Kind: "Lease", Namespace: "default", Name: "l"},
	}
	if _, err := c.Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Ingresses: an informer made by NewInformer lists and watches, with a
	// field selector; UpdateStatus writes the status subresource.
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
	}
	other := ing.DeepCopy()
	other.Name = "other"
	createIngress(t, srv.Config(), ing, other)

	byName := fields.OneTermEqualSelector("metadata.name", "app").String()
	informer := kubeclient.NewInformer(c, c.Ingresses("default"), &networkingv1.Ingress{}, 0,
		func(o *metav1.ListOptions) { o.FieldSelector = byName })
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	go informer.RunWithContext(ictx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	if keys := informer.GetStore().ListKeys(); !slices.Equal(keys, []string{"default/app"}) {
		t.Fatalf("informer holds %v, want [default/app] (field selector)", keys)
	}

	current, err := c.Ingresses("default").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}
	if _, err := c.Ingresses("default").UpdateStatus(ctx, current, metav1.UpdateOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		obj, ok, _ := informer.GetStore().GetByKey("default/app")
		if ok && len(obj.(*networkingv1.Ingress).Status.LoadBalancer.Ingress) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the status written did not reach the informer through its watch")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A plain Watch from before the status write delivers it.
	w, err := c.Ingresses("default").Watch(ctx, metav1.ListOptions{ResourceVersion: current.ResourceVersion, FieldSelector: byName})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.ResultChan():
		if e.Type != watch.Modified {
			t.Errorf("watch event %s of %+v, want MODIFIED", e.Type, e.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}

	mu.Lock()
	defer mu.Unlock()
	for _, a := range accepts {
		if !strings.HasPrefix(a, "application/vnd.kubernetes.protobuf") {
			t.Errorf("a request accepted %q, want protobuf first", a)
		}
	}
}

// createIngress writes Ingresses with a plain JSON client, not the one
// under test.
func createIngress(t *testing.T, cfg *rest.Config, ings ...*networkingv1.Ingress) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &networkingv1.SchemeGroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = kubeclientCodecs()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ing := range ings {
		if err := rc.Post().Namespace(ing.Namespace).Resource("ingresses").Body(ing).Do(context.Background()).Error(); err != nil {
			t.Fatal(err)
		}
	}
}
