package status

import (
	"context"
	"errors"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
)

// routeCache is an informer's cache of a fake clientset's Gateway API
// objects: refresh keeps the object it holds while the clientset's is the
// same (an informer replaces an object only when it changed), and it
// counts the HTTPRoutes the Writer looks up.
type routeCache struct {
	gw      *gatewayfake.Clientset
	classes map[string]*gatewayv1.GatewayClass
	gws     map[string]*gatewayv1.Gateway
	routes  map[string]*gatewayv1.HTTPRoute
	reads   int
}

func (c *routeCache) refresh(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	classes, err1 := c.gw.GatewayV1().GatewayClasses().List(ctx, metav1.ListOptions{})
	gws, err2 := c.gw.GatewayV1().Gateways("").List(ctx, metav1.ListOptions{})
	routes, err3 := c.gw.GatewayV1().HTTPRoutes("").List(ctx, metav1.ListOptions{})
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	c.classes = keep(c.classes, classes.Items)
	c.gws = keep(c.gws, gws.Items)
	c.routes = keep(c.routes, routes.Items)
}

func keep[T any](held map[string]*T, items []T) map[string]*T {
	out := map[string]*T{}
	for i := range items {
		obj := &items[i]
		key := any(obj).(metav1.Object).GetNamespace() + "/" + any(obj).(metav1.Object).GetName()
		if old := held[key]; old != nil && reflect.DeepEqual(old, obj) {
			obj = old
		}
		out[key] = obj
	}
	return out
}

func (c *routeCache) snapshot() model.Snapshot {
	s := model.Snapshot{GatewayController: model.GatewayControllerName, GatewayAddresses: []string{"127.0.50.1"}}
	for _, o := range c.classes {
		s.GatewayClasses = model.ListOf(append(s.GatewayClasses.Slice(), o)...)
	}
	for _, o := range c.gws {
		s.Gateways = model.ListOf(append(s.Gateways.Slice(), o)...)
	}
	for _, o := range c.routes {
		s.HTTPRoutes = model.ListOf(append(s.HTTPRoutes.Slice(), o)...)
	}
	return s
}

func (c *routeCache) GatewayClass(name string) *gatewayv1.GatewayClass { return c.classes["/"+name] }
func (c *routeCache) Gateway(namespace, name string) *gatewayv1.Gateway {
	return c.gws[namespace+"/"+name]
}
func (c *routeCache) HTTPRoute(namespace, name string) *gatewayv1.HTTPRoute {
	c.reads++
	return c.routes[namespace+"/"+name]
}
func (c *routeCache) GRPCRoute(string, string) *gatewayv1.GRPCRoute               { return nil }
func (c *routeCache) TLSRoute(string, string) *gatewayv1.TLSRoute                 { return nil }
func (c *routeCache) ListenerSet(string, string) *gatewayv1.ListenerSet           { return nil }
func (c *routeCache) BackendTLSPolicy(string, string) *gatewayv1.BackendTLSPolicy { return nil }

