package kube

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

// waitTimeout bounds every wait for the cache to catch up.
const waitTimeout = 10 * time.Second

// kindCounter counts changed calls by Kind.
type kindCounter struct {
	mu     sync.Mutex
	counts map[source.Kind]int
}

func newKindCounter() *kindCounter { return &kindCounter{counts: map[source.Kind]int{}} }

func (c *kindCounter) changed(ch source.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[ch.Kind]++
}

func (c *kindCounter) get(kind source.Kind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[kind]
}

// startSource starts src and registers a cleanup that stops it and waits
// until every informer has stopped.
func startSource(t *testing.T, src *Source, changed func(source.Change)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		select {
		case <-src.Done():
		case <-time.After(waitTimeout):
			t.Errorf("informers did not stop within %s", waitTimeout)
		}
	})
	// Start's ctx also bounds the watching, so the wait is bounded here.
	timer := time.AfterFunc(waitTimeout, cancel)
	defer timer.Stop()
	if err := src.Start(ctx, changed); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

// eventually polls cond every 10ms until it holds, and fails t after
// waitTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s", what, waitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// names returns "namespace/name" of objects, sorted.
func names[T source.Named](objs []T) []string {
	var out []string
	for _, o := range objs {
		if o.GetNamespace() == "" {
			out = append(out, o.GetName())
		} else {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func testObjects() []runtime.Object {
	class := "restysync"
	pathType := networkingv1.PathTypePrefix
	ready, portName, port := true, "http", int32(8080)
	return []runtime.Object{
		&networkingv1.IngressClass{
			ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
			Spec:       networkingv1.IngressClassSpec{Controller: model.ControllerName},
		},
		&networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{
				Name: "app", Namespace: "web",
				Annotations: map[string]string{
					source.LastAppliedAnnotation: `{"big":"copy"}`,
					"example.com/kept":           "yes",
				},
			},
			Spec: networkingv1.IngressSpec{
				IngressClassName: &class,
				Rules: []networkingv1.IngressRule{{
					Host: "app.example.com",
					IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{
							Path: "/", PathType: &pathType,
							Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
								Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80},
							}},
						}},
					}},
				}},
			},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "web"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: "app-1", Namespace: "web",
				Labels: map[string]string{discoveryv1.LabelServiceName: "app"},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.244.1.10"},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			}},
			Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "web"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key")},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "password", Namespace: "web"},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"password": []byte("hunter2")},
		},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "restysync", Namespace: "restysync"},
			Data:       map[string]string{"worker-processes": "2"},
		},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "restysync"},
			Data:       map[string]string{"not": "ours"},
		},
	}
}

func TestSourceFake(t *testing.T) {
	client := fake.NewClientset(testObjects()...)
	src := New(kubeclienttest.Wrap(client), Options{ConfigMap: "restysync/restysync"})
	counter := newKindCounter()
	startSource(t, src, counter.changed)

	snap, problems := src.Snapshot()
	if len(problems) != 0 {
		t.Errorf("problems = %v, want none", problems)
	}
	for _, c := range []struct {
		kind string
		got  []string
		want []string
	}{
		{"ingresses", names(snap.Ingresses.Slice()), []string{"web/app"}},
		{"ingress classes", names(snap.IngressClasses.Slice()), []string{"restysync"}},
		{"services", names(snap.Services.Slice()), []string{"web/app"}},
		{"endpoint slices", names(snap.EndpointSlices.Slice()), []string{"web/app-1"}},
		// The fake ignores field selectors; Snapshot still drops the Opaque Secret.
		{"secrets", names(snap.Secrets.Slice()), []string{"web/tls"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.kind, c.got, c.want)
		}
	}
	if got := string(snap.Secrets.At(0).Data["tls.key"]); got != "key" {
		t.Errorf("TLS secret data tls.key = %q, want it kept", got)
	}
	ing := snap.Ingresses.At(0)
	if len(ing.ManagedFields) != 0 {
		t.Errorf("ingress managedFields = %v, want stripped", ing.ManagedFields)
	}
	if want := map[string]string{"example.com/kept": "yes"}; !maps.Equal(ing.Annotations, want) {
		t.Errorf("ingress annotations = %v, want %v", ing.Annotations, want)
	}
	if got, want := src.ConfigMapData(), map[string]string{"worker-processes": "2"}; !maps.Equal(got, want) {
		t.Errorf("ConfigMapData = %v, want %v", got, want)
	}
	if got := src.Ingress("web", "app"); got == nil || got.Name != "app" {
		t.Errorf("Ingress(web, app) = %v, want the cached Ingress", got)
	}
	if got := src.Ingress("web", "missing"); got != nil {
		t.Errorf("Ingress(web, missing) = %v, want nil", got)
	}

	// Secrets and ConfigMaps are only ever listed and watched with their selectors.
	for _, action := range client.Actions() {
		var opts metav1.ListOptions
		switch a := action.(type) {
		case k8stesting.ListActionImpl:
			opts = a.ListOptions
		case k8stesting.WatchActionImpl:
			opts = a.ListOptions
		default:
			continue
		}
		switch action.GetResource().Resource {
		case "secrets":
			// Only TLS Secrets in bulk; auth Secrets one by one, by name.
			if opts.FieldSelector != "type=kubernetes.io/tls" && !strings.HasPrefix(opts.FieldSelector, "metadata.name=") {
				t.Errorf("%s secrets with field selector %q, want type=kubernetes.io/tls or metadata.name=NAME", action.GetVerb(), opts.FieldSelector)
			}
		case "configmaps":
			if opts.FieldSelector != "metadata.name=restysync" || action.GetNamespace() != "restysync" {
				t.Errorf("%s configmaps in %q with field selector %q, want metadata.name=restysync in restysync",
					action.GetVerb(), action.GetNamespace(), opts.FieldSelector)
			}
		}
	}

	ctx := context.Background()
	t.Run("update", func(t *testing.T) {
		before := counter.get(source.KindIngress)
		updated := ing.DeepCopy()
		updated.Spec.Rules[0].Host = "new.example.com"
		// The fake does not set resourceVersion as a server does, and an
		// update with an unchanged one is dropped as a resync replay.
		updated.ResourceVersion = "100"
		if _, err := client.NetworkingV1().Ingresses("web").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "updated host in snapshot", func() bool {
			snap, _ := src.Snapshot()
			return snap.Ingresses.Len() == 1 && snap.Ingresses.At(0).Spec.Rules[0].Host == "new.example.com"
		})
		// The cache is updated before the handlers hear of it.
		eventually(t, "changed(Ingress) called", func() bool { return counter.get(source.KindIngress) > before })
	})

	t.Run("delete", func(t *testing.T) {
		before := counter.get(source.KindService)
		if err := client.CoreV1().Services("web").Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "service gone from snapshot", func() bool {
			snap, _ := src.Snapshot()
			return snap.Services.Len() == 0
		})
		eventually(t, "changed(Service) called", func() bool { return counter.get(source.KindService) > before })
	})

	t.Run("configmap", func(t *testing.T) {
		if err := client.CoreV1().ConfigMaps("restysync").Delete(ctx, "restysync", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "ConfigMapData nil after delete", func() bool { return src.ConfigMapData() == nil })
		eventually(t, "changed(ConfigMap) called for add and delete", func() bool { return counter.get(source.KindConfigMap) >= 2 })
	})
}

