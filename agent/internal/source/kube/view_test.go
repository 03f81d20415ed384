package kube

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// After one new Ingress, a Snapshot's lists of the kinds that did not
// change are the very lists the Snapshot before handed out (nothing is
// listed again), the Ingresses are a new sorted list, and the list handed
// out before is unchanged.
func TestSnapshotAfterOneChangeCopiesOnlyItsKind(t *testing.T) {
	objs := authTestObjects()
	for _, name := range []string{"m", "c", "x", "a"} {
		objs = append(objs, benchApp(name)...)
	}
	client := fake.NewClientset(objs...)
	src := New(kubeclienttest.Wrap(client), Options{IngressClass: "restysync"})
	changes := make(chan source.Change, 100)
	startSource(t, src, func(c source.Change) { changes <- c })
	before, _ := src.Snapshot()
	ingressesBefore := before.Ingresses.Slice()
	wantSorted(t, "ingresses", before.Ingresses.Slice())
	wantSorted(t, "services", before.Services.Slice())
	wantSorted(t, "endpoint slices", before.EndpointSlices.Slice())
	wantSorted(t, "secrets", before.Secrets.Slice())
	again, _ := src.Snapshot()
	if !again.Ingresses.Same(before.Ingresses) || !sameList(again.Secrets, before.Secrets) {
		t.Errorf("a Snapshot after no change made new lists")
	}

	if _, err := client.NetworkingV1().Ingresses("default").Create(context.Background(),
		benchApp("g")[0].(*networkingv1.Ingress), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new Ingress reported", func() bool {
		for {
			select {
			case c := <-changes:
				if c.Kind == source.KindIngress && c.Name == "g" {
					return true
				}
			default:
				return false
			}
		}
	})
	after, _ := src.Snapshot()
	if got, want := names(after.Ingresses.Slice()), append(names(before.Ingresses.Slice()), "default/g"); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("ingresses after = %v, want %v", got, want)
	}
	wantSorted(t, "ingresses after", after.Ingresses.Slice())
	if !slices.Equal(before.Ingresses.Slice(), ingressesBefore) {
		t.Errorf("the list handed out before was changed")
	}
	for _, c := range []struct {
		kind string
		same bool
	}{
		{"ingress classes", sameList(before.IngressClasses, after.IngressClasses)},
		{"services", sameList(before.Services, after.Services)},
		{"endpoint slices", sameList(before.EndpointSlices, after.EndpointSlices)},
		// The TLS Secret and web/users, watched by name (an Ingress of
		// ours names it): their merged list is made again.
	} {
		if !c.same {
			t.Errorf("%s: a new list after a new Ingress", c.kind)
		}
	}
	if got := names(after.Secrets.Slice()); !slices.Equal(got, []string{"web/tls", "web/users"}) {
		t.Errorf("secrets = %v, want web/tls and web/users", got)
	}
	wantSorted(t, "secrets after", after.Secrets.Slice())
}

// sameList says whether a and b are the very list handed out, or both
// empty.
func sameList[T any](a, b model.List[T]) bool {
	return a.Same(b) || a.Len()+b.Len() == 0
}

func wantSorted[T source.Named](t *testing.T, what string, list []T) {
	t.Helper()
	for i := 1; i < len(list); i++ {
		if source.CompareNamed(list[i-1], list[i].GetNamespace(), list[i].GetName()) >= 0 {
			t.Errorf("%s not sorted by namespace and name at %d: %s/%s after %s/%s", what, i,
				list[i].GetNamespace(), list[i].GetName(), list[i-1].GetNamespace(), list[i-1].GetName())
		}
	}
}

