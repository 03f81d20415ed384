//go:build linux

package status

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/typed/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/source/kube"
)

// objectWrites returns a config whose client counts its writes (not
// GET, LIST or WATCH) to Services and EndpointSlices.
func objectWrites(cfg *rest.Config) (*rest.Config, *atomic.Int64) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 1000
	writes := new(atomic.Int64)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodGet && (strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/web/services") || strings.Contains(r.URL.Path, "/endpointslices")) {
				writes.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg, writes
}

// TestGatewayServicesAPIServer runs the chain as the agent does on a real
// API server with the v1.6.3 CRDs: the kube source's snapshot, model.Build
// with GatewayServices, and the leader's Writer with the source's caches.
// A Gateway with spec.infrastructure gets its Service and EndpointSlice
// with its labels and annotations (a forged managed-by label refused); a
// Service of the name that is not ours is left alone; a pass that changes
// nothing writes nothing; a change of labels is written; a Gateway no
// longer accepted loses them.
func TestGatewayServicesAPIServer(t *testing.T) {
	srv, admin, gwc := startGatewayAPIServer(t)
	ctx := context.Background()
	if _, err := gwc.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: testController}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newGateway := func(name string, labels map[gatewayv1.LabelKey]gatewayv1.LabelValue) {
		t.Helper()
		_, err := gwc.Gateways("web").Create(ctx, &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync",
				Infrastructure: &gatewayv1.GatewayInfrastructure{Labels: labels,
					Annotations: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"key1": "value1"}},
				Listeners: []gatewayv1.Listener{
					{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80},
					{Name: "alt", Protocol: gatewayv1.HTTPProtocolType, Port: 8080},
				}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	newGateway("gw", map[gatewayv1.LabelKey]gatewayv1.LabelValue{"key2": "value2", "app.kubernetes.io/managed-by": "forged"})
	// A tenant's Service holds the name the Gateway "clash" would use.
	foreign, err := admin.CoreV1().Services("web").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "clash-restysync", Labels: map[string]string{model.GatewayServiceManagedByLabel: model.GatewayServiceManagedBy}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1234}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newGateway("clash", nil)
	newGateway("moved", nil)
	if _, err := gwc.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: otherController}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	kc := newClient(t, srv.Config())
	src := kube.New(kc, kube.Options{GatewayController: testController})
	srcCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer func() {
		cancel()
		<-src.Done()
	}()
	if err := src.Start(srcCtx, func(source.Change) {}); err != nil {
		t.Fatal(err)
	}
	cfg, writes := objectWrites(srv.Config())
	opts := testElection
	opts.Namespace, opts.LeaseName, opts.Identity = "restysync", "services", "replica-s"
	opts.GatewayAPI = &GatewayAPIOptions{ControllerName: testController, Lookup: src, Services: src}
	opts.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := NewWriter(newClient(t, cfg), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	runWriter(t, w)
	eventually(t, "a leader", w.IsLeader)

	// sync is one sync of the agent: build the source's snapshot and hand
	// the status to the writer; it returns the problems.
	sync := func() []model.Problem {
		t.Helper()
		snap, _ := src.Snapshot()
		snap.GatewayController = testController
		snap.GatewayAddresses = []string{"192.0.2.10", "192.0.2.11", "127.0.50.1"}
		snap.GatewayServices = true
		m, problems := model.Build(snap)
		w.UpdateGatewayAPI(m.GatewayAPI, m.GatewayAPI)
		return problems
	}
	service := func(name string) *corev1.Service {
		svc, err := admin.CoreV1().Services("web").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	slice := func(name string) *discoveryv1.EndpointSlice {
		s, err := admin.DiscoveryV1().EndpointSlices("web").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	gw, err := gwc.Gateways("web").Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var problems []model.Problem
	eventually(t, "the Gateways' Services and EndpointSlices", func() bool {
		problems = sync()
		return service("gw-restysync") != nil && slice("gw-restysync-ipv4") != nil && service("moved-restysync") != nil
	})
	svc := service("gw-restysync")
	wantLabels := map[string]string{"key2": "value2", model.GatewayNameLabel: "gw", model.GatewayServiceManagedByLabel: model.GatewayServiceManagedBy}
	if !maps.Equal(svc.Labels, wantLabels) || !maps.Equal(svc.Annotations, map[string]string{"key1": "value1"}) {
		t.Errorf("Service labels %v annotations %v, want %v and key1=value1", svc.Labels, svc.Annotations, wantLabels)
	}
	if !model.OwnedByGateway(svc, gw.UID) || len(svc.Spec.Selector) > 0 {
		t.Errorf("Service owners %+v selector %v: want the Gateway as controller, no selector", svc.OwnerReferences, svc.Spec.Selector)
	}
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	if !slices.Equal(ports, []int32{80, 8080}) {
		t.Errorf("Service ports %v, want 80 and 8080", ports)
	}
	es := slice("gw-restysync-ipv4")
	if es.Labels[discoveryv1.LabelServiceName] != "gw-restysync" || es.Labels[discoveryv1.LabelManagedBy] != model.GatewayServiceSliceManager ||
		es.Labels["key2"] != "value2" || !model.OwnedByGateway(es, gw.UID) {
		t.Errorf("EndpointSlice labels %v owners %+v", es.Labels, es.OwnerReferences)
	}
	gwStatus, err := gwc.Gateways("web").Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es.Endpoints) != 1 || len(gwStatus.Status.Addresses) != 1 || !slices.Equal(es.Endpoints[0].Addresses, []string{gwStatus.Status.Addresses[0].Value}) || len(es.Ports) != 2 {
		t.Errorf("EndpointSlice endpoints %+v ports %+v, want the Gateway's address %+v on two ports", es.Endpoints, es.Ports, gwStatus.Status.Addresses)
	}
	var reasons []string
	for _, p := range problems {
		reasons = append(reasons, p.Object()+": "+p.Reason)
	}
	joined := strings.Join(reasons, "\n")
	if !strings.Contains(joined, `Gateway web/gw: spec.infrastructure.labels["app.kubernetes.io/managed-by"]`) ||
		!strings.Contains(joined, "Gateway web/clash: spec.infrastructure: Service clash-restysync exists and is not this Gateway's") {
		t.Errorf("problems:\n%s\nwant the forged label and the clash, each naming its Gateway", joined)
	}

	// A pass that changes nothing writes nothing; the tenant's Service is
	// untouched and the clashing Gateway has no EndpointSlice.
	time.Sleep(500 * time.Millisecond) // the cache catches up with the writes
	sync()
	time.Sleep(300 * time.Millisecond)
	before := writes.Load()
	for range 5 {
		sync()
		time.Sleep(100 * time.Millisecond)
	}
	if n := writes.Load() - before; n != 0 {
		t.Errorf("%d writes to Services or EndpointSlices by passes that changed nothing", n)
	}
	if got := service("clash-restysync"); got.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the tenant's Service was written: %+v", got.ObjectMeta)
	}
	if slice("clash-restysync-ipv4") != nil {
		t.Errorf("an EndpointSlice for the Gateway whose Service name is taken")
	}

	// New labels reach the Service; the one taken out leaves it.
	updateGateway(t, gwc, "gw", func(gw *gatewayv1.Gateway) {
		gw.Spec.Infrastructure.Labels = map[gatewayv1.LabelKey]gatewayv1.LabelValue{"key3": "value3"}
	})
	eventually(t, "the new labels on the Service and EndpointSlice", func() bool {
		sync()
		svc, es := service("gw-restysync"), slice("gw-restysync-ipv4")
		return svc.Labels["key3"] == "value3" && svc.Labels["key2"] == "" && es.Labels["key3"] == "value3" && es.Labels["key2"] == ""
	})

	// A Gateway moved to another controller's class loses its Service.
	updateGateway(t, gwc, "moved", func(gw *gatewayv1.Gateway) { gw.Spec.GatewayClassName = "other" })
	eventually(t, "the moved Gateway's Service deleted", func() bool {
		sync()
		return service("moved-restysync") == nil
	})

	// A Gateway of our class no longer accepted (a parametersRef) loses
	// its Service and EndpointSlice; the tenant's Service stays.
	updateGateway(t, gwc, "gw", func(gw *gatewayv1.Gateway) {
		gw.Spec.Infrastructure.ParametersRef = &gatewayv1.LocalParametersReference{Group: "example.com", Kind: "Params", Name: "p"}
	})
	eventually(t, "the Service and EndpointSlice deleted", func() bool {
		sync()
		return service("gw-restysync") == nil && slice("gw-restysync-ipv4") == nil
	})
	if service("clash-restysync") == nil {
		t.Errorf("the tenant's Service was deleted")
	}
}

// updateGateway changes the Gateway web/name with change, again after a
// conflict (the writer writes its status meanwhile).
func updateGateway(t *testing.T, gwc *gatewayclient.GatewayV1Client, name string, change func(*gatewayv1.Gateway)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		gw, err := gwc.Gateways("web").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(gw)
		_, err = gwc.Gateways("web").Update(context.Background(), gw, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
