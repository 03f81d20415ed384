//go:build linux

package kube

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// On a real API server without the Gateway API's CRDs, the source serves
// Ingresses and says once that the Gateway API is not installed; once the
// CRDs are installed it reads their objects without a restart. A source
// started then reads them in its first listing, and with a namespace only
// that namespace's Gateways, HTTPRoutes, ReferenceGrants and Namespace, and
// every GatewayClass.
func TestGatewayAPIAPIServer(t *testing.T) {
	defer func(d time.Duration) { gatewayAPICheckInterval = d }(gatewayAPICheckInterval)
	gatewayAPICheckInterval = 200 * time.Millisecond
	srv := kubeapi.Start(t, kubeapi.Options{})
	admin := adminClient(t, srv)
	createAll(t, admin, gatewayCoreObjects()...)
	createAll(t, admin, testObjects()[:2]...) // the IngressClass and an Ingress in web

	var log bytes.Buffer
	logs := &syncWriter{w: &log}
	src := New(agentClient(t, srv.Config()), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	counter := newKindCounter()
	startSource(t, src, counter.changed)
	snap, _ := src.Snapshot()
	if got := names(snap.Ingresses.Slice()); !slices.Equal(got, []string{"web/app"}) || snap.GatewayClasses.Len() != 0 || snap.Namespaces.Len() != 0 {
		t.Errorf("without the CRDs: Ingresses %v (want web/app), GatewayClasses %v, Namespaces %v",
			got, names(snap.GatewayClasses.Slice()), names(snap.Namespaces.Slice()))
	}
	time.Sleep(3 * gatewayAPICheckInterval)
	if n := strings.Count(logs.String(), "the Gateway API is not installed"); n != 1 {
		t.Errorf("said %d times that the Gateway API is not installed, want once:\n%s", n, logs)
	}

	kubeapi.InstallGatewayAPI(t, srv, false)
	gatewayAdmin, err := gatewayclient.NewForConfig(adminConfig(srv))
	if err != nil {
		t.Fatal(err)
	}
	createGatewayObjects(t, gatewayAdmin, gatewayTestObjects()...)
	// Each kind is read once its CRD is served; the optional ones
	// (TLSRoute, BackendTLSPolicy here) may come a check after
	// GatewayClass and Gateway.
	eventually(t, "the Gateway API's objects in the snapshot of the running source", func() bool {
		snap, _ = src.Snapshot()
		return snap.GatewayClasses.Len() == 2 && snap.Gateways.Len() == 2 && snap.HTTPRoutes.Len() == 2 &&
			snap.ReferenceGrants.Len() == 1 && snap.Secrets.Len() == 1 && snap.TLSRoutes.Len() == 1 &&
			snap.BackendTLSPolicies.Len() == 1
	})
	wantGatewaySnapshot(t, snap)
	if counter.get(source.KindGatewayClass) == 0 || counter.get(source.KindHTTPRoute) == 0 {
		t.Errorf("changes reported: %v", counter.counts)
	}

	// Started with the CRDs there, in one namespace.
	scoped := New(agentClient(t, srv.Config()), Options{Namespace: "web"})
	startSource(t, scoped, func(source.Change) {})
	snap, _ = scoped.Snapshot()
	for _, c := range []struct {
		kind      string
		got, want []string
	}{
		{"GatewayClasses", names(snap.GatewayClasses.Slice()), []string{"restysync", "theirs"}},
		{"Gateways", names(snap.Gateways.Slice()), []string{"web/gw", "web/their-gw"}},
		{"HTTPRoutes", names(snap.HTTPRoutes.Slice()), []string{"web/app"}},
		{"ReferenceGrants", names(snap.ReferenceGrants.Slice()), nil},
		{"Namespaces", names(snap.Namespaces.Slice()), []string{"web"}},
		// Read by name outside the namespace, as the listener names it.
		{"Secrets", names(snap.Secrets.Slice()), []string{"certs/gw-cert"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("with --namespace web: %s = %v, want %v", c.kind, c.got, c.want)
		}
	}

	// A change of a Namespace's labels reaches the snapshot.
	ns, err := admin.CoreV1().Namespaces().Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{"routes": "allowed"}
	if _, err := admin.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Namespace's new label in the snapshot", func() bool {
		snap, _ := scoped.Snapshot()
		return slices.ContainsFunc(snap.Namespaces.Slice(), func(ns *corev1.Namespace) bool { return ns.Labels["routes"] == "allowed" })
	})
}