func TestSourceNamespace(t *testing.T) {
	objs := append(testObjects(),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "other"}},
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "other"}},
	)
	src := New(kubeclienttest.Wrap(fake.NewClientset(objs...)), Options{Namespace: "other"})
	startSource(t, src, func(source.Change) {})
	snap, _ := src.Snapshot()
	if got, want := names(snap.Ingresses.Slice()), []string{"other/app"}; !slices.Equal(got, want) {
		t.Errorf("ingresses = %v, want %v", got, want)
	}
	if got, want := names(snap.Services.Slice()), []string{"other/app"}; !slices.Equal(got, want) {
		t.Errorf("services = %v, want %v", got, want)
	}
	if got, want := names(snap.IngressClasses.Slice()), []string{"restysync"}; !slices.Equal(got, want) {
		t.Errorf("ingress classes = %v, want %v (cluster-scoped, always read)", got, want)
	}
	if snap.Secrets.Len() != 0 || snap.EndpointSlices.Len() != 0 {
		t.Errorf("secrets %v, endpoint slices %v: want none outside the namespace", names(snap.Secrets.Slice()), names(snap.EndpointSlices.Slice()))
	}
	if src.ConfigMapData() != nil {
		t.Errorf("ConfigMapData = %v, want nil with no ConfigMap configured", src.ConfigMapData())
	}
}

func TestStartErrors(t *testing.T) {
	t.Run("bad configmap", func(t *testing.T) {
		for _, cm := range []string{"just-a-name", "ns/", "a/b/c"} {
			src := New(kubeclienttest.Wrap(fake.NewClientset()), Options{ConfigMap: cm})
			if err := src.Start(context.Background(), func(source.Change) {}); err == nil {
				t.Errorf("ConfigMap %q: Start succeeded, want an error", cm)
			}
			<-src.Done()
		}
	})
	t.Run("twice", func(t *testing.T) {
		src := New(kubeclienttest.Wrap(fake.NewClientset()), Options{})
		startSource(t, src, func(source.Change) {})
		if err := src.Start(context.Background(), func(source.Change) {}); err == nil {
			t.Error("second Start succeeded, want an error")
		}
	})
	t.Run("context ends before sync", func(t *testing.T) {
		client := fake.NewClientset()
		// A list that never answers keeps the caches from syncing.
		block := make(chan struct{})
		defer close(block)
		client.PrependReactor("list", "ingresses", func(k8stesting.Action) (bool, runtime.Object, error) {
			<-block
			return true, &networkingv1.IngressList{}, nil
		})
		src := New(kubeclienttest.Wrap(client), Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := src.Start(ctx, func(source.Change) {}); err == nil {
			t.Fatal("Start succeeded, want an error when ctx ends before sync")
		}
	})
}

func TestHandler(t *testing.T) {
	counter := newKindCounter()
	h := handler{kind: source.KindService, changed: counter.changed}
	v1 := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "web", ResourceVersion: "1"}}
	v2 := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "web", ResourceVersion: "2"}}

	h.OnAdd(v1, true)
	h.OnUpdate(v1, v1.DeepCopy()) // resync replay
	if got := counter.get(source.KindService); got != 1 {
		t.Errorf("after add and a resync replay: %d calls, want 1", got)
	}
	h.OnUpdate(v1, v2)
	h.OnDelete(v2)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "web/a", Obj: v2})
	if got := counter.get(source.KindService); got != 4 {
		t.Errorf("after update, delete and tombstone: %d calls, want 4", got)
	}
}