// A relist that replaces the informers' caches (the watch expired while
// Ingresses were added, changed, deleted and left alone) leaves the
// Snapshot a fresh start makes of the same objects: the same Ingresses
// and, through them, the same Secrets watched by name.
func TestRelistYieldsTheSnapshotOfAFreshStart(t *testing.T) {
	ing := func(name, secret, rv string) *networkingv1.Ingress {
		i := authIngress(name, "web", "restysync", secret)
		if secret == "" {
			i.Annotations = nil
		}
		i.ResourceVersion = rv
		return i
	}
	objs := append(testObjects(),
		ing("kept", "users", "1"), ing("deleted", "", "1"), ing("changed", "", "1"), ing("unnamed", "users", "1"),
		opaqueSecret("users", "web", map[string]string{"auth": "alice:{PLAIN}x\n"}),
		opaqueSecret("other", "web", map[string]string{"auth": "bob:{PLAIN}y\n"}))
	client := fake.NewClientset(objs...)
	// The Ingresses' watches are the test's: no event reaches the informer
	// but through the relist.
	var mu sync.Mutex
	var watches []*watch.RaceFreeFakeWatcher
	client.PrependWatchReactor("ingresses", func(k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		w := watch.NewRaceFreeFake()
		watches = append(watches, w)
		return true, w, nil
	})
	relisted := New(kubeclienttest.Wrap(client), Options{IngressClass: "restysync"})
	startSource(t, relisted, func(source.Change) {})
	snap, _ := relisted.Snapshot()
	if got := names(snap.Secrets.Slice()); !slices.Equal(got, []string{"web/tls", "web/users"}) {
		t.Fatalf("secrets before = %v, want web/tls and web/users", got)
	}

	ctx := context.Background()
	ingresses := client.NetworkingV1().Ingresses("web")
	if err := ingresses.Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ingresses.Delete(ctx, "unnamed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ingresses.Update(ctx, ing("changed", "other", "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ingresses.Create(ctx, ing("added", "", "3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	last := watches[len(watches)-1]
	mu.Unlock()
	last.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	eventually(t, "the relisted Ingresses in the snapshot", func() bool {
		snap, _ := relisted.Snapshot()
		return slices.Equal(names(snap.Ingresses.Slice()), []string{"web/added", "web/app", "web/changed", "web/kept"})
	})

	fresh := New(kubeclienttest.Wrap(client), Options{IngressClass: "restysync"})
	startSource(t, fresh, func(source.Change) {})
	want, _ := fresh.Snapshot()
	got, _ := relisted.Snapshot()
	// Funcs are never DeepEqual: the Service of each slice is compared.
	for i, slice := range got.EndpointSlices.Slice() {
		if g, w := got.ServiceOfSlice(slice), want.ServiceOfSlice(want.EndpointSlices.At(i)); g != w || g == "" {
			t.Errorf("after the relist %s is of Service %q, fresh start: %q", slice.Name, g, w)
		}
	}
	for svc := range want.Services.All() {
		if g, w := names(got.SlicesOf(svc.Namespace, svc.Name)), names(want.SlicesOf(svc.Namespace, svc.Name)); !slices.Equal(g, w) || len(g) == 0 {
			t.Errorf("after the relist Service %s has slices %v, fresh start: %v", svc.Name, g, w)
		}
	}
	got.SliceServices, want.SliceServices = nil, nil
	got.SlicesOf, want.SlicesOf = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the relist:\n%+v\nfresh start:\n%+v", got, want)
	}
	if got := names(got.Secrets.Slice()); !slices.Equal(got, []string{"web/other", "web/tls", "web/users"}) {
		t.Errorf("secrets after the relist = %v, want web/other, web/tls and web/users", got)
	}
}

// A view holds what it was told: a tombstone removes by its key, an
// object the view does not keep is removed, and a Snapshot's list is
// sorted.
func TestSortedView(t *testing.T) {
	var v sortedView[*corev1.Secret]
	v.keep = func(s *corev1.Secret) bool { return s.Type == corev1.SecretTypeTLS }
	secret := func(name string, typ corev1.SecretType) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name}, Type: typ}
	}
	v.put(secret("b", corev1.SecretTypeTLS))
	v.put(secret("a", corev1.SecretTypeTLS))
	v.put(secret("c", corev1.SecretTypeTLS))
	v.put(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "d"}}) // not the view's type
	if got := names(v.objects().Slice()); !slices.Equal(got, []string{"web/a", "web/b", "web/c"}) {
		t.Errorf("objects = %v", got)
	}
	first := v.objects()
	v.remove(cache.DeletedFinalStateUnknown{Key: "web/b"})
	v.put(secret("c", corev1.SecretTypeOpaque)) // no longer kept
	got := v.objects()
	if names(got.Slice()) == nil || !slices.Equal(names(got.Slice()), []string{"web/a"}) {
		t.Errorf("objects after a tombstone and a type change = %v, want web/a", names(got.Slice()))
	}
	if !slices.Equal(names(first.Slice()), []string{"web/a", "web/b", "web/c"}) {
		t.Errorf("the list handed out before changed: %v", names(first.Slice()))
	}
	v.remove(secret("a", corev1.SecretTypeTLS))
	if got := v.objects(); got.Len() != 0 {
		t.Errorf("objects after every removal = %v, want none", got.Slice())
	}
}