// On a real API server whose Gateway API lacks the TLSRoute CRD (a partial
// or older install), the source reads every other kind, so the HTTPRoutes
// route, and names the missing kind: once in the log, and as one Problem
// of its CRD in every snapshot. Once the CRD is installed, TLSRoutes are
// read without a restart and the Problem is gone.
func TestGatewayAPIWithoutTLSRouteAPIServer(t *testing.T) {
	defer func(d time.Duration) { gatewayAPICheckInterval = d }(gatewayAPICheckInterval)
	gatewayAPICheckInterval = 200 * time.Millisecond
	srv := kubeapi.Start(t, kubeapi.Options{})
	createAll(t, adminClient(t, srv), gatewayCoreObjects()...)
	kubeapi.InstallGatewayAPI(t, srv, false)
	kubeapi.RemoveGatewayAPIResource(t, srv, "tlsroutes")
	gatewayAdmin, err := gatewayclient.NewForConfig(adminConfig(srv))
	if err != nil {
		t.Fatal(err)
	}
	objects := gatewayTestObjects()
	isTLSRoute := func(o runtime.Object) bool { _, ok := o.(*gatewayv1.TLSRoute); return ok }
	tlsRoute := objects[slices.IndexFunc(objects, isTLSRoute)]
	createGatewayObjects(t, gatewayAdmin, slices.DeleteFunc(objects, isTLSRoute)...)

	var log bytes.Buffer
	logs := &syncWriter{w: &log}
	src := New(agentClient(t, srv.Config()), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	startSource(t, src, func(source.Change) {})
	snap, problems := src.Snapshot()
	if got := names(snap.HTTPRoutes.Slice()); !slices.Equal(got, []string{"other/app", "web/app"}) || snap.GRPCRoutes.Len() != 1 ||
		snap.Gateways.Len() != 2 || snap.ReferenceGrants.Len() != 1 || snap.TLSRoutes.Len() != 0 {
		t.Errorf("without the TLSRoute CRD: HTTPRoutes %v (want other/app, web/app), GRPCRoutes %v, Gateways %v, ReferenceGrants %v, TLSRoutes %v",
			got, names(snap.GRPCRoutes.Slice()), names(snap.Gateways.Slice()), names(snap.ReferenceGrants.Slice()), names(snap.TLSRoutes.Slice()))
	}
	if len(problems) != 1 || problems[0].Object() != "CustomResourceDefinition tlsroutes.gateway.networking.k8s.io" ||
		!strings.Contains(problems[0].Reason, "TLSRoutes are not read") {
		t.Errorf("problems %+v, want one of CustomResourceDefinition tlsroutes.gateway.networking.k8s.io", problems)
	}

	if !slices.Equal(snap.GatewayKindsNotServed, []string{"TLSRoute"}) {
		t.Errorf("GatewayKindsNotServed %v, want [TLSRoute]", snap.GatewayKindsNotServed)
	}

	// The HTTPRoute web/app routes on our Gateway's HTTP listener.
	snap.GatewayController, snap.GatewayAddresses = model.GatewayControllerName, []string{"127.0.0.1"}
	m, _ := model.Build(snap)
	routed := slices.ContainsFunc(m.GatewayRoutes.Slice(), func(r *model.Route) bool {
		return slices.ContainsFunc(r.Locations, func(l model.RouteLocation) bool { return l.Rule != nil && l.Rule.Route == "HTTPRoute web/app" })
	})
	if !routed {
		t.Errorf("the model has no location of HTTPRoute web/app: routes %v", m.GatewayRoutes)
	}
	time.Sleep(3 * gatewayAPICheckInterval)
	if n := strings.Count(logs.String(), "lack gateway.networking.k8s.io/v1 tlsroutes"); n != 1 {
		t.Errorf("said %d times that tlsroutes are not served, want once:\n%s", n, logs)
	}

	kubeapi.InstallGatewayAPI(t, srv, false)
	createGatewayObjects(t, gatewayAdmin, tlsRoute)
	eventually(t, "the TLSRoute in the snapshot of the running source, and no problem", func() bool {
		snap, problems = src.Snapshot()
		return snap.TLSRoutes.Len() == 1 && len(problems) == 0 && len(snap.GatewayKindsNotServed) == 0
	})
	wantGatewaySnapshot(t, snap)
}