// TestGatewayAPIRoutesPending runs the Writer beside model.Incremental
// over a cache of a fake cluster: a pass reads (and writes) only the
// routes whose wanted status changed since the last — a new route, not
// the others — a route whose write failed is visited again by the next
// pass, and a route whose status someone else overwrote is written again
// after the sync its change causes.
func TestGatewayAPIRoutesPending(t *testing.T) {
	ctx := context.Background()
	gw := gatewayfake.NewSimpleClientset() // NewClientset maps no Gateway v1 resource
	kubeclienttest.ServeGatewayAPI(gw)
	client := kubeclienttest.WrapGateway(fake.NewClientset(), gw)
	create := func(obj runtime.Object) {
		t.Helper()
		var err error
		switch o := obj.(type) {
		case *gatewayv1.GatewayClass:
			_, err = gw.GatewayV1().GatewayClasses().Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.Gateway:
			_, err = gw.GatewayV1().Gateways(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.HTTPRoute:
			_, err = gw.GatewayV1().HTTPRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	same := gatewayv1.NamespacesFromSame
	create(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: model.GatewayControllerName}})
	create(&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "gw", Generation: 1},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync", Listeners: []gatewayv1.Listener{{
			Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &same}}}}}})
	group, kind := gatewayv1.Group(gatewayv1.GroupName), gatewayv1.Kind("Gateway")
	route := func(name string) *gatewayv1.HTTPRoute {
		return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, Generation: 1},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Group: &group, Kind: &kind, Name: "gw"}}},
				Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(name + ".test")}}}
	}
	for _, name := range []string{"a", "b", "c"} {
		create(route(name))
	}

	cache := &routeCache{gw: gw}
	w, err := NewWriter(client, nil, Options{Namespace: "restysync", Identity: "test",
		GatewayAPI: &GatewayAPIOptions{Lookup: cache}})
	if err != nil {
		t.Fatal(err)
	}
	inc := model.NewIncremental()
	// sync is what a sync and the pass after it do: the cache catches up
	// with the cluster, the model is built from it and given to the Writer.
	sync := func(what string, wantReads int, wantErr bool) {
		t.Helper()
		cache.refresh(t)
		m, problems, _ := inc.Build(cache.snapshot())
		if m.GatewayAPI.Routes.Len() == 0 {
			t.Fatalf("%s: no route status; problems %v; %+v; snapshot %+v", what, problems, m.GatewayAPI, cache.snapshot())
		}
		w.UpdateGatewayAPI(m.GatewayAPI, m.GatewayAPI)
		cache.reads = 0
		if err := w.gateway.pass(ctx, w); (err != nil) != wantErr {
			t.Fatalf("%s: pass: %v", what, err)
		}
		if cache.reads != wantReads {
			t.Errorf("%s: the pass read %d HTTPRoutes, want %d", what, cache.reads, wantReads)
		}
	}
	accepted := func(what, name string, want bool) {
		t.Helper()
		r, err := gw.GatewayV1().HTTPRoutes("web").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(r.Status.Parents) == 1 && hasCondition(r.Status.Parents[0].Conditions, "Accepted", metav1.ConditionTrue, "Accepted"); got != want {
			t.Errorf("%s: HTTPRoute %s accepted by us %v, want %v: %+v", what, name, got, want, r.Status.Parents)
		}
	}

	sync("first", 3, false)
	for _, name := range []string{"a", "b", "c"} {
		accepted("first", name, true)
	}
	sync("our writes seen", 3, false) // each route changed: its status
	sync("nothing changed", 0, false)

	// A new route whose first write fails: the next pass writes it.
	fail := true
	gw.PrependReactor("update", "httproutes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			fail = false
			return true, nil, errors.New("the API server is away")
		}
		return false, nil, nil
	})
	create(route("d"))
	sync("a new route, its write failing", 1, true)
	accepted("failed write", "d", false)
	cache.reads = 0
	if err := w.gateway.pass(ctx, w); err != nil || cache.reads != 1 {
		t.Errorf("the pass after the failure: %v, read %d HTTPRoutes, want 1", err, cache.reads)
	}
	accepted("written again", "d", true)
	sync("its write seen", 1, false)

	// Someone else overwrites our entry of b: the sync its change causes
	// writes it again, and reads only the routes the model built again (a,
	// b and c, built together by the first build, are built again, as
	// islands of their own; not d).
	b, err := gw.GatewayV1().HTTPRoutes("web").Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Status.Parents[0].Conditions = []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "Overwritten",
		LastTransitionTime: metav1.Now()}}
	if _, err := gw.GatewayV1().HTTPRoutes("web").UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	accepted("overwritten", "b", false)
	sync("b overwritten", 3, false)
	accepted("written again", "b", true)
	sync("our write seen", 1, false)
	sync("nothing changed", 0, false)
}