// The class decision is still made for each Ingress that names a Secret:
// one of another class reaches nothing, and an Ingress that stops naming
// a Secret stops its watch.
func TestNamedRefsFollowTheIngresses(t *testing.T) {
	client := fake.NewClientset(authTestObjects()...)
	src := New(kubeclienttest.Wrap(client), Options{IngressClass: "restysync"})
	startSource(t, src, func(source.Change) {})
	wantServedAuthSecrets(t, src)
	ctx := context.Background()
	ingresses := client.NetworkingV1().Ingresses("web")
	for _, name := range []string{"secured", "secured-too"} {
		ing, err := ingresses.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ing = ing.DeepCopy()
		delete(ing.Annotations, "nginx.ingress.kubernetes.io/auth-secret")
		ing.ResourceVersion = "7"
		if _, err := ingresses.Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "web/users no longer served", func() bool {
		snap, _ := src.Snapshot()
		return slices.Equal(names(snap.Secrets.Slice()), []string{"web/tls"})
	})
	if got := src.authSecrets.watched(); len(got) != 1 { // web/basic, named by "typed"
		t.Errorf("watching %v, want web/basic alone", got)
	}
}

// The Gateway API's kinds are views too: a new HTTPRoute makes a new
// sorted list of HTTPRoutes, and the Gateways' and Namespaces' lists are
// the very ones handed out before.
func TestGatewaySnapshotAfterOneRouteCopiesOnlyRoutes(t *testing.T) {
	gw := gatewayfake.NewSimpleClientset()
	createGatewayObjects(t, gw, gatewayTestObjects()...)
	kubeclienttest.ServeGatewayAPI(gw)
	src := New(kubeclienttest.WrapGateway(fake.NewClientset(gatewayCoreObjects()...), gw), Options{})
	changes := make(chan source.Change, 100)
	startSource(t, src, func(c source.Change) { changes <- c })
	before, _ := src.Snapshot()
	wantGatewaySnapshot(t, before)
	if before.HTTPRoutes.Len() == 0 {
		t.Fatal("no HTTPRoute to start with")
	}
	route := before.HTTPRoutes.At(0).DeepCopy()
	route.Name, route.ResourceVersion = "aaa-new", ""
	createGatewayObjects(t, gw, route)
	eventually(t, "the new HTTPRoute reported", func() bool {
		for {
			select {
			case c := <-changes:
				if c.Kind == source.KindHTTPRoute && c.Name == "aaa-new" {
					return true
				}
			default:
				return false
			}
		}
	})
	after, _ := src.Snapshot()
	if after.HTTPRoutes.Len() != before.HTTPRoutes.Len()+1 {
		t.Errorf("%d HTTPRoutes after, want %d", after.HTTPRoutes.Len(), before.HTTPRoutes.Len()+1)
	}
	wantSorted(t, "HTTPRoutes", after.HTTPRoutes.Slice())
	if !sameList(after.Gateways, before.Gateways) || !sameList(after.Namespaces, before.Namespaces) ||
		!sameList(after.GatewayClasses, before.GatewayClasses) {
		t.Errorf("a new list of Gateways, Namespaces or GatewayClasses after a new HTTPRoute")
	}
}

// The informers keep no index (kubeclient.NewInformer): nothing reads one
// by namespace (1.7 MB a kind at 50,000 objects), and the EndpointSlices
// by Service are the source's own (slicesOf; the informer's index held a
// set per Service, 14 MB at 50,000). The Ingresses', Services' and
// EndpointSlices' informers keep no cache of their own: their views are
// (viewinformer.go).
func TestInformersHoldNoIndex(t *testing.T) {
	gw := gatewayfake.NewSimpleClientset()
	kubeclienttest.ServeGatewayAPI(gw)
	src := New(kubeclienttest.WrapGateway(fake.NewClientset(testObjects()...), gw), Options{ConfigMap: "restysync/restysync"})
	startSource(t, src, func(source.Change) {})
	for _, ni := range src.allInformers() {
		switch ni.kind {
		case source.KindIngress, source.KindService, source.KindEndpointSlice:
			if _, ok := ni.informer.(cache.SharedInformer); ok {
				t.Errorf("%s informer is a shared informer, want one whose cache is the view", ni.kind)
			}
			continue
		}
		shared, ok := ni.informer.(cache.SharedIndexInformer)
		if !ok {
			t.Errorf("%s informer is a %T, want a shared informer", ni.kind, ni.informer)
			continue
		}
		if indexers := shared.GetIndexer().GetIndexers(); len(indexers) != 0 {
			t.Errorf("%s informer indexers %v, want none", ni.kind, slices.Collect(maps.Keys(indexers)))
		}
	}
}

