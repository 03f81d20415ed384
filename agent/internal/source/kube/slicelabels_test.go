package kube

import (
	"context"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// The cached EndpointSlices lose their labels, their Service's name kept
// beside them (slicelabels.go): a Snapshot names each slice's Service, a
// slice that moves to another Service or goes is forgotten, a Gateway
// Service's slice keeps its labels, and a slice listed again at the same
// version is the cached one.
func TestSliceLabelsDropped(t *testing.T) {
	slice := func(name, service, version string, labels map[string]string) *discoveryv1.EndpointSlice {
		l := map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
		for k, v := range labels {
			l[k] = v
		}
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, ResourceVersion: version, Labels: l},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}
	}
	client := fake.NewClientset(slice("app-1", "app", "1", nil),
		slice("gw-1", "gw", "1", map[string]string{model.GatewayServiceManagedByLabel: model.GatewayServiceManagedBy}))
	src := New(kubeclienttest.Wrap(client), Options{})
	startSource(t, src, func(source.Change) {})
	serviceOf := func(name string) (string, bool) {
		snap, _ := src.Snapshot()
		s, found := source.FindNamedIn(snap.EndpointSlices, "web", name)
		if !found {
			return "", false
		}
		return snap.ServiceOfSlice(s), true
	}
	snap, _ := src.Snapshot()
	if app := snap.EndpointSlices.At(0); app.Labels != nil || snap.ServiceOfSlice(app) != "app" {
		t.Errorf("web/app-1: labels %v, Service %q; want none and app", app.Labels, snap.ServiceOfSlice(app))
	}
	if gw := snap.EndpointSlices.At(1); gw.Labels[discoveryv1.LabelServiceName] != "gw" || len(gw.Labels) != 3 {
		t.Errorf("a Gateway Service's slice has labels %v, want all three", gw.Labels)
	}
	// Listed again at the same version: the cached slice.
	cached := snap.EndpointSlices.At(0)
	again := slice("app-1", "app", "1", nil)
	if got, _ := src.transformSlice(again); got != cached {
		t.Errorf("transformSlice of the same version = %p, want the cached %p", got, cached)
	}

	ctx := context.Background()
	api := client.DiscoveryV1().EndpointSlices("web")
	if _, err := api.Update(ctx, slice("app-1", "other", "2", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web/app-1 of Service other", func() bool { s, _ := serviceOf("app-1"); return s == "other" })
	if _, list := src.ServiceEndpoints("web", "other"); len(list) != 1 {
		t.Errorf("ServiceEndpoints(web, other) = %d slices, want 1", len(list))
	}
	if n := src.takeSliceServices().Len(); n != 1 {
		t.Errorf("%d slices named after the update, want 1 (the old one forgotten)", n)
	}
	if err := api.Delete(ctx, "app-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web/app-1 gone", func() bool { _, found := serviceOf("app-1"); return !found })
	if n := src.takeSliceServices().Len(); n != 0 {
		t.Errorf("%d slices named after the delete, want 0", n)
	}
}
