//go:build linux

package status

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/typed/apis/v1"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/source/kube"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

const (
	testController  = "restysync.io/gateway-controller"
	otherController = "example.com/other-controller"
)

// gatewayStatusWrites returns a client that counts its Gateway API status
// writes; before, when set, runs before each one is sent.
func gatewayStatusWrites(t *testing.T, cfg *rest.Config, before func()) (kubeclient.Interface, *atomic.Int64) {
	t.Helper()
	cfg, writes := countStatusWrites(cfg, "/gateway.networking.k8s.io/", before)
	return newClient(t, cfg), writes
}

// gatewayRequests returns a client that counts every request it sends to
// the Gateway API (reads and writes).
func gatewayRequests(t *testing.T, cfg *rest.Config) (kubeclient.Interface, *atomic.Int64) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	requests := new(atomic.Int64)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/gateway.networking.k8s.io/") {
				requests.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	return newClient(t, cfg), requests
}

// newGatewayAPIWriter returns a Writer of the Gateway API status only, with
// the Lease lease and lookup (nil: none).
func newGatewayAPIWriter(t *testing.T, client kubeclient.Interface, lookup GatewayAPILookup, lease, identity string) *Writer {
	t.Helper()
	opts := testElection
	opts.Namespace, opts.LeaseName, opts.Identity = "restysync", lease, identity
	opts.GatewayAPI = &GatewayAPIOptions{ControllerName: testController, Lookup: lookup}
	opts.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := NewWriter(client, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// testLog writes a Writer's log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func accepted(ok bool, reason string) model.Condition {
	return model.Condition{Type: "Accepted", Status: ok, Reason: reason}
}

func programmedCondition() model.Condition {
	return model.Condition{Type: "Programmed", Status: true, Reason: "Programmed"}
}

// condition returns the condition typ of conds, failing t without one.
func condition(t *testing.T, what string, conds []metav1.Condition, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		t.Fatalf("%s: no %s condition in %+v", what, typ, conds)
	}
	return *c
}

func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