// ServiceEndpoints follows the EndpointSlices' adds, updates (one that
// moves to another Service included) and deletes, and a list it returned
// is never changed.
func TestServiceEndpoints(t *testing.T) {
	client := fake.NewClientset(testObjects()...)
	src := New(kubeclienttest.Wrap(client), Options{})
	startSource(t, src, func(source.Change) {})
	endpoints := func(service string) []string {
		_, list := src.ServiceEndpoints("web", service)
		return names(list)
	}
	svc, first := src.ServiceEndpoints("web", "app")
	if svc == nil || !slices.Equal(names(first), []string{"web/app-1"}) {
		t.Fatalf("ServiceEndpoints(web, app) = %v, %v; want the Service and web/app-1", svc, names(first))
	}
	ctx := context.Background()
	api := client.DiscoveryV1().EndpointSlices("web")
	second := first[0].DeepCopy()
	// The cached slice's only label, its Service's name, was dropped
	// (slicelabels.go).
	second.Name, second.ResourceVersion = "app-2", "1"
	second.Labels = map[string]string{discoveryv1.LabelServiceName: "app"}
	if _, err := api.Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web/app-2 served", func() bool { return slices.Equal(endpoints("app"), []string{"web/app-1", "web/app-2"}) })
	before, _ := src.Snapshot()
	checkSlicesOf(t, before)
	moved := second.DeepCopy()
	moved.Labels = map[string]string{discoveryv1.LabelServiceName: "other"}
	moved.ResourceVersion = "2"
	if _, err := api.Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web/app-2 moved to web/other", func() bool {
		return slices.Equal(endpoints("app"), []string{"web/app-1"}) && slices.Equal(endpoints("other"), []string{"web/app-2"})
	})
	if err := api.Delete(ctx, "app-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web/app-1 gone", func() bool { return len(endpoints("app")) == 0 })
	if !slices.Equal(names(first), []string{"web/app-1"}) {
		t.Errorf("a list returned before changed: %v", names(first))
	}
	after, _ := src.Snapshot()
	checkSlicesOf(t, after)
	// The Snapshot before still answers for its own slices.
	checkSlicesOf(t, before)
	changed := src.TakeChangedServices()
	slices.SortFunc(changed, func(a, b source.ServiceKey) int { return strings.Compare(a.Name, b.Name) })
	if want := []source.ServiceKey{{Namespace: "web", Name: "app"}, {Namespace: "web", Name: "other"}}; !slices.Equal(changed, want) {
		t.Errorf("changed Services %v, want %v", changed, want)
	}
}

// checkSlicesOf checks that snap's SlicesOf holds each of its
// EndpointSlices under its Service (ServiceOfSlice), and no other.
func checkSlicesOf(t *testing.T, snap model.Snapshot) {
	t.Helper()
	if snap.SlicesOf == nil {
		t.Fatal("the Snapshot has no SlicesOf")
	}
	want := map[string][]string{}
	for slice := range snap.EndpointSlices.All() {
		if service := snap.ServiceOfSlice(slice); service != "" {
			key := slice.Namespace + "/" + service
			want[key] = append(want[key], slice.Namespace+"/"+slice.Name)
		}
	}
	for svc := range snap.Services.All() {
		key := svc.Namespace + "/" + svc.Name
		got := names(snap.SlicesOf(svc.Namespace, svc.Name))
		slices.Sort(got)
		if !slices.Equal(got, want[key]) {
			t.Errorf("SlicesOf(%s) = %v, want %v", key, got, want[key])
		}
		delete(want, key)
	}
	for key, list := range want {
		namespace, name, _ := strings.Cut(key, "/")
		if got := names(snap.SlicesOf(namespace, name)); !slices.Equal(got, list) {
			t.Errorf("SlicesOf(%s) of no Service = %v, want %v", key, got, list)
		}
	}
}

// TakeChangedServices lets go of the room its set took: the first
// listing notes every Service with slices, and a cleared map would keep
// room for them all for good (3 MB at 50,000).
func TestTakeChangedServicesFreesTheListingsRoom(t *testing.T) {
	src := New(nil, Options{})
	for i := range 50000 {
		src.noteSlice(nil, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: fmt.Sprintf("s-%d", i),
			Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc-%d", i)}}})
	}
	before := heapAlloc()
	if got := len(src.TakeChangedServices()); got != 50000 {
		t.Fatalf("took %d Services, want 50000", got)
	}
	after := heapAlloc()
	freed := int64(before) - int64(after)
	t.Logf("freed %d bytes", freed)
	if freed < 2<<20 {
		t.Errorf("taking 50,000 changed Services freed %d bytes, want the set's room (over 2 MB)", freed)
	}
	runtime.KeepAlive(src)
}