// An Ingress whose status alone changed (the status writer's own
// writes come back so, one per Ingress) is put in the view, which then
// holds the cache's object, but reported as no change: the model reads
// no status. A change of its annotations or spec is reported.
func TestHandlerStatusOnlyIngressUpdate(t *testing.T) {
	counter := newKindCounter()
	view := &sortedView[*networkingv1.Ingress]{}
	h := handler{kind: source.KindIngress, changed: counter.changed, view: view}
	class := "restysync"
	v1 := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "web", ResourceVersion: "1", Generation: 1},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: "a.example.com"}}}}
	h.OnAdd(v1, true)

	v2 := v1.DeepCopy()
	v2.ResourceVersion = "2"
	v2.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
	h.OnUpdate(v1, v2)
	if got := counter.get(source.KindIngress); got != 1 {
		t.Errorf("after a status-only update: %d calls, want 1 (the add)", got)
	}
	if list := view.objects(); list.Len() != 1 || list.At(0) != v2 {
		t.Errorf("after a status-only update the view holds %v, want the updated object alone", names(list.Slice()))
	}

	v3 := v2.DeepCopy()
	v3.ResourceVersion = "3"
	v3.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}
	h.OnUpdate(v2, v3)
	v4 := v3.DeepCopy()
	v4.ResourceVersion, v4.Generation = "4", 2
	v4.Spec.Rules[0].Host = "b.example.com"
	h.OnUpdate(v3, v4)
	v5 := v4.DeepCopy()
	v5.ResourceVersion = "5"
	v5.Status.LoadBalancer.Ingress = nil
	v5.Labels = map[string]string{"team": "a"}
	h.OnUpdate(v4, v5)
	if got := counter.get(source.KindIngress); got != 4 {
		t.Errorf("after an annotation, a spec and a label (with status) change: %d calls, want 4", got)
	}
}

// strip, every informer's transform, is source.Strip (tested there) and
// leaves what is not an object alone (a tombstone).
func TestStripTombstone(t *testing.T) {
	tombstone := cache.DeletedFinalStateUnknown{Key: "a/b"}
	if obj, err := strip(tombstone); err != nil || obj != any(tombstone) {
		t.Errorf("strip(tombstone) = %v, %v; want it unchanged", obj, err)
	}
}

// An EndpointSlice event, a tombstone included, records its Service for the
// fast path before the change is reported; other kinds record nothing.
func TestChangedServices(t *testing.T) {
	src := New(nil, Options{})
	counter := newKindCounter()
	h := handler{kind: source.KindEndpointSlice, changed: counter.changed, noteSlice: src.noteSlice}
	slice := func(ns, svc string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
	}
	h.OnAdd(slice("web", "a"), false)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "web/b-x", Obj: slice("web", "b")})
	h.OnAdd(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "orphan"}}, false)
	got := src.TakeChangedServices()
	slices.SortFunc(got, func(x, y source.ServiceKey) int { return strings.Compare(x.Name, y.Name) })
	want := []source.ServiceKey{{Namespace: "web", Name: "a"}, {Namespace: "web", Name: "b"}}
	if !slices.Equal(got, want) {
		t.Errorf("changed services %v, want %v", got, want)
	}
	if again := src.TakeChangedServices(); len(again) != 0 {
		t.Errorf("taken twice: %v", again)
	}
	if n := counter.get(source.KindEndpointSlice); n != 3 {
		t.Errorf("%d changes reported, want 3", n)
	}
}

// The first listing logs its progress every listingProgressInterval, with
// the objects of each kind listed so far, then the totals.
func TestStartLogsListingProgress(t *testing.T) {
	defer func(was time.Duration) { listingProgressInterval = was }(listingProgressInterval)
	listingProgressInterval = 20 * time.Millisecond
	client := fake.NewClientset(testObjects()...)
	client.PrependReactor("list", "ingresses", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(300 * time.Millisecond) // a slow listing
		return false, nil, nil
	})
	var log syncbuf.Buffer
	src := New(kubeclienttest.Wrap(client), Options{ConfigMap: "restysync/restysync", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	startSource(t, src, func(source.Change) {})
	text := log.String()
	if !strings.Contains(text, `msg="listing from the API server"`) || !strings.Contains(text, "Service=1") ||
		!strings.Contains(text, `msg="kube caches synced"`) {
		t.Errorf("no progress of the listing, or no totals:\n%s", text)
	}
}