// TestGatewayAPIStatusAPIServer feeds hand-built GatewayAPIStatus values
// to Writers on a real API server with the v1.6.3 CRDs, and checks what
// lands on the objects.
func TestGatewayAPIStatusAPIServer(t *testing.T) {
	srv, _, gw := startGatewayAPIServer(t)
	ctx := context.Background()
	class, err := gw.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: testController},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gateway := func(name string) *gatewayv1.Gateway {
		t.Helper()
		g, err := gw.Gateways("web").Create(ctx, &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync", Listeners: []gatewayv1.Listener{
				{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	gwA, _ := gateway("a"), gateway("b")
	route, err := gw.HTTPRoutes("web").Create(ctx, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{
			{Name: "a"}, {Name: "b"}, {Name: "elsewhere"},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Another controller's entry, for the Gateway "elsewhere" of its own.
	otherNS := gatewayv1.Namespace("web")
	otherEntry := gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Name: "elsewhere", Namespace: &otherNS},
		ControllerName: otherController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted",
			ObservedGeneration: route.Generation, LastTransitionTime: metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))}},
	}
	route.Status.Parents = []gatewayv1.RouteParentStatus{otherEntry}
	if route, err = gw.HTTPRoutes("web").UpdateStatus(ctx, route, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	getClass := func() *gatewayv1.GatewayClass {
		t.Helper()
		c, err := gw.GatewayClasses().Get(ctx, "restysync", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	getGateway := func(name string) *gatewayv1.Gateway {
		t.Helper()
		g, err := gw.Gateways("web").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	getRoute := func() *gatewayv1.HTTPRoute {
		t.Helper()
		r, err := gw.HTTPRoutes("web").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// ours returns the route's entries of our controller, and checks that
	// the other controller's entry is still there, unchanged.
	ours := func(r *gatewayv1.HTTPRoute) []gatewayv1.RouteParentStatus {
		t.Helper()
		var out []gatewayv1.RouteParentStatus
		other := 0
		for _, p := range r.Status.Parents {
			switch p.ControllerName {
			case testController:
				out = append(out, p)
			case otherController:
				other++
				if p.ParentRef.Name != "elsewhere" || !hasCondition(p.Conditions, "Accepted", metav1.ConditionTrue, "Accepted") ||
					!p.Conditions[0].LastTransitionTime.Equal(&otherEntry.Conditions[0].LastTransitionTime) {
					t.Errorf("the other controller's entry changed: %+v", p)
				}
			}
		}
		if other != 1 {
			t.Errorf("%d entries of the other controller, want 1", other)
		}
		return out
	}

	gatewayStatus := func(g *gatewayv1.Gateway, addr string) model.GatewayStatus {
		return model.GatewayStatus{
			Namespace: "web", Name: g.Name, Generation: g.Generation, Addresses: []string{addr},
			Conditions: []model.Condition{accepted(true, "Accepted"), programmedCondition()},
			Listeners: []model.ListenerStatus{{
				Name: "http", SupportedKinds: []string{"HTTPRoute"}, AttachedRoutes: 1,
				Conditions: []model.Condition{accepted(true, "Accepted"), {Type: "ResolvedRefs", Status: true, Reason: "ResolvedRefs"},
					{Type: "Conflicted", Status: false, Reason: "NoConflicts"}, programmedCondition()},
			}},
		}
	}
	parent := func(name string, ok bool, reason string) model.RouteParentStatus {
		return model.RouteParentStatus{Namespace: "web", Name: name,
			Conditions: []model.Condition{accepted(ok, reason), {Type: "ResolvedRefs", Status: true, Reason: "ResolvedRefs"}}}
	}
	wanted := model.GatewayAPIStatus{
		Classes: []model.GatewayClassStatus{{Name: "restysync", Generation: class.Generation,
			Conditions:        []model.Condition{accepted(true, "Accepted")},
			SupportedFeatures: []string{"HTTPRoute", "Gateway", "HTTPRouteMethodMatching", "Gateway"}}},
		Gateways: []model.GatewayStatus{gatewayStatus(gwA, "127.0.50.1"), gatewayStatus(getGateway("b"), "127.0.50.2")},
		Routes: model.ListOf([]*model.RouteStatus{{Kind: "HTTPRoute", Namespace: "web", Name: "web", Generation: route.Generation,
			Parents: []model.RouteParentStatus{parent("a", true, "Accepted"), parent("b", false, "NotAllowedByListeners")}}}...),
	}

	outer := t
	client, writes := gatewayStatusWrites(t, srv.Config(), nil)
	w := newGatewayAPIWriter(t, client, nil, "gateway-api", "replica-a")
	stop := runWriter(t, w)
	eventually(t, "a leader", w.IsLeader)

	var acceptedSince metav1.Time
	t.Run("pending until confirmed", func(t *testing.T) {
		// Nothing confirmed yet: every Programmed=True is Pending.
		w.UpdateGatewayAPI(wanted, model.GatewayAPIStatus{})
		eventually(t, "the route's parents written", func() bool { return len(ours(getRoute())) == 2 })

		c := getClass()
		acc := condition(t, "GatewayClass", c.Status.Conditions, "Accepted")
		if acc.Status != metav1.ConditionTrue || acc.ObservedGeneration != class.Generation {
			t.Errorf("GatewayClass Accepted = %+v, want True at generation %d", acc, class.Generation)
		}
		var features []string
		for _, f := range c.Status.SupportedFeatures {
			features = append(features, string(f.Name))
		}
		if got := strings.Join(features, ","); got != "Gateway,HTTPRoute,HTTPRouteMethodMatching" {
			t.Errorf("supportedFeatures = %s, want sorted and unique", got)
		}

		g := getGateway("a")
		if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value != "127.0.50.1" ||
			g.Status.Addresses[0].Type == nil || *g.Status.Addresses[0].Type != gatewayv1.IPAddressType {
			t.Errorf("addresses = %+v, want IPAddress 127.0.50.1", g.Status.Addresses)
		}
		if !hasCondition(g.Status.Conditions, "Accepted", metav1.ConditionTrue, "Accepted") ||
			!hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionFalse, ReasonPending) {
			t.Errorf("Gateway conditions = %+v, want Accepted, and Programmed Pending", g.Status.Conditions)
		}
		for _, cond := range g.Status.Conditions {
			if cond.ObservedGeneration != g.Generation {
				t.Errorf("Gateway condition %s at generation %d, want %d", cond.Type, cond.ObservedGeneration, g.Generation)
			}
		}
		if len(g.Status.Listeners) != 1 {
			t.Fatalf("listeners = %+v, want one", g.Status.Listeners)
		}
		l := g.Status.Listeners[0]
		if l.Name != "http" || l.AttachedRoutes != 1 || len(l.SupportedKinds) != 1 || l.SupportedKinds[0].Kind != "HTTPRoute" ||
			l.SupportedKinds[0].Group == nil || *l.SupportedKinds[0].Group != gatewayv1.GroupName {
			t.Errorf("listener = %+v", l)
		}
		if !hasCondition(l.Conditions, "Programmed", metav1.ConditionFalse, ReasonPending) ||
			!hasCondition(l.Conditions, "Conflicted", metav1.ConditionFalse, "NoConflicts") {
			t.Errorf("listener conditions = %+v, want Programmed Pending", l.Conditions)
		}

		parents := ours(getRoute())
		for i, want := range []struct {
			name, reason string
			status       metav1.ConditionStatus
		}{{"a", "Accepted", metav1.ConditionTrue}, {"b", "NotAllowedByListeners", metav1.ConditionFalse}} {
			p := parents[i]
			if string(p.ParentRef.Name) != want.name || p.ParentRef.Namespace == nil || *p.ParentRef.Namespace != "web" ||
				p.ParentRef.Kind == nil || *p.ParentRef.Kind != "Gateway" || p.ParentRef.Group == nil || *p.ParentRef.Group != gatewayv1.GroupName {
				t.Errorf("parent %d = %+v, want Gateway web/%s", i, p.ParentRef, want.name)
			}
			if !hasCondition(p.Conditions, "Accepted", want.status, want.reason) {
				t.Errorf("parent %s conditions = %+v, want Accepted %s %s", want.name, p.Conditions, want.status, want.reason)
			}
			if acc := condition(t, "parent", p.Conditions, "Accepted"); acc.ObservedGeneration != route.Generation {
				t.Errorf("parent %s observedGeneration %d, want %d", want.name, acc.ObservedGeneration, route.Generation)
			}
		}
		acceptedSince = condition(t, "Gateway a", g.Status.Conditions, "Accepted").LastTransitionTime

		// nginx confirms it: Programmed.
		time.Sleep(1100 * time.Millisecond) // a new lastTransitionTime would differ (whole seconds)
		w.UpdateGatewayAPI(wanted, wanted)
		eventually(t, "Gateway a programmed", func() bool {
			g := getGateway("a")
			return hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed") &&
				len(g.Status.Listeners) == 1 && hasCondition(g.Status.Listeners[0].Conditions, "Programmed", metav1.ConditionTrue, "Programmed")
		})
		g = getGateway("a")
		if since := condition(t, "Gateway a", g.Status.Conditions, "Accepted").LastTransitionTime; !since.Equal(&acceptedSince) {
			t.Errorf("Accepted lastTransitionTime moved from %s to %s while it stayed True", acceptedSince, since)
		}
		if since := condition(t, "Gateway a", g.Status.Conditions, "Programmed").LastTransitionTime; since.Equal(&acceptedSince) {
			t.Errorf("Programmed lastTransitionTime %s did not move when it turned True", since)
		}
	})

	t.Run("no write when nothing differs", func(t *testing.T) {
		// Replica a's last writes of the subtests before land first: a
		// write still in flight when b starts would make b's reads stale.
		for range 20 {
			n := writes.Load()
			time.Sleep(250 * time.Millisecond)
			if writes.Load() == n {
				break
			}
		}
		before := writes.Load()
		for range 20 {
			w.UpdateGatewayAPI(wanted, wanted)
		}
		// A replica that never wrote reads each object, and finds it as
		// wanted: it writes nothing either.
		stop()
		client2, writes2 := gatewayStatusWrites(t, srv.Config(), nil)
		w2 := newGatewayAPIWriter(outer, client2, nil, "gateway-api", "replica-b")
		stop = runWriter(outer, w2) // it runs on in the next subtests
		eventually(t, "replica b leads", w2.IsLeader)
		w2.UpdateGatewayAPI(wanted, wanted)
		// A change to class only, after the others: once it lands, the
		// pass that compared the rest is over.
		changed := wanted
		changed.Classes = []model.GatewayClassStatus{wanted.Classes[0]}
		changed.Classes[0].SupportedFeatures = []string{"Gateway", "HTTPRoute"}
		w2.UpdateGatewayAPI(changed, changed)
		eventually(t, "the class's features changed", func() bool { return len(getClass().Status.SupportedFeatures) == 2 })
		if n := writes.Load() - before; n != 0 {
			t.Errorf("replica a wrote %d times the same status, want 0", n)
		}
		if n := writes2.Load(); n != 1 {
			t.Errorf("replica b wrote %d statuses, want 1 (the class)", n)
		}
		if since := condition(t, "Gateway a", getGateway("a").Status.Conditions, "Accepted").LastTransitionTime; !since.Equal(&acceptedSince) {
			t.Errorf("Accepted lastTransitionTime moved from %s to %s", acceptedSince, since)
		}
		w = w2
	})

	t.Run("generation not confirmed is pending", func(t *testing.T) {
		g := getGateway("a")
		g.Spec.Listeners[0].Port = 8080
		g, err := gw.Gateways("web").Update(ctx, g, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next := wanted
		next.Gateways = []model.GatewayStatus{gatewayStatus(g, "127.0.50.1"), wanted.Gateways[1]}
		w.UpdateGatewayAPI(next, wanted) // nginx confirmed only the last generation
		eventually(t, "Gateway a pending at its new generation", func() bool {
			g := getGateway("a")
			c := meta.FindStatusCondition(g.Status.Conditions, "Programmed")
			return c != nil && c.Reason == ReasonPending && c.ObservedGeneration == g.Generation
		})
		w.UpdateGatewayAPI(next, next)
		eventually(t, "Gateway a programmed at its new generation", func() bool {
			return hasCondition(getGateway("a").Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed")
		})
		wanted = next
	})

	t.Run("our parents follow the model", func(t *testing.T) {
		// b is no longer a parent of ours (say its class changed): our
		// entry for it goes, the other controller's stays.
		next := wanted
		next.Gateways = wanted.Gateways[:1]
		first := *wanted.Routes.At(0)
		first.Parents = first.Parents[:1]
		next.Routes = model.ListOf(&first)
		w.UpdateGatewayAPI(next, next)
		eventually(t, "b's entry removed", func() bool {
			p := ours(getRoute())
			return len(p) == 1 && p[0].ParentRef.Name == "a"
		})
		// The route names none of our Gateways any more: all our entries go.
		next.Routes = model.List[*model.RouteStatus]{}
		w.UpdateGatewayAPI(next, next)
		eventually(t, "our entries removed", func() bool { return len(ours(getRoute())) == 0 })
		// A Gateway no longer ours keeps what it had: nothing is written.
		if g := getGateway("b"); !hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed") {
			t.Errorf("Gateway b's status changed after it left: %+v", g.Status.Conditions)
		}
		wanted = next
	})

	t.Run("conflict retried", func(t *testing.T) {
		// Before the first status write is sent, the Gateway changes
		// under it: the write conflicts, and the writer reads it again.
		var bumped atomic.Bool
		client3, writes3 := gatewayStatusWrites(t, srv.Config(), func() {
			if !bumped.CompareAndSwap(false, true) {
				return
			}
			g := getGateway("a")
			g.Labels = map[string]string{"bumped": "yes"}
			if _, err := gw.Gateways("web").Update(ctx, g, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		})
		stop() // the Lease is released: replica c leads at once
		w3 := newGatewayAPIWriter(t, client3, nil, "gateway-api", "replica-c")
		stop = runWriter(outer, w3)
		next := wanted
		next.Gateways = []model.GatewayStatus{wanted.Gateways[0]}
		next.Gateways[0].Addresses = []string{"127.0.50.9"}
		w3.UpdateGatewayAPI(next, next)
		eventually(t, "the new address written", func() bool {
			a := getGateway("a").Status.Addresses
			return len(a) == 1 && a[0].Value == "127.0.50.9"
		})
		if !bumped.Load() {
			t.Fatal("no conflict was made")
		}
		if n := writes3.Load(); n != 2 {
			t.Errorf("%d status writes, want 2 (one conflict, one retry)", n)
		}
		if getGateway("a").Labels["bumped"] != "yes" {
			t.Error("the change that made the conflict was lost")
		}
	})

	t.Run("a follower writes nothing", func(t *testing.T) {
		stop()
		clientA, writesA := gatewayStatusWrites(t, srv.Config(), nil)
		clientB, writesB := gatewayStatusWrites(t, srv.Config(), nil)
		wa := newGatewayAPIWriter(t, clientA, nil, "leader-only", "replica-a")
		wb := newGatewayAPIWriter(t, clientB, nil, "leader-only", "replica-b")
		exclusive(t, wa, wb)
		runWriter(t, wa)
		runWriter(t, wb)
		eventually(t, "a leader", func() bool { return wa.IsLeader() || wb.IsLeader() })
		next := model.GatewayAPIStatus{Classes: []model.GatewayClassStatus{wanted.Classes[0]}}
		next.Classes[0].SupportedFeatures = []string{"Gateway"}
		wa.UpdateGatewayAPI(next, next)
		wb.UpdateGatewayAPI(next, next)
		eventually(t, "the class's features changed", func() bool { return len(getClass().Status.SupportedFeatures) == 1 })
		leaderWrites, followerWrites := writesA, writesB
		if wb.IsLeader() {
			leaderWrites, followerWrites = writesB, writesA
		}
		never(t, 500*time.Millisecond, "the follower wrote status", func() bool { return followerWrites.Load() != 0 })
		if n := leaderWrites.Load(); n != 1 {
			t.Errorf("the leader wrote %d times, want 1 (the class)", n)
		}
	})

	// As the agent runs it: the kube source's caches are the Lookup, so a
	// pass compares with them and sends a request only to write.
	t.Run("the source's caches as Lookup", func(t *testing.T) {
		kc := newClient(t, srv.Config())
		src := kube.New(kc, kube.Options{GatewayController: testController})
		srcCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer func() {
			cancel()
			<-src.Done()
		}()
		if err := src.Start(srcCtx, func(source.Change) {}); err != nil {
			t.Fatal(err)
		}
		client, requests := gatewayRequests(t, srv.Config())
		w := newGatewayAPIWriter(t, client, src, "cached", "replica-d")
		runWriter(t, w)
		eventually(t, "a leader", w.IsLeader)
		// features sets the class's features, feeds next to w and waits
		// until the source's cache has them: the pass that wrote them has
		// compared the class, and the next compares with the cache.
		next := wanted
		next.Classes = []model.GatewayClassStatus{wanted.Classes[0]}
		features := func(names ...string) {
			t.Helper()
			next.Classes[0].SupportedFeatures = names
			w.UpdateGatewayAPI(next, next)
			eventually(t, "the class's features in the cache", func() bool {
				c := src.GatewayClass("restysync")
				return c != nil && len(c.Status.SupportedFeatures) == len(names)
			})
		}
		features("Gateway")
		features("Gateway", "HTTPRoute") // the pass that wrote "Gateway" is over
		before := requests.Load()
		for range 20 {
			w.UpdateGatewayAPI(next, next)
		}
		features("Gateway", "HTTPRoute", "HTTPRouteMethodMatching")
		if n := requests.Load() - before; n != 1 {
			t.Errorf("%d Gateway API requests, want 1 (the class's status; nothing read: the cache is compared)", n)
		}
	})
}

// startGatewayAPIServer starts an API server with the Gateway API's CRDs
// and the Namespaces restysync and web, and returns it with admin clients.
func startGatewayAPIServer(t *testing.T) (*kubeapi.Server, kubernetes.Interface, *gatewayclient.GatewayV1Client) {
	t.Helper()
	srv := kubeapi.Start(t, kubeapi.Options{})
	kubeapi.InstallGatewayAPI(t, srv, false)
	admin := adminClientset(t, srv.Config())
	gw, err := gatewayclient.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"restysync", "web"} {
		if _, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, admin, gw
}
