package kube

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/source"
)

// An Ingress update that leaves its spec, labels and annotations as they
// were (the status writer's) shares them with the cached Ingress; one
// that changes the spec does not share it; the same version listed again
// is the cached Ingress.
func TestTransformIngressShares(t *testing.T) {
	cachedIng := apiServerApp("web", 0)[0].(*networkingv1.Ingress)
	cachedIng.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}
	cachedIng.Labels = map[string]string{"team": "a"}
	src := New(kubeclienttest.Wrap(fake.NewClientset(cachedIng.DeepCopy())), Options{})
	startSource(t, src, func(source.Change) {})
	cached := src.Ingress(cachedIng.Namespace, cachedIng.Name)
	if cached == nil {
		t.Fatal("no cached Ingress")
	}
	mapOf := func(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }

	status := cached.DeepCopy()
	status.ResourceVersion = "2000"
	status.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
	got, err := src.transformIngress(status)
	if err != nil {
		t.Fatal(err)
	}
	ing := got.(*networkingv1.Ingress)
	if ing == cached || &ing.Spec.Rules[0] != &cached.Spec.Rules[0] || mapOf(ing.Annotations) != mapOf(cached.Annotations) || mapOf(ing.Labels) != mapOf(cached.Labels) {
		t.Errorf("a status update shares nothing with the cached Ingress")
	}
	if ing.Status.LoadBalancer.Ingress[0].IP != "192.0.2.10" || ing.ResourceVersion != "2000" {
		t.Errorf("the status update lost its status or version: %+v", ing)
	}

	spec := cached.DeepCopy()
	spec.ResourceVersion, spec.Generation = "2001", 2
	spec.Spec.Rules[0].Host = "new.example.com"
	got, _ = src.transformIngress(spec)
	if ing := got.(*networkingv1.Ingress); ing.Spec.Rules[0].Host != "new.example.com" || &ing.Spec.Rules[0] == &cached.Spec.Rules[0] {
		t.Errorf("a spec change: host %q, shared with the cache %v", ing.Spec.Rules[0].Host, &ing.Spec.Rules[0] == &cached.Spec.Rules[0])
	}

	if got, _ := src.transformIngress(cached.DeepCopy()); got != cached {
		t.Errorf("the same version again is not the cached Ingress")
	}
}
